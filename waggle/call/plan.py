"""Plan one call: which metastore, what to send, and what the reply needs. Pure: no sockets, no waiting, and
the call's arguments are never changed (a request sent in other names is a copy).

Everything that depends on the method comes from its entry in the method table (:mod:`waggle.hms.methods`):
its route, access, where it carries database names, lock ids, lock components, table references and catalog
names, and its bridge. Nothing here names an HMS method. The planner of the routes snapshot decides where
names go (:mod:`waggle.routing`); remote databases are decided in their own room (:mod:`waggle.remotes.planning`);
each member's capabilities and health are inputs, so a call for a member that is down is answered from the plan.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Set
from typing import TYPE_CHECKING, Any

from waggle.call import lock_ids, merge
from waggle.call.values import (
    Call,
    Kind,
    Learned,
    MemberHealth,
    NeedCatalogs,
    NeedLinks,
    Paired,
    Plan,
    Refusal,
    Send,
)
from waggle.config.model import MetastoreConfig, NotificationLog, TransportKind
from waggle.copies import planning as copies
from waggle.hms.bridges import DEFAULT_CATALOG, strip_catalog
from waggle.hms.catalogs import carries_catalog
from waggle.hms.fields import catalog_named, copied_along, table_refs, value_at
from waggle.hms.methods import Access, LinkOp, MethodSpec, NameForm, Route
from waggle.hms.names import parse
from waggle.hms.rewrite import CALL_NAMES
from waggle.hms.strings import strings_in
from waggle.remotes import planning as remotes
from waggle.routing.federation import Decision, Naming, Planner, Refused
from waggle.routing.links import Link
from waggle.routing.table_links import TableLink

if TYPE_CHECKING:
    from waggle.copies.serve import Served
    from waggle.routes.snapshot import Routes

#: the one rewriter of whole calls (plans are cached per struct class)

_NOTHING_LEARNED = Learned()


def plan(call: Call, routes: Routes, health: MemberHealth, created: Mapping[str, Set[str]],
         learned: Learned = _NOTHING_LEARNED) -> Plan | NeedCatalogs | NeedLinks:
    """What to do with ``call`` under ``routes``, the metastores' ``health`` as it is now. ``created``:
    databases created through waggle per member (the whitelist); ``learned``: what was looked up for this call
    already (whatever the answers)."""
    spec, planner = call.spec, routes.planner
    if spec is None or call.io is None or call.args is None:
        return _unknown(call, routes, health)
    primary = planner.primary
    if spec.token is not None and routes.config.server.security.answers_tokens:
        return Send(Kind.TOKENS, call, primary.name, primary, call.args)
    if spec.connector is not None and routes.registry is not None:
        return Send(Kind.CONNECTORS, call, primary.name, primary, call.args)
    if spec.log is not None and routes.config.server.notification_log is NotificationLog.FEDERATED:
        return Send(Kind.LOG, call, primary.name, primary, call.args)
    if spec.link is not None and routes.registry is not None:
        linked = remotes.link_call(call.name, spec, call.args, call.session.identity, routes, learned.connectors)
        if linked is not None:
            return _remote(call, spec, routes, health, linked)
    if spec.route is Route.IDENTITY:
        return Send(Kind.IDENTITY, call, primary.name, primary, call.args)
    if spec.route is Route.FANOUT:
        return merge.plan(call, spec, routes, learned.catalogs)
    names: list[str] = []
    lock_args = None
    if spec.route is Route.LOCK_ID:
        owned = _lock_owner(call, spec, routes)
        if isinstance(owned, str):
            return _refuse(call, "-", owned, Refused.META, None)
        decision, lock_args = owned
    else:
        names = CALL_NAMES.names_in(call.args)
        if routes.registry is not None:
            named = remotes.named_call(call.name, spec, call.args, names, routes, learned.tables)
            if named is not None:
                return _remote(call, spec, routes, health, named)
        if spec.access is Access.READ and not spec.lock_components and not routes.mapped_tables:
            decision = routes.memo.reads.decide(planner, spec, names)
        else:
            locks = [(c.dbname or "", c.type) for c in value_at(call.args, spec.lock_components) or ()] \
                if spec.lock_components else ()
            tables = table_refs(call.args, spec) if routes.mapped_tables else ()
            decision = planner.decide(spec, names, locks, created, tables)
    if decision.refusal is not None:
        refused_as = decision.refused_as
        if decision.link is not None and spec.link is not None and spec.link.op is LinkOp.DROP_TABLE and \
                call.session.cascading is not None and call.session.cascading == decision.link.name:
            refused_as = Refused.NO_SUCH_OBJECT  # within a stock DROP DATABASE ... CASCADE of the link
        return _refuse(call, decision.member.name, decision.refusal, refused_as, decision)
    member = decision.member
    both = None
    if routes.copies and not member.primary and copies.serves(member, routes.copies):
        facts = copies.Facts(routes.copies, health.is_up(member.name), health.is_up(primary.name), time.time(),
                             primary.name, routes.caps[primary.name].catalogs is True)
        chosen = copies.planned(spec, call.io, call.args, names, planner.naming(member), facts,
                                CALL_NAMES.holds(type(call.args), NameForm.QUALIFIED))
        if isinstance(chosen, copies.FromBoth):
            both = chosen
        elif chosen is not None:
            return _from_copies(call, routes, health, decision, chosen)
    caps = routes.caps[member.name]
    naming = planner.naming(member)
    # Catalogs: a metastore without them (Hive 2) gets plain names, and its replies get the catalog the client
    # named.
    fill = None
    strip = False
    catalogs = caps.catalogs
    catalog = catalog_named(names, call.args, spec.catalog_fields) if catalogs is not True else None
    if catalog is not None:
        if catalogs is None and member.name not in learned.catalogs:
            return NeedCatalogs((member.name,))
        if catalogs is False and catalog.lower() != DEFAULT_CATALOG:
            return _refuse(call, member.name, f"catalog '{catalog}' does not exist in metastore '{member.name}' "
                                              f"(a Hive 2 metastore has only '{DEFAULT_CATALOG}')",
                           Refused.NO_SUCH_OBJECT, decision, quiet=True)
        strip = catalogs is not True and any(n.startswith("@") for n in names)
        fill = catalog if catalogs is False else None
    raw: bytes | None = call.raw
    args = call.args
    if lock_args is not None:  # the member's own lock id
        args, raw = lock_args, None
    if decision.rewrite_request or strip:
        args = member_args(routes, naming, args, strip)
        raw = None
    step = send_plan(_sending(spec), call, routes, health, member=member, naming=naming, decision=decision,
                     args=args, raw=raw, fill=fill)
    if both is not None and isinstance(step, Send) and step.kind is Kind.SEND:
        from_copy = _on_copy(call, routes, health, both.args, both.fill, both.served)
        if isinstance(from_copy, Send):
            return Paired(call, step._replace(stream=False, rewrite_reply=True), from_copy)
    return step


def cascading(call: Call, routes: Routes) -> str | None:
    """The link whose tables the call's connection is dropping one by one, after this call (a stock
    ``DROP DATABASE ... CASCADE`` of a link, call by call: :func:`waggle.remotes.planning.cascading`)."""
    return remotes.cascading(call.spec, call.io.args if call.io is not None else None, CALL_NAMES.names_in(call.args),
                             routes.links, call.session.cascading)


def member_args(routes: Routes, naming: Naming, args: Any, strip: bool = False) -> Any:
    """A copy of a call's ``args`` in the names ``naming``'s member knows (catalogs stripped with ``strip``);
    the call's own arguments stay as they came."""
    known = routes.memo.member_names.of(naming)

    def to_member(name: str) -> str:
        out = known.get(name)
        if out is None:
            out = known[name] = naming.to_member(name)
        return out

    args = copied_along(args, CALL_NAMES.plan(type(args)))
    CALL_NAMES.rewrite(args, (lambda n: strip_catalog(to_member(n))) if strip else to_member)
    return args


