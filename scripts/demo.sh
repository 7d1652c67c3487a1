#!/usr/bin/env bash
# Set up what the demo needs (the first run only: about 2 minutes in all, step by step) and start the demo: two
# real local metastores with sample data and waggle in front of them. Arguments go to `waggle demo`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
echo "Starting the demo: two Hive 2.3 metastores seeded with sample data, then waggle in front of them (about 15 s)"
exec .venv/bin/waggle demo "$@"
