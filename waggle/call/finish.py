"""Finish one call: a metastore's reply, a bridge's result or a refusal, as the bytes the client gets. Pure.

A reply that needs no change is relayed byte for byte. One that does is spliced in its encoded form when that
is provably safe (:mod:`waggle.hms.splice`), else decoded, rewritten and encoded again: names back to the
client's, tables that ``mapped-tables`` hides left out, and the client's catalog filled in for a metastore
without catalogs; a federated member's lock ids shown with its slot (:mod:`waggle.call.lock_ids`). A successful
call's bookkeeping (a lock id that cannot carry a slot granted or released on this connection, a database created
under a whitelist) comes back as a value, which the driver applies.
"""

from __future__ import annotations

import gc
from typing import Any

from thrift.Thrift import TApplicationException, TMessageType

from waggle.call import lock_ids
from waggle.call.values import Answer, Call, Encoder, NameFn, Outcome, Paired, Refusal, Send, Settled
from waggle.config.model import MetastoreConfig, ProtocolKind
from waggle.hms import specs
from waggle.hms.bridges import is_unknown_method
from waggle.hms.catalogs import fill_catalog
from waggle.hms.decode import decode_message
from waggle.hms.fields import value_at
from waggle.hms.gen.hive_metastore.ttypes import LockResponse, LockState, Partition
from waggle.hms.layouts import Layout
from waggle.hms.methods import Access, MethodSpec
from waggle.hms.names import parse
from waggle.hms.rewrite import CALL_NAMES
from waggle.hms.service import MethodIO
from waggle.hms.splice import Splicer
from waggle.hms.wire import Header
from waggle.routing.access import table_visible
from waggle.routing.federation import Decision, Naming, Refused
from waggle.routing.links import present_link
from waggle.routing.table_links import TableLink, rename
from waggle.upstream.client import Reply

_SPLICER = Splicer(CALL_NAMES)

# -- answers that reach no metastore ---------------------------------------------------------------------------
def failure(header: Header, io: MethodIO | None, message: str, encoder: Encoder, *, outcome: Outcome,
            metastore: str, layout: Layout = Layout.CURRENT, **fields: Any) -> Answer:
    """A ``MetaException`` (or, for a method that declares none, a ``TApplicationException``) saying ``message``,
    where a client reading ``layout`` finds it (the session's :attr:`~waggle.call.values.Session.release`)."""
    return Answer(_failure_bytes(header, io, message, encoder, layout=layout), outcome, metastore, fields)


def answered(call: Call, value: Any, encoder: Encoder, metastore: str, **fields: Any) -> Answer:
    """A call waggle answered itself: the method's result carrying ``value`` (None: a void call's result)."""
    io = call.io
    assert io is not None and io.result is not None
    result = io.result() if value is None else io.result(success=value)
    return Answer(encoder.encode(call.name, TMessageType.REPLY, call.header.seqid, result), Outcome.OK, metastore,
                  fields)


def refused(call: Call, message: str, encoder: Encoder, metastore: str, reason: str | None = None,
            record: bool = True) -> Answer:
    """A call waggle refused itself: a failure saying ``message``, logged loudly with ``reason`` (by default the
    message itself). ``record``: False for a refusal that is neither counted nor logged."""
    return Answer(_failure_bytes(call.header, call.io, message, encoder, layout=call.session.release.layout),
                  Outcome.REFUSED, metastore,
                  reason=message if reason is None else reason, loud=True, record=record)


def _failure_bytes(header: Header, io: MethodIO | None, message: str, encoder: Encoder,
                   raised_as: Refused = Refused.META, layout: Layout = Layout.CURRENT) -> bytes | None:
    """The method's declared exception of that class (else its MetaException) at the field a client reading
    ``layout`` reads it from, or, where it reads none, a ``TApplicationException``; nothing for a oneway call."""
    if header.mtype == TMessageType.ONEWAY:
        return None
    result = io.exception_result(raised_as.value, message, layout) if io is not None else None
    if result is not None:
        return encoder.encode(header.name, TMessageType.REPLY, header.seqid, result)
    return encoder.encode_application_error(header.name, header.seqid, TApplicationException.INTERNAL_ERROR, message)


