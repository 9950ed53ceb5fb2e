"""The compare page and the index, opened in headless Chromium: plotly draws both figures
offline (plotly.min.js next to the page) and the verdict is on the page."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import HEADLESS_FLAGS
from test_compare_small import build, eager_run, graph_run

from launchprof import compare
from launchprof.report.compare import write_compare
from launchprof.report.index import write_index

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def dump_dom(page: Path, profile: Path) -> str:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (scripts/system-deps.sh installs it)")
    done = subprocess.run(
        [
            CHROMIUM,
            *HEADLESS_FLAGS,
            f"--user-data-dir={profile}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.browser
def test_compare_page_renders_in_chromium(tmp_path: Path) -> None:
    before, _ = build(tmp_path, "eager", eager_run)
    after, _ = build(tmp_path, "graph", graph_run)
    folder = tmp_path / "reports" / "cmp"
    write_compare(compare(before, after), folder)
    dom = dump_dom(folder / "compare.html", tmp_path / "chromium")
    assert 'class="plot">plotly.min.js did not load' not in dom
    # One plotly root per figure: the before/after bars and the two step timelines.
    assert dom.count('class="plot js-plotly-plot"') == 2
    assert "<h2>verified</h2>" in dom
    assert "BEFORE: step" in dom and "AFTER: step" in dom  # timeline subplot titles
    write_index(tmp_path / "reports")
    index = dump_dom(tmp_path / "reports" / "index.html", tmp_path / "chromium")
    assert 'href="cmp/compare.html"' in index
