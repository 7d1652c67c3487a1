"""``waggle sync --status --config FILE``: each policy's checkpoint (the primary's ``waggle_sys`` records), the
source's current event id, the lag, the last execution (``waggle_sys.replication_metrics``) and the failed
tables. Reads only."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from waggle.common.logging import configure, get_logger
from waggle.config.loader import ConfigError
from waggle.config.model import MetastoreConfig
from waggle.hms.gen.hive_metastore.ttypes import NoSuchObjectException, NotificationEventRequest
from waggle.sync.execution import SUCCEEDED
from waggle.sync.follow.records import key as records_key
from waggle.sync.hms import connections
from waggle.sync.metrics_table import TABLE, read_rows
from waggle.sync.policies import Policy
from waggle.sync.runner import SyncConfigError
from waggle.sync.service_main import Setup, problems
from waggle.sync.system import SYS_DB
from waggle.upstream.handshake import UpstreamCredentials

log = get_logger("waggle.sync.status")


# -- waggle sync --status ------------------------------------------------------------------------------------------
def status(args: argparse.Namespace, out: IO[str] | None = None) -> int:
    """Each policy's checkpoint, the source's current event, the lag, the last execution and failed tables.
    Exit code 0: all well; 1: the files or the primary are at fault; 2: some policy's last execution failed."""
    configure()
    out = out or sys.stdout
    setup = Setup(args, out)
    try:
        pf = setup.policies()
        config = setup.config(pf)
    except (SyncConfigError, ConfigError) as exc:
        return problems(exc)
    credentials = setup.credentials(config)
    members = {m.name: m for m in config.federation.members}
    try:
        with connections(config.federation.primary, 1, credentials) as (target,):
            params, location = _records(target)
    except Exception as exc:
        print(f"error: primary metastore '{config.federation.primary.name}': {exc}", file=sys.stderr)
        return 1
    rows = _last_rows(location)
    failed = 0
    for source in dict.fromkeys(p.spec.source for p in pf.policies):
        with _source(members[source], credentials) as reach:
            for policy in (p for p in pf.policies if p.spec.source == source):
                failed += _print_policy(out, policy, params, reach, rows.get(policy.name))
    return 2 if failed else 0


def _records(target: Any) -> tuple[dict[str, str], str | None]:
    try:
        params = dict(target.client.get_database(SYS_DB).parameters or {})
    except NoSuchObjectException:
        return {}, None
    table = target.table(SYS_DB, TABLE)
    return params, (str(table.sd.location) if table is not None else None)


def _last_rows(location: str | None) -> dict[str, dict[str, str | None]]:
    last: dict[str, dict[str, str | None]] = {}
    if location is None:
        return last
    try:
        rows = read_rows(location)
    except Exception as exc:
        log.warning("sync.metrics_table_unreadable", location=location, error=str(exc))
        return last
    for row in rows:
        name = row.get("policy_name") or ""
        if name and (name not in last or (row.get("ended_at") or "") >= (last[name].get("ended_at") or "")):
            last[name] = row
    return last


class _Reach:
    """The source's current event id, and an event's commit time, or why not."""

    def __init__(self, metastore: Any, error: str | None) -> None:
        self.metastore, self.error = metastore, error

    def current(self) -> int | None:
        return None if self.metastore is None else int(self.metastore.current_event_id())

    def event_time(self, after: int) -> int | None:
        if self.metastore is None:
            return None
        events = self.metastore.client.get_next_notification(NotificationEventRequest(lastEvent=after,
                                                                                      maxEvents=1)).events or []
        return int(events[0].eventTime) if events else None


@contextmanager
def _source(member: MetastoreConfig, credentials: UpstreamCredentials) -> Iterator[_Reach]:
    try:
        with connections(member, 1, credentials) as (source,):
            yield _Reach(source, None)
    except Exception as exc:
        yield _Reach(None, f"source '{member.name}' unreachable: {exc}")


def _print_policy(out: IO[str], policy: Policy, params: dict[str, str], reach: _Reach,
                  row: dict[str, str | None] | None) -> int:
    text = params.get(records_key(policy.name, "checkpoint"))
    checkpoint = int(text) if text and text.lstrip("-").isdigit() else None
    state = "disabled" if not policy.enabled else policy.schedule_text
    print(f"policy {policy.name} ({state}; source {policy.spec.source}: {', '.join(policy.spec.patterns)})",
          file=out)
    print(f"  checkpoint: {checkpoint if checkpoint is not None else 'none (not bootstrapped yet)'}", file=out)
    if reach.error:
        print(f"  source: {reach.error}", file=out)
    else:
        try:
            current = reach.current()
            print(f"  source event: {current}", file=out)
            if checkpoint is not None and current is not None:
                lag = max(current - checkpoint, 0)
                seconds = ""
                if lag:
                    when = reach.event_time(checkpoint)
                    if when:
                        seconds = f", {max(time.time() - when, 0):.0f}s behind the oldest unapplied event"
                print(f"  lag: {lag} event(s){seconds}", file=out)
        except Exception as exc:
            print(f"  source: cannot read its events: {exc}", file=out)
    failed: dict[str, str] = {}
    if row is None:
        print("  last execution: none", file=out)
    else:
        print(f"  last execution: {row.get('status')} ({row.get('trigger')}, {row.get('phase')}) "
              f"{row.get('started_at')} .. {row.get('ended_at')}, events {row.get('from_event')} -> "
              f"{row.get('to_event')}, {row.get('objects')} object(s), {row.get('partitions')} partition(s)"
              + (f"; error: {row.get('error')}" if row.get("error") else ""), file=out)
        try:
            failed = json.loads(row.get("failed_tables") or "{}")
        except ValueError:
            failed = {}
    for target, error in sorted(failed.items()):
        print(f"  failed table: {target}: {error}", file=out)
    return 1 if failed or (row is not None and row.get("status") != SUCCEEDED) else 0
