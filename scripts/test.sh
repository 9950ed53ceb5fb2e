#!/usr/bin/env bash
# Set up and run the whole test suite on a fresh machine: system programs (nsys,
# chromium), a virtual environment with launchprof installed from this checkout (the
# tests import the installed package, not the source tree), lint, type check, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q ".[test]"
.venv/bin/ruff check launchprof tests scripts
.venv/bin/ruff format --check launchprof tests scripts
.venv/bin/mypy launchprof
# Run from tests/ so the checkout's launchprof/ folder is not importable: the installed
# package is what gets tested.
cd tests && ../.venv/bin/pytest -q -p no:cacheprovider "$@"
