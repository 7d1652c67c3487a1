"""The federation's merged notification log as tests wait for it: its journal in the primary
(``waggle_sys.merged_log_*``, :mod:`waggle.events.store`) knows a member once a merger has read its log; from then
on every event of that member is merged, by whichever waggle process holds the lease."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from tests.support.waits import wait_for
from waggle.local.client import hms_client

SYS_DB = "waggle_sys"


def journal_positions(primary_port: int) -> dict[str, list[int]]:
    """Each member's position in the journal's last block (epoch, last id read, its time, how many of that id)."""
    with hms_client("127.0.0.1", primary_port) as c:
        if SYS_DB not in c.get_all_databases():
            return {}
        blocks = sorted(c.get_tables(SYS_DB, "merged_log_*"))
        if not blocks:
            return {}
        tail = json.loads(c.get_table(SYS_DB, blocks[-1]).parameters.get("tail") or "{}")
    return dict(tail.get("positions") or {})


def wait_merging(proc: Any, primary_port: int, members: Iterable[str], timeout: float = 30) -> None:
    """Wait until the journal in the primary knows every one of ``members``."""
    wanted = set(members)
    wait_for(lambda: wanted <= set(journal_positions(primary_port)), timeout=timeout,
             message=lambda: f"the merged log to read {sorted(wanted)}: {proc.log()[-3000:]}")
