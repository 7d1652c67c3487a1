"""``waggle sync --status --config FILE``: each policy's checkpoint (the primary's ``waggle_sys`` records), the
source's current event id, the lag, whether it is failing (since when, with which error), the last execution
(``waggle_sys.replication_metrics``) and the failed tables. Reads only; each call waits at most
:data:`CALL_SECONDS` (never more than the member's ``read-timeout``), so a hung source is said to be, not waited
for.

Whether a policy is failing (its last batch failed: :mod:`waggle.sync.failing`) is asked first of the follower
running on this host (``GET /healthz`` on the file's ``http-port``), which knows at once; else it is read from the
policy's newest rows, which the follower writes at once when a policy starts failing or recovers: the failed rows
after its last good one, since the first one's start (:func:`from_rows`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import IO, Any

from waggle.common.logging import configure, get_logger
from waggle.config.loader import ConfigError
from waggle.config.model import MetastoreConfig
from waggle.hms.gen.hive_metastore.ttypes import NoSuchObjectException, NotificationEventRequest
from waggle.sync.execution import FAILED, PARTIAL
from waggle.sync.follow.records import key as records_key
from waggle.sync.hms import follow_connections
from waggle.sync.metrics_table import TABLE, read_rows
from waggle.sync.policies import Policy
from waggle.sync.runner import SyncConfigError
from waggle.sync.service_main import Setup, problems
from waggle.sync.system import SYS_DB
from waggle.upstream.handshake import UpstreamCredentials

log = get_logger("waggle.sync.status")
#: the longest wait for a metastore's reply to one call of ``--status`` (a glance, not a batch)
CALL_SECONDS = 10.0


# -- waggle sync --status ------------------------------------------------------------------------------------------
def status(args: argparse.Namespace, out: IO[str] | None = None) -> int:
    """Each policy's checkpoint, the source's current event, the lag, whether it is failing, the last execution
    and failed tables. Exit code 0: all well; 1: the files or the primary are at fault; 2: some policy is failing,
    or has failed tables."""
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
    primary = config.federation.primary
    try:
        with follow_connections(primary, 1, credentials, call=CALL_SECONDS) as (target,):
            params, location = _records(target)
    except Exception as exc:
        print(f"error: primary metastore '{primary.name}': {exc}", file=sys.stderr)
        return 1
    rows = _rows(location)
    live = live_health(pf.http_port)
    bad = 0
    for source in dict.fromkeys(p.spec.source for p in pf.policies):
        member = members[source]
        with _source(member, credentials) as reach:
            for policy in (p for p in pf.policies if p.spec.source == source):
                entry = live.get(policy.name) if live is not None else None
                verdict = from_live(entry, pf.http_port) if entry is not None else from_rows(rows.get(policy.name, []))
                bad += _print_policy(out, policy, params, reach, rows.get(policy.name, []), verdict)
    return 2 if bad else 0


# -- failing or not (pure) -------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a policy is failing, since when, its error; who says so."""

    failing: bool
    said_by: str
    since: str | None = None  # UTC, ISO 8601: the start of the first failed batch of the run
    error: str | None = None
    batches: int = 0  # failed batches in the run
    last_at: str | None = None  # when the last failed batch started (live) or its row ended (rows)

    def line(self) -> str:
        if not self.failing:
            return f"ok (says {self.said_by})"
        return (f"failing since {self.since}, {self.batches} failed batch(es), the last at {self.last_at}: "
                f"{self.error} (says {self.said_by})")


ROWS = f"{SYS_DB}.{TABLE}"


def from_live(entry: Mapping[str, Any], port: int) -> Verdict:
    """A policy's entry in the running follower's ``/healthz``."""
    said_by = f"the running follower, port {port}"
    if not entry.get("failing"):
        return Verdict(False, said_by)
    return Verdict(True, said_by, entry.get("failing_since"), entry.get("error"),
                   int(entry.get("failed_batches") or 0), entry.get("last_batch_at"))


