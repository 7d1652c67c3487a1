"""Calls that every member answers (``Route.FANOUT``): sent in parallel, each bounded, merged in member order.

Each member gets the fan-out timeout plus its ``latency``. A member that is down, fails, answers with an
exception or is late is left out of the merge: a structured log line names it and a counter counts it; the
client still gets what the others answered. Only when no member answered does the client get an error.

In PREFIXED mode a listing pattern is cut per member to the part that can match names behind its prefix
(``names.residual_patterns``); a member whose prefix cannot match is not asked. Every merged name is checked
against the client's pattern again, so hidden databases and aliases come out right.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import gevent

from waggle.common import metrics
from waggle.common.logging import get_logger
from waggle.hms.bridges import DEFAULT_CATALOG
from waggle.hms.gen.hive_metastore.ttypes import GetAllFunctionsResponse
from waggle.hms.names import matches, parse, residual_patterns
from waggle.hms.service import MethodIO
from waggle.routing.access import table_visible
from waggle.routing.federation import Naming
from waggle.upstream import compat
from waggle.upstream.client import Identity, UpstreamError
from waggle.upstream.pool import UpstreamPool

log = get_logger("waggle.fanout")


@dataclass(slots=True)
class Outcome:
    pool: UpstreamPool
    naming: Naming
    args: Any
    result: Any = None  # the decoded result struct when the member answered without an exception
    error: str | None = None


class FanOut:
    """One merged call. ``routes`` supplies the pools and the planner, ``runtime`` health and counters."""

    def __init__(self, runtime: Any, routes: Any, identity: Identity | None) -> None:
        self.runtime = runtime
        self.routes = routes
        self.identity = identity

    def gather(self, name: str, seqid: int, io: MethodIO, per_member: list[tuple[UpstreamPool, Naming, Any]]
               ) -> list[Outcome]:
        runtime = self.runtime
        server = self.routes.config.server
        outcomes: list[Outcome] = []
        jobs: list[tuple[Outcome, gevent.Greenlet]] = []
        longest = 0.0
        for pool, naming, args in per_member:
            outcome = Outcome(pool, naming, args)
            outcomes.append(outcome)
            if not runtime.health.is_up(pool.name):
                outcome.error = runtime.health.down_message(pool.name)
                continue
            timeout = (server.fan_out_timeout_ms + pool.config.latency_ms) / 1000.0
            longest = max(longest, timeout)
            jobs.append((outcome, gevent.spawn(_quietly, pool.invoke, self.identity, name, args, io.result, seqid,
                                               timeout)))
        if jobs:
            gevent.joinall([g for _, g in jobs], timeout=longest + 1.0)
        for outcome, job in jobs:
            if not job.ready():
                job.kill(block=False)
                outcome.error = f"metastore '{outcome.pool.name}' did not answer {name} in time"
            elif job.value[1] is None:
                outcome.result = job.value[0]
            else:
                exc = job.value[1]
                outcome.error = str(exc) if isinstance(exc, UpstreamError) else f"metastore " \
                    f"'{outcome.pool.name}' failed {name}: {exc!r}"
                if isinstance(exc, UpstreamError):
                    runtime.health.call_failed(outcome.pool.name, exc)
        for outcome in outcomes:
            if outcome.error is not None:
                metrics.FANOUT_OMISSIONS.labels(name, outcome.pool.name).inc()
                log.warning("fanout.member_omitted", method=name, metastore=outcome.pool.name, error=outcome.error)
        return outcomes

    # -- the merged methods ------------------------------------------------------------------------------------
    def databases(self, name: str, seqid: int, io: MethodIO, pattern: str | None) -> tuple[Any, list[Outcome]]:
        """``get_all_databases`` (``pattern`` None) and ``get_databases(pattern)``."""
        qualified = parse(pattern) if pattern is not None else None
        client_pattern = qualified.db if qualified is not None else None
        per_member = []
        members = self._members()
        self._learn_catalogs(qualified.catalog if qualified is not None else None, members)
        for pool, naming in members:
            member_pattern = self._member_pattern(naming, client_pattern)
            if member_pattern is None:
                continue
            if pattern is None:
                args = io.args()
            else:
                assert qualified is not None
                args = io.args(pattern=_requalify_pattern(qualified.catalog, member_pattern, pool))
            per_member.append((pool, naming, args))
        outcomes = self.gather(name, seqid, io, per_member)
        merged: list[str] = []
        seen: set[str] = set()
        for outcome in outcomes:
            if outcome.result is None:
                continue
            for db in outcome.result.success or ():
                for shown in outcome.naming.client_names(db):
                    if shown not in seen and matches(client_pattern, shown):
                        seen.add(shown)
                        merged.append(shown)
        return io.result(success=merged), outcomes  # type: ignore[misc]

    def table_meta(self, name: str, seqid: int, io: MethodIO, args: Any) -> tuple[Any, list[Outcome]]:
        qualified = parse(args.db_patterns) if args.db_patterns is not None else None
        client_pattern = qualified.db if qualified is not None else None
        catalog = qualified.catalog if qualified is not None else None
        per_member = []
        members = self._members()
        self._learn_catalogs(catalog, members)
        for pool, naming in members:
            member_pattern = self._member_pattern(naming, client_pattern)
            if member_pattern is None:
                continue
            member_args = copy.copy(args)
            if qualified is not None:
                member_args.db_patterns = _requalify_pattern(qualified.catalog, member_pattern, pool)
            per_member.append((pool, naming, member_args))
        outcomes = self.gather(name, seqid, io, per_member)
        merged = []
        for outcome in outcomes:
            if outcome.result is None:
                continue
            member = outcome.naming.member  # routing settings of the call's own configuration
            for meta in outcome.result.success or ():
                if not table_visible(member, meta.dbName or "", meta.tableName or ""):
                    continue
                shown = [n for n in outcome.naming.client_names(meta.dbName or "") if matches(client_pattern, n)]
                if catalog is not None and meta.catName is None:
                    meta.catName = catalog  # a metastore without catalogs: what a Hive 3+ one would say
                for i, db in enumerate(shown):
                    item = meta if i == 0 else copy.copy(meta)
                    item.dbName = db
                    merged.append(item)
        return io.result(success=merged), outcomes  # type: ignore[misc]

    def functions(self, name: str, seqid: int, io: MethodIO) -> tuple[Any, list[Outcome]]:
        members = self._members()
        if not self.routes.config.server.query_functions_across_all_metastores:
            members = members[:1]
        outcomes = self.gather(name, seqid, io, [(pool, naming, io.args()) for pool, naming in members])
        merged = []
        for outcome in outcomes:
            if outcome.result is None or outcome.result.success is None:
                continue
            for function in outcome.result.success.functions or ():
                shown = outcome.naming.client_names(function.dbName or "")
                if shown:
                    function.dbName = shown[0]
                    merged.append(function)
        return io.result(success=GetAllFunctionsResponse(functions=merged)), outcomes  # type: ignore[misc]

    # -- helpers ---------------------------------------------------------------------------------------------
    def _learn_catalogs(self, catalog: str | None, members: list[tuple[UpstreamPool, Naming]]) -> None:
        """Ask the members not yet known to understand catalogs or not, in parallel and once per pool."""
        if catalog is None:
            return
        runtime = self.runtime
        unknown = [pool for pool, _ in members if pool.caps.catalogs is None and runtime.health.is_up(pool.name)]
        if unknown:
            jobs = [gevent.spawn(compat.probe_catalogs, pool, self.identity) for pool in unknown]
            gevent.joinall(jobs, timeout=self.routes.config.server.fan_out_timeout_ms / 1000.0)

    def _members(self) -> list[tuple[UpstreamPool, Naming]]:
        planner = self.routes.planner
        pools = self.routes.pools
        return [(pools[m.name], planner.naming(m)) for m in planner.federation.members]

    @staticmethod
    def _member_pattern(naming: Naming, client_pattern: str | None) -> str | None:
        """The pattern to send this member, or None when none of its databases can match."""
        if naming.member.database_name_mapping:
            return "*"  # aliases can match where real names do not: ask for all, filter here
        if not naming.prefix:
            return client_pattern if client_pattern is not None else "*"
        residuals = residual_patterns(client_pattern, naming.prefix)
        return None if residuals is None else "|".join(residuals)


def _quietly(call: Any, *args: Any) -> tuple[Any, Exception | None]:
    """(result, None) or (None, the exception): a failed member is an outcome, not a greenlet's traceback."""
    try:
        return call(*args), None
    except Exception as exc:
        return None, exc


def _requalify_pattern(catalog: str | None, pattern: str, pool: UpstreamPool) -> str:
    """The member's pattern in the catalog the client named: plain for a metastore that may lack catalogs."""
    if catalog is None or (catalog.lower() == DEFAULT_CATALOG and pool.caps.catalogs is not True):
        return pattern
    return f"@{catalog}#{pattern}"

