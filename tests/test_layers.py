"""The import layers of launchprof (docs/architecture.md), checked from the source.

Every import of every module is read with ``ast`` - at the top, inside functions, under
``TYPE_CHECKING`` - and resolved to the launchprof module it names. The test fails on

- an import that points up the layer order
  ``cli -> commands -> api -> report -> analysis -> trace | nsys | calibrate -> leaves``
  (a module may import its own layer and any layer below it);
- a leaf that imports any other launchprof module;
- a circle of imports between modules, or between packages (``launchprof.commands``,
  ``launchprof.analysis``, ... and each top-level module on its own);
- a module that :data:`LAYERS` does not place (a new top-level module must be given a layer
  here and in docs/architecture.md).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "launchprof"

# Top to bottom. Keys: a package (every module in it) or a top-level module.
LAYERS: dict[str, int] = {
    # 0 cli: the console entry, options and their defaults, the Typer app, the consoles
    "launchprof.cli": 0,
    "launchprof.__main__": 0,
    # 1 commands: what each command does, its terminal text, its files
    "launchprof.commands": 1,
    # 2 api: the Python API (launchprof.analyze, launchprof.compare, the user's calibration,
    #   reading a report folder back); the package itself names the public functions
    "launchprof.api": 2,
    "launchprof": 2,
    # 3 report: summary.json, report.html, step files, compare and combined pages
    "launchprof.report": 3,
    # 4 analysis: pure functions of a loaded trace (no file, no terminal, no process setting)
    "launchprof.analysis": 4,
    # 5 inputs and tools: reading traces and step-times files, running nsys, calibrating
    "launchprof.trace": 5,
    "launchprof.nsys": 5,
    "launchprof.calibrate": 5,
    # 6 leaves: no launchprof import but the constants below
    "launchprof.errors": 6,
    "launchprof.timings": 6,
    "launchprof.marker": 6,
    "launchprof.profiler_region": 6,
    "launchprof.malloc": 6,
    "launchprof.cache": 6,
    "launchprof.text": 6,
    # 7 constants: plain values several layers share, the NVTX client under the marker
    #   (ctypes only) and the torch hooks under profiler_region (standard library only);
    #   no launchprof import at all
    "launchprof.defaults": 7,
    "launchprof.nvtx_api": 7,
    "launchprof.source_hooks": 7,
}
NAMES = ["cli", "commands", "api", "report", "analysis", "trace | nsys | calibrate", "leaves", "constants"]
LEAF = 6
CONSTANTS = 7


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str) -> set[str]:
    """The launchprof modules ``name`` imports (anywhere in its source)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x, from .store import y
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            for alias in node.names:
                found.add(f"{module}.{alias.name}" if f"{module}.{alias.name}" in MODULES else module)
    return {resolve(m) for m in found if m == "launchprof" or m.startswith("launchprof.")} - {name}


def resolve(name: str) -> str:
    """The module that ``name`` (a module, or a module's attribute) is."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def group(name: str) -> str:
    """The key of :data:`LAYERS` that holds module ``name``."""
    while name not in LAYERS:
        name = name.rpartition(".")[0]
    return name


def package_of(name: str) -> str:
    """The package node of the package-level graph: ``launchprof.X`` for a module of a
    subpackage X, the module itself for a top-level module."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or MODULES[name].name == "__init__.py" else name