def down(plan: Refusal, encoder: Encoder) -> Answer:
    """A call for a metastore that is down, answered with its down message (nothing was sent)."""
    assert plan.refusal is not None
    return failure(plan.call.header, plan.call.io, plan.refusal, encoder, outcome=Outcome.MEMBER_DOWN,
                   metastore=plan.metastore, layout=plan.call.session.release.layout)


def refusal(plan: Refusal, encoder: Encoder) -> Answer:
    """A call refused before anything reached a metastore."""
    call, header = plan.call, plan.call.header
    assert plan.refusal is not None
    raw: bytes | None = None
    if plan.unknown_method:
        if not call.oneway:
            raw = encoder.encode_application_error(header.name, header.seqid, TApplicationException.UNKNOWN_METHOD,
                                                   plan.refusal)
        return Answer(raw, Outcome.REFUSED, plan.metastore, {"names": plan.foreign},
                      reason="unknown method naming a routed database", loud=True)
    raw = None
    if call.spec is not None and call.spec.access is Access.LOCK and plan.refused_as is Refused.META:
        raw = _lock_not_acquired(header, call.spec, call.io, plan.refusal, encoder)
    if raw is None:
        raw = _failure_bytes(header, call.io, plan.refusal, encoder, plan.refused_as, call.session.release.layout)
    return Answer(raw, Outcome.REFUSED, plan.metastore, reason=None if plan.quiet else plan.refusal,
                  loud=plan.refused_as is Refused.META)


def _lock_not_acquired(header: Header, spec: MethodSpec, io: MethodIO | None, message: str, encoder: Encoder
                       ) -> bytes | None:
    """A refused lock, answered as a lock NOT_ACQUIRED with the reason in ``errorMessage`` (lock id 0, which no
    metastore grants). ``lock`` declares no MetaException, and Iceberg's Java HiveCatalog retries every Thrift
    error from it until its lock-creation timeout (3 minutes by default); a lock not acquired fails the commit
    at once, and the client's connection goes on."""
    if io is None or io.result is None or not spec.granted_lock or header.mtype == TMessageType.ONEWAY:
        return None
    result = io.result()
    setattr(result, spec.granted_lock[0], LockResponse(lockid=0, state=LockState.NOT_ACQUIRED, errorMessage=message))
    return encoder.encode(header.name, TMessageType.REPLY, header.seqid, result)


# -- replies ---------------------------------------------------------------------------------------------------
def reply(plan: Send, reply: Reply | None, encoder: Encoder, upstream: Layout | None = None) -> Answer:
    """The client's answer to a metastore's reply (``None``: a oneway call, sent), with what it leaves behind
    (:class:`~waggle.call.values.Settled`) for the driver to apply. ``upstream``: the layout the metastore
    declares its exceptions in, when :func:`redeclarable` asked for it (else None: relayed as they are)."""
    call, metastore = plan.call, plan.metastore
    protocol = plan.wire.protocol
    io = call.io
    if reply is None:
        return Answer(None, Outcome.SENT, metastore)
    raw: bytes | None
    mtype = reply.header.mtype
    if reply.streamed:
        raw = reply.raw  # the rest of a reply whose head is already on its way
    elif mtype == TMessageType.EXCEPTION and io is not None and plan.decision is not None and \
            call.spec is not None and call.spec.bridge is not None and call.spec.bridge.applies_to(plan.args) and \
            _unknown_method(reply, io, protocol, plan.limits):
        return Answer(None, Outcome.BRIDGE, metastore, bridge_instead=True)
    elif plan.rewrite_reply and mtype == TMessageType.REPLY and reply.first_field == 0:
        assert io is not None and io.result is not None
        raw = rewritten(plan, reply, io.result, encoder)
    elif upstream is not None and upstream is not call.session.release.layout and io is not None and \
            redeclarable(plan, reply):
        raw = _redeclared(plan, reply, io, upstream, encoder)
    elif protocol is call.wire.protocol:
        raw = reply.raw  # relayed byte for byte
    else:
        raw = _relayed(reply, io, protocol, plan.limits, call.wire.protocol, encoder)
    if mtype == TMessageType.REPLY and reply.first_field <= 0:
        decision = plan.decision  # most calls leave nothing behind: a read relayed to the primary, say
        if decision is None or (decision.creates is None and decision.member.primary):
            return Answer(raw, Outcome.OK, metastore)
        return Answer(raw, Outcome.OK, metastore, settled=_settled(plan, reply))
    return Answer(raw, outcome(reply, io, upstream), metastore)


