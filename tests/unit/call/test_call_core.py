"""The call core with plain values: plan() and finish() decide without a socket, a metastore, Java or a Runtime."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from thrift.Thrift import TMessageType

from tests.support.health import PlainHealth
from waggle.call import finish, merge
from waggle.call.plan import plan
from waggle.call.values import Answer, Call, FanOut, Kind, Learned, NeedCatalogs, Refusal, Send, Session, Settled
from waggle.config.loader import load
from waggle.config.model import WaggleConfig
from waggle.hms.decode import decode_message
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as H
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.hms.methods import METHODS
from waggle.hms.service import METHOD_IO
from waggle.hms.wire import Header, Wire
from waggle.routes.snapshot import Routes
from waggle.routing.databases import PrefixedMap
from waggle.routing.federation import Planner, Refused
from waggle.upstream.capabilities import Capabilities
from waggle.upstream.client import Reply
from waggle.upstream.outcome import Outcome

FEDERATION = {
    "primary-meta-store": {"name": "main", "remote-meta-store-uris": "thrift://127.0.0.1:9",
                           "access-control-type": "READ_AND_WRITE_AND_CREATE"},
    "federated-meta-stores": [
        {"name": "fed", "remote-meta-store-uris": "thrift://127.0.0.1:9", "database-prefix": "fed_",
         "access-control-type": "READ_AND_WRITE_ON_DATABASE_WHITELIST", "writable-database-white-list": ["sales"]},
        {"name": "ro", "remote-meta-store-uris": "thrift://127.0.0.1:9", "database-prefix": "ro_",
         "hive-version": "2.3"},
    ],
}


@dataclass
class Core:
    """What the core plans from: a configuration, its routes snapshot, the members' health, the whitelist."""

    config: WaggleConfig
    routes: Routes
    health: PlainHealth = field(default_factory=PlainHealth)
    created: dict[str, set[str]] = field(default_factory=dict)


def _core(root: Path, server: dict[str, Any]) -> Core:
    (root / "server.yml").write_text(yaml.safe_dump(server))
    (root / "federation.yml").write_text(yaml.safe_dump(FEDERATION))
    config = load(str(root / "server.yml"), str(root / "federation.yml"))
    fed = config.federation
    planner = Planner(fed, config.server.database_resolution, PrefixedMap(fed))
    return Core(config, Routes.of(config, planner=planner, caps={m.name: Capabilities(m) for m in fed.members}))


@pytest.fixture
def core(tmp_path: Path) -> Core:
    return _core(tmp_path, {"database-resolution": "PREFIXED"})


@dataclass(frozen=True)
class _Member:
    """A member's name, where a fan-out's outcome names the member it came from."""

    name: str


class _Encoder:
    """The client's encoding (binary), as the driver's Wire does it."""

    def __init__(self, core: Core) -> None:
        self.wire = Wire(None, core.config.server.wire, core.config.server.limits)  # type: ignore[arg-type]

    def encode(self, name: str, mtype: int, seqid: int, obj: Any) -> bytes:
        return self.wire.encode(name, mtype, seqid, obj)

    def encode_application_error(self, name: str, seqid: int, kind: int, message: str) -> bytes:
        return self.wire.encode_application_error(name, seqid, kind, message)


def _call(core: Core, method: str, session: Session | None = None, /, **fields: Any) -> Call:
    io = METHOD_IO[method]
    args = io.args(**fields)
    raw = _Encoder(core).encode(method, TMessageType.CALL, 7, args)
    return Call(Header(method, TMessageType.CALL, 7), METHODS[method], io, args, raw, session or Session(),
                core.config.server.wire)


def _decoded(core: Core, answer: Answer, name: str) -> Any:
    assert answer.raw is not None
    io = METHOD_IO[name]
    return decode_message(answer.raw, core.config.server.wire.protocol, io.result, core.config.server.limits)[1]


def _plan(core: Core, call: Call, asked: frozenset[str] = frozenset()) -> Any:
    step = plan(call, core.routes, core.health, core.created, Learned(catalogs=asked))
    assert isinstance(step, Send | Refusal | FanOut)
    return step


def test_a_prefixed_name_goes_to_its_member_rewritten(core: Core) -> None:
    call = _call(core, "get_database", name="fed_sales")
    step = _plan(core, call)
    assert (step.kind, step.metastore, step.raw) == (Kind.SEND, "fed", None)  # re-encoded: the name changed
    assert (step.args.name, call.args.name) == ("sales", "fed_sales")  # a copy is rewritten, never the call's own
    assert step.rewrite_reply and not step.stream


def test_an_unprefixed_name_is_relayed_to_the_primary_as_it_is(core: Core) -> None:
    call = _call(core, "get_table", dbname="sales", tbl_name="orders")
    step = _plan(core, call)
    assert (step.kind, step.metastore, step.raw) == (Kind.SEND, "main", call.raw)
    assert step.stream and not step.rewrite_reply