def send_plan(kind: Kind, call: Call, routes: Routes, health: MemberHealth, *, member: MetastoreConfig,
              naming: Naming, decision: Decision | None, args: Any, raw: bytes | None = None, fill: str | None = None,
              link: Link | None = None, table_link: TableLink | None = None, copy: Served | None = None
              ) -> Send | Refusal:
    """The plan of a call sent to ``member`` (or, for Kind.LINK, answered by waggle, which may send it on)."""
    if kind in _SENT and not health.is_up(member.name):  # the planner chose; the metastore is down
        return Refusal(Kind.DOWN, call, member.name, health.down_message(member.name), decision=decision)
    # whether to bridge is decided here, for every plan that sends: the member lacks the method (or cannot take
    # these arguments), as far as is known now (a reply may still say so: see finish.reply)
    spec = call.spec
    bridge = spec is not None and spec.bridge is not None and routes.caps[member.name].bridges(call.name, args)
    if bridge and kind is Kind.SEND:
        kind = Kind.BRIDGE
    result_class = call.io.result if call.io is not None else None
    rewrite_reply = False
    if result_class is not None:
        fill, rewrite_reply = reply_changes(result_class, naming, decision, fill)
    else:
        fill = None
    lock_slot = None
    if spec is not None and spec.shown_lock_ids and not member.primary:
        lock_slot = _slots(routes).of.get(member.name)
        rewrite_reply = rewrite_reply or lock_slot is not None
    wire = member.wire
    stream = not rewrite_reply and (wire is call.wire or wire == call.wire) and \
        call.wire.transport is TransportKind.BUFFERED
    if copy is not None:
        rewrite_reply, stream = True, False
        if kind is Kind.SEND:
            kind = Kind.COPY
    elif kind is not Kind.LINK:  # a link made or dropped: its reply is the primary's, as it is
        if link is None and decision is not None:
            link = decision.link
        if link is not None or table_link is not None:
            # a link's database is described as such; a remote table's reply gets the local names
            rewrite_reply, stream = True, False
    return Send(kind, call, member.name, member, args, raw, naming, decision, bridge,
                routes.config.server.upstream_limits, fill, rewrite_reply, stream, link, table_link, copy, lock_slot)


