"""Hive delegation tokens: Hadoop's Writable layout, the URL string form, the authority and its key file."""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path

import pytest

from waggle.security.tokens import (
    DAY_MS,
    KIND,
    MAX_TEXT_BYTES,
    Token,
    TokenAccessDenied,
    TokenAuthority,
    TokenError,
    TokenExpired,
    TokenIdentifier,
    _Reader,
    _write_vlong,
    decode_token,
    encode_token,
    secrets_from_file,
)

KEY1 = b"k" * 20
KEY2 = b"s" * 32
NOW = 1_700_000_000_000


def ident(**overrides: object) -> TokenIdentifier:
    fields: dict[str, object] = dict(
        owner="alice@EXAMPLE.COM",
        renewer="hive",
        real_user="",
        issue_date_ms=NOW,
        max_date_ms=NOW + 7 * DAY_MS,
        sequence=42,
        master_key_id=3,
    )
    fields.update(overrides)
    return TokenIdentifier(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (127, "7f"),
        (-112, "90"),
        (128, "8f80"),
        (256, "8e0100"),
        (-113, "8770"),
        (-256, "87ff"),
        (-257, "860100"),
        ((1 << 63) - 1, "88" + "7f" + "ff" * 7),
        (-(1 << 63), "80" + "7f" + "ff" * 7),
    ],
)
def test_vlong_matches_hadoop_writable_utils(value: int, encoded: str) -> None:
    out = bytearray()
    _write_vlong(out, value)
    assert out.hex() == encoded
    assert _Reader(bytes(out), "x").vlong("v") == value


def test_identifier_layout_and_round_trip() -> None:
    i = ident(owner="bob", renewer="hive", real_user="")
    raw = i.to_bytes()
    # version 0, Text "bob", Text "hive", Text "", vlong issue, vlong max, vint 42, vint 3
    assert raw[:11] == bytes([0, 3]) + b"bob" + bytes([4]) + b"hive" + bytes([0])
    assert raw[-2:] == bytes([42, 3])
    assert TokenIdentifier.from_bytes(raw) == i
    unicode = ident(owner="zoë", real_user="proxy/host@R")
    assert TokenIdentifier.from_bytes(unicode.to_bytes()) == unicode


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "truncated in version"),
        (b"\x01", "unknown version 1"),
        (b"\x00\x05ab", "truncated in owner"),
        (b"\x00\xff", "negative length"),
        (b"\x00\x03\xff\xfe\xfd", "not valid UTF-8"),
        (ident().to_bytes()[:-1], "truncated in masterKeyId"),
        (ident().to_bytes() + b"\x00", "trailing"),
    ],
)
def test_malformed_identifiers(data: bytes, message: str) -> None:
    with pytest.raises(TokenError, match=message):
        TokenIdentifier.from_bytes(data)


def test_oversized_strings_are_refused_before_reading_them() -> None:
    out = bytearray([0])
    _write_vlong(out, MAX_TEXT_BYTES + 1)
    with pytest.raises(TokenError, match="more than the"):
        TokenIdentifier.from_bytes(bytes(out) + b"a" * 10)
    out = bytearray([0])
    _write_vlong(out, 1 << 40)  # a length that does not even fit an int
    with pytest.raises(TokenError, match="32-bit"):
        TokenIdentifier.from_bytes(bytes(out))


def test_to_bytes_refuses_out_of_range_numbers() -> None:
    with pytest.raises(TokenError, match="32-bit"):
        ident(sequence=1 << 31).to_bytes()


def test_token_string_round_trip_padded_or_not() -> None:
    s = encode_token(b"\x00ident", b"\xfb\xffpassword", KIND, "svc")
    assert "=" not in s and "+" not in s and "/" not in s
    token = decode_token(s)
    assert token == Token(b"\x00ident", b"\xfb\xffpassword", KIND, "svc")
    padded = s + "=" * (-len(s) % 4)
    assert decode_token(padded) == token
    standard = padded.replace("-", "+").replace("_", "/")
    assert decode_token(standard) == token
    assert "password" not in repr(token) and "fb" not in repr(token)


@pytest.mark.parametrize("bad", ["", "!!!!", "abcde", "AAAA", encode_token(b"i", b"p", "K", "s") + "AA"])
def test_malformed_token_strings(bad: str) -> None:
    with pytest.raises(TokenError, match="malformed token"):
        decode_token(bad)


def test_issue_signs_like_hadoops_secret_manager() -> None:
    authority = TokenAuthority({1: KEY1, 2: KEY2}, random_bits=lambda bits: 12345)
    s, i = authority.issue("alice", "hive", "", NOW)
    assert i == TokenIdentifier("alice", "hive", "", NOW, NOW + 7 * DAY_MS, 12345, 2)
    token = decode_token(s)
    assert token.kind == KIND and token.service == "" and token.identifier == i.to_bytes()
    assert token.password == hmac.new(KEY2, token.identifier, hashlib.sha1).digest()
    assert authority.password_for(token.identifier) == token.password
    assert authority.authenticate(s) == i
    assert authority.first_expiry_ms(i) == NOW + DAY_MS
    assert "KEY" not in repr(authority) and "kkkk" not in repr(authority) and "ssss" not in repr(authority)


