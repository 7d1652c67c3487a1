"""The call core with plain values: plan() and finish() decide without a socket, a metastore or Java."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from thrift.Thrift import TMessageType

from waggle.call import finish, merge
from waggle.call.plan import plan
from waggle.call.values import Answer, Call, Kind, Learned, NeedCatalogs, Plan, Session, Settled
from waggle.config.loader import load
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as H
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.hms.methods import METHODS
from waggle.hms.service import METHOD_IO
from waggle.routing.federation import Refused
from waggle.runtime import Runtime
from waggle.upstream.client import Reply
from waggle.upstream.outcome import Outcome
from waggle.wire import Header, decode_message

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


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    root: Path = tmp_path_factory.mktemp("core")
    (root / "server.yml").write_text(yaml.safe_dump({"database-resolution": "PREFIXED"}))
    (root / "federation.yml").write_text(yaml.safe_dump(FEDERATION))
    rt = Runtime(load(str(root / "server.yml"), str(root / "federation.yml")))  # never started: no I/O
    yield rt
    rt.close()


class _Encoder:
    """The client's encoding (binary), as the driver's Wire does it."""

    def __init__(self, runtime: Runtime) -> None:
        from waggle.wire import Wire

        self.wire = Wire(None, runtime.config.server.wire, runtime.config.server.limits)  # type: ignore[arg-type]

    def encode(self, name: str, mtype: int, seqid: int, obj: Any) -> bytes:
        return self.wire.encode(name, mtype, seqid, obj)

    def encode_application_error(self, name: str, seqid: int, kind: int, message: str) -> bytes:
        return self.wire.encode_application_error(name, seqid, kind, message)


def _call(runtime: Runtime, method: str, session: Session | None = None, /, **fields: Any) -> Call:
    io = METHOD_IO[method]
    args = io.args(**fields)
    raw = _Encoder(runtime).encode(method, TMessageType.CALL, 7, args)
    return Call(Header(method, TMessageType.CALL, 7), METHODS[method], io, args, raw, session or Session(),
                runtime.config.server.wire)


def _decoded(runtime: Runtime, answer: Answer, name: str) -> Any:
    assert answer.raw is not None
    io = METHOD_IO[name]
    return decode_message(answer.raw, runtime.config.server.wire.protocol, io.result, runtime.config.server.limits)[1]


def _plan(runtime: Runtime, call: Call, asked: frozenset[str] = frozenset()) -> Plan:
    step = plan(call, runtime.routes, runtime.created, Learned(catalogs=asked))
    assert isinstance(step, Plan)
    return step


def test_a_prefixed_name_goes_to_its_member_rewritten(runtime: Runtime) -> None:
    call = _call(runtime, "get_database", name="fed_sales")
    step = _plan(runtime, call)
    assert (step.kind, step.pool.name, step.raw) == (Kind.SEND, "fed", None)  # re-encoded: the name changed
    assert call.args.name == "sales"
    assert step.rewrite_reply and not step.stream


def test_an_unprefixed_name_is_relayed_to_the_primary_as_it_is(runtime: Runtime) -> None:
    call = _call(runtime, "get_table", dbname="sales", tbl_name="orders")
    step = _plan(runtime, call)
    assert (step.kind, step.pool.name, step.raw) == (Kind.SEND, "main", call.raw)
    assert step.stream and not step.rewrite_reply


def test_a_write_to_a_read_only_member_is_refused_in_the_plan(runtime: Runtime) -> None:
    call = _call(runtime, "drop_table", dbname="ro_web", name="visits", deleteData=True)
    step = _plan(runtime, call)
    assert step.kind is Kind.REFUSE and step.metastore == "ro"
    answer = finish.refusal(step, _Encoder(runtime))
    assert answer.outcome == "refused" and answer.loud
    error = _decoded(runtime, answer, "drop_table").o3
    assert isinstance(error, T.MetaException) and "ro_web" in error.message


def test_names_of_two_metastores_in_one_call_are_refused_naming_both(runtime: Runtime) -> None:
    call = _call(runtime, "get_table_objects_by_name_req", req=T.GetTablesRequest(dbName="fed_sales"))
    assert _plan(runtime, call).kind is Kind.SEND
    lock = _call(runtime, "lock", rqst=T.LockRequest(component=[
        T.LockComponent(type=1, level=3, dbname="fed_sales"), T.LockComponent(type=1, level=3, dbname="sales")]))
    step = _plan(runtime, lock)
    assert step.kind is Kind.REFUSE and "'fed'" in (step.refusal or "") and "'main'" in (step.refusal or "")


def test_a_catalog_the_metastore_may_not_know_is_a_fact_to_ask_for(runtime: Runtime) -> None:
    call = _call(runtime, "get_database", name="@hive#fed_sales")
    assert plan(call, runtime.routes, runtime.created) == NeedCatalogs(("fed",))
    # asked, and the answer stayed unknown (the metastore was unreachable): the name goes as it is
    step = _plan(runtime, _call(runtime, "get_database", name="@hive#fed_sales"), frozenset({"fed"}))
    assert step.kind is Kind.SEND and step.fill is None
    # a Hive 2.3 member (hive-version) is known to have no catalogs: stripped, and the reply gets one
    step = _plan(runtime, _call(runtime, "get_database", name="@hive#ro_web"))
    assert step.call.args.name == "web" and step.fill == "hive"
    other = _plan(runtime, _call(runtime, "get_database", name="@spark#ro_web"))
    assert other.kind is Kind.REFUSE and other.refused_as is Refused.NO_SUCH_OBJECT and other.quiet


def test_a_lock_id_goes_where_it_was_granted_on_this_connection(runtime: Runtime) -> None:
    session = Session()
    lock = _call(runtime, "lock", session, rqst=T.LockRequest(component=[
        T.LockComponent(type=3, level=3, dbname="fed_sales")]))
    step = _plan(runtime, lock)
    assert step.pool.name == "fed"
    granted = _Encoder(runtime).encode("lock", TMessageType.REPLY, 7,
                                       H.lock_result(success=T.LockResponse(lockid=42, state=1)))
    answer = finish.reply(step, Reply(Header("lock", TMessageType.REPLY, 7), granted, 0, 0), _Encoder(runtime))
    assert answer.settled is not None and answer.settled.granted is not None
    assert (answer.settled.granted[0], answer.settled.granted[1].name) == (42, "fed")
    assert session.lock_owners == {}  # the core changes nothing: the driver applies what comes back
    session.lock_owners[42] = answer.settled.granted[1]
    check = _plan(runtime, _call(runtime, "check_lock", session, rqst=T.CheckLockRequest(lockid=42)))
    assert check.pool.name == "fed"
    assert _plan(runtime, _call(runtime, "check_lock", session, rqst=T.CheckLockRequest(lockid=9))).pool.name == "main"
    unlock = _plan(runtime, _call(runtime, "unlock", session, rqst=T.UnlockRequest(lockid=42)))
    done = _Encoder(runtime).encode("unlock", TMessageType.REPLY, 7, H.unlock_result())
    answer = finish.reply(unlock, Reply(Header("unlock", TMessageType.REPLY, 7), done, -1, 0), _Encoder(runtime))
    assert answer.settled == Settled(released=42)


def test_a_fan_out_asks_only_the_members_whose_prefix_can_match(runtime: Runtime) -> None:
    step = _plan(runtime, _call(runtime, "get_databases", pattern="fed_*"))
    assert step.kind is Kind.FANOUT
    assert [(pool.name, args.pattern) for pool, _, args in step.jobs] == [("main", "fed_*"), ("fed", "*")]
    outcomes = [Outcome(pool, naming) for pool, naming, _ in step.jobs]
    outcomes[0].result = H.get_databases_result(success=["fed_local"])
    outcomes[1].error = "metastore 'fed' did not answer get_databases in time"
    answer = merge.merge(step, outcomes, _Encoder(runtime), lambda m: pytest.fail(m))
    assert _decoded(runtime, answer, "get_databases").success == ["fed_local"]
    assert answer.fields == {"metastores": ["main"], "omitted": ["fed"]}


def test_one_members_listing_is_its_own_reply_when_the_merge_leaves_it_as_it_is(runtime: Runtime) -> None:
    encoder = _Encoder(runtime)

    def merged(pattern: str, member: str, listed: list[str]) -> tuple[Answer, bytes]:
        step = _plan(runtime, _call(runtime, "get_databases", pattern=pattern))
        (pool, naming, _), = [job for job in step.jobs if job[0].name == member]
        result = H.get_databases_result(success=listed)
        reply = encoder.encode("get_databases", TMessageType.REPLY, 7, result)
        return merge.merge(step, [Outcome(pool, naming, result, raw=reply)], encoder, lambda m: pytest.fail(m)), reply

    answer, reply = merged("local|other", "main", ["local", "other"])
    assert answer.raw is reply and answer.fields == {"metastores": ["main"], "omitted": []}
    for listed, shown in ((["Local", "other"], ["local", "other"]), (["local", "local"], ["local"])):
        answer, reply = merged("local|other", "main", listed)
        assert answer.raw != reply and _decoded(runtime, answer, "get_databases").success == shown
    answer, reply = merged("fed_*", "fed", ["sales"])  # names behind a prefix change: never the member's bytes
    assert answer.raw != reply and _decoded(runtime, answer, "get_databases").success == ["fed_sales"]


def test_a_reply_is_rewritten_back_to_the_clients_names(runtime: Runtime) -> None:
    call = _call(runtime, "get_database", name="fed_sales")
    step = _plan(runtime, call)
    raw = _Encoder(runtime).encode("get_database", TMessageType.REPLY, 7,
                                   H.get_database_result(success=T.Database(name="sales")))
    answer = finish.reply(step, Reply(Header("get_database", TMessageType.REPLY, 7), raw, 0, 0), _Encoder(runtime))
    assert (answer.outcome, answer.metastore) == ("ok", "fed")
    assert _decoded(runtime, answer, "get_database").success.name == "fed_sales"


def test_a_reply_that_needs_no_change_is_relayed_byte_for_byte(runtime: Runtime) -> None:
    call = _call(runtime, "get_table", dbname="sales", tbl_name="orders")
    step = _plan(runtime, call)
    raw = _Encoder(runtime).encode("get_table", TMessageType.REPLY, 7,
                                   H.get_table_result(o2=T.NoSuchObjectException(message="no")))
    answer = finish.reply(step, Reply(Header("get_table", TMessageType.REPLY, 7), raw, 2, 0), _Encoder(runtime))
    assert answer.raw is raw and answer.outcome == "NoSuchObjectException"


def test_set_ugi_is_planned_as_the_connections_identity(runtime: Runtime) -> None:
    step = _plan(runtime, _call(runtime, "set_ugi", user_name="alice", group_names=["g"]))
    assert step.kind is Kind.IDENTITY and step.pool.name == "main"


def test_a_lock_of_a_metastore_a_reload_removed_is_refused_naming_it(runtime: Runtime) -> None:
    from dataclasses import replace

    gone = replace(runtime.config.federation.member("fed"), name="gone")
    session = Session(lock_owners={5: gone})
    step = _plan(runtime, _call(runtime, "check_lock", session, rqst=T.CheckLockRequest(lockid=5)))
    assert (step.kind, step.metastore, step.pool) == (Kind.REFUSE, "gone", None)
    assert "granted by metastore 'gone', which is no longer in the federation" in (step.refusal or "")
    answer = finish.refusal(step, _Encoder(runtime))
    assert answer.raw is not None and answer.metastore == "gone"


def test_token_calls_are_waggles_only_behind_a_kerberos_front_door(runtime: Runtime, tmp_path: Path) -> None:
    assert _plan(runtime, _call(runtime, "get_delegation_token", token_owner="a", renewer_kerberos_principal_name="a")
                 ).kind is Kind.SEND  # no front door: the primary's, as before
    properties = {"hive.metastore.sasl.enabled": True, "hive.metastore.kerberos.principal": "waggle/h@EX.COM",
                  "hive.metastore.kerberos.keytab.file": "/none.keytab"}
    (tmp_path / "server.yml").write_text(yaml.safe_dump({"database-resolution": "PREFIXED",
                                                         "configuration-properties": properties}))
    (tmp_path / "federation.yml").write_text(yaml.safe_dump(FEDERATION))
    secured = Runtime(load(str(tmp_path / "server.yml"), str(tmp_path / "federation.yml")))  # never started
    try:
        for method, fields in (("get_delegation_token", {"token_owner": "a"}),
                               ("renew_delegation_token", {"token_str_form": "x"}),
                               ("add_token", {"token_identifier": "waggle:x", "delegation_token": "forever"}),
                               ("get_all_token_identifiers", {})):
            step = _plan(secured, _call(secured, method, **fields))
            assert step.kind is Kind.TOKENS and step.call.spec is not None and step.call.spec.token is not None
    finally:
        secured.close()
