"""The front door: TLS and SASL on a client connection, before a single call is read.

:meth:`FrontDoor.open` takes a freshly accepted socket. It returns the socket the driver should use, which
may be wrapped in TLS, in SASL framing, or both, together with who the client proved to be. A client that
does not authenticate is answered with a SASL ``BAD`` message naming the reason, and is closed. The reason
is logged, and nothing the client sent reaches a metastore.

Clients log in one of two ways:

* **GSSAPI**, with a Kerberos ticket. The principal must belong to waggle's realm or to one listed in
  ``kerberos.trusted-realms``. It is mapped to a short name by ``hadoop.security.auth_to_local``.
* **DIGEST-MD5**, with a waggle delegation token. The identity is the token's owner.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from waggle.config.model import KerberosServer, Limits, ServerSecurity, TlsServer
from waggle.security.digest import DigestError, DigestServer
from waggle.security.gss import GssapiServer, KerberosLogin
from waggle.security.principals import AuthToLocal, NoMatchingRule
from waggle.security.sasl import Mechanism, SaslError, SaslSocket, accept
from waggle.security.token_service import TokenRefused, TokenService

#: seconds a client has for the TLS handshake and the SASL negotiation
HANDSHAKE_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class Authenticated:
    """Who a connection proved to be. ``user`` is what metastores see; ``principal`` what the client showed."""

    user: str
    principal: str
    mechanism: str  # GSSAPI | DIGEST-MD5 | TLS
    qop: str = "auth"

    @property
    def via_token(self) -> bool:
        return self.mechanism == "DIGEST-MD5"


class Refused(Exception):
    """The client did not get in; ``str()`` says why (safe to log)."""


class _DigestMechanism:
    """DIGEST-MD5 server as a SASL mechanism: challenge first, then check the response against the token."""

    name = "DIGEST-MD5"
    wraps = False

    def __init__(self, tokens: TokenService) -> None:
        self._tokens = tokens
        self._refusal: str | None = None
        self._username: str | None = None
        self._server = DigestServer(self._lookup)
        self._stage = 0
        self._complete = False
        self.owner = ""

    def _lookup(self, username: str) -> bytes | None:
        self._username = username
        try:
            password, identifier = self._tokens.login(username)
        except TokenRefused as exc:
            self._refusal = str(exc)
            return None
        self.owner = identifier.owner
        return password

    @property
    def complete(self) -> bool:
        return self._complete

    def step(self, data: bytes) -> bytes:
        if self._stage == 0:
            self._stage = 1
            return self._server.challenge()
        try:
            final = self._server.respond(data)
        except DigestError as exc:
            if self._refusal:
                raise SaslError(self._refusal) from None
            # the message may quote the user name, which is the token's identifier: never log it
            name = self._username or ""
            reason = str(exc).replace(name, f"<the token of {self.owner or 'an unknown owner'}>") if name else str(exc)
            raise SaslError(f"DIGEST-MD5 login failed: {reason}") from None
        self._complete = True
        return final

    def wrap(self, data: bytes) -> bytes:  # pragma: no cover - DIGEST-MD5 is offered with auth only
        return data

    def unwrap(self, data: bytes) -> bytes:  # pragma: no cover
        return data


class FrontDoor:
    """TLS and SASL for one configuration of the Thrift port."""

    def __init__(self, security: ServerSecurity, limits: Limits, login: KerberosLogin | None,
                 tokens: TokenService | None) -> None:
        self.security = security
        self._limits = limits
        self._login = login
        self._tokens = tokens
        self._tls = server_context(security.tls) if security.tls is not None else None
        kerberos = security.kerberos
        self._mapper = AuthToLocal(kerberos.auth_to_local, kerberos.realm) if kerberos is not None else None
        self._realms = {kerberos.realm, *kerberos.trusted_realms} if kerberos is not None else set()
        self._sasl_on = kerberos is not None and kerberos.sasl

    @property
    def kind(self) -> str:
        """``tls``, ``sasl`` or ``tls+sasl`` (the metrics label of refusals)."""
        parts = (["tls"] if self._tls is not None else []) + (["sasl"] if self._sasl_on else [])
        return "+".join(parts)

    def open(self, sock: socket.socket) -> tuple[Any, Authenticated | None]:
        """The socket to serve, and who is on it; :class:`Refused` when the client did not get in."""
        sock.settimeout(HANDSHAKE_SECONDS)
        conn: Any = sock
        who: Authenticated | None = None
        try:
            if self._tls is not None:
                try:
                    conn = self._tls.wrap_socket(sock, server_side=True)
                except (ssl.SSLError, OSError) as exc:
                    raise Refused(f"TLS handshake failed: {getattr(exc, 'reason', None) or exc}") from None
            kerberos = self.security.kerberos
            if kerberos is not None and self._sasl_on:
                conn, who = self._sasl(conn, kerberos)
        except TimeoutError:
            raise Refused(f"no TLS or SASL handshake within {HANDSHAKE_SECONDS:g}s") from None
        sock.settimeout(None)
        if conn is not sock and hasattr(conn, "settimeout"):
            conn.settimeout(None)
        return conn, who

    def _sasl(self, conn: Any, kerberos: KerberosServer) -> tuple[SaslSocket, Authenticated]:
        assert self._login is not None
        mechanisms: dict[str, Callable[[], Mechanism]] = {
            "GSSAPI": lambda: GssapiServer(self._login.acceptor(), kerberos.qops,  # type: ignore[union-attr]
                                           authorize=self._authorize),
        }
        if self._tokens is not None:
            tokens = self._tokens
            mechanisms["DIGEST-MD5"] = lambda: _DigestMechanism(tokens)
        try:
            mech = accept(conn, mechanisms)
        except SaslError as exc:
            raise Refused(str(exc)) from None
        except OSError as exc:
            raise Refused(f"connection lost during the SASL negotiation: {exc}") from None
        if isinstance(mech, GssapiServer):
            who = Authenticated(self.short_name(mech.principal), mech.principal, mech.name, mech.qop)
        else:
            assert isinstance(mech, _DigestMechanism)
            who = Authenticated(mech.owner, mech.owner, mech.name)
        return SaslSocket(conn, mech, self._limits.max_message_bytes + 1024), who

    def _authorize(self, principal: str) -> None:
        realm = principal.rpartition("@")[2]
        if realm not in self._realms:
            raise SaslError(f"principal {principal} is of realm {realm}, which waggle does not trust (it trusts "
                            f"{', '.join(sorted(self._realms))}; see kerberos.trusted-realms)")
        self.short_name(principal)

    def short_name(self, principal: str) -> str:
        assert self._mapper is not None
        try:
            return self._mapper.short_name(principal)
        except NoMatchingRule as exc:
            raise SaslError(f"principal {principal} matches no hadoop.security.auth_to_local rule: {exc}") \
                from None


def server_context(tls: TlsServer) -> ssl.SSLContext:
    """The TLS context of the Thrift port (TLS 1.2 or newer; client certificates when a CA is given)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(tls.certificate_file, tls.key_file)
    except OSError as exc:  # ssl.SSLError included
        raise OSError(f"cannot use tls.certificate-file '{tls.certificate_file}' with tls.key-file "
                      f"'{tls.key_file}': {_why(exc)}") from None
    if tls.client_ca_file:
        try:
            context.load_verify_locations(tls.client_ca_file)
        except OSError as exc:
            raise OSError(f"cannot use tls.client-ca-file '{tls.client_ca_file}': {_why(exc)}") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def _why(exc: OSError) -> str:
    if isinstance(exc, ssl.SSLError):
        return str(exc.reason or exc)
    return exc.strerror or str(exc)
