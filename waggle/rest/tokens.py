"""Bearer tokens of the Iceberg REST port, from its OAuth2 client-credentials endpoint (``/v1/oauth/tokens``).

A client proves itself with the id and secret of ``iceberg-rest.clients`` and gets a token that names the user
its requests act as, until when, and which key signed it. Tokens are HMAC-SHA256 signed with the keys of
waggle's delegation tokens (``delegation-tokens.signing-key-file``; the highest id signs, every key verifies),
so any replica holding the same file checks any token, and nothing is stored.

Nothing here reads a clock or touches the network: times are passed in. A token is never logged; what is logged
about one is who it names.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass

from waggle.config.model import RestClientConfig

#: the version tag every token starts with (a later layout gets a new one)
TAG = "wgl1"
#: a token longer than this is not read (it cannot be one of ours)
MAX_TOKEN_CHARS = 4096


class TokenRefused(Exception):
    """The request's token (or a client's credentials) is not good; ``str()`` is safe to log and to answer."""


@dataclass(frozen=True, slots=True)
class Bearer:
    """Who a good token names."""

    client: str
    user: str
    expires: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Tokens:
    """Issues and checks the REST port's tokens with ``keys`` (key id -> secret)."""

    def __init__(self, keys: Mapping[int, bytes], clients: tuple[RestClientConfig, ...], lifetime: int | None,
                 secrets: Mapping[str, bytes]) -> None:
        """``secrets``: each client's secret by client id (:func:`waggle.config.check.rest_secrets`)."""
        if not keys:
            raise ValueError("no signing keys")
        self._keys = dict(keys)
        self._signing = max(self._keys)
        self._clients = {c.id: c for c in clients}
        self._secrets = dict(secrets)
        self.lifetime = lifetime if lifetime is not None else 3600

    def grant(self, client_id: str, secret: str, now: int) -> tuple[str, Bearer]:
        """A token for a client whose secret matches; :class:`TokenRefused` (naming the client id) otherwise."""
        client = self._clients.get(client_id)
        given = secret.encode()
        # compared even for an unknown id, so the time taken does not tell which ids exist
        expected = self._secrets.get(client_id) if client is not None else None
        # a client without a secret read (or an empty one) is refused whatever is sent, "\0" included
        known = client is not None and bool(expected)
        if not expected:
            expected = b"\0" * max(len(given), 1)
        if not hmac.compare_digest(given, expected) or not known or client is None:
            raise TokenRefused(f"unknown client id or wrong secret (client id {client_id!r})")
        bearer = Bearer(client.id, client.user, now + self.lifetime)
        return self.sign(bearer), bearer

    def sign(self, bearer: Bearer) -> str:
        payload = _b64(json.dumps({"c": bearer.client, "u": bearer.user, "e": bearer.expires, "k": self._signing},
                                  separators=(",", ":")).encode())
        return f"{TAG}.{payload}.{_b64(self._mac(self._signing, payload))}"

    def _mac(self, key_id: int, payload: str) -> bytes:
        return hmac.new(self._keys[key_id], f"{TAG}.{payload}".encode(), hashlib.sha256).digest()

    def check(self, token: str, now: int) -> Bearer:
        """Who ``token`` names; :class:`TokenRefused` for a token that is not ours, altered, or expired."""
        if len(token) > MAX_TOKEN_CHARS:
            raise TokenRefused("the bearer token is too long to be one of waggle's")
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != TAG:
            raise TokenRefused("the bearer token is not one of waggle's (get one from /v1/oauth/tokens)")
        try:
            fields = json.loads(_unb64(parts[1]))
            signature = _unb64(parts[2])
            key_id, user, client, expires = int(fields["k"]), str(fields["u"]), str(fields["c"]), int(fields["e"])
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise TokenRefused("the bearer token is malformed") from None
        if key_id not in self._keys:
            raise TokenRefused(f"the bearer token was signed with key {key_id}, which this waggle does not hold")
        if not hmac.compare_digest(signature, self._mac(key_id, parts[1])):
            raise TokenRefused("the bearer token's signature does not match")
        if expires <= now:
            raise TokenRefused(f"the bearer token of client {client!r} has expired")
        return Bearer(client, user, expires)
