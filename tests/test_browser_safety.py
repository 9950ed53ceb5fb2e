"""Hostile kernel names and NVTX text do not execute when report.html is opened in a
headless Chromium.

Each payload, if it ran, would write a marker into the page (``document.title`` and a
``<div id="pwned">``). The test dumps the DOM after the page's scripts ran and asserts the
marker is absent. A control page that embeds the same payload unescaped proves the check
catches execution."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import HEADLESS_FLAGS
from tracebuilder import TraceBuilder

import launchprof
from launchprof.report.write import write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MARK = "PWNED-BY-TRACE"
JS = f"document.title='{MARK}';var d=document.createElement('div');d.id='{MARK}';document.body.appendChild(d)"
PAYLOADS = [
    f'<img src=x onerror="{JS}">',
    f"</script><script>{JS}</script>",
    f'<svg onload="{JS}"></svg>',
    f"\\u003c/script\\u003e<script>{JS}</script>",
]

pytestmark = [pytest.mark.browser, pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")]


def dump_dom(page: Path, profile: Path) -> str:
    done = subprocess.run(
        [
            str(CHROMIUM),
            *HEADLESS_FLAGS,
            f"--user-data-dir={profile}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def executed(dom: str) -> bool:
    """Whether a payload ran: it set the title or added its marker element."""
    return f"<title>{MARK}</title>" in dom or f'<div id="{MARK}">' in dom


def test_control_page_would_be_caught(tmp_path: Path) -> None:
    """The same payloads pasted raw into a page do execute: the check below is able to fail."""
    page = tmp_path / "control.html"
    page.write_text("<!doctype html><html><head><title>control</title></head><body>" + PAYLOADS[0] + "</body></html>")
    dom = dump_dom(page, tmp_path / "profile")
    assert executed(dom)


def test_hostile_names_do_not_execute(tmp_path: Path) -> None:
    b = TraceBuilder()
    for i, payload in enumerate(PAYLOADS * 3):
        t = 10_000 * i
        b.launch(t + 100, t + 900, t + 1000, t + 2000, name=payload)
        b.range(payload, t + 50, t + 2100, domain=PAYLOADS[1])
    b.call(PAYLOADS[1], 200_000, 201_000)
    b.gpus = [(0, PAYLOADS[0])]
    trace = b.write(tmp_path / "hostile.sqlite")
    out = tmp_path / "report"
    analysis = launchprof.analyze(trace)
    write_report(analysis, out, trace_path=f"{PAYLOADS[1]}.sqlite")
    dom = dump_dom(out / "report.html", tmp_path / "profile")
    assert "launchprof report" in dom  # the page rendered
    assert 'class="plot-container' in dom  # plots were drawn by plotly.js
    assert not executed(dom)  # the payload may show as text; it never ran
