"""The Iceberg pointer guard's handler from plain values: it reads the member's table through the member's pool
in the call's identity, by the member's names, then refuses (nothing sent) or sends the plan's call, with the
metastore's own check where the call carries a context. No runtime, no socket: a pool that answers one read."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from thrift.Thrift import TApplicationException, TMessageType

from tests.support.health import PlainHealth
from waggle.call import finish
from waggle.call.values import Answer, Call, Kind, Outcome, Send, Session
from waggle.config.loader import load
from waggle.config.model import WaggleConfig
from waggle.hms.decode import decode_message
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.hms.methods import METHODS
from waggle.hms.service import METHOD_IO
from waggle.hms.specs import raised
from waggle.hms.wire import Header, Wire
from waggle.server import own
from waggle.upstream.capabilities import Capabilities
from waggle.upstream.client import UpstreamError

NOW, OLD, NEXT = "file:///w/e/metadata/2.json", "file:///w/e/metadata/1.json", "file:///w/e/metadata/3.json"
ICEBERG = {"table_type": "ICEBERG", "metadata_location": NOW, "previous_metadata_location": OLD}
FEDERATION = {"primary-meta-store": {"name": "main", "remote-meta-store-uris": "thrift://127.0.0.1:9"},
              "federated-meta-stores": [{"name": "ops", "remote-meta-store-uris": "thrift://127.0.0.1:9",
                                         "database-prefix": "ops_"}]}


class Pool:
    """A member's pool that answers the guard's read with ``table`` (None: no such table; an exception: raised)."""

    def __init__(self, config: WaggleConfig, table: Any) -> None:
        member = config.federation.member("ops")
        self.name, self.config, self.caps = "ops", member, Capabilities(member)
        self.table = table
        self.asked: list[tuple[Any, str, Any]] = []

    def exchange(self, identity: Any, method: str, args: Any, result_class: type, seqid: int = 0) -> Any:
        self.asked.append((identity, method, args))
        if isinstance(self.table, Exception):
            raise self.table
        if self.table is None:
            return result_class(o2=T.NoSuchObjectException(message="no such table"))
        return result_class(success=T.GetTableResult(table=self.table))


@dataclass
class Health(PlainHealth):
    """Member health that remembers the failures it learned of."""

    failed: list[str] = field(default_factory=list)

    def call_failed(self, name: str, error: UpstreamError) -> None:
        self.failed.append(name)

    def found_down(self, name: str, reason: str) -> None:
        self.down.add(name)


@dataclass
class Context:
    health: Health = field(default_factory=Health)


@dataclass
class Desk:
    config: WaggleConfig
    member_pool: Pool
    context: Context = field(default_factory=Context)
    session: Session = field(default_factory=lambda: Session(identity=("alice", ("data",))))
    peer: str = "10.0.0.1:5000"
    sent: list[Send] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.wire = Wire(None, self.config.server.wire, self.config.server.limits)  # type: ignore[arg-type]

    def pool(self, name: str) -> Pool:
        assert name == "ops"
        return self.member_pool

    def send(self, step: Send) -> Answer:
        self.sent.append(step)
        return Answer(b"sent", Outcome.OK, step.metastore)

    def fail(self, call: Call, message: str, outcome: Outcome, metastore: str, **fields: Any) -> Answer:
        return finish.failure(call.header, call.io, message, self.wire, outcome=outcome, metastore=metastore,
                              **fields)


def _desk(tmp_path: Path, table: Any) -> Desk:
    (tmp_path / "s.yml").write_text(yaml.safe_dump({"database-resolution": "PREFIXED"}))
    (tmp_path / "f.yml").write_text(yaml.safe_dump(FEDERATION))
    config = load(str(tmp_path / "s.yml"), str(tmp_path / "f.yml"))
    return Desk(config, Pool(config, table))


def _step(desk: Desk, method: str, parameters: dict[str, str] | None,
          context: T.EnvironmentContext | None = None) -> Send:
    """An alter of ops_scratch.events as the client sent it, planned for member ops as scratch.events."""
    io = METHOD_IO[method]

    def args(db: str) -> Any:
        new = T.Table(dbName=db, tableName="events", parameters=parameters)
        if method == "alter_table_req":
            return io.args(req=T.AlterTableRequest(dbName=db, tableName="events", table=new,
                                                   environmentContext=context))
        if method == "alter_table_with_environment_context":
            return io.args(dbname=db, tbl_name="events", new_tbl=new, environment_context=context)
        return io.args(dbname=db, tbl_name="events", new_tbl=new)

    raw = desk.wire.encode(method, TMessageType.CALL, 9, args("ops_scratch"))
    call = Call(Header(method, TMessageType.CALL, 9), METHODS[method], io, args("ops_scratch"), raw, desk.session,
                desk.config.server.wire)
    member = desk.config.federation.member("ops")
    return Send(Kind.POINTER_GUARD, call, "ops", member, args("scratch"))


def _message(desk: Desk, answer: Answer, method: str) -> str:
    assert answer.raw is not None
    _, result = decode_message(answer.raw, desk.config.server.wire.protocol, METHOD_IO[method].result,
                               desk.config.server.limits)
    error = raised(result)
    assert isinstance(error, T.MetaException), result
    return str(error.message)


def _guarded(desk: Desk, step: Send) -> Answer:
    return own.HANDLERS[Kind.POINTER_GUARD](desk, step)


@pytest.mark.parametrize("method", ["alter_table", "alter_table_with_cascade", "alter_table_with_environment_context",
                                    "alter_table_req"])
def test_a_stale_alter_of_an_iceberg_table_is_refused_before_it_reaches_the_member(tmp_path: Path,
                                                                                   method: str) -> None:
    for stale in ({"EXTERNAL": "TRUE"}, {"metadata_location": OLD, "previous_metadata_location": "x"}):
        desk = _desk(tmp_path, T.Table(dbName="scratch", tableName="events", parameters=ICEBERG))
        answer = _guarded(desk, _step(desk, method, stale))
        assert (answer.outcome, answer.metastore, answer.loud, desk.sent) == (Outcome.REFUSED, "ops", True, [])
        message = _message(desk, answer, method)
        for part in ("Iceberg pointer guard", "'ops_scratch.events'", "metastore 'ops'", NOW, "Re-read the table"):
            assert part in message, (part, message)
        # read once, by the member's names, in the call's identity
        [(identity, read, args)] = desk.member_pool.asked
        assert (identity, read, args.req.dbName, args.req.tblName) == (("alice", ("data",)), "get_table_req",
                                                                       "scratch", "events")


def test_an_honest_commit_and_an_alter_keeping_the_pointer_are_sent_with_the_metastores_check(tmp_path: Path
                                                                                              ) -> None:
    commit = {"table_type": "ICEBERG", "metadata_location": NEXT, "previous_metadata_location": NOW}
    for parameters in (commit, {**ICEBERG, "comment": "kept"}):
        desk = _desk(tmp_path, T.Table(dbName="scratch", tableName="events", parameters=ICEBERG))
        stats = T.EnvironmentContext(properties={"DO_NOT_UPDATE_STATS": "true"})
        step = _step(desk, "alter_table_with_environment_context", parameters, stats)
        assert _guarded(desk, step).outcome == Outcome.OK
        [sent] = desk.sent
        assert sent.raw is None and sent.args.new_tbl.parameters == parameters
        assert sent.args.environment_context.properties == {
            "DO_NOT_UPDATE_STATS": "true", "expected_parameter_key": "metadata_location",
            "expected_parameter_value": NOW}
        assert step.args.environment_context is stats and stats.properties == {"DO_NOT_UPDATE_STATS": "true"}
        desk = _desk(tmp_path, T.Table(dbName="scratch", tableName="events", parameters=ICEBERG))
        plain = _step(desk, "alter_table", parameters)
        assert _guarded(desk, plain).outcome == Outcome.OK and desk.sent == [plain]  # no context to carry it


def test_a_table_that_is_no_iceberg_table_or_none_at_all_is_altered_as_sent(tmp_path: Path) -> None:
    for table in (T.Table(dbName="scratch", tableName="events", parameters={"EXTERNAL": "TRUE"}), None):
        desk = _desk(tmp_path, table)
        step = _step(desk, "alter_table_with_environment_context", {"comment": "x"}, T.EnvironmentContext())
        assert _guarded(desk, step).outcome == Outcome.OK and desk.sent == [step]


def test_a_read_that_fails_fails_the_alter_saying_nothing_was_altered(tmp_path: Path) -> None:
    unknown = TApplicationException(TApplicationException.INTERNAL_ERROR, "x")
    for error in (UpstreamError("ops", "timed out"), unknown):
        desk = _desk(tmp_path, error)
        if error is unknown:  # answered, with an application error
            desk.member_pool.exchange = lambda *a, **k: unknown  # type: ignore[method-assign]
        answer = _guarded(desk, _step(desk, "alter_table", ICEBERG))
        assert (answer.outcome, desk.sent) == (Outcome.UPSTREAM_ERROR, [])
        assert "nothing was altered" in _message(desk, answer, "alter_table")
        assert desk.context.health.failed == (["ops"] if error is not unknown else [])  # as any call's failure


def test_a_member_that_is_down_is_answered_by_the_send_without_a_read(tmp_path: Path) -> None:
    desk = _desk(tmp_path, T.Table(parameters=ICEBERG))
    desk.context.health.down.add("ops")
    step = _step(desk, "alter_table", {})
    _guarded(desk, step)
    assert desk.sent == [step] and desk.member_pool.asked == []
