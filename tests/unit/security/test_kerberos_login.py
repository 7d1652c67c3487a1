"""When waggle logs in again from its keytab: before the ticket's last ten minutes, or once most of it is used."""

from __future__ import annotations

from waggle.security.gss import RENEW_MARGIN_SECONDS, KerberosLogin


def login(expires_in: float, lived: float, now: float = 1_000_000.0) -> bool:
    k = KerberosLogin("waggle/h@EX.COM", "/none.keytab")  # nothing is read until a login
    k.status.last_login = now - lived
    k.status.expires_at = now + expires_in
    return k._due(now)


def test_a_fresh_long_ticket_is_kept():
    assert not login(expires_in=10 * 3600, lived=60)


def test_a_ticket_near_its_end_or_mostly_used_is_renewed():
    assert login(expires_in=RENEW_MARGIN_SECONDS - 1, lived=3600)
    assert login(expires_in=3 * 3600, lived=7 * 3600)  # more than two thirds used
    assert login(expires_in=-5, lived=36000)


def test_a_login_is_due_until_the_first_one_happens():
    k = KerberosLogin("waggle/h@EX.COM", "/none.keytab")
    assert k._due(1_000_000.0) and k.status.error is None and k.realm == "EX.COM"


def test_impersonation_tokens_are_kept_bounded_and_renewed_after_their_interval():
    from waggle.upstream.impersonation import DelegationTokens

    now = [0.0]
    fetched: list[str] = []
    renewed: list[str] = []
    tokens = DelegationTokens("m", max_tokens=2, refresh_seconds=100, clock=lambda: now[0])

    def fetch(user: str) -> str:
        fetched.append(user)
        return f"token-of-{user}-{len(fetched)}"

    def renew(token: str) -> None:
        if token.startswith("token-of-bob"):
            raise RuntimeError("cancelled at the metastore")
        renewed.append(token)

    assert tokens.get("alice", fetch, renew) == "token-of-alice-1"
    assert tokens.get("alice", fetch, renew) == "token-of-alice-1" and fetched == ["alice"]
    tokens.get("bob", fetch, renew)
    tokens.get("carol", fetch, renew)  # the bound drops the least recently used: alice
    assert len(tokens) == 2
    assert tokens.get("alice", fetch, renew) == "token-of-alice-4"
    now[0] = 150  # past the interval: alice's is renewed, bob's cannot be and is replaced
    assert tokens.get("alice", fetch, renew) == "token-of-alice-4" and renewed == ["token-of-alice-4"]
    assert tokens.get("bob", fetch, renew) == "token-of-bob-5"