def test_a_write_to_a_read_only_member_is_refused_in_the_plan(core: Core) -> None:
    call = _call(core, "drop_table", dbname="ro_web", name="visits", deleteData=True)
    step = _plan(core, call)
    assert step.kind is Kind.REFUSE and step.metastore == "ro"
    answer = finish.refusal(step, _Encoder(core))
    assert answer.outcome == "refused" and answer.loud
    error = _decoded(core, answer, "drop_table").o3
    assert isinstance(error, T.MetaException) and "ro_web" in error.message


def test_names_of_two_metastores_in_one_call_are_refused_naming_both(core: Core) -> None:
    call = _call(core, "get_table_objects_by_name_req", req=T.GetTablesRequest(dbName="fed_sales"))
    assert _plan(core, call).kind is Kind.SEND
    lock = _call(core, "lock", rqst=T.LockRequest(component=[
        T.LockComponent(type=1, level=3, dbname="fed_sales"), T.LockComponent(type=1, level=3, dbname="sales")]))
    step = _plan(core, lock)
    assert step.kind is Kind.REFUSE and "'fed'" in (step.refusal or "") and "'main'" in (step.refusal or "")


def test_a_catalog_the_metastore_may_not_know_is_a_fact_to_ask_for(core: Core) -> None:
    call = _call(core, "get_database", name="@hive#fed_sales")
    assert plan(call, core.routes, core.health, core.created) == NeedCatalogs(("fed",))
    # asked, and the answer stayed unknown (the metastore was unreachable): the name goes as it is
    step = _plan(core, _call(core, "get_database", name="@hive#fed_sales"), frozenset({"fed"}))
    assert step.kind is Kind.SEND and step.fill is None
    # a Hive 2.3 member (hive-version) is known to have no catalogs: stripped, and the reply gets one
    step = _plan(core, _call(core, "get_database", name="@hive#ro_web"))
    assert (step.args.name, step.call.args.name) == ("web", "@hive#ro_web") and step.fill == "hive"
    other = _plan(core, _call(core, "get_database", name="@spark#ro_web"))
    assert other.kind is Kind.REFUSE and other.refused_as is Refused.NO_SUCH_OBJECT and other.quiet


def test_a_lock_id_that_cannot_carry_a_slot_goes_where_it_was_granted_on_this_connection(core: Core) -> None:
    """A member's id at or above 2**48 has no room for its slot: shown as it is, remembered on the connection
    (ids that carry a slot: tests/unit/call/test_lock_ids.py)."""
    big = 1 << 48
    session = Session()
    lock = _call(core, "lock", session, rqst=T.LockRequest(component=[
        T.LockComponent(type=3, level=3, dbname="fed_sales")]))
    step = _plan(core, lock)
    assert step.metastore == "fed"
    granted = _Encoder(core).encode("lock", TMessageType.REPLY, 7,
                                       H.lock_result(success=T.LockResponse(lockid=big, state=1)))
    answer = finish.reply(step, Reply(Header("lock", TMessageType.REPLY, 7), granted, 0, 0), _Encoder(core))
    assert _decoded(core, answer, "lock").success.lockid == big
    assert answer.settled is not None and answer.settled.granted is not None
    assert (answer.settled.granted[0], answer.settled.granted[1].name) == (big, "fed")
    assert session.lock_owners == {}  # the core changes nothing: the driver applies what comes back
    session.lock_owners[big] = answer.settled.granted[1]
    check = _plan(core, _call(core, "check_lock", session, rqst=T.CheckLockRequest(lockid=big)))
    assert check.metastore == "fed" and check.args.rqst.lockid == big
    assert _plan(core, _call(core, "check_lock", session, rqst=T.CheckLockRequest(lockid=9))).metastore == "main"
    unlock = _plan(core, _call(core, "unlock", session, rqst=T.UnlockRequest(lockid=big)))
    done = _Encoder(core).encode("unlock", TMessageType.REPLY, 7, H.unlock_result())
    answer = finish.reply(unlock, Reply(Header("unlock", TMessageType.REPLY, 7), done, -1, 0), _Encoder(core))
    assert answer.settled == Settled(released=big)


def test_a_fan_out_asks_only_the_members_whose_prefix_can_match(core: Core) -> None:
    step = _plan(core, _call(core, "get_databases", pattern="fed_*"))
    assert step.kind is Kind.FANOUT
    assert [(naming.member.name, args.pattern) for naming, args in step.jobs] == [("main", "fed_*"), ("fed", "*")]
    outcomes = [Outcome(_Member(naming.member.name), naming) for naming, _ in step.jobs]
    outcomes[0].result = H.get_databases_result(success=["fed_local"])
    outcomes[1].error = "metastore 'fed' did not answer get_databases in time"
    answer = merge.merge(step, outcomes, _Encoder(core), lambda m: pytest.fail(m))
    assert _decoded(core, answer, "get_databases").success == ["fed_local"]
    assert answer.fields == {"metastores": ["main"], "omitted": ["fed"]}


