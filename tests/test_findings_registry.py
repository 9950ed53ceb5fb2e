"""The finding kinds are one registry (launchprof.analysis.diagnosis.finders.FINDING_KINDS): the
diagnosis loops over it, docs/reference.md's table of findings lists the same kinds with
the same severities, and a finder that gives a kind or severity its line does not name is
refused."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from tracebuilder import TraceBuilder

import launchprof
from launchprof.analysis.diagnosis import finders
from launchprof.analysis.diagnosis.finders import FINDING_KINDS, FinderInputs, FindingKind, find_all
from launchprof.analysis.diagnosis.findings import Finding, Severity
from launchprof.analysis.prediction.predict import constants
from launchprof.analysis.stepdata import step_context

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference.md"


def documented() -> dict[str, set[str]]:
    """kind -> severities named in its row of docs/reference.md's "Findings" table."""
    text = REFERENCE.read_text(encoding="utf-8")
    table = text.split("### Findings", 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in table.splitlines()[2:]:
        kind, severity = (c.strip() for c in line.strip("|").split("|")[:2])
        rows[kind.strip("`")] = set(re.findall(r"\b(blocker|warning|info)\b", severity))
    return rows


def test_the_reference_lists_each_registered_kind_with_its_severities() -> None:
    assert documented() == {k.kind: {str(s) for s in k.severities} for k in FINDING_KINDS}
    assert len(FINDING_KINDS) == len({k.kind for k in FINDING_KINDS}) >= 10


def _inputs(tmp_path: Path) -> FinderInputs:
    b = TraceBuilder()
    for i in range(12):  # a steady loop of one kernel a step
        t = 100_000 * i
        b.launch(t, t + 2_000, t + 4_000, t + 6_000)
    a = launchprof.analyze(b.write(tmp_path / "t.sqlite"))
    ctx = step_context(a, a.found_steps)
    values, _ = constants(None, None)
    return FinderInputs(ctx, a, {}, "cuda", values, None, None, None, replaying=False)


def test_the_diagnosis_runs_the_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind added as one registry line is found and listed, by severity."""
    inputs = _inputs(tmp_path)
    extra = FindingKind(
        "example-kind",
        (Severity.INFO,),
        lambda i: Finding("example-kind", Severity.INFO, len(i.ctx.steady), [0], "seen", "nothing"),
    )
    monkeypatch.setattr(finders, "FINDING_KINDS", (*FINDING_KINDS, extra))
    kinds = [f.kind for f in find_all(inputs, with_steps=True)]
    assert kinds[-1] == "example-kind"
    diagnosis = launchprof.analyze(tmp_path / "t.sqlite").diagnosis
    assert diagnosis is not None and "example-kind" in [f["kind"] for f in diagnosis.to_dict()["findings"]]
    assert [f.kind for f in find_all(inputs, with_steps=False)] == []  # only graph-trace-mode runs without steps


def test_a_finder_that_gives_another_severity_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = _inputs(tmp_path)
    wrong = FindingKind(
        "example-kind",
        (Severity.INFO,),
        lambda i: Finding("example-kind", Severity.BLOCKER, 1, [0], "seen", "nothing"),
    )
    monkeypatch.setattr(finders, "FINDING_KINDS", (wrong,))
    with pytest.raises(ValueError, match="example-kind"):
        find_all(inputs, with_steps=True)


def test_severity_orders_and_reads_as_text() -> None:
    assert [s.rank for s in Severity] == [0, 1, 2]
    assert Severity.BLOCKER == "blocker" and f"{Severity.WARNING}" == "warning"
    f = Finding("k", Severity.INFO, 1, [0], "e", "f")
    # written as its bare text: summary.json reads back a str, not an enum's repr
    written = json.loads(json.dumps(f.to_dict()))
    assert type(written["severity"]) is str and written["severity"] == "info"
    assert json.loads(json.dumps(dataclasses.asdict(f)))["severity"] == "info"
