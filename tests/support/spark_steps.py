"""SQL steps in one fresh local Spark session, in a subprocess (``tests/integration/spark_steps.py``): each step's
rows, or its error, so that a test can assert on both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
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


def run_gated(spec: dict[str, Any], gates: dict[str, Callable[[], None]], timeout: float = 600) -> dict[str, Any]:
    """:func:`run`, calling ``gates[name]()`` between the steps before step ``name`` and that step, in the one
    Spark session (a change made elsewhere that the session's next query must see, say)."""
    with tempfile.TemporaryDirectory() as tmp:
        files = {name: str(Path(tmp) / f"gate-{i}") for i, name in enumerate(gates)}
        spec_file = Path(tmp) / "spec.json"
        spec_file.write_text(json.dumps({**spec, "gates": files}))
        errors = open(Path(tmp) / "stderr", "w+")  # a file: Spark's chatter must never fill a pipe it waits on
        proc = subprocess.Popen([sys.executable, str(SCRIPT), str(spec_file)], stdout=subprocess.PIPE,
                                stderr=errors, text=True, cwd=ROOT)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            assert proc.stdout is not None
            result: dict[str, Any] | None = None
            for line in proc.stdout:
                if line.startswith("GATE "):
                    name = line[len("GATE "):].strip()
                    gates[name]()
                    Path(files[name]).touch()
                elif line.startswith("RESULT "):
                    result = json.loads(line[len("RESULT "):])
            proc.wait()
        finally:
            timer.cancel()
            errors.seek(0)
            said = errors.read()
            errors.close()
        if result is None:
            raise AssertionError(f"Spark exited with {proc.returncode}:\n{said[-4000:]}")
        return result