def test_one_members_listing_is_its_own_reply_when_the_merge_leaves_it_as_it_is(core: Core) -> None:
    encoder = _Encoder(core)

    def merged(pattern: str, member: str, listed: list[str]) -> tuple[Answer, bytes]:
        step = _plan(core, _call(core, "get_databases", pattern=pattern))
        (naming, _), = [job for job in step.jobs if job[0].member.name == member]
        result = H.get_databases_result(success=listed)
        reply = encoder.encode("get_databases", TMessageType.REPLY, 7, result)
        outcome = Outcome(_Member(member), naming, result, raw=reply)
        return merge.merge(step, [outcome], encoder, lambda m: pytest.fail(m)), reply

    answer, reply = merged("local|other", "main", ["local", "other"])
    assert answer.raw is reply and answer.fields == {"metastores": ["main"], "omitted": []}
    for listed, shown in ((["Local", "other"], ["local", "other"]), (["local", "local"], ["local"])):
        answer, reply = merged("local|other", "main", listed)
        assert answer.raw != reply and _decoded(core, answer, "get_databases").success == shown
    answer, reply = merged("fed_*", "fed", ["sales"])  # names behind a prefix change: never the member's bytes
    assert answer.raw != reply and _decoded(core, answer, "get_databases").success == ["fed_sales"]


def test_a_reply_is_rewritten_back_to_the_clients_names(core: Core) -> None:
    call = _call(core, "get_database", name="fed_sales")
    step = _plan(core, call)
    raw = _Encoder(core).encode("get_database", TMessageType.REPLY, 7,
                                   H.get_database_result(success=T.Database(name="sales")))
    answer = finish.reply(step, Reply(Header("get_database", TMessageType.REPLY, 7), raw, 0, 0), _Encoder(core))
    assert (answer.outcome, answer.metastore) == ("ok", "fed")
    assert _decoded(core, answer, "get_database").success.name == "fed_sales"


def test_a_reply_that_needs_no_change_is_relayed_byte_for_byte(core: Core) -> None:
    call = _call(core, "get_table", dbname="sales", tbl_name="orders")
    step = _plan(core, call)
    raw = _Encoder(core).encode("get_table", TMessageType.REPLY, 7,
                                   H.get_table_result(o2=T.NoSuchObjectException(message="no")))
    answer = finish.reply(step, Reply(Header("get_table", TMessageType.REPLY, 7), raw, 2, 0), _Encoder(core))
    assert answer.raw is raw and answer.outcome == "NoSuchObjectException"


def test_set_ugi_is_planned_as_the_connections_identity(core: Core) -> None:
    step = _plan(core, _call(core, "set_ugi", user_name="alice", group_names=["g"]))
    assert step.kind is Kind.IDENTITY and step.metastore == "main"


def test_a_lock_of_a_metastore_a_reload_removed_is_refused_naming_it(core: Core) -> None:
    from dataclasses import replace

    gone = replace(core.config.federation.member("fed"), name="gone")
    session = Session(lock_owners={5: gone})
    step = _plan(core, _call(core, "check_lock", session, rqst=T.CheckLockRequest(lockid=5)))
    assert isinstance(step, Refusal) and (step.kind, step.metastore) == (Kind.REFUSE, "gone")
    assert "granted by metastore 'gone', which is no longer in the federation" in (step.refusal or "")
    answer = finish.refusal(step, _Encoder(core))
    assert answer.raw is not None and answer.metastore == "gone"


def test_token_calls_are_waggles_only_behind_a_kerberos_front_door(core: Core, tmp_path: Path) -> None:
    assert _plan(core, _call(core, "get_delegation_token", token_owner="a", renewer_kerberos_principal_name="a")
                 ).kind is Kind.SEND  # no front door: the primary's, as before
    properties = {"hive.metastore.sasl.enabled": True, "hive.metastore.kerberos.principal": "waggle/h@EX.COM",
                  "hive.metastore.kerberos.keytab.file": "/none.keytab"}
    (tmp_path / "secured").mkdir()
    secured = _core(tmp_path / "secured", {"database-resolution": "PREFIXED", "configuration-properties": properties})
    for method, fields in (("get_delegation_token", {"token_owner": "a"}),
                           ("renew_delegation_token", {"token_str_form": "x"}),
                           ("add_token", {"token_identifier": "waggle:x", "delegation_token": "forever"}),
                           ("get_all_token_identifiers", {})):
        step = _plan(secured, _call(secured, method, **fields))
        assert step.kind is Kind.TOKENS and step.call.spec is not None and step.call.spec.token is not None


