"""``python -m waggle.sync ...`` or ``spark-submit waggle/sync/__main__.py ...``: the same as ``waggle sync ...``."""

from __future__ import annotations

import sys

from waggle.cli import main

if __name__ == "__main__":
    sys.exit(main(["sync", *sys.argv[1:]]))
