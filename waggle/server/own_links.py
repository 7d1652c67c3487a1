"""The calls of remote databases that waggle answers itself: making and dropping links and remote tables (the
remote end checked first, then the primary keeps the stub), and Hive 4 data-connector calls (answered from the
connectors waggle keeps in the primary). Handlers of :data:`waggle.server.own.HANDLERS`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from waggle.call import finish
from waggle.call.values import Answer, Outcome, Send
from waggle.common.logging import get_logger
from waggle.hms.fields import value_at
from waggle.hms.methods import LinkOp
from waggle.remotes.connectors import ConnectorError
from waggle.remotes.registry import create_stub, remote_refusal, remote_table_refusal
from waggle.upstream.client import UpstreamError

if TYPE_CHECKING:
    from waggle.server.desk import Desk

log = get_logger("waggle.call")


def link(desk: Desk, step: Send) -> Answer:
    """Create a link (the remote database must exist and be no link itself; then the primary stores it) or
    drop one (in the primary only: nothing reaches the remote metastore)."""
    call, made = step.call, step.link
    assert call.spec is not None and call.spec.link is not None and call.io is not None
    op = call.spec.link.op
    if step.table_link is not None:
        return _table_link(desk, step, op)
    assert made is not None
    context, wire = desk.context, desk.wire
    if op is LinkOp.CREATE:
        member = context.config.federation.member(made.member) if made.member else context.links.uri_member(made)
        why = remote_refusal(context.remotes.link_pool(member), desk.session.identity, made)
        if why is not None:
            return finish.refused(call, f"{call.name} refused: cannot link '{made.name}' to {made.describe()}: "
                                        f"{why}", wire, step.metastore, why)
        why = create_stub(desk.pool(step.metastore), desk.session.identity, value_at(step.args, call.spec.link.path))
        if why is not None:
            return finish.failure(call.header, call.io, f"{call.name} failed: {why}", wire,
                                  outcome=Outcome.UPSTREAM_ERROR, metastore=step.metastore)
        answer = finish.answered(call, None, wire, step.metastore)
    else:
        answer = desk.send(step)
    if answer.outcome == Outcome.OK:
        if op is LinkOp.CREATE:
            context.links.add(made)
            log.info("link.created", database=made.name, remote=made.describe())
        else:
            context.links.remove(made.name)
            log.info("link.dropped", database=made.name, remote=made.describe())
        context.remotes.relink()
    return answer


def _table_link(desk: Desk, step: Send, op: LinkOp) -> Answer:
    """Make a remote table (the remote table must exist; then the primary keeps its stub) or drop one (the
    stub only)."""
    call, table, context = step.call, step.table_link, desk.context
    assert table is not None
    if op is LinkOp.CREATE_TABLE:
        made = table.link
        member = context.config.federation.member(made.member) if made.member else context.links.uri_member(made)
        why = remote_table_refusal(context.remotes.link_pool(member), desk.session.identity, table)
        if why is not None:
            return finish.refused(call, f"{call.name} refused: cannot make '{table.db}.{table.name}' a link to "
                                        f"{table.describe()}: {why}", desk.wire, step.metastore, why)
    answer = desk.send(step)
    if answer.outcome == Outcome.OK:
        if op is LinkOp.CREATE_TABLE:
            context.links.add_table(table)
            log.info("link.created", table=f"{table.db}.{table.name}", remote=table.describe())
        else:
            context.links.remove_table((table.db, table.name))
            log.info("link.dropped", table=f"{table.db}.{table.name}", remote=table.describe())
        context.remotes.relink()
    return answer


def connectors(desk: Desk, step: Send) -> Answer:
    """A Hive 4 data-connector call, answered by waggle from the connectors it keeps in the primary."""
    call = step.call
    assert call.spec is not None and call.spec.connector is not None
    values = [value_at(call.args, path) for path in call.spec.connector.paths]
    try:
        value = desk.context.connectors.answer(call.spec.connector.op, values, desk.session.identity)
    except ConnectorError as exc:
        return finish.refused(call, f"{call.name} refused: {exc}", desk.wire, "waggle", str(exc))
    except UpstreamError as exc:
        return finish.failure(call.header, call.io, f"waggle keeps data connectors in the primary, which failed: "
                              f"{exc}", desk.wire, outcome=Outcome.UPSTREAM_ERROR, metastore=step.metastore,
                              error=exc.detail)
    return finish.answered(call, value, desk.wire, "waggle")
