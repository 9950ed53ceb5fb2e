"""Report rendering: the summary document, plotly figures, HTML pages. Only this package
imports plotly."""
