"""``waggle metastore``: one local Hive 2.3 metastore for development, in the foreground, as the tests and the
demo run them (Derby in a directory of its own, waggle's notification log listener installed)."""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType

from waggle.local.jvm import LocalMetastoreError, PortTaken
from waggle.local.metastore import LocalMetastore


def run_metastore(workdir: str | None, port: int, events: bool, event_ttl: int | None) -> int:
    """Start the metastore, say where it serves, and keep it until Ctrl-C or SIGTERM. Its files stay in
    ``workdir`` (a temporary directory without one), so a restart on the same directory finds its tables."""
    where = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="waggle-metastore-"))
    store = LocalMetastore(where, port=port, notifications=events, event_ttl=event_ttl)
    try:
        store.start().wait_ready()
    except LocalMetastoreError as exc:
        store.stop()
        if workdir is None:
            shutil.rmtree(where, ignore_errors=True)
        hint = ": choose another with --port" if isinstance(exc, PortTaken) else ""
        print(f"error: {exc}{hint}", file=sys.stderr)
        return 1
    log = "off" if not events else f"on (events kept {event_ttl if event_ttl is not None else 86400} s)"
    print(f"Hive 2.3 metastore serving on {store.uri}\n  files:            {store.workdir}\n"
          f"  warehouse:        {store.warehouse}\n  notification log: {log}\n  log:              "
          f"{store.log_path}\nCtrl-C stops it.", flush=True)

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        assert store.process is not None
        code = store.process.wait()
        print(f"error: the metastore exited with {code}:\n{store.log_tail()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        store.stop()
        return 0
