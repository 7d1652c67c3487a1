"""The service's commands: ``waggle sync --follow``, ``--run-now NAME`` and ``--status``, each with ``--config``.

The I/O around :mod:`waggle.sync.service`: the configuration files, the connections, Spark, the followers
(:class:`waggle.sync.follow.follower.Follower`), the ``replication_metrics`` table, the HTTP port and signals.
``waggle/cli.py`` parses the arguments (``--follow``, ``--run-now NAME``, ``--status``, each with ``--config``, and
the sync's ``--federation-config``, ``--server-config``, ``--principal``/``--keytab``, ``--master``,
``--max-writes-per-second``) and calls :func:`main_follow`, :func:`run_now` or :func:`status`.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import replace
from typing import IO, Any

from waggle.common.logging import configure, get_logger
from waggle.config.loader import ConfigError, load
from waggle.config.model import MetastoreConfig, WaggleConfig
from waggle.sync.budget import FairBudget, Share
from waggle.sync.execution import SUCCEEDED, Execution, PolicyState
from waggle.sync.follow.follower import FollowContext, Follower, no_match
from waggle.sync.follow.records import Records
from waggle.sync.hms import follow_connections
from waggle.sync.http import Api, HttpServer, SyncMetrics
from waggle.sync.job import describe
from waggle.sync.metrics_table import TABLE, ExecutionRow, ensure_table, write_rows
from waggle.sync.policies import Policy, PolicyFile, command_line_policy, load_policies
from waggle.sync.policy_thread import RUN_NOW, FollowerFactory, FollowerLike, PolicyThread
from waggle.sync.runner import SyncConfigError, _LazySpark, source_tables
from waggle.sync.service import Service
from waggle.sync.system import SYS_DB
from waggle.upstream.blocking import kerberos_identity
from waggle.upstream.handshake import UpstreamCredentials

log = get_logger("waggle.sync.service")



# -- shared set-up ------------------------------------------------------------------------------------------------
class Setup:
    def __init__(self, args: argparse.Namespace, out: IO[str]) -> None:
        self.args, self.out = args, out

    def policies(self) -> PolicyFile:
        """The sync file's policies, or the one the batch run's flags give (``--source``, ``--tables``, ...)."""
        args = self.args
        if args.config:
            pf = load_policies(args.config)
        else:
            pf = command_line_policy(
                args.federation_config, args.source, args.tables, getattr(args, "name", None),
                getattr(args, "http_port", None), **{"mode": args.mode, "target-database": args.target_database,
                                                     "partition-filter": args.partition_filter,
                                                     "location-root": args.location_root,
                                                     "propagate-deletes": args.propagate_deletes or None,
                                                     "switch-mode": args.switch_mode or None})
        run = pf.run
        if getattr(self.args, "federation_config", None):
            run = replace(run, federation_config=self.args.federation_config)
        if getattr(self.args, "max_writes_per_second", None) is not None:
            run = replace(run, max_writes_per_second=self.args.max_writes_per_second)
        if getattr(self.args, "master", None):
            run = replace(run, master=self.args.master)
        return replace(pf, run=run)

    def config(self, pf: PolicyFile) -> WaggleConfig:
        config = load(getattr(self.args, "server_config", None), pf.run.federation_config, serving=False)
        members = {m.name: m for m in config.federation.members}
        problems = [f"policy '{p.name}': source metastore '{p.spec.source}' is not in {pf.run.federation_config} "
                    f"(members: {', '.join(members)})" for p in pf.policies if p.spec.source not in members]
        problems += [f"policy '{p.name}': source metastore '{p.spec.source}' is the primary: the sync brings other "
                     "members' tables into it" for p in pf.policies if p.spec.source == config.federation.primary.name]
        if problems:
            raise ConfigError(problems)
        return config

    def credentials(self, config: WaggleConfig) -> UpstreamCredentials:
        return kerberos_identity(getattr(self.args, "principal", None), getattr(self.args, "keytab", None),
                                 config.server.security.kerberos)


def problems(exc: SyncConfigError | ConfigError) -> int:
    for problem in exc.problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1


class TableRows:
    """Writes rows into ``waggle_sys.replication_metrics`` (created on first use)."""

    def __init__(self, primary: MetastoreConfig, credentials: UpstreamCredentials) -> None:
        self.primary, self.credentials = primary, credentials
        self.location: str | None = None
        self._lock = threading.Lock()

    def ensure(self) -> str:
        with self._lock:
            if self.location is None:
                with follow_connections(self.primary, 1, self.credentials) as (target,):
                    self.location = ensure_table(target)
            return self.location

    def row(self, policy: Policy, row: ExecutionRow) -> None:
        path = write_rows(self.ensure(), [row])
        log.info("sync.execution", policy=policy.name, trigger=row.trigger, status=row.status, batches=row.batches,
                 from_event=row.from_event, to_event=row.to_event, file=path)


class Observers:
    """The metrics, then the table."""

    def __init__(self, metrics: SyncMetrics, table: TableRows) -> None:
        self.metrics, self.table = metrics, table

    def batch(self, policy: Policy, execution: Execution) -> None:
        self.metrics.batch(policy, execution)

    def state(self, policy: Policy, state: PolicyState) -> None:
        self.metrics.state(policy, state)

    def row(self, policy: Policy, row: ExecutionRow) -> None:
        self.metrics.row(policy, row)
        self.table.row(policy, row)


def follower_factory(pf: PolicyFile, config: WaggleConfig, credentials: UpstreamCredentials,
                     spark: _LazySpark) -> FollowerFactory:
    """Makes each policy's :class:`~waggle.sync.follow.follower.Follower` with its
    :class:`~waggle.sync.follow.follower.FollowContext`."""
    members = {m.name: m for m in config.federation.members}

    def make(policy: Policy, share: Share) -> FollowerLike:
        ctx = FollowContext(source=members[policy.spec.source], primary=config.federation.primary,
                            credentials=credentials, budget=share, spark=spark.get, page_size=pf.page_size,
                            lease_seconds=pf.lease_seconds)
        return Follower(policy.name, policy.spec, ctx)

    return make


# -- waggle sync --follow -----------------------------------------------------------------------------------------
def main_follow(args: argparse.Namespace) -> int:
    configure()
    stop = threading.Event()
    _on_signals(stop)  # first: a SIGTERM while starting is a clean stop too
    setup = Setup(args, sys.stdout)
    try:
        pf = setup.policies()
        config = setup.config(pf)
    except (SyncConfigError, ConfigError) as exc:
        return problems(exc)
    credentials = setup.credentials(config)
    primary = config.federation.primary
    budget = FairBudget(primary.name, pf.run.max_writes_per_second)
    spark = _LazySpark(pf.run.master)
    metrics = SyncMetrics(budget)
    table = TableRows(primary, credentials)
    try:
        table.ensure()
    except Exception as exc:  # the rows wait for the primary; the policies do not
        log.error("sync.metrics_table_failed", table=f"{SYS_DB}.{TABLE}", error=str(exc))
    held = _held(pf, config.federation.primary, credentials)
    if held:
        for problem in held:
            print(f"error: {problem}", file=sys.stderr)
        return 1
    unmatched = _unmatched(pf, config, credentials)
    if unmatched:  # as a batch run of the same jobs fails them, with the same exit code
        for problem in unmatched:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    factory = follower_factory(pf, config, credentials, spark)
    service = Service(pf, factory, Observers(metrics, table), budget)
    metrics.failing_seconds = service.failing_seconds
    http: HttpServer | None = None
    if stop.is_set():
        log.info("sync.service_stopped", detail="stopped while starting")
        return 0
    try:
        if pf.http_port:
            http = HttpServer(Api(service.health, service.run_now, metrics, service.alive), pf.http_port).start()
        service.start()
        log.info("sync.service_started", file=pf.path, policies=[p.name for p in pf.policies if p.enabled],
                 http_port=pf.http_port or None)
        watcher = threading.Thread(target=service.watch, name="sync-file-watch", daemon=True)
        watcher.start()
        while not stop.wait(0.5):
            pass
        log.info("sync.service_stopping", detail="every policy finishes its batch in hand")
    finally:
        service.stop()
        if http is not None:
            http.stop()
        spark.stop()
    log.info("sync.service_stopped")
    return 0


def _held(pf: PolicyFile, primary: MetastoreConfig, credentials: UpstreamCredentials) -> list[str]:
    """The policies of the file another follower holds (their leases in the primary): a second follower of the
    same policies is refused at its start. A primary that cannot be reached now is the batches' problem."""
    try:
        with follow_connections(primary, 1, credentials) as (own,):
            found = [(p.name, Records(own, p.name).live_holder("")) for p in pf.policies if p.enabled]
    except Exception as exc:
        log.warning("sync.leases_unread", metastore=primary.name, error=str(exc))
        return []
    return [f"policy '{name}' is followed by {holder}: one follower at a time (stop it first, or wait for its "
            "lease to expire)" for name, holder in found if holder]