GRAPH = {name: imports_of(name) for name in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer() -> None:
    unplaced = [name for name in MODULES if not any(name == k or name.startswith(k + ".") for k in LAYERS)]
    assert unplaced == [], f"give these modules a layer in LAYERS and docs/architecture.md: {unplaced}"


def test_every_package_has_its_init() -> None:
    """A folder of modules without ``__init__.py`` would be left out of the wheel."""
    missing = [
        str(d.relative_to(ROOT))
        for d in sorted(PACKAGE.rglob("*"))
        if d.is_dir() and any(d.glob("*.py")) and not (d / "__init__.py").is_file()
    ]
    assert missing == []


def test_no_import_points_up_a_layer() -> None:
    upward = [
        f"{a} ({NAMES[LAYERS[group(a)]]}) imports {b} ({NAMES[LAYERS[group(b)]]})"
        for a, targets in GRAPH.items()
        for b in sorted(targets)
        if LAYERS[group(b)] < LAYERS[group(a)]
    ]
    assert upward == []


def test_leaves_import_no_launchprof_module_but_the_constants() -> None:
    bad = {
        a: sorted(b for b in t if LAYERS[group(b)] != CONSTANTS) for a, t in GRAPH.items() if LAYERS[group(a)] >= LEAF
    }
    assert {a: t for a, t in bad.items() if t} == {}
    assert all(not GRAPH.get(a) for a in GRAPH if LAYERS[group(a)] == CONSTANTS)


def test_no_import_circle_between_modules() -> None:
    assert cycles(GRAPH) == []


def test_no_import_circle_between_packages() -> None:
    packages: dict[str, set[str]] = {}
    for a, targets in GRAPH.items():
        here = package_of(a)
        packages.setdefault(here, set()).update(package_of(b) for b in targets if package_of(b) != here)
    assert cycles(packages) == []


def analysis_names_imported(name: str) -> list[tuple[str, str]]:
    """(analysis module, name) of each name module ``name`` imports from
    ``launchprof.analysis`` (anywhere in its source); a whole module imported (``import
    launchprof.analysis.x``, ``from launchprof.analysis import x``) is given as (module, "*")."""
    found = []
    for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, "*") for a in node.names if a.name.startswith("launchprof.analysis")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("launchprof.analysis"):
            for alias in node.names:
                whole = f"{node.module}.{alias.name}" in MODULES
                found.append((f"{node.module}.{alias.name}", "*") if whole else (str(node.module), alias.name))
    return found


def result_type_or_constant(module: str, attr: str) -> bool:
    """Whether ``module.attr`` is a class (a result type) or an upper-case constant that is
    not callable: what the report may take from the analysis."""
    import importlib

    if attr == "*":
        return False
    value = getattr(importlib.import_module(module), attr)
    return isinstance(value, type) or (attr.isupper() and not callable(value))


def test_the_report_takes_only_result_types_and_constants_from_the_analysis() -> None:
    """The analysis finishes before the report starts (docs/architecture.md): a module of
    ``launchprof.report`` formats a finished result and calls no analysis function."""
    report = [m for m in MODULES if m.startswith("launchprof.report")]
    taken = {m: analysis_names_imported(m) for m in report}
    assert sum(len(t) for t in taken.values()) > 10  # the check sees the report's imports
    bad = {m: [f"{mod}.{attr}" for mod, attr in t if not result_type_or_constant(mod, attr)] for m, t in taken.items()}
    assert {m: b for m, b in bad.items() if b} == {}


def test_the_result_check_refuses_a_function_and_a_whole_module() -> None:
    assert not result_type_or_constant("launchprof.analysis.headline", "headline")
    assert not result_type_or_constant("launchprof.analysis.timeline.durations", "*")
    assert result_type_or_constant("launchprof.analysis.result", "AnalysisResult")
    assert result_type_or_constant("launchprof.analysis.comparison.verify", "CI_LEVEL")


def test_the_checker_sees_imports_inside_functions_and_relative_ones() -> None:
    """The parse itself: a function-level import and a relative one are found."""
    assert "launchprof.commands.analyze" in GRAPH["launchprof.commands.profile"]  # inside _after_recording
    assert "launchprof.calibrate.store" in GRAPH["launchprof.calibrate"]  # from .store import ...
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize(
    ("code", "absent"),
    [
        # the console entry reads `profile` without Typer, numpy or pandas
        ("import launchprof.cli.entry, launchprof.cli.profile", ("typer", "numpy", "pandas", "launchprof.api")),
        # the Python API (analysis and comparison) without the command line or the page renderer
        ("import launchprof.api", ("typer", "rich", "jinja2", "plotly", "launchprof.cli", "launchprof.commands")),
    ],
)
def test_what_a_layer_loads(code: str, absent: tuple[str, ...]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import sys\n{code}\nprint(sorted(m for m in {absent!r} if m in sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
