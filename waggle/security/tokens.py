"""Hive delegation tokens, byte-compatible with Hadoop's, so Java clients and servers accept ours.

A delegation token lets a job that has no Kerberos ticket (a Spark executor, an Oozie action) act for the user
who obtained it. Three layers live here:

* :class:`TokenIdentifier`, the public half: Hadoop's ``AbstractDelegationTokenIdentifier`` Writable (who owns
  the token, who may renew it, when it was issued, when it dies for good, and which signing key signed it).
* :func:`encode_token` / :func:`decode_token`, Hadoop's ``Token.encodeToUrlString()`` string form, which
  carries the identifier, the password, the token kind and the service.
* :class:`TokenAuthority`, which issues and verifies tokens. The password of a token is
  HMAC-SHA1(signing key, identifier bytes), exactly as Hadoop's ``SecretManager`` computes it, so any replica
  holding the same keys can verify any token. The authority keeps no state: which tokens were renewed until
  when, and which were cancelled, is for the caller to persist; methods take and return those facts.

Nothing here touches the network or the clock; times are milliseconds since the epoch passed in by the caller.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

KIND = "HIVE_DELEGATION_TOKEN"
"""The token kind Hive's metastore and HiveServer2 issue (``DelegationTokenIdentifier.HIVE_DELEGATION_KIND``)."""

IDENTIFIER_VERSION = 0
"""The only identifier layout Hadoop writes and reads (``AbstractDelegationTokenIdentifier.VERSION``)."""

DAY_MS = 24 * 60 * 60 * 1000
MAX_TEXT_BYTES = 16 * 1024
"""Bound on one string (owner, renewer, real user, kind, service) read from untrusted bytes."""
MAX_TOKEN_BYTES = 64 * 1024
"""Bound on a decoded token (and so on its identifier and password) read from untrusted input."""
MIN_SECRET_BYTES = 16

_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_B64URL = re.compile(r"[A-Za-z0-9_\-+/]*={0,2}")
_B64STD = re.compile(r"[A-Za-z0-9_\-+/]+={0,2}")


class TokenError(Exception):
    """A token, identifier or signing key is malformed, unknown, or not acceptable."""


class TokenExpired(TokenError):
    """The token is past its expiry (not renewed in time) or its maximum date."""


class TokenAccessDenied(TokenError):
    """The caller may not renew or cancel this token."""


# -- Hadoop Writable encoding ------------------------------------------------------------------------------
def _write_vlong(out: bytearray, value: int) -> None:
    """``WritableUtils.writeVLong``: one byte for -112..127, else a length byte and the big-endian magnitude."""
    if not _INT64[0] <= value <= _INT64[1]:
        raise TokenError(f"{value} does not fit in a 64-bit long")
    if -112 <= value <= 127:
        out.append(value & 0xFF)
        return
    marker = -112
    if value < 0:
        value = ~value
        marker = -120
    size = (value.bit_length() + 7) // 8
    out.append((marker - size) & 0xFF)
    out += value.to_bytes(size, "big")


def _write_vint(out: bytearray, value: int) -> None:
    if not _INT32[0] <= value <= _INT32[1]:
        raise TokenError(f"{value} does not fit in a 32-bit int")
    _write_vlong(out, value)


def _write_text(out: bytearray, text: str) -> None:
    """Hadoop ``Text.write``: a vint byte length, then UTF-8."""
    data = text.encode("utf-8")
    _write_vint(out, len(data))
    out += data


def _write_bytes(out: bytearray, data: bytes) -> None:
    _write_vint(out, len(data))
    out += data


