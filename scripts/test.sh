#!/usr/bin/env bash
# Set up (first run only) and run every check: generated code, lint, types, and the test suite
# against real metastores, a real Spark session and real sshd.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --test
export PATH="$PWD/.venv/bin:$PATH"
echo "== generated Thrift code matches thrift_idl/"
bash thrift_idl/generate.sh --check
echo "== ruff"
ruff check waggle tests bench
echo "== mypy"
mypy
echo "== docs site" && NO_MKDOCS_2_WARNING=1 mkdocs build --strict --quiet  # into site/ (ignored by git)
echo "== pytest"
pytest "$@"
