"""Every command's arguments and options come from its one table
(launchprof/cli/optiontables.py), and an option several commands take is defined once."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import typer.main

from launchprof.cli import optiontables
from launchprof.cli.typer_app import app

CLI = Path(optiontables.__file__).resolve().parent


def _click_command(name: str):  # type: ignore[no-untyped-def]
    group = typer.main.get_command(app)
    return group.commands[name]  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", optiontables.COMMANDS)
def test_the_command_takes_its_table_in_order(name: str) -> None:
    table = optiontables.COMMAND_TABLES[name]
    params = [p for p in _click_command(name).params if p.name != "help"]
    expected = [a.param for a in table.arguments] + [o.param for o in table.options]
    assert [p.name for p in params] == expected
    by_name = {p.name: p for p in params}
    for opt in table.options:
        param = by_name[opt.param]
        assert tuple(param.opts) == opt.names
        assert param.help == opt.help
        assert param.default == opt.default or (opt.kind == "texts" and not param.default)
        assert param.is_flag == (opt.kind == "flag")
        if opt.min is not None or opt.max is not None:
            assert (param.type.min, param.type.max) == (opt.min, opt.max)
    for arg in table.arguments:
        assert by_name[arg.param].required


def test_the_app_has_the_tables_commands_in_their_order() -> None:
    group = typer.main.get_command(app)
    assert list(group.commands) == list(optiontables.COMMANDS)  # type: ignore[attr-defined]


def _calls(path: Path, attribute: str) -> list[ast.Call]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == attribute)
            or (isinstance(node.func, ast.Attribute) and node.func.attr == attribute)
        )
    ]


def test_each_option_name_is_spelled_in_one_definition() -> None:
    """``--nsys``, ``--output``, ... are each written once in optiontables.py (a command that
    says it otherwise replaces the help, not the names)."""
    seen: dict[str, int] = {}
    for call in _calls(CLI / "optiontables.py", "Option"):
        names = call.args[1]
        assert isinstance(names, ast.Tuple)
        for element in names.elts:
            assert isinstance(element, ast.Constant)
            seen[element.value] = seen.get(element.value, 0) + 1
    assert seen and all(n == 1 for n in seen.values()), {k: n for k, n in seen.items() if n > 1}
    spelled = {name for table in optiontables.COMMAND_TABLES.values() for opt in table.options for name in opt.names}
    assert spelled == set(seen)


def test_no_command_writes_its_own_typer_options() -> None:
    """typer.Option and typer.Argument are made in one place from the tables
    (``_parameters``), besides the app's own ``--version``."""
    source = (CLI / "typer_app.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    makers = {"Option", "Argument"}
    where = []
    for func in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        for node in ast.walk(func):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in makers:
                where.append(func.name)
    assert set(where) == {"_parameters", "_root"}, where
    for path in CLI.glob("*.py"):
        if path.name != "typer_app.py":
            assert "typer.Option(" not in path.read_text(encoding="utf-8"), path.name
