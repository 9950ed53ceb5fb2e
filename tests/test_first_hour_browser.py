"""The pages of a first hour in a real headless Chromium at 800 and 1300 px: nothing overflows
the window and no table needs sideways scrolling, no number wraps in the middle, the
per-step chart keeps every marker inside its plot, the duration histogram has no long
empty tail and one label format.

A copy of each page gets a probe script that measures the laid-out page and writes what it
found into the DOM, which ``--dump-dom`` returns (the page's own CSP allows inline scripts;
the index's copy gets one that does)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import HEADLESS_FLAGS
from typer.testing import CliRunner

from launchprof.cli import app

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None, reason="chromium is not installed (scripts/test.sh installs Debian's chromium package)"
    ),
]
DATA = Path(__file__).parent / "data"

PROBE = """<script>
window.addEventListener("load", function () { setTimeout(function () {
  var doc = document.documentElement, numeric = /^[-+]?[\\d,.]+(\\s?(%|µs|ms|s|x|×))?$/, wrapped = [];
  document.querySelectorAll("td, .fig .v").forEach(function (el) {
    var text = el.textContent.trim();
    if (!numeric.test(text)) return;
    var range = document.createRange(); range.selectNodeContents(el);
    var lines = new Set(Array.from(range.getClientRects()).map(function (r) { return Math.round(r.top); }));
    if (lines.size > 1) wrapped.push(text);
  });
  var points = [];
  var plot = document.getElementById("diagfig1");
  if (plot) {
    var area = plot.querySelector(".cartesianlayer .plot .bglayer rect, .draglayer .nsewdrag");
    var box = area ? area.getBoundingClientRect() : null;
    plot.querySelectorAll(".scatterlayer .point").forEach(function (p) {
      var r = p.getBoundingClientRect(), y = r.top + r.height / 2;
      points.push({top: y, inside: box ? (y >= box.top - 1 && y <= box.bottom + 1) : null});
    });
  }
  var ticks = [];
  var hist = document.getElementById("diagfig2");
  if (hist) hist.querySelectorAll(".xtick text").forEach(function (t) { ticks.push(t.textContent); });
  var out = document.createElement("pre"); out.id = "probe";
  var clipped = [];
  document.querySelectorAll(".wide").forEach(function (el) {
    var head = el.querySelector("th") || el;
    if (el.scrollWidth > el.clientWidth + 1) clipped.push(head.textContent.trim().slice(0, 40));
  });
  out.textContent = JSON.stringify({scrollWidth: doc.scrollWidth, width: window.innerWidth, clipped: clipped,
                                    wrapped: wrapped, points: points, ticks: ticks});
  document.body.appendChild(out);
}, 3000); });
</script>"""


def _probe(page: Path, width: int, tmp_path: Path) -> dict:
    copy = page.with_name(f"probe-{width}-{page.name}")
    text = page.read_text()
    text = text.replace("style-src 'unsafe-inline'\">", "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">")
    copy.write_text(text.replace("</body>", PROBE + "</body>"))
    assert CHROMIUM is not None
    cmd = [
        CHROMIUM,
        *HEADLESS_FLAGS,
        "--hide-scrollbars",
        "--virtual-time-budget=20000",
        f"--window-size={width},1000",
        f"--user-data-dir={tmp_path / f'profile-{width}'}",
        "--dump-dom",
        copy.resolve().as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, "the probe did not run"
    import html

    return json.loads(html.unescape(found.group(1)))


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Reports of an eager, a graph, a CPU-only and a two-rank trace, a comparison and a combined run, in reports/."""
    root = tmp_path_factory.mktemp("pages")
    runner = CliRunner()
    out = root / "reports"
    traces = ("traces/mlp_eager", "traces/mlp_graph", "cpu/steps_loop_2022", "gpu/small_kernels_reinstantiate")
    for trace in (*traces, "gpu/ddp_mlp_x2"):
        name = trace.split("/")[1]
        result = runner.invoke(app, ["analyze", str(DATA / f"{trace}.sqlite.xz"), "-q", "-o", str(out / name)])
        assert result.exit_code in (0, 2), result.output
    traces = [str(DATA / f"traces/{n}.sqlite.xz") for n in ("mlp_eager", "mlp_graph")]
    assert runner.invoke(app, ["compare", *traces, "-q", "-o", str(out / "cmp")]).exit_code == 0
    assert runner.invoke(app, ["analyze", *traces, "-q", "--workers", "0", "-o", str(out / "comb")]).exit_code == 0
    from launchprof.report.index import write_index

    write_index(out)
    return out


PAGES = [
    "mlp_eager/report.html",
    "mlp_graph/report.html",
    "steps_loop_2022/report.html",
    "small_kernels_reinstantiate/report.html",
    "ddp_mlp_x2/report.html",
    "cmp/compare.html",
    "comb/combined.html",
    "index.html",
]


@pytest.mark.parametrize("width", [800, 1300])
@pytest.mark.parametrize("page", PAGES)
def test_no_overflow_and_no_number_wrapped(reports: Path, tmp_path: Path, page: str, width: int) -> None:
    got = _probe(reports / page, width, tmp_path)
    assert got["scrollWidth"] <= got["width"], f"{page} is {got['scrollWidth']} px wide in a {width} px window"
    assert got["wrapped"] == [], f"{page}: numbers broken over two lines: {got['wrapped'][:5]}"
    assert got["clipped"] == [], f"{page}: tables that need sideways scrolling in a {width} px window: {got['clipped']}"


def test_warmup_and_cut_off_steps_stay_inside_the_chart(reports: Path, tmp_path: Path) -> None:
    """mlp_eager's warm-up step is 44,549.8 µs on an axis cut at 3x the 787.9 µs median:
    its marker is drawn at the top edge, never above the plot."""
    got = _probe(reports / "mlp_eager/report.html", 1300, tmp_path)
    assert len(got["points"]) >= 1
    assert all(p["inside"] for p in got["points"]), got["points"]


def test_duration_histogram_labels_and_no_empty_tail(reports: Path, tmp_path: Path) -> None:
    got = _probe(reports / "mlp_eager/report.html", 1300, tmp_path)
    ticks = got["ticks"]
    assert ticks and all(re.fullmatch(r"\d+(\.\d)? (ns|µs|ms)", t) for t in ticks), ticks
    assert len(ticks) <= 14  # the kernels (1-6 µs) and launch calls (3-20 µs) of a steady step, not 30 bins
    doc = json.loads((reports / "mlp_eager/summary.json").read_text())
    assert doc["headline"]["verdict"] == "launch-bound"


def test_pages_say_us_as_micro_and_count_in_plurals(reports: Path) -> None:
    for page in ("mlp_eager/report.html", "cmp/compare.html", "small_kernels_reinstantiate/report.html"):
        text = (reports / page).read_text()
        assert re.search(r"\d us\b", re.sub(r"<script.*?</script>", "", text, flags=re.S)) is None, page
        assert "1 instantiations" not in text and "1 iterations" not in text