def _unmatched(pf: PolicyFile, config: WaggleConfig, credentials: UpstreamCredentials) -> list[str]:
    """The enabled policies whose table patterns name no table at their source, each said as a batch run says it
    (:data:`waggle.sync.runner.NO_MATCH`): refused at the start. A source that cannot be reached now is its
    batches' problem (a bootstrap that matches nothing fails with the same words)."""
    members = {m.name: m for m in config.federation.members}
    found: list[str] = []
    for source in dict.fromkeys(p.spec.source for p in pf.policies if p.enabled):
        member = members[source]
        policies = [p for p in pf.policies if p.enabled and p.spec.source == source]
        try:
            with follow_connections(member, 1, credentials) as (reader,):
                found += [no_match(p.name, p.spec) for p in policies if not source_tables(p.spec, reader)]
        except Exception as exc:
            log.warning("sync.policies_unchecked", metastore=source, policies=[p.name for p in policies],
                        error=describe(exc), detail="their bootstrap checks that their tables match")
    return found


def _on_signals(stop: threading.Event) -> None:
    def handler(signum: int, _: object) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)


# -- waggle sync --run-now NAME -------------------------------------------------------------------------------------
def run_now(args: argparse.Namespace, out: IO[str] | None = None) -> int:
    """Ask the running service (on ``http-port`` of this host) to run the policy at once; if none answers, run it
    once here, until caught up. Exit code 0: done (or started by the service); 1: refused; 2: the run failed."""
    configure()
    out = out or sys.stdout
    name: str = args.run_now
    setup = Setup(args, out)
    try:
        pf = setup.policies()
    except SyncConfigError as exc:
        return problems(exc)
    policy = pf.policy(name)
    if policy is None:
        print(f"error: no policy '{name}' in {pf.path} (policies: {', '.join(p.name for p in pf.policies)})",
              file=sys.stderr)
        return 1
    if pf.http_port:
        answer = _post_run(pf.http_port, name)
        if answer is not None:
            status, body = answer
            if status == 202:
                print(f"policy '{name}': started in the running service (port {pf.http_port})", file=out)
                return 0
            print(f"error: the running service refused: {body.get('error', body)}", file=sys.stderr)
            return 1
    try:
        config = setup.config(replace(pf, policies=(policy,)))
    except ConfigError as exc:
        return problems(exc)
    credentials = setup.credentials(config)
    spark = _LazySpark(pf.run.master)
    metrics = SyncMetrics()
    table = TableRows(config.federation.primary, credentials)
    budget = FairBudget(config.federation.primary.name, pf.run.max_writes_per_second)
    stop = threading.Event()
    try:
        follower = follower_factory(pf, config, credentials, spark)(policy, budget.share(name))
        thread = PolicyThread(policy, follower, Observers(metrics, table), pf.poll_interval_max,
                              pf.execution_window, budget.share(name))
        thread.stop_event = stop
        _on_signals(stop)
        try:
            rows = thread.run_once(RUN_NOW)
        finally:
            follower.close()
    finally:
        spark.stop()
    for row in rows:  # one, or two when a batch failed after others did not
        print(f"policy '{name}': {row.status}, {row.batches} batch(es), events {row.from_event} -> {row.to_event}, "
              f"{row.objects} object(s), {row.partitions} partition(s)"
              + (f"; error: {row.error}" if row.error else ""), file=out)
        for target, error in sorted(row.failed_tables.items()):
            print(f"  failed: {target}: {error}", file=out)
    return 0 if all(row.status == SUCCEEDED for row in rows) else 2


def _post_run(port: int, name: str) -> tuple[int, dict[str, Any]] | None:
    """The running service's answer to run-now, or None when none answers."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/policies/{urllib.parse.quote(name)}/run",
                                     method="POST", data=b"")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"{}")
        except ValueError:
            return exc.code, {"error": f"HTTP {exc.code}"}
    except (urllib.error.URLError, OSError, ValueError):
        return None
