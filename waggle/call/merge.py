"""Fan-outs (``Route.FANOUT``): which members to ask with what, and how their answers merge. Pure.

The method table names each fan-out's :class:`~waggle.hms.methods.Merge`; this module has one planner and one
merger per kind, never per method. In PREFIXED mode a listing pattern is cut per member to the part that can
match names behind its prefix (``names.residual_patterns``); a member whose prefix cannot match is not asked.
Every merged name is checked against the client's pattern again, so hidden databases and aliases come out
right. Members are merged in federation order; one that is down, failed or was late is left out (the driver
logs and counts it), and only when no member answered does the client get an error.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence, Set
from typing import TYPE_CHECKING, Any, NamedTuple

from thrift.Thrift import TMessageType

from waggle.call.values import Answer, Call, Encoder, FanOut, NeedCatalogs, Outcome
from waggle.hms.bridges import DEFAULT_CATALOG
from waggle.hms.gen.hive_metastore.ttypes import GetAllFunctionsResponse
from waggle.hms.methods import Merge, MethodSpec, NameForm
from waggle.hms.names import QualifiedName, matches, parse, residual_patterns
from waggle.routes.memo import NameMemo
from waggle.routes.snapshot import Capabilities
from waggle.routing.access import table_visible
from waggle.routing.federation import Naming
from waggle.upstream.outcome import Outcome as Part

if TYPE_CHECKING:
    from waggle.routes.snapshot import Routes


class _Facts(NamedTuple):
    """What the merge needs to know of the request."""

    merge: Merge
    pattern: str | None  # the client's database pattern, without its catalog
    catalog: str | None  # the catalog the client named
    shown: NameMemo[tuple[str, ...]]  # the routes snapshot's names clients see for a member's database
    #: member -> its databases that have copies in the primary (read-from-copies): listed while it is down
    copied: Mapping[str, list[str]]


def plan(call: Call, spec: MethodSpec, routes: Routes, asked: Set[str]) -> FanOut | NeedCatalogs:
    assert spec.merge is not None
    attr = next((f.attr for f in spec.db_args if f.form is NameForm.PATTERN), None)
    text = getattr(call.args, attr) if attr is not None else None
    qualified = parse(text) if text is not None else None
    catalog = qualified.catalog if qualified is not None else None
    planner, caps = routes.planner, routes.caps
    members = [(caps[m.name], planner.naming(m)) for m in planner.federation.members]
    if spec.merge is Merge.FUNCTIONS and not routes.config.server.query_functions_across_all_metastores:
        members = members[:1]
    if catalog is not None:
        unknown = tuple(n.member.name for c, n in members if c.catalogs is None and n.member.name not in asked)
        if unknown:
            return NeedCatalogs(unknown, bounded=True)
    now = time.time()
    copied = {m.name: routes.copies.member_databases(m, now) for m in planner.federation.federated
              if routes.copies.serve(m)} if spec.merge is Merge.DATABASE_NAMES else {}
    facts = _Facts(spec.merge, qualified.db if qualified is not None else None, catalog, routes.memo.shown, copied)
    owner = _owner(routes, spec.merge, facts.pattern)
    jobs = []
    for member_caps, naming in members:
        if owner is not None and naming.member.name != owner:
            continue
        args = call.args  # only encoded for each member: shared unless its pattern differs
        if spec.merge is not Merge.FUNCTIONS:
            member_pattern = _member_pattern(naming, facts.pattern)
            if member_pattern is None:
                continue
            if attr is not None and qualified is not None:
                args = copy.copy(args)
                setattr(args, attr, _requalify_pattern(qualified, member_pattern, member_caps))
        jobs.append((naming, args))
    return FanOut(call, tuple(jobs), facts)


def merge(plan: FanOut, outcomes: Sequence[Part], encoder: Encoder, failure: Callable[[str], Answer]) -> Answer:
    """The client's answer from the members' outcomes (``failure`` builds the error when none answered)."""
    call = plan.call
    answered = [o for o in outcomes if o.error is None]
    fields = {"metastores": [o.pool.name for o in answered],
              "omitted": [o.pool.name for o in outcomes if o.error is not None]}
    if outcomes and not answered:
        answer = failure("; ".join(str(o.error) for o in outcomes))
        answer.fields.update(fields)
        return answer
    facts: _Facts = plan.facts
    assert call.io is not None and call.io.result is not None
    merged = _merger(facts.merge)(answered, facts)
    if facts.copied:
        merged = merged + _copied_databases(outcomes, facts, set(merged))
        fields["from_copies"] = [o.pool.name for o in outcomes if o.error is not None and o.pool.name in facts.copied]
    if len(answered) == 1 and facts.merge is Merge.DATABASE_NAMES and answered[0].raw is not None and \
            merged == answered[0].result.success:
        # one member's listing that the merge left as it was: its own reply is the answer, not re-encoded
        return Answer(answered[0].raw, Outcome.OK, "*", fields)
    result = call.io.result(success=merged)
    raw = encoder.encode(call.name, TMessageType.REPLY, call.header.seqid, result)
    return Answer(raw, Outcome.OK, "*", fields)


def _database_names(outcomes: Sequence[Part], facts: _Facts) -> list[str]:
    merged: list[str] = []
    seen: set[str] = set()
    for outcome in outcomes:
        naming = outcome.naming
        known = facts.shown.of(naming)
        for db in outcome.result.success or ():
            names = known.get(db)
            if names is None:
                names = known[db] = naming.client_names(db)
            for shown in names:
                if shown not in seen and matches(facts.pattern, shown):
                    seen.add(shown)
                    merged.append(shown)
    return merged


def _copied_databases(outcomes: Sequence[Part], facts: _Facts, seen: set[str]) -> list[str]:
    """The databases of members that did not answer whose tables have copies in the primary, as clients see
    them (their reads are answered from the copies)."""
    out = []
    for outcome in outcomes:
        if outcome.error is None:
            continue
        for db in facts.copied.get(outcome.pool.name, ()):
            for shown in outcome.naming.client_names(db):
                if shown not in seen and matches(facts.pattern, shown):
                    seen.add(shown)
                    out.append(shown)
    return out


def _table_metas(outcomes: Sequence[Part], facts: _Facts) -> list[Any]:
    merged = []
    for outcome in outcomes:
        member = outcome.naming.member  # routing settings of the call's own configuration
        for meta in outcome.result.success or ():
            if not table_visible(member, meta.dbName or "", meta.tableName or ""):
                continue
            shown = [n for n in outcome.naming.client_names(meta.dbName or "") if matches(facts.pattern, n)]
            if facts.catalog is not None and meta.catName is None:
                meta.catName = facts.catalog  # a metastore without catalogs: what a Hive 3+ one would say
            for i, db in enumerate(shown):
                item = meta if i == 0 else copy.copy(meta)
                item.dbName = db
                merged.append(item)
    return merged


def _functions(outcomes: Sequence[Part], facts: _Facts) -> GetAllFunctionsResponse:
    merged = []
    for outcome in outcomes:
        if outcome.result.success is None:
            continue
        for function in outcome.result.success.functions or ():
            shown = outcome.naming.client_names(function.dbName or "")
            if shown:
                function.dbName = shown[0]
                merged.append(function)
    return GetAllFunctionsResponse(functions=merged)


def _merger(kind: Merge) -> Callable[[Sequence[Part], _Facts], Any]:
    # compared by identity: a dict keyed by the enum would hash it with a Python call, on every merge
    if kind is Merge.DATABASE_NAMES:
        return _database_names
    if kind is Merge.TABLE_METAS:
        return _table_metas
    if kind is Merge.FUNCTIONS:
        return _functions
    raise AssertionError(f"no merger for {kind}")


def _owner(routes: Routes, kind: Merge, pattern: str | None) -> str | None:
    """The one member asked for a table listing of one database named exactly (no ``*``, ``|`` or ``.``): the
    member that database (or link) belongs to. Then a member that is down makes the listing an error that the
    client retries (Trino's SHOW TABLES), not an empty listing from the others."""
    if kind is not Merge.TABLE_METAS or not pattern or any(c in pattern for c in "*|."):
        return None
    found = routes.planner.lookup(pattern)
    return found.target.member.name if found is not None and found.target is not None else None


def _member_pattern(naming: Naming, client_pattern: str | None) -> str | None:
    """The pattern to send this member, or None when none of its databases can match. The member's databases
    that links matching the client's pattern stand for are asked for too (a link's name is not the member's):
    Trino's SHOW TABLES of a link is ``get_table_meta(link, "*", [])``."""
    if naming.member.database_name_mapping:
        return "*"  # aliases can match where real names do not: ask for all, filter here
    if not naming.prefix:
        own: list[str] | None = [client_pattern if client_pattern is not None else "*"]
    else:
        own = residual_patterns(client_pattern, naming.prefix)
    linked = [db for name, db in naming.dbmap.linked(naming.member).items() if matches(client_pattern, name)]
    if own is not None and "*" in own:
        return "*"
    wanted = [*(own or ()), *(db for db in linked if db not in (own or ()))]
    return "|".join(wanted) if wanted else None


def _requalify_pattern(qualified: QualifiedName, pattern: str, caps: Capabilities) -> str:
    """The member's pattern in the catalog the client named: plain for a metastore that may lack catalogs."""
    catalog = qualified.catalog
    if catalog is None or (catalog.lower() == DEFAULT_CATALOG and caps.catalogs is not True):
        return pattern
    return f"@{catalog}#{pattern}"
