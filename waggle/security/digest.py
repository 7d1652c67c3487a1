"""SASL DIGEST-MD5 (RFC 2831), the mechanism Hive and Hadoop clients use to authenticate with a delegation token.

Only what Hive needs: QOP ``auth`` (authentication without integrity or privacy layers), algorithm
``md5-sess``, ``charset=utf-8``, and a single exchange (no subsequent authentication, so the nonce count is
always 1). For a Hive token the username is base64 of the token identifier and the password is base64 of the
token password, as ASCII (Hadoop's ``SaslRpcServer.encodeIdentifier`` / ``encodePassword``).

:class:`DigestServer` sends the challenge and checks the client's response; :class:`DigestClient` answers a
challenge and checks the server's ``rspauth``. Both are pure state machines over bytes: the caller moves the
messages (for Thrift, inside ``TSaslServerTransport`` frames).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

MAX_CHALLENGE_BYTES = 2048
MAX_RESPONSE_BYTES = 4096
_NC = re.compile(r"[0-9a-fA-F]{8}")
_HEX32 = re.compile(r"[0-9a-fA-F]{32}")
_SEPARATORS = frozenset(b' \t\r\n,"=')


class DigestError(Exception):
    """A DIGEST-MD5 message is malformed, or the peer failed to authenticate."""


def parse_directives(data: bytes, what: str, repeatable: frozenset[str] = frozenset()) -> dict[str, list[bytes]]:
    """The ``name=value`` directives of a challenge or response (RFC 2831 section 7.1 ``#`` lists).

    Values are tokens or quoted strings (with backslash escapes), returned as raw bytes; names are lower-cased.
    A name may appear more than once only if it is in ``repeatable``.
    """
    out: dict[str, list[bytes]] = {}
    pos, end = 0, len(data)

    def skip_space(i: int) -> int:
        while i < end and data[i] in b" \t\r\n":
            i += 1
        return i

    while True:
        pos = skip_space(pos)
        if pos < end and data[pos] == ord(","):  # empty list elements are allowed
            pos += 1
            continue
        if pos >= end:
            return out
        start = pos
        while pos < end and data[pos] not in _SEPARATORS and data[pos] >= 0x20:
            pos += 1
        name = data[start:pos].decode("ascii", "replace").lower()
        if not name:
            raise DigestError(f"malformed {what}: expected a directive name at byte {start}")
        pos = skip_space(pos)
        if pos >= end or data[pos] != ord("="):
            raise DigestError(f"malformed {what}: expected '=' after {name!r}")
        pos = skip_space(pos + 1)
        if pos < end and data[pos] == ord('"'):
            value = bytearray()
            pos += 1
            while True:
                if pos >= end:
                    raise DigestError(f"malformed {what}: unterminated quoted value of {name!r}")
                c = data[pos]
                if c == ord("\\"):
                    if pos + 1 >= end:
                        raise DigestError(f"malformed {what}: unterminated quoted value of {name!r}")
                    value.append(data[pos + 1])
                    pos += 2
                elif c == ord('"'):
                    pos += 1
                    break
                else:
                    value.append(c)
                    pos += 1
            raw = bytes(value)
        else:
            start = pos
            while pos < end and data[pos] not in _SEPARATORS and data[pos] >= 0x20:
                pos += 1
            raw = data[start:pos]
            if not raw:
                raise DigestError(f"malformed {what}: {name!r} has no value")
        if name in out and name not in repeatable:
            raise DigestError(f"malformed {what}: {name!r} appears more than once")
        out.setdefault(name, []).append(raw)
        pos = skip_space(pos)
        if pos < end and data[pos] != ord(","):
            raise DigestError(f"malformed {what}: expected ',' after the value of {name!r}")


def _quote(value: bytes) -> bytes:
    return b'"' + value.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'


def _hash_bytes(text: str, utf8: bool) -> bytes:
    """RFC 2831 2.1.2.1: with charset=utf-8, ISO 8859-1 when every character fits, else UTF-8."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        if not utf8:
            raise DigestError(f"{text!r} is not ISO 8859-1 and the peer did not negotiate charset=utf-8") from None
        return text.encode("utf-8")


def _wire(value: bytes, utf8: bool, name: str) -> str:
    try:
        return value.decode("utf-8" if utf8 else "latin-1")
    except UnicodeDecodeError:
        raise DigestError(f"malformed response: {name} is not valid UTF-8") from None


def _md5(data: bytes) -> bytes:
    return hashlib.md5(data, usedforsecurity=False).digest()


def _md5_hex(data: bytes) -> bytes:
    return hashlib.md5(data, usedforsecurity=False).hexdigest().encode("ascii")


@dataclass(frozen=True)
class DigestInputs:
    """What both sides hash (RFC 2831 section 2.1.2.1), as the bytes that enter the hash."""

    username: bytes
    realm: bytes
    password: bytes = field(repr=False)
    nonce: bytes
    cnonce: bytes
    nc: bytes
    qop: bytes
    digest_uri: bytes
    authzid: bytes | None

    def response(self, server: bool = False) -> bytes:
        """The client's ``response`` value, or with ``server=True`` the server's ``rspauth`` (md5-sess)."""
        a1 = _md5(self.username + b":" + self.realm + b":" + self.password) + b":" + self.nonce + b":" + self.cnonce
        if self.authzid:
            a1 += b":" + self.authzid
        a2 = (b"" if server else b"AUTHENTICATE") + b":" + self.digest_uri
        tail = self.nonce + b":" + self.nc + b":" + self.cnonce + b":" + self.qop + b":" + _md5_hex(a2)
        return _md5_hex(_md5_hex(a1) + b":" + tail)


def _one(directives: dict[str, list[bytes]], name: str, what: str) -> bytes:
    values = directives.get(name)
    if not values:
        raise DigestError(f"malformed {what}: missing {name!r}")
    return values[0]


class DigestServer:
    """The server side of one DIGEST-MD5 exchange: :meth:`challenge`, then :meth:`respond` to the client.

    ``lookup(username)`` returns the password bytes hashed for that user, or ``None`` for an unknown user; it
    may raise :class:`DigestError` itself. After a failure the exchange is over: start a new server.
    """

    def __init__(
        self,
        lookup: Callable[[str], bytes | None],
        realm: str = "default",
        *,
        random_bytes: Callable[[int], bytes] = secrets.token_bytes,
    ) -> None:
        self._lookup = lookup
        self.realm = realm
        self._realm_bytes = _hash_bytes(realm, utf8=True)
        self._random_bytes = random_bytes
        self._nonce: bytes | None = None
        self._state = "new"
        self._username: str | None = None

    def __repr__(self) -> str:
        return f"DigestServer(realm={self.realm!r}, state={self._state!r}, username={self._username!r})"

    @property
    def complete(self) -> bool:
        return self._state == "done"

    @property
    def username(self) -> str:
        """The authenticated username; only after :meth:`respond` succeeded."""
        if self._username is None:
            raise DigestError("no user has authenticated yet")
        return self._username

    def challenge(self) -> bytes:
        """The digest-challenge: our realm, a fresh nonce, qop auth, charset utf-8, algorithm md5-sess."""
        if self._state != "new":
            raise DigestError(f"challenge() called twice (state {self._state})")
        self._nonce = base64.b64encode(self._random_bytes(24))
        self._state = "challenged"
        return (
            b"realm=" + _quote(self.realm.encode("utf-8")) + b",nonce=" + _quote(self._nonce)
            + b',qop="auth",charset=utf-8,algorithm=md5-sess'
        )  # fmt: skip

    def respond(self, response: bytes) -> bytes:
        """Check the client's digest-response; the ``rspauth=`` final message, or :class:`DigestError`."""
        if self._state != "challenged":
            raise DigestError(
                "respond() before challenge()" if self._state == "new" else f"exchange already {self._state}"
            )
        try:
            final = self._check(response)
        except BaseException:
            self._state = "failed"
            raise
        self._state = "done"
        return final

    def _check(self, response: bytes) -> bytes:
        what = "digest-response"
        if len(response) > MAX_RESPONSE_BYTES:
            raise DigestError(f"malformed {what}: {len(response)} bytes, more than {MAX_RESPONSE_BYTES}")
        d = parse_directives(response, what)
        charset = d.get("charset", [b""])[0]
        if charset and charset.lower() != b"utf-8":
            raise DigestError(f"unsupported charset {charset.decode('ascii', 'replace')!r}")
        utf8 = bool(charset)
        username_raw = _one(d, "username", what)
        nonce = _one(d, "nonce", what)
        cnonce = _one(d, "cnonce", what)
        nc = _one(d, "nc", what)
        digest_uri = _one(d, "digest-uri", what)
        client_response = _one(d, "response", what)
        qop = d.get("qop", [b"auth"])[0]
        username = _wire(username_raw, utf8, "username")
        realm = _hash_bytes(_wire(d["realm"][0], utf8, "realm"), utf8) if "realm" in d else b""
        if "realm" in d and realm != self._realm_bytes:
            raise DigestError(f"realm {d['realm'][0].decode('utf-8', 'replace')!r} is not {self.realm!r}")
        assert self._nonce is not None
        if not hmac.compare_digest(nonce, self._nonce):
            raise DigestError("wrong nonce: the response does not answer this server's challenge")
        if not _NC.fullmatch(nc.decode("ascii", "replace")):
            raise DigestError(f"malformed {what}: nc must be 8 hex digits")
        if int(nc, 16) != 1:
            raise DigestError(f"nonce count {nc.decode()} replayed or out of order: a first exchange has 00000001")
        if qop != b"auth":
            raise DigestError(f"qop {qop.decode('ascii', 'replace')!r} was not offered (only 'auth')")
        if not cnonce:
            raise DigestError(f"malformed {what}: empty cnonce")
        if not _HEX32.fullmatch(client_response.decode("ascii", "replace")):
            raise DigestError(f"malformed {what}: response must be 32 hex digits")
        authzid = d.get("authzid", [b""])[0]
        if authzid and _wire(authzid, utf8, "authzid") != username:
            raise DigestError(f"{username!r} may not act as {_wire(authzid, utf8, 'authzid')!r}")
        password = self._lookup(username)
        if password is None:
            raise DigestError(f"unknown user {username!r}")
        inputs = DigestInputs(
            username=_hash_bytes(username, utf8),
            realm=realm,
            password=password,
            nonce=nonce,
            cnonce=cnonce,
            nc=nc,
            qop=qop,
            digest_uri=digest_uri,
            authzid=authzid or None,
        )
        if not hmac.compare_digest(inputs.response(), client_response.lower()):
            raise DigestError(f"wrong response for {username!r}: bad password or tampered message")
        self._username = username
        return b"rspauth=" + inputs.response(server=True)


class DigestClient:
    """The client side of one DIGEST-MD5 exchange: :meth:`respond` to the challenge, :meth:`verify` the final.

    ``service`` and ``host`` form the digest-uri; Hive's and Hadoop's token clients use ``null/default``.
    """

    def __init__(
        self,
        username: str,
        password: bytes,
        service: str = "null",
        host: str = "default",
        *,
        authzid: str | None = None,
        random_bytes: Callable[[int], bytes] = secrets.token_bytes,
    ) -> None:
        self.username = username
        self._password = password
        self.digest_uri = f"{service}/{host}"
        self.authzid = authzid
        self._random_bytes = random_bytes
        self._rspauth: bytes | None = None
        self.complete = False

    def __repr__(self) -> str:
        return f"DigestClient(username={self.username!r}, digest_uri={self.digest_uri!r}, complete={self.complete})"

    def respond(self, challenge: bytes) -> bytes:
        """The digest-response to a server's challenge; :class:`DigestError` if we cannot meet its terms."""
        what = "digest-challenge"
        if self._rspauth is not None:
            raise DigestError("respond() called twice")
        if len(challenge) > MAX_CHALLENGE_BYTES:
            raise DigestError(f"malformed {what}: {len(challenge)} bytes, more than {MAX_CHALLENGE_BYTES}")
        d = parse_directives(challenge, what, repeatable=frozenset({"realm"}))
        nonce = _one(d, "nonce", what)
        algorithm = _one(d, "algorithm", what)
        if algorithm.lower() != b"md5-sess":
            raise DigestError(f"unsupported algorithm {algorithm.decode('ascii', 'replace')!r}")
        qops = [q.strip().lower() for q in d.get("qop", [b"auth"])[0].split(b",")]
        if b"auth" not in qops:
            raise DigestError("the server does not offer qop 'auth'")
        charset = d.get("charset", [b""])[0]
        if charset and charset.lower() != b"utf-8":
            raise DigestError(f"unsupported charset {charset.decode('ascii', 'replace')!r}")
        utf8 = bool(charset)
        realm_wire = d["realm"][0] if "realm" in d else None
        realm = _hash_bytes(_wire(realm_wire, utf8, "realm"), utf8) if realm_wire is not None else b""
        cnonce = base64.b64encode(self._random_bytes(24))
        nc = b"00000001"
        inputs = DigestInputs(
            username=_hash_bytes(self.username, utf8),
            realm=realm,
            password=self._password,
            nonce=nonce,
            cnonce=cnonce,
            nc=nc,
            qop=b"auth",
            digest_uri=self.digest_uri.encode("utf-8" if utf8 else "latin-1"),
            authzid=_hash_bytes(self.authzid, utf8) if self.authzid else None,
        )
        response = inputs.response()
        self._rspauth = inputs.response(server=True)
        encode = "utf-8" if utf8 else "latin-1"
        parts = [b"charset=utf-8"] if utf8 else []
        parts.append(b"username=" + _quote(self.username.encode(encode)))
        if realm_wire is not None:
            parts.append(b"realm=" + _quote(realm_wire))
        parts += [
            b"nonce=" + _quote(nonce),
            b"nc=" + nc,
            b"cnonce=" + _quote(cnonce),
            b"digest-uri=" + _quote(self.digest_uri.encode(encode)),
            b"maxbuf=65536",
            b"response=" + response,
            b"qop=auth",
        ]
        if self.authzid:
            parts.append(b"authzid=" + _quote(self.authzid.encode(encode)))
        return b",".join(parts)

    def verify(self, final: bytes) -> None:
        """Check the server's ``rspauth``: it proves the server knows the password too."""
        if self._rspauth is None:
            raise DigestError("verify() before respond()")
        d = parse_directives(final, "final message")
        rspauth = _one(d, "rspauth", "final message")
        if not hmac.compare_digest(rspauth.lower(), self._rspauth):
            raise DigestError("wrong rspauth: the server does not know the password")
        self.complete = True
