"""The calls waggle answers itself rather than relaying, as a table of handlers by the plan's kind.

Each capability that answers or redirects calls keeps its handlers in a module of its own beside this one (remote
databases in :mod:`waggle.server.own_links`; the connection's identity and delegation tokens here) and adds one
entry to :data:`HANDLERS`. A handler gets the connection as a :class:`~waggle.server.desk.Desk` and the plan, and
returns the :class:`~waggle.call.values.Answer`; answers and refusals are built by :mod:`waggle.call.finish`.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from waggle.call import finish
from waggle.call.values import Answer, Kind, Outcome, Send
from waggle.hms.methods import TokenOp
from waggle.security.token_service import TokenRefused
from waggle.server import own_copies, own_links, own_log, own_pointer_guard
from waggle.server.desk import Desk, Handler
from waggle.upstream.client import UpstreamError

#: set_ugi identities are remembered by the upstream pools: bound what one may cost.
MAX_IDENTITY_CHARS = 65536


def identity(desk: Desk, step: Send) -> Answer:
    """Remember the client's identity; every later call travels on a connection opened as this user."""
    call, session = step.call, desk.session
    if session.authenticated is None or session.identity is None:
        who = (str(call.args.user_name or ""), tuple(str(g) for g in call.args.group_names or ()))
        size = len(who[0]) + sum(len(g) for g in who[1])
        if size > MAX_IDENTITY_CHARS:
            return finish.refused(call, f"{call.name} refused: the user and groups are {size} characters long; "
                                        f"the limit is {MAX_IDENTITY_CHARS}", desk.wire, step.metastore,
                                  record=False)
        session.identity = who
        structlog.contextvars.bind_contextvars(user=who[0])
    # else Kerberos or a token proved who this is: set_ugi is answered, and changes nothing
    assert session.identity is not None
    pool = desk.pool(step.metastore)
    try:
        groups = pool.set_ugi_reply(session.identity)
    except UpstreamError as exc:
        return finish.failure(call.header, call.io, str(exc), desk.wire, outcome=Outcome.UPSTREAM_ERROR,
                              metastore=pool.name, error=exc.detail)
    return finish.answered(call, groups, desk.wire, pool.name)


def tokens(desk: Desk, step: Send) -> Answer:
    """A delegation-token call, answered by waggle's token service (the front door logs clients in)."""
    call = step.call
    assert call.spec is not None and call.spec.token is not None
    op, who, service = call.spec.token.op, desk.session.authenticated, desk.context.guard.tokens
    args = [str(getattr(call.args, name, None) or "") for name in call.spec.token.args]
    value: object = None
    try:
        if service is None or who is None or op is TokenOp.STORE:
            raise TokenRefused(f"{call.name} refused: waggle keeps its own delegation-token store, which clients "
                               f"cannot read or change")
        if op is TokenOp.ISSUE:
            value = service.issue(who.user, who.via_token, desk.peer.rpartition(":")[0], *args)
        elif op is TokenOp.RENEW:
            value = service.renew(who.user, *args)
        else:
            service.cancel(who.user, *args)
    except TokenRefused as exc:
        return finish.refused(call, str(exc), desk.wire, "waggle")
    except UpstreamError as exc:
        return finish.failure(call.header, call.io, f"waggle's token store is unavailable: {exc}", desk.wire,
                              outcome=Outcome.UPSTREAM_ERROR, metastore=step.metastore, error=exc.detail)
    return finish.answered(call, value, desk.wire, "waggle")


#: the plan kinds waggle answers itself -> their handler (every other kind is relayed, bridged or fanned out)
HANDLERS: Mapping[Kind, Handler] = {
    Kind.IDENTITY: identity,
    Kind.TOKENS: tokens,
    Kind.LINK: own_links.link,
    Kind.CONNECTORS: own_links.connectors,
    Kind.COPY: own_copies.from_copy,
    Kind.PAIRED: own_copies.paired,
    Kind.LOG: own_log.merged_log,
    Kind.POINTER_GUARD: own_pointer_guard.guarded_alter,
}