def reply_changes(result_class: type, naming: Naming, decision: Decision | None, fill: str | None
                  ) -> tuple[str | None, bool]:
    """(the catalog to fill in, if this result can hold one; whether the reply must be changed at all)."""
    fill = fill if fill is not None and carries_catalog(result_class) else None
    filters = decision is not None and naming.member.mapped_tables is not None
    return fill, (not naming.identity and CALL_NAMES.touches(result_class)) or filters or fill is not None


#: the kinds of plan that send the call to the metastore the planner chose, as soon as it is up
_SENT = frozenset((Kind.SEND, Kind.POINTER_GUARD))


def _sending(spec: MethodSpec) -> Kind:
    """How a call for the member the planner chose is sent: as it is, or after the Iceberg pointer guard read the
    table it alters (:mod:`waggle.server.own_pointer_guard`)."""
    return Kind.POINTER_GUARD if spec.pointer_guard is not None else Kind.SEND


def _refuse(call: Call, metastore: str, refusal: str, refused_as: Refused, decision: Decision | None,
            quiet: bool = False) -> Refusal:
    return Refusal(Kind.REFUSE, call, metastore, refusal, refused_as, quiet, decision=decision)


def _lock_owner(call: Call, spec: MethodSpec, routes: Routes) -> tuple[Decision, Any] | str:
    """Where a call that carries only a lock id goes: to the member its slot names, with the member's own id (a
    copy of the call's arguments), or to the primary (slot 0, or no lock id), or, for an id that cannot carry a
    slot, where this connection was granted it (:mod:`waggle.call.lock_ids`). A refusal's text for a slot that
    names no member."""
    primary = routes.planner.primary
    held = value_at(call.args, spec.lock_id)
    if held is None:
        return Decision(primary), None
    held = int(held)
    owner = call.session.lock_owners.get(held)
    if owner is not None:
        if owner.name in routes.caps:
            return Decision(routes.config.federation.member(owner.name)), None
        return Decision(owner, f"lock {held} was granted by metastore '{owner.name}', which is no longer in the "
                               f"federation"), None
    slot, own = lock_ids.decode(held)
    if slot == 0:
        return Decision(primary), None
    name = _slots(routes).named.get(slot)
    if name is None:
        return (f"lock id {held} names metastore slot {slot} (its own lock {own}), and no metastore of the "
                f"federation has that slot: a reload removed it, or the id is not one waggle showed")
    return Decision(routes.config.federation.member(name)), lock_ids.with_id(call.args, spec.lock_id, own)


