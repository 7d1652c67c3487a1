"""``python -m waggle.sync ...`` or ``spark-submit waggle/sync/__main__.py ...``: the same as ``waggle sync ...``.

The sync knows nothing of the command line that starts it: this file only runs the ``waggle`` command
(``python -m waggle``) with ``sync`` before the arguments it was given.
"""

from __future__ import annotations

import runpy
import sys

if __name__ == "__main__":
    sys.argv[1:1] = ["sync"]
    runpy.run_module("waggle", run_name="__main__", alter_sys=True)
