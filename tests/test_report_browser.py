"""report.html opened in a real headless Chromium (Debian's ``chromium``), from file://
with no network: plotly must render every plot, the timeline must draw every kernel of
its window, and no trace string may turn into markup."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import HEADLESS_FLAGS
from tracebuilder import TraceBuilder

import launchprof
from launchprof.report.write import write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None, reason="chromium is not installed (scripts/test.sh installs Debian's chromium package)"
    ),
]

FLAGS = [
    *HEADLESS_FLAGS,
    "--hide-scrollbars",
    "--virtual-time-budget=15000",
]
WINDOW_NS = 2_000_000  # the timeline window length (launchprof.report.figures)
HOSTILE = "<img src=x onerror=\"document.title='pwned'\"></script><script>document.title='pwned'</script>&amp;"


def _chromium(page: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "chromium-profile"
    assert CHROMIUM is not None
    cmd = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, page.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def _dom(page: Path, tmp_path: Path) -> str:
    return _chromium(page, tmp_path, "--dump-dom").stdout


def _plot_segments(dom: str) -> dict[int, tuple[str, str]]:
    """For each plot div: (its class attribute, its rendered inner HTML)."""
    out = {}
    for m in re.finditer(r'<div id="fig(\d+)" class="([^"]*)"', dom):
        n = int(m.group(1))
        end = dom.index(f'id="fig{n}-data"', m.end())
        out[n] = (m.group(2), dom[m.end() : end])
    return out


@pytest.fixture(scope="module")
def eager_report(real_trace, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("eager")
    write_report(launchprof.analyze(real_trace("mlp_eager")), folder, force=True)
    return folder / "report.html"


def test_every_plot_renders(eager_report: Path, tmp_path: Path) -> None:
    dom = _dom(eager_report, tmp_path)
    plots = _plot_segments(dom)
    assert sorted(plots) == [1, 2, 3]  # timeline, bubble histogram, utilization of GPU 0
    for n, (cls, inner) in plots.items():
        assert "js-plotly-plot" in cls.split(), n
        assert 'class="main-svg"' in inner, n
        assert "did not load" not in inner
    assert "time since the window start (µs)" in plots[1][1]
    assert "bubble length" in plots[2][1]
    assert "GPU busy" in plots[3][1]


def test_timeline_lanes_and_every_kernel_of_the_window(eager_report: Path, real_trace, tmp_path: Path) -> None:
    """The window starts at the median GPU activity; count the kernels and API calls
    inside it with SQL and find as many bars in the rendered SVG."""
    with sqlite3.connect(real_trace("mlp_eager")) as con:
        starts = [
            r[0]
            for r in con.execute(
                "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
                "SELECT start FROM CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY start"
            )
        ]
        lo = starts[len(starts) // 2]
        window = (lo, lo + WINDOW_NS)
        (kernels,) = con.execute(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE end > ? AND start < ?", window
        ).fetchone()
        (calls,) = con.execute(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE end > ? AND start < ?", window
        ).fetchone()
    timeline = _plot_segments(_dom(eager_report, tmp_path))[1][1]
    lanes = re.findall(r'class="ytick"[^>]*>.*?<text[^>]*>([^<]*)</text>', timeline)
    assert sorted(lanes) == ["CPU thread 810", "GPU 0 idle", "GPU 0 stream 7"]
    # Bar traces in drawing order: other API calls, launch calls, host-wait gaps, kernels.
    points = [part.count('class="point"') for part in timeline.split('class="trace bars"')[1:]]
    assert kernels > 50
    assert points[-1] == kernels
    assert points[0] + points[1] == calls


def test_without_plotlyjs_the_page_says_so(eager_report: Path, tmp_path: Path) -> None:
    folder = tmp_path / "copy"
    folder.mkdir()
    shutil.copy(eager_report, folder / "report.html")  # no plotly.min.js beside it
    dom = _dom(folder / "report.html", tmp_path)
    plots = _plot_segments(dom)
    assert sorted(plots) == [1, 2, 3]
    for cls, inner in plots.values():
        assert inner.startswith(">plotly.min.js did not load: keep it next to report.html</div>")
        assert "js-plotly-plot" not in cls
    assert 'class="main-svg"' not in dom


def test_trace_strings_stay_text(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.gpus = [(0, "GPU " + HOSTILE)]
    b.processes = [(100, "proc " + HOSTILE)]
    b.launch(0, 900, 1000, 2000, name="kernel " + HOSTILE)
    b.launch(1000, 3000, 3500, 4000, name="kernel " + HOSTILE)
    b.call("cudaFree " + HOSTILE, 4100, 4200)
    folder = tmp_path / "r"
    write_report(launchprof.analyze(b.write(tmp_path / "t.sqlite")), folder)
    dom = _dom(folder / "report.html", tmp_path)
    assert "<title>launchprof: t.sqlite</title>" in dom
    assert "pwned" not in re.search(r"<title>(.*?)</title>", dom, re.S).group(1)  # type: ignore[union-attr]
    assert "<img" not in dom
    assert "&lt;img src=x" in dom  # shown as text, in the tables
    for cls, inner in _plot_segments(dom).values():
        assert "js-plotly-plot" in cls.split() and 'class="main-svg"' in inner


def test_screenshot_of_the_report(eager_report: Path, tmp_path: Path) -> None:
    """A full-page screenshot is a non-trivial 1400 px wide PNG (a page whose plots
    failed would still be a PNG, so the checks above carry the weight)."""
    shot = tmp_path / "report.png"
    _chromium(eager_report, tmp_path, f"--screenshot={shot}", "--window-size=1400,2400")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1400, 2400)
    assert len(data) > 50_000
