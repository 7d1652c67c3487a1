"""SQL steps in one fresh local Spark session, in a subprocess (``tests/integration/spark_steps.py``): each step's
rows, or its error, so that a test can assert on both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "integration" / "spark_steps.py"


def run(spec: dict[str, Any], python: str = sys.executable, timeout: float = 600,
        env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``spec`` (``uri``, ``warehouse``, ``steps``, optionally ``jars``) under ``python``: per step
    ``{"rows": [...]}`` or ``{"error": "..."}``, and its ``seconds``."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        done = subprocess.run([python, str(SCRIPT), f.name], capture_output=True, text=True, timeout=timeout,
                              env=env, cwd=ROOT)
    finally:
        os.unlink(f.name)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise AssertionError(f"Spark exited with {done.returncode}:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(line[len("RESULT "):])
    return result
