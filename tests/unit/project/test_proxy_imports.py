"""What a serving process loads: the Iceberg REST door's code (pyiceberg, pydantic: about 75 MB of each process's
memory) only where its port is on."""

from __future__ import annotations

import subprocess
import sys


def test_a_proxy_without_the_rest_port_loads_no_pyiceberg() -> None:
    code = ("import sys\nfrom gevent import monkey\nmonkey.patch_all()\n"
            "import waggle.app, waggle.cli, waggle.runtime, waggle.workers.worker\n"
            "print(sorted(m for m in ('pyiceberg', 'pydantic', 'waggle.rest.door') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout
