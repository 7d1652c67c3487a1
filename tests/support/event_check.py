"""Hive's own reading of notification messages: ``tests/integration/java/EventCheck.java`` (compiled against
pyspark's Hive jars) decodes each message with the metastore's ``MessageDeserializer`` and prints what it says."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

CHECKER = Path(__file__).parents[1] / "integration" / "java" / "EventCheck.java"


def hive_reads(event_check: list[str], events: list[Any]) -> list[dict[str, Any]]:
    """Each event's message as Hive's MessageDeserializer reads it (``event_check``: the compiled checker's
    command)."""
    lines = "".join(f"{e.eventType}\t{e.message}\n" for e in events)
    done = subprocess.run(event_check, input=lines, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]
