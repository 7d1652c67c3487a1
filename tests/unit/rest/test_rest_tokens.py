"""The Iceberg REST port's bearer tokens: granted for a client's secret, checked, expired, tampered with, signed
with a key this waggle does not hold, and across a key rotation."""

from __future__ import annotations

import base64
import json

import pytest

from waggle.config.model import RestClientConfig
from waggle.rest.tokens import MAX_TOKEN_CHARS, TAG, Bearer, TokenRefused, Tokens

SECRET = b"client-secret-0123456789"
CLIENTS = (RestClientConfig(id="etl", user="etl-user", secret_file="/secrets/etl"),
           RestClientConfig(id="bi", user="bi", secret_file="/secrets/bi"))
SECRETS = {"etl": SECRET, "bi": b"another-secret-0123456789"}
KEY1, KEY2 = b"k" * 32, b"K" * 32
NOW = 1_800_000_000


def _payload(token: str) -> dict[str, object]:
    part = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_client_with_its_secret_gets_a_token_naming_its_user_until_now_plus_the_lifetime():
    tokens = Tokens({1: KEY1}, CLIENTS, 600, SECRETS)
    token, bearer = tokens.grant("etl", SECRET.decode(), NOW)
    assert bearer == Bearer("etl", "etl-user", NOW + 600)
    assert token.startswith(f"{TAG}.") and token.count(".") == 2
    assert SECRET.decode() not in token
    assert tokens.check(token, NOW) == bearer
    assert tokens.check(token, NOW + 599) == bearer
    assert tokens.lifetime == 600


def test_the_lifetime_defaults_to_an_hour():
    tokens = Tokens({1: KEY1}, CLIENTS, None, SECRETS)
    _, bearer = tokens.grant("etl", SECRET.decode(), NOW)
    assert bearer.expires == NOW + 3600 and tokens.lifetime == 3600


@pytest.mark.parametrize("client_id, secret", [
    ("etl", "wrong-secret-0123456789"),
    ("etl", ""),
    ("etl", SECRET.decode() + "x"),
    ("bi", SECRET.decode()),  # another client's secret
    ("nobody", SECRET.decode()),
    ("", ""),
])
def test_a_wrong_secret_or_unknown_client_is_refused_naming_the_client_id_not_the_secret(client_id, secret):
    tokens = Tokens({1: KEY1}, CLIENTS, 600, SECRETS)
    with pytest.raises(TokenRefused) as refused:
        tokens.grant(client_id, secret, NOW)
    text = str(refused.value)
    assert repr(client_id) in text
    assert SECRET.decode() not in text
    if secret:
        assert secret not in text


def test_a_token_expires_at_its_time():
    tokens = Tokens({1: KEY1}, CLIENTS, 60, SECRETS)
    token, _ = tokens.grant("etl", SECRET.decode(), NOW)
    for late in (NOW + 60, NOW + 10_000):
        with pytest.raises(TokenRefused, match="'etl' has expired"):
            tokens.check(token, late)


def test_an_altered_token_is_refused():
    tokens = Tokens({1: KEY1}, CLIENTS, 600, SECRETS)
    token, _ = tokens.grant("etl", SECRET.decode(), NOW)
    tag, payload, signature = token.split(".")
    # the payload changed (another user, a later expiry), the signature kept
    for change in ({"u": "admin"}, {"e": NOW + 10**6}, {"c": "bi"}):
        forged = _b64(json.dumps({**_payload(token), **change}, separators=(",", ":")).encode())
        with pytest.raises(TokenRefused, match="signature does not match"):
            tokens.check(f"{tag}.{forged}.{signature}", NOW)
    # one character of the signature changed
    flipped = signature[:-2] + ("A" if signature[-2] != "A" else "B") + signature[-1]
    with pytest.raises(TokenRefused, match="signature does not match"):
        tokens.check(f"{tag}.{payload}.{flipped}", NOW)
    # a token signed with another secret under the same key id
    other = Tokens({1: b"x" * 32}, CLIENTS, 600, SECRETS).grant("etl", SECRET.decode(), NOW)[0]
    with pytest.raises(TokenRefused, match="signature does not match"):
        tokens.check(other, NOW)


