"""The calls waggle answers itself rather than relaying: delegation tokens (a Kerberos front door), Hive 4 data
connectors, and the making and dropping of links (remote databases and remote tables).

A mixin of :class:`~waggle.server.driver.ClientDriver`: it uses the driver's session, runtime and wire, and its
upstream I/O (``_send_or_bridge``), and keeps the driver to the relaying of calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thrift.Thrift import TMessageType

from waggle.call import finish
from waggle.call.plan import value_at
from waggle.call.values import Answer, Plan, Session
from waggle.common.logging import get_logger
from waggle.hms.methods import LinkOp, TokenOp
from waggle.hms.wire import Wire
from waggle.remotes.connectors import ConnectorError
from waggle.remotes.registry import create_stub, remote_refusal, remote_table_refusal
from waggle.security.token_service import TokenRefused
from waggle.upstream.client import UpstreamError

if TYPE_CHECKING:
    from waggle.runtime import Runtime

log = get_logger("waggle.call")


class OwnAnswers:
    __slots__ = ()
    # provided by ClientDriver
    runtime: Runtime
    session: Session
    wire: Wire
    peer: str

    def _send_or_bridge(self, step: Plan, started: float) -> Answer:
        raise NotImplementedError

    def _link(self, step: Plan, started: float) -> Answer:
        """Create a link (the remote database must exist and be no link itself; then the primary stores it) or
        drop one (in the primary only: nothing reaches the remote metastore)."""
        call, link = step.call, step.link
        assert call.spec is not None and call.spec.link is not None and call.io is not None
        op = call.spec.link.op
        if step.table_link is not None:
            return self._table_link(step, started, op)
        assert link is not None
        if op is LinkOp.CREATE:
            runtime = self.runtime
            member = runtime.config.federation.member(link.member) if link.member else runtime.links.uri_member(link)
            why = remote_refusal(runtime.link_pool(member), self.session.identity, link)
            if why is not None:
                answer = finish.failure(call.header, call.io, f"{call.name} refused: cannot link '{link.name}' to "
                                        f"{link.describe()}: {why}", self.wire, "refused", step.metastore)
                answer.reason, answer.loud = why, True
                return answer
        if op is LinkOp.CREATE:
            why = create_stub(step.upstream, self.session.identity, value_at(call.args, call.spec.link.path))
            if why is not None:
                return finish.failure(call.header, call.io, f"{call.name} failed: {why}", self.wire,
                                      "upstream_error", step.metastore)
            assert call.io.result is not None
            answer = Answer(self.wire.encode(call.name, TMessageType.REPLY, call.header.seqid, call.io.result()),
                            "ok", step.metastore)
        else:
            answer = self._send_or_bridge(step, started)
        if answer.outcome == "ok":
            if op is LinkOp.CREATE:
                self.runtime.links.add(link)
                log.info("link.created", database=link.name, remote=link.describe())
            else:
                self.runtime.links.remove(link.name)
                log.info("link.dropped", database=link.name, remote=link.describe())
            self.runtime.relink()
        return answer

    def _table_link(self, step: Plan, started: float, op: LinkOp) -> Answer:
        """Make a remote table (the remote table must exist; then the primary keeps its stub) or drop one (the
        stub only)."""
        call, table, runtime = step.call, step.table_link, self.runtime
        assert table is not None and call.io is not None
        if op is LinkOp.CREATE_TABLE:
            link = table.link
            member = runtime.config.federation.member(link.member) if link.member else runtime.links.uri_member(link)
            why = remote_table_refusal(runtime.link_pool(member), self.session.identity, table)
            if why is not None:
                answer = finish.failure(call.header, call.io, f"{call.name} refused: cannot make "
                                        f"'{table.db}.{table.name}' a link to {table.describe()}: {why}", self.wire,
                                        "refused", step.metastore)
                answer.reason, answer.loud = why, True
                return answer
        answer = self._send_or_bridge(step, started)
        if answer.outcome == "ok":
            if op is LinkOp.CREATE_TABLE:
                runtime.links.add_table(table)
                log.info("link.created", table=f"{table.db}.{table.name}", remote=table.describe())
            else:
                runtime.links.remove_table((table.db, table.name))
                log.info("link.dropped", table=f"{table.db}.{table.name}", remote=table.describe())
            runtime.relink()
        return answer

    def _connectors(self, step: Plan) -> Answer:
        """A Hive 4 data-connector call, answered by waggle from the connectors it keeps in the primary."""
        call = step.call
        assert call.spec is not None and call.spec.connector is not None and call.io is not None
        assert call.io.result is not None
        values = [value_at(call.args, path) for path in call.spec.connector.paths]
        try:
            value = self.runtime.connectors.answer(call.spec.connector.op, values, self.session.identity)
        except ConnectorError as exc:
            answer = finish.failure(call.header, call.io, f"{call.name} refused: {exc}", self.wire, "refused",
                                    "waggle")
            answer.reason, answer.loud = str(exc), True
            return answer
        except UpstreamError as exc:
            return finish.failure(call.header, call.io, f"waggle keeps data connectors in the primary, which "
                                  f"failed: {exc}", self.wire, "upstream_error", step.metastore, error=exc.detail)
        result = call.io.result() if value is None else call.io.result(success=value)
        return Answer(self.wire.encode(call.name, TMessageType.REPLY, call.header.seqid, result), "ok", "waggle")

    def _tokens(self, step: Plan) -> Answer:
        """A delegation-token call, answered by waggle's token service (the front door logs clients in)."""
        call = step.call
        assert call.spec is not None and call.spec.token is not None and call.io is not None
        assert call.io.result is not None
        op, who, service = call.spec.token.op, self.session.authenticated, self.runtime.tokens
        args = [str(getattr(call.args, name, None) or "") for name in call.spec.token.args]
        value: object = None
        try:
            if service is None or who is None or op is TokenOp.STORE:
                raise TokenRefused(f"{call.name} refused: waggle keeps its own delegation-token store, which "
                                   f"clients cannot read or change")
            if op is TokenOp.ISSUE:
                value = service.issue(who.user, who.via_token, self.peer.rpartition(":")[0], *args)
            elif op is TokenOp.RENEW:
                value = service.renew(who.user, *args)
            else:
                service.cancel(who.user, *args)
        except TokenRefused as exc:
            answer = finish.failure(call.header, call.io, str(exc), self.wire, "refused", "waggle")
            answer.reason, answer.loud = str(exc), True
            return answer
        except UpstreamError as exc:
            return finish.failure(call.header, call.io, f"waggle's token store is unavailable: {exc}", self.wire,
                                  "upstream_error", step.metastore, error=exc.detail)
        result = call.io.result() if value is None else call.io.result(success=value)
        return Answer(self.wire.encode(call.name, TMessageType.REPLY, call.header.seqid, result), "ok", "waggle")
