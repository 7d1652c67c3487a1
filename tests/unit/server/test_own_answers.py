"""The calls waggle answers itself: the handler table, and handlers' answers and refusals from plain values (no
runtime, no socket)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from thrift.Thrift import TMessageType

from waggle.call.values import Answer, Call, Kind, Send, Session
from waggle.config.loader import load
from waggle.config.model import WaggleConfig
from waggle.hms.decode import decode_message
from waggle.hms.methods import METHODS
from waggle.hms.service import METHOD_IO
from waggle.hms.wire import Header, Wire
from waggle.server import own

FEDERATION = {"primary-meta-store": {"name": "main", "remote-meta-store-uris": "thrift://127.0.0.1:9"}}


@dataclass
class Guard:
    """What a handler reads of waggle's security for a token call: no token service (no Kerberos front door)."""

    tokens: Any = None


@dataclass
class Context:
    """What is running, as a handler sees it: only the guard."""

    guard: Guard = field(default_factory=Guard)


@dataclass
class Desk:
    """A connection as a handler sees it, with nothing behind it: sending or asking a pool fails the test."""

    config: WaggleConfig
    context: Any = field(default_factory=Context)
    session: Session = field(default_factory=Session)
    peer: str = "10.0.0.1:5000"

    def __post_init__(self) -> None:
        self.wire = Wire(None, self.config.server.wire, self.config.server.limits)  # type: ignore[arg-type]

    def pool(self, name: str) -> Any:
        raise AssertionError(f"no metastore is asked here ({name})")

    def send(self, step: Send) -> Answer:
        raise AssertionError("nothing is sent here")


def _desk(tmp_path: Path) -> Desk:
    (tmp_path / "s.yml").write_text("")
    (tmp_path / "f.yml").write_text(yaml.safe_dump(FEDERATION))
    return Desk(load(str(tmp_path / "s.yml"), str(tmp_path / "f.yml")))


def _step(desk: Desk, kind: Kind, method: str, **fields: Any) -> Send:
    io = METHOD_IO[method]
    args = io.args(**fields)
    raw = desk.wire.encode(method, TMessageType.CALL, 3, args)
    call = Call(Header(method, TMessageType.CALL, 3), METHODS[method], io, args, raw, desk.session,
                desk.config.server.wire)
    primary = desk.config.federation.primary
    return Send(kind, call, primary.name, primary, args, raw)


def test_each_self_answered_kind_has_one_handler() -> None:
    assert set(own.HANDLERS) == {Kind.IDENTITY, Kind.TOKENS, Kind.LINK, Kind.CONNECTORS,
                                 Kind.COPY, Kind.PAIRED, Kind.LOG, Kind.POINTER_GUARD}


def test_a_token_call_without_waggles_token_service_is_refused_loudly(tmp_path: Path) -> None:
    desk = _desk(tmp_path)
    answer = own.HANDLERS[Kind.TOKENS](desk, _step(desk, Kind.TOKENS, "get_delegation_token", token_owner="a"))
    assert (answer.outcome, answer.metastore, answer.loud) == ("refused", "waggle", True)
    assert answer.raw is not None
    _, result = decode_message(answer.raw, desk.config.server.wire.protocol, METHOD_IO["get_delegation_token"].result,
                               desk.config.server.limits)
    assert "delegation-token store" in result.o1.message


def test_an_identity_over_the_limit_is_refused_unrecorded_and_the_session_keeps_none(tmp_path: Path) -> None:
    desk = _desk(tmp_path)
    step = _step(desk, Kind.IDENTITY, "set_ugi", user_name="u" * (own.MAX_IDENTITY_CHARS + 1), group_names=[])
    answer = own.HANDLERS[Kind.IDENTITY](desk, step)
    assert (answer.outcome, answer.record, desk.session.identity) == ("refused", False, None)