def from_rows(rows: Sequence[Mapping[str, str | None]]) -> Verdict | None:
    """From a policy's rows, oldest first: failing when its newest rows failed, since the start of the first of
    them (the follower ends a row when a policy starts failing or recovers, so no row mixes the two); None when
    it has no row."""
    if not rows:
        return None
    run = []
    for row in reversed(rows):
        if row.get("status") != FAILED:
            break
        run.append(row)
    if not run:
        return Verdict(False, ROWS)
    newest, first = run[0], run[-1]
    return Verdict(True, ROWS, first.get("started_at"), newest.get("error"),
                   sum(int(r.get("batches") or 0) for r in run), newest.get("ended_at"))


def live_health(port: int, timeout: float = 3.0) -> dict[str, dict[str, Any]] | None:
    """The policies of the follower running on this host (its ``/healthz`` on ``port``), by name; None when none
    answers."""
    if not port:
        return None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=timeout) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as exc:  # 503: failing, or stopping; the body says which
        try:
            body = json.loads(exc.read())
        except ValueError:
            return None
    except (urllib.error.URLError, OSError, ValueError):
        return None
    policies = body.get("policies") if isinstance(body, dict) else None
    if not isinstance(policies, list):
        return None
    return {str(p["policy"]): p for p in policies if isinstance(p, dict) and "policy" in p}


def _records(target: Any) -> tuple[dict[str, str], str | None]:
    try:
        params = dict(target.client.get_database(SYS_DB).parameters or {})
    except NoSuchObjectException:
        return {}, None
    table = target.table(SYS_DB, TABLE)
    return params, (str(table.sd.location) if table is not None else None)


def _rows(location: str | None) -> dict[str, list[dict[str, str | None]]]:
    """Each policy's rows, oldest first (by their end)."""
    by_policy: dict[str, list[dict[str, str | None]]] = {}
    if location is None:
        return by_policy
    try:
        rows = read_rows(location)
    except Exception as exc:
        log.warning("sync.metrics_table_unreadable", location=location, error=str(exc))
        return by_policy
    for row in sorted(rows, key=lambda r: (r.get("ended_at") or "", r.get("started_at") or "")):
        name = row.get("policy_name") or ""
        if name:
            by_policy.setdefault(name, []).append(row)
    return by_policy


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
    with ExitStack() as stack:
        try:
            (source,) = stack.enter_context(follow_connections(member, 1, credentials, call=CALL_SECONDS))
        except Exception as exc:
            yield _Reach(None, f"source '{member.name}' unreachable: {exc}")
            return
        yield _Reach(source, None)


def _print_policy(out: IO[str], policy: Policy, params: dict[str, str], reach: _Reach,
                  rows: Sequence[Mapping[str, str | None]], verdict: Verdict | None) -> int:
    """The policy's lines; 1 when it is failing or has failed tables, else 0."""
    row = rows[-1] if rows else None
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
    print(f"  state: {verdict.line() if verdict is not None else 'not run yet'}", file=out)
    failed: dict[str, str] = {}
    if row is None:
        print("  last execution: none", file=out)
    else:
        print(f"  last execution: {row.get('status')} ({row.get('trigger')}, {row.get('phase') or 'no batch'}) "
              f"{row.get('started_at')} .. {row.get('ended_at')}, events {row.get('from_event')} -> "
              f"{row.get('to_event')}, {row.get('objects')} object(s), {row.get('partitions')} partition(s)"
              + (f"; error: {row.get('error')}" if row.get("error") else ""), file=out)
        try:
            failed = json.loads(row.get("failed_tables") or "{}")
        except ValueError:
            failed = {}
    for target, error in sorted(failed.items()):
        print(f"  failed table: {target}: {error}", file=out)
    failing = verdict is not None and verdict.failing
    return 1 if failing or failed or (row is not None and row.get("status") == PARTIAL) else 0