def redeclarable(plan: Send, reply: Reply | None) -> bool:
    """Whether a reply is a declared exception of a method whose releases declare exceptions at different fields:
    then where the metastore put it and where the client reads it may differ (ask the metastore's layout)."""
    io = plan.call.io
    return reply is not None and bool(io is not None and io.declared) and not reply.streamed and \
        reply.header.mtype == TMessageType.REPLY and reply.first_field > 0


def _redeclared(plan: Send, reply: Reply, io: MethodIO, upstream: Layout, encoder: Encoder) -> bytes:
    """A metastore's declared exception moved to where the client reads it: a Hive 2 metastore's MetaException
    at field 1 of get_partition_names is a NoSuchObjectException to a Hive 3.1+ client (which stops retrying), and
    a newer metastore's field 2 is nothing to a Hive 2 client."""
    header, result = decode_message(reply.raw, plan.wire.protocol, io.result_class(upstream), plan.limits)
    moved = io.redeclared(result, plan.call.session.release.layout)
    if moved is not None:
        return encoder.encode(header.name, TMessageType.REPLY, header.seqid, moved)
    raised = next((getattr(result, f.attr) for f in specs.fields(type(result)) if f.fid > 0 and
                   getattr(result, f.attr, None) is not None), None)
    message = f"{type(raised).__name__}: {getattr(raised, 'message', raised)}" if raised is not None else \
        "an exception the client's release does not declare"
    return encoder.encode_application_error(header.name, header.seqid, TApplicationException.INTERNAL_ERROR,
                                            f"metastore '{plan.metastore}' answered {header.name} with {message}")


def rewritten(plan: Send, reply: Reply, result_class: type, encoder: Encoder) -> bytes:
    """A successful reply with its names rewritten, tables filtered and catalog filled in."""
    wire, naming, decision = plan.wire, plan.naming, plan.decision
    assert naming is not None and decision is not None
    to_client = _to_client(naming, decision)
    if plan.fill is None and naming.member.mapped_tables is None and wire == plan.call.wire and \
            plan.call.wire.protocol is ProtocolKind.BINARY and plan.link is None and plan.table_link is None and \
            plan.copy is None and plan.lock_slot is None:
        spliced = _SPLICER.splice_names(reply.raw, result_class, to_client, plan.limits)
        if spliced is not None:
            return spliced
    # Decoding a large reply allocates tens of thousands of objects that live until it is re-encoded; with the
    # collector on, that sets off full collections over the whole heap (about half the time of this path for
    # 3,000 partitions). Thrift structs hold no cycles, and nothing here yields to another greenlet, so the
    # collector is paused for this stretch only.
    collecting = gc.isenabled()
    gc.disable()
    try:
        header, result = decode_message(reply.raw, wire.protocol, result_class, plan.limits)
        return encoded_result(plan, header, result, encoder, to_client)
    finally:
        if collecting:
            gc.enable()


