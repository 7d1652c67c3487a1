#!/usr/bin/env bash
# Set up (first run only) and start the demo: two real local metastores with waggle in front.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/waggle demo "$@"