def test_sequence_numbers_are_random_31_bit() -> None:
    authority = TokenAuthority({1: KEY1})
    sequences = {authority.issue("a", "b", "", NOW)[1].sequence for _ in range(50)}
    assert len(sequences) > 45 and all(0 <= s < 1 << 31 for s in sequences)


def test_keys_rotate_old_tokens_still_verify() -> None:
    old = TokenAuthority({1: KEY1})
    s, _ = old.issue("alice", "hive", "", NOW)
    rotated = TokenAuthority({1: KEY1, 2: KEY2})
    assert rotated.authenticate(s).master_key_id == 1
    assert rotated.issue("a", "b", "", NOW)[1].master_key_id == 2
    dropped = TokenAuthority({2: KEY2})
    with pytest.raises(TokenError, match="unknown key id 1"):
        dropped.authenticate(s)


def test_forged_and_foreign_tokens() -> None:
    authority = TokenAuthority({1: KEY1})
    s, _ = authority.issue("alice", "hive", "", NOW)
    token = decode_token(s)
    forged = encode_token(ident(owner="root", master_key_id=1).to_bytes(), token.password, KIND, "")
    with pytest.raises(TokenError, match="does not match"):
        authority.authenticate(forged)
    with pytest.raises(TokenError, match="kind"):
        authority.authenticate(encode_token(token.identifier, token.password, "HDFS_DELEGATION_TOKEN", ""))
    with pytest.raises(TokenError, match="malformed"):
        authority.password_for(b"\x07junk")


def test_check_expiry_and_max_date() -> None:
    authority = TokenAuthority({1: KEY1})
    _, i = authority.issue("alice", "hive", "", NOW)
    expiry = authority.first_expiry_ms(i)
    authority.check(i, NOW + 1, expiry)
    authority.check(i, expiry, expiry)
    with pytest.raises(TokenExpired, match="expired"):
        authority.check(i, expiry + 1, expiry)
    with pytest.raises(TokenExpired, match="max date"):
        authority.check(i, i.max_date_ms + 1, i.max_date_ms + 10)


def test_renew_only_by_the_renewer_never_past_the_max_date() -> None:
    authority = TokenAuthority({1: KEY1}, max_lifetime_ms=3 * DAY_MS, renew_interval_ms=DAY_MS)
    s, i = authority.issue("alice", "hive", "", NOW)
    assert authority.renew(s, "hive", NOW + 1000) == NOW + 1000 + DAY_MS
    assert authority.renew(s, "hive", NOW + 2 * DAY_MS + 5) == i.max_date_ms
    with pytest.raises(TokenAccessDenied, match="only hive may renew"):
        authority.renew(s, "alice", NOW)
    with pytest.raises(TokenExpired):
        authority.renew(s, "hive", i.max_date_ms + 1)
    no_renewer, _ = authority.issue("alice", "", "", NOW)
    with pytest.raises(TokenAccessDenied, match="no renewer"):
        authority.renew(no_renewer, "", NOW)


def test_cancel_by_owner_or_renewer() -> None:
    authority = TokenAuthority({1: KEY1})
    s, i = authority.issue("alice@EXAMPLE.COM", "hive", "", NOW)
    assert authority.cancel(s, "alice@EXAMPLE.COM") == i
    assert authority.cancel(s, "hive/h1@EXAMPLE.COM", "hive") == i
    with pytest.raises(TokenAccessDenied, match="may not cancel"):
        authority.cancel(s, "mallory@EXAMPLE.COM", "mallory")


def test_authority_refuses_weak_or_missing_keys() -> None:
    with pytest.raises(TokenError, match="no signing keys"):
        TokenAuthority({})
    with pytest.raises(TokenError, match="fewer than"):
        TokenAuthority({1: b"short"})


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_secrets_from_file(tmp_path: Path) -> None:
    single = tmp_path / "single"
    single.write_text(b64(KEY1) + "\n")
    assert secrets_from_file(single) == {1: KEY1}
    unpadded = tmp_path / "unpadded"
    unpadded.write_text(b64(KEY1).rstrip("="))
    assert secrets_from_file(unpadded) == {1: KEY1}
    many = tmp_path / "many"
    many.write_text(f"# rotated 2024-05\n1:{b64(KEY1)}\n\n7: {b64(KEY2)}\n")
    assert secrets_from_file(many) == {1: KEY1, 7: KEY2}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no signing keys"),
        ("not base64!!\n", ":1: the secret is not base64"),
        ("# c\n1:" + b64(KEY1) + "\nx:" + b64(KEY2), ":3: key id must be"),
        ("1:" + b64(KEY1) + "\n1:" + b64(KEY2), ":2: key id 1 appears twice"),
        ("1:" + b64(KEY1) + "\n" + b64(KEY2), ":2: expected id:base64secret"),
        ("1:" + b64(b"tiny"), ":1: the secret is 4 bytes"),
    ],
)
def test_secrets_file_errors_name_file_and_line_not_secret(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "keys"
    path.write_text(text)
    with pytest.raises(TokenError, match=message) as info:
        secrets_from_file(path)
    assert str(path) in str(info.value)
    assert b64(KEY1) not in str(info.value) and b64(KEY2) not in str(info.value) and "base64!!" not in str(info.value)


def test_secrets_file_missing(tmp_path: Path) -> None:
    with pytest.raises(TokenError, match="cannot read"):
        secrets_from_file(tmp_path / "absent")