def encoded_result(plan: Send, header: Header, result: Any, encoder: Encoder, to_client: NameFn | None = None
                   ) -> bytes:
    """A decoded result in the member's names, encoded for the client: tables filtered, names rewritten."""
    naming, decision, spec = plan.naming, plan.decision, plan.call.spec
    assert naming is not None and decision is not None and spec is not None
    if naming.member.mapped_tables is not None:  # on the member's names, before they are rewritten
        _filter_tables(result, naming.member, decision, spec)
    if plan.copy is not None:
        plan.copy.as_source(result)
    elif plan.table_link is not None:
        local_names(result, plan.table_link)
    elif not naming.identity:
        CALL_NAMES.rewrite(result, to_client or _to_client(naming, decision))
    if plan.fill is not None:
        fill_catalog(result, plan.fill)
    if plan.link is not None:
        present_link(result, plan.link, naming.member)
    if plan.lock_slot is not None:
        lock_ids.shown_ids(result, spec.shown_lock_ids, plan.lock_slot)
    return encoder.encode(header.name, TMessageType.REPLY, header.seqid, result)


def paired(plan: Paired, source: Reply, held: list[str] | None, encoder: Encoder) -> Answer:
    """A prefer read's answer from the member's reply and the copy's partition names (None: the primary could not
    say): the source's partitions with the copy's storage where the copy holds them, or a refusal naming those it
    lacks (partial: refuse). Without the copy's names, or when the member answered with an exception, the
    member's answer is the client's, as it would be alone."""
    served = plan.copy.copy
    assert served is not None
    if held is None or not _succeeded(source):
        return reply(plan.source, source, encoder)
    call = plan.call
    assert call.io is not None and call.io.result is not None
    collecting = gc.isenabled()
    gc.disable()  # see rewritten
    try:
        header, result = decode_message(source.raw, plan.source.wire.protocol, call.io.result, plan.source.limits)
        missing = served.with_copy_storage(result, set(held))
        if missing and served.refuse_partial:
            return _partial_refused(plan, missing, encoder)
        raw = _partitions_reply(plan.source, header, result, encoder) or \
            encoded_result(plan.source, header, result, encoder)
    finally:
        if collecting:
            gc.enable()
    return Answer(raw, Outcome.OK, plan.source.metastore,
                  {"served_from": served.describe(), "from_source": len(missing)})


def _partitions_reply(plan: Send, header: Header, result: Any, encoder: Encoder) -> bytes | None:
    """A plain list of partitions in the client's names, each named by its ``dbName`` alone (the hot path of a
    prefer read: no walk); None for any other reply."""
    naming, decision = plan.naming, plan.decision
    partitions = getattr(result, "success", None)
    if naming is None or decision is None or type(partitions) is not list or naming.member.mapped_tables is not None \
            or any(type(p) is not Partition or p.colStats is not None for p in partitions):
        return None
    if not naming.identity:
        to_client = _to_client(naming, decision)
        shown: dict[str, str] = {}
        for p in partitions:
            db = p.dbName
            if db is not None:
                name = shown.get(db)
                if name is None:
                    name = shown[db] = to_client(db)
                p.dbName = name
    if plan.fill is not None:
        fill_catalog(result, plan.fill)
    return encoder.encode(header.name, TMessageType.REPLY, header.seqid, result)


def _partial_refused(plan: Paired, missing: list[str], encoder: Encoder) -> Answer:
    served = plan.copy.copy
    assert served is not None
    shown = ", ".join(missing[:20]) + (f" and {len(missing) - 20} more" if len(missing) > 20 else "")
    table = f"{served.client_db}.{next(iter(served.tables.values()))}"
    return refused(plan.call, f"{len(missing)} partition(s) of '{table}' are not in its copy '{served.describe()}' "
                              f"in the primary, or are older there than in metastore '{plan.source.metastore}' "
                              f"(partial: refuse): {shown}", encoder, plan.source.metastore)


def _succeeded(reply: Reply) -> bool:
    return bool(reply.header.mtype == TMessageType.REPLY and reply.first_field == 0 and not reply.streamed)


def bridged(plan: Send, result: Any, encoder: Encoder, via: str) -> Answer:
    """The answer a bridge built (its result struct, in the member's names)."""
    header = plan.call.header
    raw = encoded_result(plan, Header(header.name, TMessageType.REPLY, header.seqid), result, encoder)
    return Answer(raw, Outcome.OK, plan.metastore, {"bridge": via})


