"""Reaching a metastore: the first of its URIs that accepts, then how waggle proves itself to it.

This is the one way waggle connects to a metastore, whoever asks: the proxy's pools and health checks
(:func:`waggle.upstream.client.connect`), and the tools that are not the proxy, ``waggle sync``, ``waggle check``
and the demo (:mod:`waggle.upstream.blocking`). It knows nothing of pools, calls or gevent.

* **TLS**: the metastore's certificate is checked against ``tls.ca-file`` (or the system's CAs) and against
  the host of its URI. Through an SSH tunnel this is still the metastore's host, never the tunnel's end.
* **Kerberos** (``hive.metastore.sasl.enabled``): GSSAPI as the caller's Kerberos identity (waggle's keytab, or
  the ticket cache of the person running a command), to the metastore's principal with ``_HOST`` expanded to
  the same host.
* **Impersonation**: DIGEST-MD5 with a caller's delegation token from the metastore, so the metastore sees the
  caller (see :mod:`waggle.upstream.impersonation`).
"""

from __future__ import annotations

import base64
import functools
import socket
import ssl
import time
from typing import Any

from waggle.config.hive_values import expand_host
from waggle.config.model import HostPort, MetastoreConfig, TlsClient
from waggle.security.digest import DigestClient, DigestError
from waggle.security.gss import GssapiClient, Initiator
from waggle.security.sasl import SaslError, SaslSocket, initiate
from waggle.security.tokens import TokenError, decode_token


class Unreachable(Exception):
    """No URI of the metastore accepted a connection; ``str()`` lists each URI with why."""


class SecurityFailed(Exception):
    """The TLS or SASL handshake with the metastore failed; ``str()`` says why (never a key or token)."""


class UpstreamCredentials:
    """Who connects to Kerberized metastores: waggle's keytab login, a person's ticket cache, or nobody."""

    def __init__(self, login: Initiator | None) -> None:
        self.login = login


def tune(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)


def dial(addresses: tuple[HostPort, ...], timeout: float) -> tuple[socket.socket, HostPort]:
    """A connected socket to the first of ``addresses`` that accepts within ``timeout`` seconds each."""
    errors = []
    for address in addresses:
        started = time.monotonic()
        try:
            sock = socket.create_connection((address.host, address.port), timeout=timeout)
        except OSError as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
            errors.append(f"{address}: {reason} after {1000 * (time.monotonic() - started):.0f} ms")
            continue
        tune(sock)
        return sock, address
    raise Unreachable("; ".join(errors))


@functools.lru_cache(maxsize=64)
def client_context(tls: TlsClient) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=tls.ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = tls.check_hostname
    if not tls.check_hostname:
        context.verify_mode = ssl.CERT_REQUIRED  # the chain is still checked
    if tls.certificate_file and tls.key_file:
        context.load_cert_chain(tls.certificate_file, tls.key_file)
    return context


def _tls_files(tls: TlsClient) -> str:
    named = [("tls.ca-file", tls.ca_file), ("tls.certificate-file", tls.certificate_file),
             ("tls.key-file", tls.key_file)]
    return ", ".join(f"{key} '{path}'" for key, path in named if path) or "the system's CAs"


#: OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH and X509_V_ERR_IP_ADDRESS_MISMATCH
_NAME_MISMATCH = (62, 64)


def tls_failure(exc: ssl.SSLError) -> str:
    """Why a TLS handshake failed, with the certificate check's own words when the certificate was refused."""
    reason = getattr(exc, "reason", None) or str(exc)
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
        hint = "tls.check-hostname" if exc.verify_code in _NAME_MISMATCH else "tls.ca-file"
        return f"{reason}: the metastore's certificate was refused: {exc.verify_message} (see {hint})"
    return str(reason)


class _DigestClientMechanism:
    """DIGEST-MD5 with a Hive delegation token, as a SASL client mechanism."""

    name = "DIGEST-MD5"
    wraps = False

    def __init__(self, token: str) -> None:
        try:
            decoded = decode_token(token)
        except TokenError as exc:
            raise SaslError(f"the metastore's delegation token is unusable: {exc}") from None
        self._client = DigestClient(base64.b64encode(decoded.identifier).decode("ascii"),
                                    base64.b64encode(decoded.password))
        self._stage = 0
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    def initial(self) -> bytes:
        return b""

    def step(self, data: bytes) -> bytes:
        try:
            if self._stage == 0:
                self._stage = 1
                return self._client.respond(data)
            self._client.verify(data)
        except DigestError as exc:
            raise SaslError(f"DIGEST-MD5 login failed: {exc}") from None
        self._complete = True
        return b""

    def wrap(self, data: bytes) -> bytes:  # pragma: no cover - auth only
        return data

    def unwrap(self, data: bytes) -> bytes:  # pragma: no cover
        return data


def secure(sock: Any, config: MetastoreConfig, host: str, credentials: UpstreamCredentials | None,
           token: str | None, max_frame: int) -> Any:
    """``sock`` with the metastore's TLS and SASL done; :class:`SecurityFailed` if either fails."""
    security = config.security
    conn = sock
    if security.tls is not None:
        try:
            context = client_context(security.tls)
        except OSError as exc:  # ssl.SSLError included
            raise SecurityFailed(f"cannot use its TLS files ({_tls_files(security.tls)}): "
                                 f"{getattr(exc, 'reason', None) or exc.strerror or exc}") from None
        try:
            conn = context.wrap_socket(sock, server_hostname=host)
        except ssl.SSLError as exc:
            raise SecurityFailed(f"TLS handshake with {host} failed: {tls_failure(exc)}") from None
    if not security.kerberos:
        return conn
    assert security.principal is not None
    try:
        if token is not None:
            mech: Any = _DigestClientMechanism(token)
        else:
            login = credentials.login if credentials is not None else None
            if login is None:
                raise SaslError("waggle has no Kerberos principal and keytab of its own")
            try:
                creds = login.initiator()
            except SaslError as exc:
                raise SecurityFailed(f"cannot log in with Kerberos: {exc}") from None
            mech = GssapiClient(creds, expand_host(security.principal, host), security.qops)
        initiate(conn, mech)
    except SaslError as exc:
        raise SecurityFailed(f"refused waggle's SASL login ({'DIGEST-MD5' if token else 'GSSAPI'}): {exc}") \
            from None
    return SaslSocket(conn, mech, max_frame)


def handshake(sock: socket.socket, config: MetastoreConfig, address: HostPort, host: str,
              credentials: UpstreamCredentials | None, token: str | None, max_frame: int, timeout: float) -> Any:
    """:func:`secure` on a freshly dialled socket (closed when the handshake fails), its errors naming
    ``address``: a socket-like object ready for Thrift, the socket itself for a plain metastore."""
    security = config.security
    if security.tls is None and not security.kerberos:
        return sock
    sock.settimeout(timeout)
    try:
        return secure(sock, config, host, credentials, token, max_frame)
    except SecurityFailed as exc:
        sock.close()
        raise SecurityFailed(f"{exc} ({address})") from None
    except OSError as exc:
        sock.close()
        raise SecurityFailed(f"connection failed during the TLS or SASL handshake ({address}): "
                             f"{exc.strerror or exc}") from None