def test_a_call_for_a_member_that_is_down_is_answered_from_the_plan(core: Core) -> None:
    core.health.down.add("fed")
    step = _plan(core, _call(core, "get_database", name="fed_sales"))
    assert (step.kind, step.metastore) == (Kind.DOWN, "fed")
    answer = finish.down(step, _Encoder(core))
    assert (answer.outcome, answer.metastore) == ("member_down", "fed")
    assert "metastore 'fed' is down" in _decoded(core, answer, "get_database").o2.message
    # refusals come first: nothing would have been sent to it anyway
    refused = _plan(core, _call(core, "drop_table", dbname="ro_web", name="visits", deleteData=True))
    assert refused.kind is Kind.REFUSE
    assert _plan(core, _call(core, "get_database", name="sales")).kind is Kind.SEND  # the others are up


def test_plans_are_made_from_plain_values_and_carry_no_connection(core: Core) -> None:
    step = _plan(core, _call(core, "get_table", dbname="fed_sales", tbl_name="orders"))
    assert step.member is not None and step.member.name == "fed" and core.routes.pools == {}
    assert isinstance(step, Send) and not any(type(value).__module__.startswith("waggle.upstream") for value in step)
    with pytest.raises(AttributeError):
        step.raw = b""  # type: ignore[misc]  # a plan is made once, never patched


def test_rewriting_a_nested_request_leaves_the_call_as_it_came(core: Core) -> None:
    table = T.Table(tableName="t", dbName="fed_sales", sd=T.StorageDescriptor(location="/x"),
                    partitionKeys=[T.FieldSchema(name="p", type="string")])
    call = _call(core, "create_table", tbl=table)
    step = _plan(core, call)
    assert (step.metastore, step.args.tbl.dbName, call.args.tbl.dbName) == ("fed", "sales", "fed_sales")
    assert step.args.tbl.sd is table.sd  # what the rewrite never reaches is shared, not copied


# -- outcomes and the call path's signatures -----------------------------------------------------------------
def test_outcomes_are_the_strings_the_docs_and_dashboards_name() -> None:
    from waggle.call.values import ERROR_KINDS, Outcome

    assert {o.value for o in Outcome} == {
        "ok", "sent", "refused", "shed", "member_down", "upstream_error", "unknown_outcome", "no_equivalent",
        "bridge_error", "bridge", "application_error", "exception", "client_gone"}
    assert str(Outcome.UNKNOWN_OUTCOME) == "unknown_outcome" and Outcome.SHED == "shed"
    assert type(str(Outcome.OK)) is str  # what a log line carries
    assert ERROR_KINDS["shed"] == "shed" and ERROR_KINDS[Outcome.MEMBER_DOWN] == "upstream"
    assert ERROR_KINDS.get("NoSuchObjectException", "exception") == "exception"


def test_a_pool_over_its_limit_sheds_the_call_and_a_lost_write_says_its_outcome_is_unknown(core: Core) -> None:
    from waggle.call import lost
    from waggle.call.values import Outcome
    from waggle.upstream.client import Lost, UpstreamError
    from waggle.upstream.pool import Overloaded

    read = _call(core, "get_database", name="fed_sales")
    write = _call(core, "drop_database", name="fed_sales", deleteData=False, cascade=False)
    assert lost.answer(read, Overloaded("fed", "is busy")) == ("metastore 'fed' is busy", Outcome.SHED)
    assert lost.answer(read, UpstreamError("fed", "boom"))[1] is Outcome.UPSTREAM_ERROR
    dropped = UpstreamError("fed", "closed the connection", lost=Lost.DROPPED, sent=True)
    assert lost.answer(write, dropped)[1] is Outcome.UNKNOWN_OUTCOME


@pytest.mark.parametrize("function", ["waggle.call.plan:send_plan", "waggle.upstream.pool:UpstreamPool.forward",
                                      "waggle.upstream.fanout:gather", "waggle.call.finish:failure",
                                      "waggle.routes.snapshot:Routes.of", "waggle.routes.snapshot:Routes.build"])
def test_long_signatures_of_the_call_path_take_named_values(function: str) -> None:
    import importlib
    import inspect

    module, _, path = function.partition(":")
    target: Any = importlib.import_module(module)
    for part in path.split("."):
        target = getattr(target, part)
    positional = [p for p in inspect.signature(target).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in ("self", "cls")]
    assert len(positional) <= 5, [p.name for p in positional]
    assert any(p.kind is p.KEYWORD_ONLY for p in inspect.signature(target).parameters.values())
