"""waggle's token service with an in-memory token store: who may issue, renew and cancel, and token logins."""

from __future__ import annotations

import base64

import pytest

from tests.support.tokens import Clock, MemoryStore
from waggle.security.principals import AuthToLocal
from waggle.security.token_service import ProxyUsers, TokenRefused, TokenService
from waggle.security.tokens import TokenAuthority, decode_token

KEYS = {1: b"k" * 32}


def service(store: MemoryStore | None = None, clock: Clock | None = None,
            props: dict[str, str] | None = None) -> TokenService:
    authority = TokenAuthority(KEYS, max_lifetime_ms=10_000, renew_interval_ms=1_000)
    return TokenService(authority, store or MemoryStore(), ProxyUsers(props or {}),
                        AuthToLocal("DEFAULT", "EX.COM").short_name, clock or Clock())


def login_user(token: str) -> str:
    return base64.b64encode(decode_token(token).identifier).decode()


def test_a_token_is_issued_checked_renewed_and_cancelled():
    store, clock = MemoryStore(), Clock()
    tokens = service(store, clock)
    token = tokens.issue("alice", False, "10.0.0.1", "alice", "hive/h@EX.COM")
    password, identifier = tokens.login(login_user(token))
    assert (identifier.owner, identifier.renewer, identifier.real_user) == ("alice", "hive", "")
    assert password == base64.b64encode(decode_token(token).password)
    assert all(key.startswith("waggle:") for key in store.records)
    clock.now += 800
    assert tokens.renew("hive", token) == clock.now + 1_000
    clock.now += 900  # past the first expiry, within the renewed one
    tokens.login(login_user(token))
    with pytest.raises(TokenRefused, match="only hive may renew"):
        tokens.renew("alice", token)
    tokens.cancel("alice", token)
    with pytest.raises(TokenRefused, match="cancelled or is unknown"):
        tokens.login(login_user(token))
    with pytest.raises(TokenRefused, match="cancelled or never issued"):
        tokens.renew("hive", token)


def test_expired_and_past_their_max_date_tokens_are_refused():
    clock = Clock()
    tokens = service(clock=clock)
    token = tokens.issue("alice", False, "10.0.0.1", "", "")
    clock.now += 1_001
    with pytest.raises(TokenRefused, match="expired"):
        tokens.login(login_user(token))
    other = tokens.issue("alice", False, "10.0.0.1", "", "alice")
    for _ in range(20):
        clock.now += 900
        try:
            tokens.renew("alice", other)
        except TokenRefused as exc:
            assert "max date" in str(exc)
            break
    else:
        pytest.fail("a token was renewed past its max date")


def test_only_kerberos_callers_get_tokens_and_only_proxy_users_for_others():
    tokens = service(props={"hadoop.proxyuser.hive.users": "alice,bob", "hadoop.proxyuser.hive.hosts": "10.0.0.0/8"})
    with pytest.raises(TokenRefused, match="Kerberos-authenticated"):
        tokens.issue("alice", True, "10.0.0.1", "alice", "alice")
    with pytest.raises(TokenRefused, match="bob may not get a delegation token for alice"):
        tokens.issue("bob", False, "10.0.0.1", "alice", "")
    token = tokens.issue("hive", False, "10.1.2.3", "alice", "hive")
    assert tokens.login(login_user(token))[1].real_user == "hive"
    with pytest.raises(TokenRefused, match=r"\(from 192.168.0.1\)"):
        tokens.issue("hive", False, "192.168.0.1", "alice", "hive")
    with pytest.raises(TokenRefused, match="for carol"):
        tokens.issue("hive", False, "10.1.2.3", "carol", "hive")


def test_forged_foreign_and_malformed_tokens_do_not_log_in():
    tokens = service()
    token = tokens.issue("alice", False, "10.0.0.1", "", "")
    foreign = TokenService(TokenAuthority({7: b"z" * 32}), MemoryStore(), ProxyUsers({}),
                           AuthToLocal("DEFAULT", "EX.COM").short_name, Clock())
    with pytest.raises(TokenRefused, match="unknown key id 1"):
        foreign.login(login_user(token))
    with pytest.raises(TokenRefused, match="not a waggle delegation token"):
        tokens.login("not base64!")
    with pytest.raises(TokenRefused, match="cannot cancel"):
        tokens.cancel("alice", token[:-4] + "AAAA")