def outcome(reply: Reply | None, io: MethodIO | None, upstream: Layout | None = None) -> str:
    if reply is None:
        return Outcome.SENT
    if reply.header.mtype == TMessageType.EXCEPTION:
        return Outcome.APPLICATION_ERROR
    if reply.first_field <= 0:
        return Outcome.OK
    if io is not None and io.result is not None:
        declared = specs.field_by_id(io.result if upstream is None else io.result_class(upstream), reply.first_field)
        if declared is not None and declared.struct is not None:
            return declared.struct.__name__
    return Outcome.EXCEPTION


def _relayed(reply: Reply, io: MethodIO | None, upstream: ProtocolKind, limits: Any, client: ProtocolKind,
             encoder: Encoder) -> bytes | None:
    if upstream is client:
        return reply.raw
    if io is None or io.result is None:
        return None
    header, body = decode_message(reply.raw, upstream, io.result, limits)
    return encoder.encode(header.name, header.mtype, header.seqid, body)


def _settled(plan: Send, reply: Reply) -> Settled | None:
    """What a successful call leaves behind: a database in the whitelist, a lock id granted or released."""
    decision, spec = plan.decision, plan.call.spec
    if decision is None or spec is None:
        return None
    created = (decision.member.name, decision.creates) if decision.creates is not None else None
    if decision.member.primary:  # locks the primary grants are not recorded
        return Settled(created) if created is not None else None
    if spec.access is Access.LOCK and spec.granted_lock:
        io = plan.call.io
        assert io is not None and io.result is not None
        _, result = decode_message(reply.raw, plan.wire.protocol, io.result, plan.limits)
        lock_id = value_at(result, spec.granted_lock)
        if lock_id is not None and (plan.lock_slot is None or lock_ids.encode(plan.lock_slot, int(lock_id)) is None):
            return Settled(created, (int(lock_id), decision.member))  # shown as it is: the connection remembers it
    elif spec.releases_lock:
        return Settled(created, released=int(value_at(plan.call.args, spec.lock_id) or -1))  # as the client shows it
    return Settled(created) if created is not None else None


def _to_client(naming: Naming, decision: Decision) -> NameFn:
    requested = decision.requested
    shown: dict[str, str] = {}  # one name, thousands of fields: resolve it once per reply

    def to_client(name: str) -> str:
        out = shown.get(name)
        if out is None:
            out = shown[name] = naming.to_client(name, requested)
        return out

    return to_client


def _unknown_method(reply: Reply, io: MethodIO, protocol: ProtocolKind, limits: Any) -> bool:
    assert io.result is not None
    _, error = decode_message(reply.raw, protocol, io.result, limits)
    return is_unknown_method(error)


def _filter_tables(result: Any, member: MetastoreConfig, decision: Decision, spec: MethodSpec) -> None:
    """Leave out of a reply the tables that ``mapped-tables`` hides."""
    success = getattr(result, "success", None)
    if success is None:
        return
    if spec.lists_tables and isinstance(success, list):
        dbs = list(decision.requested)
        if dbs:
            result.success = [t for t in success if table_visible(member, dbs[0], t)]
        return
    tables = success if isinstance(success, list) else getattr(success, "tables", None)
    if isinstance(tables, list):
        kept = [t for t in tables if not hasattr(t, "tableName") or
                table_visible(member, t.dbName or "", t.tableName or "")]
        if tables is success:
            result.success = kept
        else:
            success.tables = kept


def local_names(result: Any, table: TableLink) -> None:
    """A remote table's reply in the client's names: its database and its table."""
    def database(name: str) -> str:
        qualified = parse(name)
        return qualified.requalify(table.db) if (qualified.db or "").lower() == table.link.database else name

    CALL_NAMES.rewrite(result, database)
    rename(result, lambda _attr, value: table.name if value.lower() == table.table else None)
