"""``waggle sync --follow`` as users run it: a subprocess on a sync file, stopped with SIGTERM or killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.env import ROOT
from tests.support.waits import wait_for


def sync_file(path: Path, federation: Path, jobs: list[dict[str, Any]], **top: Any) -> Path:
    """A sync file (JSON is YAML) with these jobs and top-level keys."""
    path.write_text(json.dumps({"federation-config": str(federation), **top, "jobs": jobs}))
    return path


def partition_names(port: int, db: str, table: str) -> list[str]:
    """A table's partition names in the metastore at ``port``, sorted; none while the table is not there."""
    from waggle.local.client import hms_client

    with hms_client("127.0.0.1", port) as c:
        try:
            return sorted(c.get_partition_names(db, table, -1))
        except Exception:
            return []


class FollowerProcess:
    """``config``: the sync file (None: the policy is given by ``extra``, the batch run's flags)."""

    def __init__(self, config: Path | None, log: Path, *extra: str) -> None:
        self.config, self.log, self.extra = config, log, extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.offset = 0

    def start(self) -> FollowerProcess:
        self.offset = self.log.stat().st_size if self.log.exists() else 0  # a log shared with earlier runs
        with open(self.log, "ab") as out:
            given = ["--config", str(self.config)] if self.config is not None else []
            self.proc = subprocess.Popen([sys.executable, "-m", "waggle", "sync", "--follow", *given,
                                          "--no-progress", *self.extra], stdout=out,
                                         stderr=subprocess.STDOUT, cwd=ROOT, env=dict(os.environ))
        return self

    def wait_started(self, timeout: float = 60) -> FollowerProcess:
        """Until the service runs its policies (its signal handlers are in place)."""
        self.until(lambda: any(line.get("event") == "sync.service_started" for line in self.lines()), timeout,
                   "the follower's start")
        return self

    def kill(self) -> None:
        """SIGKILL, as a crash (the process group: Spark's JVM too)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def stop(self, timeout: float = 120) -> int:
        """SIGTERM; the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def wait(self, timeout: float = 60) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def until(self, condition: Any, timeout: float, what: str) -> Any:
        """Wait for ``condition()``; fail early, with the log, if the follower exits meanwhile."""
        def check() -> Any:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"the follower exited with {self.proc.returncode} before {what}:\n"
                                     f"{self.output()[-4000:]}")
            return condition()

        return wait_for(check, timeout, lambda: f"{what}; the follower's log ends:\n{self.output()[-4000:]}")

    def output(self) -> str:
        """What this run wrote to the log."""
        if not self.log.exists():
            return ""
        with open(self.log, "rb") as f:
            f.seek(self.offset)
            return f.read().decode(errors="replace")

    def lines(self) -> list[dict[str, Any]]:
        """The JSON log lines."""
        out = []
        for line in self.output().splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out
