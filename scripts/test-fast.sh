#!/usr/bin/env bash
# The fast subset of the tests, about a minute on 2 CPUs: nothing that needs nsys,
# Chromium, Dask or a GPU, and nothing marked slow (the wider trace corpus, stress and
# concurrency runs, many-example properties); every module is still exercised. Uses the
# virtual environment scripts/test.sh made (.venv) when there is one, else the pytest on
# PATH. scripts/test.sh runs everything (what CI runs). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/../tests"
pytest=pytest
if [ -x ../.venv/bin/pytest ]; then pytest=../.venv/bin/pytest; fi
"$pytest" -q -p no:cacheprovider -m "not slow and not nsys and not browser and not dask and not gpu" "$@"
