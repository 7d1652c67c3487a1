"""Lock ids that name their member: the encoding, the slots, and the call core routing and showing them, on fresh
sessions (nothing remembered: any connection, any worker, any replica)."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from thrift.Thrift import TMessageType

from tests.unit.call.test_call_core import Core, _call, _core, _decoded, _Encoder, _plan
from waggle.call import finish, lock_ids
from waggle.call.values import Kind, Refusal, Send, Session
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as H
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.hms.methods import METHODS
from waggle.hms.wire import Header
from waggle.upstream.client import Reply


@pytest.fixture
def core(tmp_path: Path) -> Core:
    return _core(tmp_path, {"database-resolution": "PREFIXED"})


def _slot(core: Core, name: str) -> int:
    return lock_ids.assign(m.name for m in core.config.federation.federated).of[name]


# -- the pure module ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("slot", [1, 2, 4242, lock_ids.MAX_SLOT])
@pytest.mark.parametrize("own", [0, 1, 17, (1 << 48) - 1])
def test_an_id_round_trips_and_stays_a_positive_i64(slot: int, own: int) -> None:
    shown = lock_ids.encode(slot, own)
    assert shown is not None and 0 <= shown < 1 << 63
    assert lock_ids.decode(shown) == (slot, own)


def test_the_primarys_ids_are_slot_0_and_ids_without_room_are_not_encoded() -> None:
    assert lock_ids.decode(17) == (0, 17)
    assert lock_ids.decode(-1) == (0, -1)
    assert lock_ids.encode(3, 1 << 48) is None
    assert lock_ids.encode(3, -5) is None


def test_slots_are_stable_and_depend_on_the_names_only() -> None:
    slots = lock_ids.assign(["fed", "ro"])
    assert slots.of == {"fed": lock_ids.natural_slot("fed"), "ro": lock_ids.natural_slot("ro")}
    assert lock_ids.natural_slot("fed") == zlib.crc32(b"fed") % 32767 + 1
    assert lock_ids.assign(["ro", "fed", "ro"]).of == slots.of  # order and repeats do not matter
    assert {v: k for k, v in slots.of.items()} == dict(slots.named)
    assert lock_ids.assign(["fed"]).of["fed"] == slots.of["fed"]  # a member's slot does not move for another's


def _colliding(count: int) -> list[str]:
    """``count`` names with the same natural slot."""
    found: dict[int, list[str]] = {}
    i = 0
    while True:
        name = f"m{i}"
        same = found.setdefault(lock_ids.natural_slot(name), [])
        same.append(name)
        if len(same) == count:
            return same
        i += 1


def test_colliding_members_probe_on_in_the_order_of_their_names() -> None:
    a, b, c = sorted(_colliding(3))
    natural = lock_ids.natural_slot(a)
    slots = lock_ids.assign([c, a, b])
    after = natural % lock_ids.MAX_SLOT + 1
    assert slots.of[a] == natural and slots.of[b] == after and slots.of[c] == after % lock_ids.MAX_SLOT + 1
    assert lock_ids.assign([c, b]).of[b] == natural  # without a, b keeps the natural slot
    assert lock_ids.assign([c, a, b]) is slots  # remembered per set of names


def test_probing_wraps_from_the_last_slot_to_the_first() -> None:
    last = next(f"w{i}" for i in range(1_000_000) if lock_ids.natural_slot(f"w{i}") == lock_ids.MAX_SLOT)
    twin = next(f"x{i}" for i in range(1_000_000) if lock_ids.natural_slot(f"x{i}") == lock_ids.MAX_SLOT)
    first, second = sorted([last, twin])
    slots = lock_ids.assign([first, second])
    assert (slots.of[first], slots.of[second]) == (lock_ids.MAX_SLOT, 1)


def test_ids_are_shown_along_paths_through_lists_and_set_in_copies() -> None:
    result = H.show_locks_result(success=T.ShowLocksResponse(locks=[
        T.ShowLocksResponseElement(lockid=5, blockedByExtId=6), T.ShowLocksResponseElement(lockid=1 << 48)]))
    lock_ids.shown_ids(result, METHODS["show_locks"].shown_lock_ids, 9)
    locks = result.success.locks
    assert [(x.lockid, x.blockedByExtId) for x in locks] == [(9 << 48 | 5, 9 << 48 | 6), (1 << 48, None)]
    args = H.check_lock_args(rqst=T.CheckLockRequest(lockid=9 << 48 | 5, txnid=3))
    copy = lock_ids.with_id(args, METHODS["check_lock"].lock_id, 5)
    assert (copy.rqst.lockid, copy.rqst.txnid, args.rqst.lockid) == (5, 3, 9 << 48 | 5)


def test_the_method_table_derives_where_replies_show_lock_ids() -> None:
    assert METHODS["lock"].shown_lock_ids == (("success", "lockid"),)
    assert METHODS["check_lock"].shown_lock_ids == (("success", "lockid"),)
    assert METHODS["show_locks"].shown_lock_ids == (("success", "locks", "lockid"),
                                                    ("success", "locks", "blockedByExtId"))
    assert METHODS["unlock"].shown_lock_ids == () and METHODS["get_table"].shown_lock_ids == ()


# -- the call core -----------------------------------------------------------------------------------------------
def _reply(core: Core, method: str, result: object) -> Reply:
    raw = _Encoder(core).encode(method, TMessageType.REPLY, 7, result)
    return Reply(Header(method, TMessageType.REPLY, 7), raw, 0, 0)


def test_a_members_lock_is_shown_with_its_slot_and_nothing_is_remembered(core: Core) -> None:
    step = _plan(core, _call(core, "lock", Session(), rqst=T.LockRequest(component=[
        T.LockComponent(type=3, level=3, dbname="fed_sales")])))
    assert step.metastore == "fed" and step.lock_slot == _slot(core, "fed") and not step.stream
    answer = finish.reply(step, _reply(core, "lock", H.lock_result(success=T.LockResponse(lockid=42, state=1))),
                          _Encoder(core))
    assert _decoded(core, answer, "lock").success.lockid == lock_ids.encode(_slot(core, "fed"), 42)
    assert answer.settled is None


def test_the_primarys_lock_replies_are_relayed_as_they_are(core: Core) -> None:
    step = _plan(core, _call(core, "lock", Session(), rqst=T.LockRequest(component=[
        T.LockComponent(type=3, level=3, dbname="sales")])))
    assert step.metastore == "main" and step.lock_slot is None
    reply = _reply(core, "lock", H.lock_result(success=T.LockResponse(lockid=42, state=1)))
    assert finish.reply(step, reply, _Encoder(core)).raw is reply.raw


@pytest.mark.parametrize(("method", "args"), [
    ("check_lock", {"rqst": T.CheckLockRequest(lockid=0)}),
    ("unlock", {"rqst": T.UnlockRequest(lockid=0)}),
    ("heartbeat", {"ids": T.HeartbeatRequest(lockid=0)}),
])
def test_a_call_carrying_a_members_id_goes_there_with_its_own_id_on_a_fresh_session(
        core: Core, method: str, args: dict[str, object]) -> None:
    path = METHODS[method].lock_id
    for member, own in (("fed", 42), ("ro", 7)):
        shown = lock_ids.encode(_slot(core, member), own)
        assert shown is not None
        request = next(iter(args.values()))
        setattr(request, path[-1], shown)
        call = _call(core, method, Session(), **args)
        step = _plan(core, call)
        assert isinstance(step, Send) and step.kind is Kind.SEND and step.metastore == member
        assert step.raw is None and getattr(getattr(step.args, path[0]), path[1]) == own
        assert getattr(getattr(call.args, path[0]), path[1]) == shown  # the call's own arguments stay
    setattr(next(iter(args.values())), path[-1], 42)  # slot 0: the primary's, as it is
    step = _plan(core, _call(core, method, Session(), **args))
    assert step.metastore == "main" and step.raw is not None


def test_a_heartbeat_without_a_lock_id_goes_to_the_primary(core: Core) -> None:
    step = _plan(core, _call(core, "heartbeat", Session(), ids=T.HeartbeatRequest(txnid=5)))
    assert step.metastore == "main"


def test_an_id_whose_slot_names_no_member_is_refused_naming_it(core: Core) -> None:
    taken = set(lock_ids.assign(m.name for m in core.config.federation.federated).named)
    slot = next(s for s in range(1, lock_ids.MAX_SLOT + 1) if s not in taken)
    shown = lock_ids.encode(slot, 42)
    step = _plan(core, _call(core, "check_lock", Session(), rqst=T.CheckLockRequest(lockid=shown)))
    assert isinstance(step, Refusal) and step.kind is Kind.REFUSE and step.metastore == "-"
    assert f"lock id {shown} names metastore slot {slot}" in (step.refusal or "")
    answer = finish.refusal(step, _Encoder(core))
    assert answer.raw is not None and answer.reason is not None and str(shown) in answer.reason


def test_check_lock_and_show_locks_replies_of_a_member_show_its_slot(core: Core) -> None:
    slot = _slot(core, "fed")
    shown = lock_ids.encode(slot, 42)
    check = _plan(core, _call(core, "check_lock", Session(), rqst=T.CheckLockRequest(lockid=shown)))
    answer = finish.reply(check, _reply(core, "check_lock", H.check_lock_result(
        success=T.LockResponse(lockid=42, state=1))), _Encoder(core))
    assert _decoded(core, answer, "check_lock").success.lockid == shown
    show = _plan(core, _call(core, "show_locks", Session(), rqst=T.ShowLocksRequest(dbname="fed_sales")))
    assert show.metastore == "fed" and show.lock_slot == slot
    answer = finish.reply(show, _reply(core, "show_locks", H.show_locks_result(success=T.ShowLocksResponse(locks=[
        T.ShowLocksResponseElement(lockid=42, dbname="sales", blockedByExtId=41)]))), _Encoder(core))
    (element,) = _decoded(core, answer, "show_locks").success.locks
    assert (element.lockid, element.blockedByExtId, element.dbname) == (shown, lock_ids.encode(slot, 41),
                                                                         "fed_sales")
    primary = _plan(core, _call(core, "show_locks", Session(), rqst=T.ShowLocksRequest()))
    assert primary.metastore == "main" and primary.lock_slot is None
