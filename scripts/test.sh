#!/usr/bin/env bash
# Set up (first run only) and run every check: generated code, lint, types, and the test suite
# against real metastores, a real Spark session and real sshd, measuring branch coverage; the pure rooms
# (scripts/coverage_floor.py) must stay at or above their floor.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --test
export PATH="$PWD/.venv/bin:$PATH"
echo "== generated Thrift code matches thrift_idl/"
bash thrift_idl/generate.sh --check
echo "== ruff"
ruff check waggle tests bench scripts
echo "== mypy"
mypy
echo "== docs site" && NO_MKDOCS_2_WARNING=1 mkdocs build --strict --quiet  # into site/ (ignored by git)
# The suite runs on two pytest-xdist workers, each test file whole on one of them (a file's components start once;
# each worker starts the session's own metastores, waggle and Spark, and takes its ports from a range of its own):
# 20 to 25 minutes on two cores (WAGGLE_TEST_WORKERS=0 runs it in this one process). The longest files go
# first (tests/conftest.py), and every JVM compiles with C1 alone (JDK_JAVA_OPTIONS, set there too).
# A whole run tests the pure code (tests/unit) in processes of its own first, then the rest with the coverage
# appended: the unit tests leave gevent's greenlets behind, and a process that later runs the real components'
# threads can then destroy a dead thread's greenlets in a pending call, where Python 3.11 may spin for good
# (docs/development.md, "Two runs"). Given arguments, one run of what they name.
workers="${WAGGLE_TEST_WORKERS:-2}"
echo "== pytest ($workers workers; 0: this process), with branch coverage (pyproject.toml's [tool.coverage])"
if [ $# -eq 0 ]; then
    pytest -n "$workers" --dist loadfile --cov=waggle --cov-report= tests/unit
    pytest -n "$workers" --dist loadfile --cov=waggle --cov-append --cov-report=term:skip-covered tests/clients \
        tests/integration
else
    pytest -n "$workers" --dist loadfile --cov=waggle --cov-report=term:skip-covered "$@"
fi
# The pure rooms are held to their floor on a run of the whole suite; a run of some tests only says how they stand.
echo "== coverage floor of the pure rooms (scripts/coverage_floor.py)"
if [ $# -eq 0 ]; then python scripts/coverage_floor.py; else python scripts/coverage_floor.py --advisory; fi
