"""Size limits of the source (files of a few hundred lines, functions of a screen or less),
checked with ``ast``:

- no function or method in launchprof/ with more than :data:`MAX_FUNCTION_LINES` lines of
  code in its body (docstring, comments and blank lines not counted; a nested function's
  lines count in its parent too) unless a comment ``# long: REASON`` sits on its ``def``
  line or in the comment lines right above it (above its decorators, if any);
- no module in launchprof/ longer than :data:`MAX_FILE_LINES` lines;
- no function with more than :data:`MAX_PARAMETERS` parameters (``self``/``cls`` not
  counted) unless a comment ``# params: REASON`` sits on its ``def`` line or right above it;
- docs/architecture.md's "Where to change" answers name at most three package files each.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "launchprof"
MAX_FUNCTION_LINES = 60
MAX_FILE_LINES = 500
MAX_PARAMETERS = 6
LONG_REASON = re.compile(r"#\s*long:\s*\S")
PARAMS_REASON = re.compile(r"#\s*params:\s*\S")
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# Long functions allowed by name, without a reason next to them (none now; a test below
# fails when an entry here is no longer long).
ALLOWED: set[str] = set()


def code_lines(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of ``node``'s body that hold code: not blank, not only a comment, not the
    docstring (``lines``: the module's source lines)."""
    body = node.body
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        if len(body) == 1:
            return 0
        first = body[1]
    end = node.end_lineno or node.lineno
    return sum(1 for text in lines[first.lineno - 1 : end] if text.strip() and not text.strip().startswith("#"))


def has_reason(
    lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef, reason: re.Pattern[str] = LONG_REASON
) -> bool:
    """A ``# long: REASON`` comment (or another ``reason``) on the ``def`` line, or in the
    block of comment lines right above the function (above its decorators)."""
    if reason.search(lines[node.lineno - 1]):
        return True
    row = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 2  # the line above, 0-based
    while row >= 0 and lines[row].strip().startswith("#"):
        if reason.search(lines[row]):
            return True
        row -= 1
    return False


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Parameters of ``node``: positional, keyword-only, ``*args`` and ``**kwargs``, without
    a leading ``self`` or ``cls``."""
    a = node.args
    named = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    n = len(named) + (a.vararg is not None) + (a.kwarg is not None)
    return n - 1 if named and named[0].arg in ("self", "cls") else n


def long_functions() -> dict[str, tuple[int, bool]]:
    """``path::name`` -> (lines of code, has a reason) of every function over the limit."""
    found: dict[str, tuple[int, bool]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = code_lines(lines, node)
                if n > MAX_FUNCTION_LINES:
                    found[f"{path.relative_to(ROOT).as_posix()}::{node.name}"] = (n, has_reason(lines, node))
    return found


def test_no_long_function_without_a_reason() -> None:
    bad = {k: n for k, (n, reason) in long_functions().items() if not reason and k not in ALLOWED}
    assert not bad, (
        f"functions over {MAX_FUNCTION_LINES} lines of code: split them, or write '# long: REASON' "
        f"on or above the def line: {bad}"
    )


def test_allowed_long_functions_are_still_long() -> None:
    """An entry of :data:`ALLOWED` that is no longer needed goes."""
    long = long_functions()
    stale = sorted(k for k in ALLOWED if k not in long or long[k][1])
    assert not stale, f"remove from ALLOWED: {stale}"


def test_no_long_module() -> None:
    long = {
        p.relative_to(ROOT).as_posix(): n
        for p in sorted(PACKAGE.rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES
    }
    assert not long, f"modules over {MAX_FILE_LINES} lines: split them: {long}"


def test_the_count_leaves_out_docstring_comments_and_blanks() -> None:
    source = 'def f(x):\n    """Doc.\n\n    More."""\n\n    # a comment\n    y = x\n\n    return y\n'
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef)
    assert code_lines(source.splitlines(), node) == 2


def test_a_reason_above_the_decorators_counts() -> None:
    source = (
        "# long: a table of cases\n# (one per rule)\n@decorator\ndef f():\n    pass\n\n"
        "def g():  # long: one rule\n    pass\n"
    )
    tree = ast.parse(source)
    lines = source.splitlines()
    f, g = (n for n in tree.body if isinstance(n, ast.FunctionDef))
    assert has_reason(lines, f) and has_reason(lines, g)
    assert not has_reason(["def h():", "    pass"], ast.parse("def h():\n    pass\n").body[0])  # type: ignore[arg-type]


def test_no_function_with_more_than_six_parameters_without_a_reason() -> None:
    many, stale = {}, []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                where = f"{path.relative_to(ROOT).as_posix()}::{node.name}"
                reason = has_reason(lines, node, PARAMS_REASON)
                if parameters(node) > MAX_PARAMETERS and not reason:
                    many[where] = parameters(node)
                elif reason and parameters(node) <= MAX_PARAMETERS:
                    stale.append(where)
    assert not many, f"more than {MAX_PARAMETERS} parameters: an options object, or '# params: REASON': {many}"
    assert not stale, f"'# params:' on a function with {MAX_PARAMETERS} parameters or fewer: {stale}"


def test_the_parameter_count() -> None:
    source = "class C:\n    def f(self, a, b, /, c, *d, e, **g):\n        pass\n"
    f = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef))
    assert parameters(f) == 6
    lines = ["# params: the columns", "def h(a, b, c, d, e, f, g):", "    pass"]
    h = ast.parse("\n".join(lines)).body[0]
    assert isinstance(h, ast.FunctionDef) and parameters(h) == 7 and has_reason(lines, h, PARAMS_REASON)
    assert not has_reason(lines, h)  # a params reason is no long reason


def test_each_where_to_change_answer_names_at_most_three_package_files() -> None:
    """Rows (a), (c), (d) and a renamed nsys column name at most three files of the
    package, each of which exists; a new nsys table names its two files and, for the frame,
    one module per kind of table (the activity tables', the others')."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if re.match(r"\| \([a-d]\) ", line)]
    assert len(rows) == 5
    for row in rows:
        files = row.split("|")[2]
        named = {n for n in re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.py)`", files) if not n.startswith("tests/")}
        assert named and all((PACKAGE / n).is_file() for n in named), (row, named)
        if "a new table" in row:
            assert named == {"trace/tables.py", "trace/model.py", "trace/activity.py", "trace/loader.py"}, named
            assert "for an activity table" in files and "for another" in files
        else:
            assert len(named) <= 3, (row[:40], named)
