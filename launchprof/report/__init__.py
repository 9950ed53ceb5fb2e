"""Report rendering: the summary document, plotly figures, HTML pages. Only this package
imports plotly (the compare and combined pages build plotly figure objects; the analyze
report builds the same figure JSON from plain dicts, :mod:`launchprof.report.plainfig`)."""
