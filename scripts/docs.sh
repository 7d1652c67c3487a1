#!/usr/bin/env bash
# Read the docs site locally: set up only what it needs (the first time, about 40 s: a .venv with mkdocs and
# Material for MkDocs, and Mermaid for its diagrams), build it into site/ with `mkdocs build --strict`, and serve it
# with `mkdocs serve`, which rebuilds on every edit under docs/.
#
#   scripts/docs.sh               build, then serve at http://127.0.0.1:8000/ until Ctrl-C
#   scripts/docs.sh --port 8001   the same on another port
#   scripts/docs.sh --build-only  build into site/ and stop (open site/index.html)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() { sed -n '6,8s/^# \{0,3\}//p' "${BASH_SOURCE[0]}"; }
build_only=false
port=8000
while [ $# -gt 0 ]; do
  case $1 in
    --build-only) build_only=true ;;
    --port) [ $# -ge 2 ] || { usage >&2; exit 2; }; port=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

bash scripts/setup.sh --docs
# Material for MkDocs prints a large notice about MkDocs 2.0 on every run unless this is set
export NO_MKDOCS_2_WARNING=1
echo "Building the site into site/ (mkdocs build --strict, about 5 s)"
.venv/bin/python -m mkdocs build --strict --quiet
if $build_only; then
  echo "Built: open site/index.html, or serve it with scripts/docs.sh"
  exit 0
fi
echo "Serving it at http://127.0.0.1:$port/ (mkdocs serve rebuilds on every edit under docs/; Ctrl-C stops)"
exec .venv/bin/python -m mkdocs serve --dev-addr "127.0.0.1:$port"