class _Reader:
    """Reads Writable fields from untrusted bytes; every failure is a :class:`TokenError` naming ``what``."""

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._pos = 0
        self._what = what

    def _fail(self, message: str) -> TokenError:
        return TokenError(f"malformed {self._what}: {message} (at byte {self._pos} of {len(self._data)})")

    def take(self, size: int, field: str) -> bytes:
        if self._pos + size > len(self._data):
            raise self._fail(f"truncated in {field}: needs {size} bytes, has {len(self._data) - self._pos}")
        chunk = self._data[self._pos : self._pos + size]
        self._pos += size
        return chunk

    def vlong(self, field: str) -> int:
        first = int.from_bytes(self.take(1, field), "big", signed=True)
        if first >= -112:
            return first
        negative = first < -120
        size = (-120 - first) if negative else (-112 - first)
        value = int.from_bytes(self.take(size, field), "big")
        if value > _INT64[1]:
            raise self._fail(f"{field} does not fit in a 64-bit long")
        return ~value if negative else value

    def vint(self, field: str) -> int:
        value = self.vlong(field)
        if not _INT32[0] <= value <= _INT32[1]:
            raise self._fail(f"{field} ({value}) does not fit in a 32-bit int")
        return value

    def length(self, field: str, bound: int) -> int:
        size = self.vint(f"{field} length")
        if size < 0:
            raise self._fail(f"{field} has a negative length ({size})")
        if size > bound:
            raise self._fail(f"{field} is {size} bytes, more than the {bound} allowed")
        return size

    def text(self, field: str) -> str:
        raw = self.take(self.length(field, MAX_TEXT_BYTES), field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail(f"{field} is not valid UTF-8") from None

    def blob(self, field: str) -> bytes:
        return self.take(self.length(field, MAX_TOKEN_BYTES), field)

    def end(self) -> None:
        if self._pos != len(self._data):
            raise self._fail(f"{len(self._data) - self._pos} unexpected trailing bytes")


# -- the identifier -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenIdentifier:
    """The public half of a delegation token, as Hadoop's ``AbstractDelegationTokenIdentifier`` writes it.

    ``owner`` is the user the token acts for (for a proxy user, the effective user); ``real_user`` the
    authenticated user that impersonates ``owner``, or ``""``; ``renewer`` the short name of the only user who
    may renew the token, or ``""`` for none. ``master_key_id`` names the signing key of the password.
    """

    owner: str
    renewer: str
    real_user: str
    issue_date_ms: int
    max_date_ms: int
    sequence: int
    master_key_id: int

    def to_bytes(self) -> bytes:
        """Version byte 0, Text owner, renewer, realUser, vlong issueDate, maxDate, vint sequence, masterKeyId."""
        out = bytearray([IDENTIFIER_VERSION])
        for text in (self.owner, self.renewer, self.real_user):
            _write_text(out, text)
        _write_vlong(out, self.issue_date_ms)
        _write_vlong(out, self.max_date_ms)
        _write_vint(out, self.sequence)
        _write_vint(out, self.master_key_id)
        return bytes(out)

    @classmethod
    def from_bytes(cls, data: bytes) -> TokenIdentifier:
        """Parse identifier bytes; :class:`TokenError` on a bad version, truncation, oversize or trailing bytes."""
        if len(data) > MAX_TOKEN_BYTES:
            raise TokenError(f"malformed token identifier: {len(data)} bytes, more than the {MAX_TOKEN_BYTES} allowed")
        reader = _Reader(data, "token identifier")
        version = reader.take(1, "version")[0]
        if version != IDENTIFIER_VERSION:
            raise TokenError(f"malformed token identifier: unknown version {version} (expected {IDENTIFIER_VERSION})")
        owner = reader.text("owner")
        renewer = reader.text("renewer")
        real_user = reader.text("realUser")
        issue_date = reader.vlong("issueDate")
        max_date = reader.vlong("maxDate")
        sequence = reader.vint("sequenceNumber")
        master_key_id = reader.vint("masterKeyId")
        reader.end()
        return cls(owner, renewer, real_user, issue_date, max_date, sequence, master_key_id)


# -- the token string ---------------------------------------------------------------------------------
class Token(NamedTuple):
    """A decoded token: identifier bytes, password bytes, kind and service (Hadoop's ``Token``)."""

    identifier: bytes
    password: bytes
    kind: str
    service: str

    def __repr__(self) -> str:
        return f"Token(kind={self.kind!r}, service={self.service!r}, identifier={len(self.identifier)} bytes)"


def encode_token(identifier: bytes, password: bytes, kind: str = KIND, service: str = "") -> str:
    """Hadoop's ``Token.encodeToUrlString()``: URL-safe base64 without padding of the token's Writable."""
    out = bytearray()
    _write_bytes(out, identifier)
    _write_bytes(out, password)
    _write_text(out, kind)
    _write_text(out, service)
    return base64.urlsafe_b64encode(bytes(out)).decode("ascii").rstrip("=")


def decode_token(text: str) -> Token:
    """Hadoop's ``Token.decodeFromUrlString()``: accepts URL-safe or standard base64, padded or not."""
    text = text.strip()
    if len(text) > MAX_TOKEN_BYTES * 4 // 3 + 4:
        raise TokenError(f"malformed token: {len(text)} characters, too long")
    if not text or not _B64URL.fullmatch(text):
        raise TokenError("malformed token: not a base64 string")
    body = text.rstrip("=").replace("+", "-").replace("/", "_")
    if len(body) % 4 == 1:
        raise TokenError("malformed token: truncated base64")
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise TokenError("malformed token: not a base64 string") from None
    reader = _Reader(raw, "token")
    identifier = reader.blob("identifier")
    password = reader.blob("password")
    kind = reader.text("kind")
    service = reader.text("service")
    reader.end()
    return Token(identifier, password, kind, service)


# -- issuing and verifying --------------------------------------------------------------------------------
class TokenAuthority:
    """Issues, verifies, renews and cancels delegation tokens signed with a set of keys.

    ``keys`` maps key ids to secrets: the highest id signs new tokens, every key verifies, so keys rotate by
    adding a higher id and dropping an old one once its tokens have reached their maximum date. Sequence
    numbers are random 31-bit integers, so replicas sharing the keys need no coordination.

    Renewals and cancellations are the caller's state: :meth:`issue` and :meth:`renew` return the expiry to
    persist, :meth:`check` takes it back, :meth:`cancel` only decides whether the caller may drop it.
    """

    def __init__(
        self,
        keys: Mapping[int, bytes],
        max_lifetime_ms: int = 7 * DAY_MS,
        renew_interval_ms: int = DAY_MS,
        *,
        kind: str = KIND,
        random_bits: Callable[[int], int] = secrets.randbits,
    ) -> None:
        if not keys:
            raise TokenError("no signing keys")
        for key_id, secret in keys.items():
            if not _INT32[0] <= key_id <= _INT32[1]:
                raise TokenError(f"signing key id {key_id} does not fit in a 32-bit int")
            if len(secret) < MIN_SECRET_BYTES:
                raise TokenError(f"signing key {key_id} is {len(secret)} bytes, fewer than {MIN_SECRET_BYTES}")
        if max_lifetime_ms <= 0 or renew_interval_ms <= 0:
            raise TokenError("max_lifetime_ms and renew_interval_ms must be positive")
        self._keys = {int(k): bytes(v) for k, v in keys.items()}
        self._signing_id = max(self._keys)
        self.max_lifetime_ms = max_lifetime_ms
        self.renew_interval_ms = renew_interval_ms
        self.kind = kind
        self._random_bits = random_bits

    def __repr__(self) -> str:
        return (
            f"TokenAuthority(key_ids={sorted(self._keys)}, signing_key_id={self._signing_id}, "
            f"max_lifetime_ms={self.max_lifetime_ms}, renew_interval_ms={self.renew_interval_ms})"
        )

    @property
    def signing_key_id(self) -> int:
        return self._signing_id

    @property
    def key_ids(self) -> list[int]:
        return sorted(self._keys)

    def issue(
        self, owner: str, renewer: str, real_user: str, now_ms: int, *, service: str = ""
    ) -> tuple[str, TokenIdentifier]:
        """A new token string and its identifier; its first expiry is :meth:`first_expiry_ms`.

        ``renewer`` is a short name (apply ``auth_to_local`` to a principal first), as Hadoop stores it.
        """
        identifier = TokenIdentifier(
            owner=owner,
            renewer=renewer,
            real_user=real_user,
            issue_date_ms=now_ms,
            max_date_ms=now_ms + self.max_lifetime_ms,
            sequence=self._random_bits(31),
            master_key_id=self._signing_id,
        )
        raw = identifier.to_bytes()
        return encode_token(raw, self._sign(self._signing_id, raw), self.kind, service), identifier

    def first_expiry_ms(self, identifier: TokenIdentifier) -> int:
        """When a freshly issued token expires unless renewed: one renew interval, never past its max date."""
        return min(identifier.issue_date_ms + self.renew_interval_ms, identifier.max_date_ms)

    def _sign(self, key_id: int, identifier: bytes) -> bytes:
        return hmac.new(self._keys[key_id], identifier, hashlib.sha1).digest()

    def password_for(self, identifier: bytes) -> bytes:
        """The password of a token with these identifier bytes (what a DIGEST-MD5 server needs)."""
        parsed = TokenIdentifier.from_bytes(identifier)
        if parsed.master_key_id not in self._keys:
            raise TokenError(f"token signed with unknown key id {parsed.master_key_id}")
        return self._sign(parsed.master_key_id, identifier)

    def authenticate(self, token: str | Token) -> TokenIdentifier:
        """The identifier of a genuine token of our kind; :class:`TokenError` if malformed, foreign or forged."""
        decoded = decode_token(token) if isinstance(token, str) else token
        if decoded.kind != self.kind:
            raise TokenError(f"token kind {decoded.kind!r} is not {self.kind!r}")
        if not hmac.compare_digest(self.password_for(decoded.identifier), decoded.password):
            raise TokenError("token password does not match its identifier")
        return TokenIdentifier.from_bytes(decoded.identifier)

    def check(self, identifier: TokenIdentifier, now_ms: int, renewed_until_ms: int) -> None:
        """Raise :class:`TokenExpired` if the token is past its max date or its (persisted) expiry."""
        if identifier.max_date_ms < now_ms:
            raise TokenExpired(f"token of {identifier.owner} passed its max date {identifier.max_date_ms}")
        if renewed_until_ms < now_ms:
            raise TokenExpired(f"token of {identifier.owner} expired at {renewed_until_ms}")

    def renew(self, token: str | Token, renewer_short_name: str, now_ms: int) -> int:
        """The token's new expiry, for the caller to persist; only its named renewer may renew it."""
        identifier = self.authenticate(token)
        if identifier.max_date_ms < now_ms:
            raise TokenExpired(f"token of {identifier.owner} passed its max date {identifier.max_date_ms}")
        if not identifier.renewer:
            raise TokenAccessDenied(f"{renewer_short_name} may not renew a token of {identifier.owner}: no renewer")
        if renewer_short_name != identifier.renewer:
            raise TokenAccessDenied(
                f"{renewer_short_name} may not renew a token of {identifier.owner}: "
                f"only {identifier.renewer} may renew it"
            )
        return min(now_ms + self.renew_interval_ms, identifier.max_date_ms)

    def cancel(self, token: str | Token, canceller: str, canceller_short_name: str | None = None) -> TokenIdentifier:
        """The identifier whose persisted state the caller may drop; its owner or its renewer may cancel it.

        ``canceller`` is compared to the owner as is, ``canceller_short_name`` (default ``canceller``) to
        the renewer, as Hadoop's ``AbstractDelegationTokenSecretManager.cancelToken`` does.
        """
        identifier = self.authenticate(token)
        short = canceller if canceller_short_name is None else canceller_short_name
        if canceller == identifier.owner or (identifier.renewer and short == identifier.renewer):
            return identifier
        raise TokenAccessDenied(f"{canceller} may not cancel a token of {identifier.owner}")


# -- signing keys on disk ------------------------------------------------------------------------------
def _decode_secret(text: str, where: str) -> bytes:
    if not _B64STD.fullmatch(text):
        raise TokenError(f"{where}: the secret is not base64")
    body = text.rstrip("=").replace("-", "+").replace("_", "/")
    if len(body) % 4 == 1:
        raise TokenError(f"{where}: the secret is truncated base64")
    try:
        secret = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise TokenError(f"{where}: the secret is not base64") from None
    if len(secret) < MIN_SECRET_BYTES:
        raise TokenError(f"{where}: the secret is {len(secret)} bytes, fewer than {MIN_SECRET_BYTES}")
    return secret


def secrets_from_file(path: str | Path) -> dict[int, bytes]:
    """Signing keys from a file: lines ``id:base64secret`` (blank lines and ``#`` comments skipped), or a
    single line with a bare base64 secret, which is key id 1. Errors name the file and line, never the secret.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenError(f"{path}: cannot read signing keys: {type(exc).__name__}") from None
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1)]
    lines = [(n, line) for n, line in lines if line and not line.startswith("#")]
    if not lines:
        raise TokenError(f"{path}: no signing keys")
    if len(lines) == 1 and ":" not in lines[0][1]:
        n, line = lines[0]
        return {1: _decode_secret(line, f"{path}:{n}")}
    keys: dict[int, bytes] = {}
    for n, line in lines:
        where = f"{path}:{n}"
        key_id_text, sep, secret_text = line.partition(":")
        if not sep:
            raise TokenError(f"{where}: expected id:base64secret (a bare secret is only allowed alone)")
        key_id_text = key_id_text.strip()
        if not key_id_text.isascii() or not key_id_text.isdigit():
            raise TokenError(f"{where}: key id must be a non-negative integer")
        key_id = int(key_id_text)
        if key_id > _INT32[1]:
            raise TokenError(f"{where}: key id {key_id} does not fit in a 32-bit int")
        if key_id in keys:
            raise TokenError(f"{where}: key id {key_id} appears twice")
        keys[key_id] = _decode_secret(secret_text.strip(), where)
    return keys