@pytest.mark.parametrize("garbage, reason", [
    ("", "not one of waggle's"),
    ("garbage", "not one of waggle's"),
    ("a.b.c", "not one of waggle's"),
    (f"{TAG}.x.y.z", "not one of waggle's"),
    (f"{TAG}.!!!.???", "malformed"),
    (f"{TAG}.{_b64(b'not json')}.AAAA", "malformed"),
    (f"{TAG}.{_b64(b'[1, 2]')}.AAAA", "malformed"),
    (f"{TAG}.{_b64(json.dumps({'c': 'etl', 'u': 'etl'}).encode())}.AAAA", "malformed"),  # no key id, no expiry
    (f"{TAG}.{_b64(json.dumps({'c': 'e', 'u': 'e', 'e': 'soon', 'k': 1}).encode())}.AAAA", "malformed"),
    ("x" * (MAX_TOKEN_CHARS + 1), "too long"),
])
def test_garbage_is_refused_saying_why(garbage, reason):
    with pytest.raises(TokenRefused, match=reason):
        Tokens({1: KEY1}, CLIENTS, 600, SECRETS).check(garbage, NOW)


def test_a_token_signed_with_a_key_id_this_waggle_does_not_hold_is_refused_naming_the_id():
    token, _ = Tokens({7: KEY1}, CLIENTS, 600, SECRETS).grant("etl", SECRET.decode(), NOW)
    with pytest.raises(TokenRefused, match="signed with key 7, which this waggle does not hold"):
        Tokens({1: KEY1, 2: KEY2}, CLIENTS, 600, SECRETS).check(token, NOW)


def test_rotation_old_tokens_verify_and_new_ones_are_signed_with_the_highest_key():
    old = Tokens({1: KEY1}, CLIENTS, 600, SECRETS)
    token1, bearer = old.grant("etl", SECRET.decode(), NOW)
    assert _payload(token1)["k"] == 1
    rotated = Tokens({1: KEY1, 2: KEY2}, CLIENTS, 600, SECRETS)
    assert rotated.check(token1, NOW) == bearer  # signed by key 1, still good
    token2, _ = rotated.grant("etl", SECRET.decode(), NOW)
    assert _payload(token2)["k"] == 2
    assert rotated.check(token2, NOW).user == "etl-user"
    # a replica that has not got key 2 yet refuses it; one that dropped key 1 refuses the old token
    with pytest.raises(TokenRefused, match="key 2"):
        old.check(token2, NOW)
    with pytest.raises(TokenRefused, match="key 1"):
        Tokens({2: KEY2}, CLIENTS, 600, SECRETS).check(token1, NOW)


def test_any_replica_with_the_same_keys_checks_any_token():
    token, bearer = Tokens({1: KEY1, 2: KEY2}, CLIENTS, 600, SECRETS).grant("bi", SECRETS["bi"].decode(), NOW)
    assert Tokens({1: KEY1, 2: KEY2}, (), 600, SECRETS).check(token, NOW) == bearer


def test_no_keys_is_an_error():
    with pytest.raises(ValueError, match="no signing keys"):
        Tokens({}, CLIENTS, 600, SECRETS)


def test_a_client_whose_secret_was_not_read_gets_no_token():
    tokens = Tokens({1: KEY1}, CLIENTS, 600, {"etl": SECRET})
    with pytest.raises(TokenRefused, match="'bi'"):
        tokens.grant("bi", SECRETS["bi"].decode(), NOW)
    with pytest.raises(TokenRefused, match="'bi'"):
        tokens.grant("bi", "\0", NOW)
    empty = Tokens({1: KEY1}, CLIENTS, 600, {"etl": b""})
    for given in ("", "\0"):
        with pytest.raises(TokenRefused, match="'etl'"):
            empty.grant("etl", given, NOW)
