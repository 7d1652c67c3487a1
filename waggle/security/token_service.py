"""waggle's own delegation tokens: issued, renewed and cancelled for clients, and checked at DIGEST-MD5 logins.

A token is Hive's: a Hadoop ``Token`` whose identifier is a ``DelegationTokenIdentifier``, and whose password
is the HMAC of that identifier under a signing key (:mod:`waggle.security.tokens`). Every replica given the
same key file can check any replica's token without asking anyone.

Renewals and cancellations must reach every replica too. They are kept in the primary metastore's own
token store: the Thrift calls ``add_token``, ``get_token`` and ``remove_token``, which Hive's ``DBTokenStore``
uses. The record is keyed ``waggle:`` plus the identifier, and holds the current expiry. Issuing adds the
record, renewing replaces it and cancelling removes it. A login checks the signature and the max date
locally, then reads the record: a token without one was cancelled. If the primary cannot be asked,
token logins fail, and Kerberos logins keep working.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import os
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from waggle.common.logging import get_logger
from waggle.config.model import KerberosServer
from waggle.security.principals import AuthToLocal
from waggle.security.tokens import TokenAuthority, TokenError, TokenIdentifier, secrets_from_file

log = get_logger("waggle.tokens")
_PREFIX = "waggle:"


class TokenRefused(Exception):
    """A token call or a token login that is refused; ``str()`` is the reason (never the token)."""


class TokenStore(Protocol):
    """Where renewals and cancellations live (the primary metastore's token store)."""

    def put(self, key: str, value: str) -> None: ...

    def get(self, key: str) -> str | None: ...

    def remove(self, key: str) -> bool: ...


def now_ms() -> int:
    return int(time.time() * 1000)


class ProxyUsers:
    """Hadoop's ``hadoop.proxyuser.<user>.users`` and ``.hosts``: who may ask for another user's token."""

    def __init__(self, properties: Mapping[str, str]) -> None:
        self._users: dict[str, set[str]] = {}
        self._hosts: dict[str, set[str]] = {}
        for key, value in properties.items():
            if not key.startswith("hadoop.proxyuser."):
                continue
            user, _, what = key[len("hadoop.proxyuser."):].rpartition(".")
            values = {v.strip() for v in value.split(",") if v.strip()}
            if what == "users":
                self._users[user] = values
            elif what == "hosts":
                self._hosts[user] = values

    def allows(self, proxy: str, user: str, address: str) -> bool:
        users = self._users.get(proxy, set())
        hosts = self._hosts.get(proxy, set())
        if not ("*" in users or user in users):
            return False
        return "*" in hosts or address in hosts or any(_in_network(address, h) for h in hosts if "/" in h)


def _in_network(address: str, network: str) -> bool:
    try:
        return ipaddress.ip_address(address) in ipaddress.ip_network(network, strict=False)
    except ValueError:
        return False


class TokenService:
    """Answers the three delegation-token calls and checks token logins, for one configuration."""

    def __init__(self, authority: TokenAuthority, store: TokenStore, proxy_users: ProxyUsers,
                 short_name: Callable[[str], str], clock: Callable[[], int] = now_ms) -> None:
        self.authority = authority
        self.store = store
        self.proxy_users = proxy_users
        self._short_name = short_name
        self._clock = clock

    def issue(self, caller: str, via_token: bool, address: str, owner: str, renewer: str) -> str:
        """A token for ``owner`` (the caller, or a user the caller may act for), renewable by ``renewer``."""
        if via_token:
            raise TokenRefused("a delegation token can only be issued to a Kerberos-authenticated connection, "
                               "not to one that logged in with a token")
        owner = owner.strip() or caller
        if owner != caller and not self.proxy_users.allows(caller, owner, address):
            raise TokenRefused(f"{caller} may not get a delegation token for {owner} (from {address}): no "
                               f"hadoop.proxyuser.{caller}.users/hosts rule allows it")
        renewer_short = self._renewer(renewer) if renewer.strip() else caller
        token, identifier = self.authority.issue(owner, renewer_short, caller if owner != caller else "",
                                                 self._clock())
        self._put(identifier, self.authority.first_expiry_ms(identifier))
        log.info("token.issued", owner=owner, renewer=renewer_short, real_user=identifier.real_user or None,
                 sequence=identifier.sequence)
        return token

    def renew(self, caller: str, token: str) -> int:
        try:
            expiry = self.authority.renew(token, caller, self._clock())
            identifier = self.authority.authenticate(token)
        except TokenError as exc:
            raise TokenRefused(f"cannot renew the token: {exc}") from None
        if self._get(identifier) is None:
            raise TokenRefused(f"cannot renew the token of {identifier.owner}: it was cancelled or never issued")
        self._put(identifier, expiry)
        log.info("token.renewed", owner=identifier.owner, sequence=identifier.sequence, until_ms=expiry)
        return expiry

    def cancel(self, caller: str, token: str) -> None:
        try:
            identifier = self.authority.cancel(token, caller)
        except TokenError as exc:
            raise TokenRefused(f"cannot cancel the token: {exc}") from None
        if not self.store.remove(_key(identifier.to_bytes())):
            raise TokenRefused(f"cannot cancel the token of {identifier.owner}: it was cancelled or never issued")
        log.info("token.cancelled", owner=identifier.owner, sequence=identifier.sequence, by=caller)

    def login(self, username: str) -> tuple[bytes, TokenIdentifier]:
        """For a DIGEST-MD5 login: the password the client must prove, and the token's identifier."""
        try:
            raw = base64.b64decode(username, validate=True)
            identifier = TokenIdentifier.from_bytes(raw)
            password = self.authority.password_for(raw)
        except (TokenError, binascii.Error, ValueError) as exc:
            raise TokenRefused(f"not a waggle delegation token: {exc}") from None
        expiry = self._get(identifier)
        if expiry is None:
            raise TokenRefused(f"the delegation token of {identifier.owner} was cancelled or is unknown")
        try:
            self.authority.check(identifier, self._clock(), expiry)
        except TokenError as exc:
            raise TokenRefused(str(exc)) from None
        return base64.b64encode(password), identifier

    # -- the store ---------------------------------------------------------------------------------------
    def _renewer(self, principal: str) -> str:
        try:
            return self._short_name(principal.strip())
        except Exception as exc:  # the mapping's own error (no rule matches, a malformed principal)
            raise TokenRefused(f"renewer '{principal}': {exc}") from None

    def _put(self, identifier: TokenIdentifier, expiry_ms: int) -> None:
        self.store.put(_key(identifier.to_bytes()), str(expiry_ms))

    def _get(self, identifier: TokenIdentifier) -> int | None:
        value = self.store.get(_key(identifier.to_bytes()))
        if value is None:
            return None
        try:
            return int(value)
        except ValueError:
            return None


def _key(identifier: bytes) -> str:
    return _PREFIX + base64.b64encode(identifier).decode("ascii")


def build(kerberos: KerberosServer, properties: Mapping[str, str], store: TokenStore,
          random_key: bytes | None = None, clock: Callable[[], int] = now_ms) -> TokenService:
    """The token service of one configuration: keys from ``delegation-tokens.signing-key-file``, or a random
    key for this waggle alone (logged, since its tokens then work only here and only until a restart).
    ``random_key``: that key, when a supervisor chose it for all its workers. ``clock``: the time in
    milliseconds since the epoch that issues, renewals and logins are judged at (the wall clock)."""
    if kerberos.token_key_file:
        keys = secrets_from_file(kerberos.token_key_file)
    else:
        keys = {1: random_key or os.urandom(32)}
        if random_key is None:
            log.warning("tokens.random_key", detail="no delegation-tokens.signing-key-file: tokens issued by this "
                        "waggle work only on it and only until it restarts")
    authority = TokenAuthority(keys, kerberos.token_max_lifetime_ms, kerberos.token_renew_interval_ms)
    mapper = AuthToLocal(kerberos.auth_to_local, kerberos.realm)
    return TokenService(authority, store, ProxyUsers(properties), mapper.short_name, clock)