def _slots(routes: Routes) -> lock_ids.Slots:
    """The lock-id slots of the federated members (remembered per set of names)."""
    return lock_ids.assign(m.name for m in routes.config.federation.federated)


def _unknown(call: Call, routes: Routes, health: MemberHealth) -> Send | Refusal:
    """A method waggle's IDL does not have: the primary answers, byte for byte, unless it names a database
    that is not the primary's to answer for."""
    planner = routes.planner
    foreign = _foreign_database(*strings_in(call.raw, call.wire.protocol), planner)
    if foreign is not None:
        return Refusal(Kind.REFUSE, call, planner.primary.name,
                       f"Invalid method name: '{call.name}' (waggle does not know this method, and it names "
                       f"{foreign}; waggle cannot route it)", unknown_method=True, foreign=foreign)
    return send_plan(Kind.SEND, call, routes, health, member=planner.primary, naming=planner.naming(planner.primary),
                     decision=None, args=None, raw=call.raw)


def _foreign_database(first: str | None, strings: list[str], planner: Planner) -> str | None:
    """The database, if any, that an unknown call names and that the primary cannot answer for as it is.

    Without an IDL nothing says which strings are database names: the first argument (where every HMS method
    puts its database) and ``@cat#db`` strings anywhere are taken as such."""
    candidates = [first] if first else []
    candidates += [text for text in strings if text.startswith("@")]
    for text in candidates:
        for candidate in {text, text.partition(".")[0]}:
            found = planner.lookup(candidate) if candidate else None
            if found is not None and found.target is not None and (
                    not found.target.member.primary or found.target.db != (parse(candidate).db or "").lower()):
                return f"database '{found.shown}' of metastore '{found.target.member.name}'"
    return None


def _remote(call: Call, spec: MethodSpec, routes: Routes, health: MemberHealth, step: remotes.Remote
            ) -> Plan | NeedLinks:
    """The plan of a remote-database call, from what :mod:`waggle.remotes.planning` decided."""
    if isinstance(step, remotes.Refuse):
        return _refuse(call, step.metastore, step.message, Refused.META, None)
    if isinstance(step, remotes.Learn):
        return NeedLinks(step.names, step.connectors, step.tables)
    if isinstance(step, remotes.Store):  # the primary keeps (or drops) the link or the stub
        planner = routes.planner
        args, raw = (call.args, call.raw) if step.args is None else (step.args, None)
        return send_plan(Kind.LINK, call, routes, health, member=planner.primary,
                         naming=planner.naming(planner.primary), decision=Decision(planner.primary), args=args,
                         raw=raw, link=step.link, table_link=step.table)
    return send_plan(_sending(spec), call, routes, health, member=step.member,
                     naming=routes.planner.naming(step.member), decision=Decision(step.member), args=step.args,
                     table_link=step.table)


# -- reads answered from copies (read-from-copies) -----------------------------------------------------------
def _from_copies(call: Call, routes: Routes, health: MemberHealth, decision: Decision, chosen: copies.Choice
                 ) -> Plan:
    """The plan of a call that :func:`waggle.copies.planning.planned` answers from copies (or refuses)."""
    member = decision.member
    if isinstance(chosen, copies.WriteRefused):
        if chosen.down:
            return Refusal(Kind.DOWN, call, member.name, f"{health.down_message(member.name)}; {chosen.message}",
                           decision=decision)
        return _refuse(call, member.name, chosen.message, Refused.META, decision)
    if isinstance(chosen, copies.LockInPrimary):
        return _on_copy(call, routes, health, chosen.args, None, None)
    assert isinstance(chosen, copies.FromCopy)
    return _on_copy(call, routes, health, chosen.args, chosen.fill, chosen.served)


def _on_copy(call: Call, routes: Routes, health: MemberHealth, args: Any, fill: str | None, served: Served | None
             ) -> Send | Refusal:
    """The call sent to the primary about copies, as :mod:`waggle.copies.planning` wrote it."""
    primary = routes.planner.primary
    return send_plan(Kind.SEND, call, routes, health, member=primary, naming=routes.planner.naming(primary),
                     decision=Decision(primary), args=args, fill=fill, copy=served)
