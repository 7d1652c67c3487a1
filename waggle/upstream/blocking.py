"""A blocking Thrift client of one metastore, for everything that talks to metastores and is not the proxy's call
path: ``waggle sync`` (its sources and its target), ``waggle check --connect``, the demo and the local
metastores' readiness probe.

It reaches a metastore exactly as the proxy does, through :mod:`waggle.upstream.handshake`: the member's URIs in
order, or its SSH tunnel; TLS; Kerberos (SASL GSSAPI); and the wire format the federation file gives it (framed
or not, binary or compact). Over that sits Thrift's generated client with the C codec. There is nothing more to
configure: the member's keys in the federation file are the ones the proxy reads.

Who logs in to a Kerberized metastore (:func:`kerberos_identity`): ``--principal`` with ``--keytab`` (as
``spark-submit`` takes them), else waggle's own keytab from the server file, else the ticket cache of the
person running the command (``KRB5CCNAME``, as ``kinit`` leaves it). No gevent here: the sync runs in threads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
from thrift.protocol.TCompactProtocol import TCompactProtocolAccelerated
from thrift.transport.TTransport import TBufferedTransport, TFramedTransport, TTransportBase, TTransportException

from waggle.config.model import CacheMode, HostPort, KerberosServer, MetastoreConfig, ProtocolKind, TransportKind
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
from waggle.hms.gen.hive_metastore.ttypes import NotificationEventRequest
from waggle.hms.notification_log import LISTENER_KEYS, missing_listener
from waggle.routing.databases import visible
from waggle.security.gss import KerberosLogin, TicketCacheLogin
from waggle.security.sasl import SaslError
from waggle.upstream.handshake import SecurityFailed, Unreachable, UpstreamCredentials, dial, handshake

#: the largest SASL frame accepted from a metastore (a page of 500 partitions is a few MB)
MAX_FRAME_BYTES = 1 << 30


class MetastoreUnavailable(Exception):
    """The metastore could not be reached, or refused the login; ``str()`` names it and says why."""

    def __init__(self, member: str, detail: str) -> None:
        super().__init__(f"metastore '{member}' {detail}")
        self.member = member
        self.detail = detail


def kerberos_identity(principal: str | None = None, keytab: str | None = None,
                      server: KerberosServer | None = None) -> UpstreamCredentials:
    """The Kerberos identity a command connects with: ``principal`` and ``keytab`` when given, else waggle's own
    (the server file's), else the ticket cache of whoever runs the command."""
    if principal and keytab:
        return UpstreamCredentials(KerberosLogin(principal, keytab))
    if server is not None:
        return UpstreamCredentials(KerberosLogin(server.principal, server.keytab))
    return UpstreamCredentials(TicketCacheLogin())


class SocketTransport(TTransportBase):  # type: ignore[misc]
    """A Thrift transport over a connected socket-like object: a socket, a TLS socket or a SASL socket."""

    def __init__(self, sock: Any) -> None:
        self.sock: Any = sock

    def isOpen(self) -> bool:
        return self.sock is not None

    def open(self) -> None:
        pass

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None

    def read(self, sz: int) -> bytes:
        try:
            data: bytes = self.sock.recv(sz)
        except TimeoutError:
            raise TTransportException(TTransportException.TIMED_OUT, "the metastore did not answer in time") \
                from None
        except ConnectionResetError:
            data = b""
        except OSError as exc:
            raise TTransportException(TTransportException.UNKNOWN, f"reading from the metastore failed: "
                                                                     f"{exc.strerror or exc}") from None
        if not data:
            raise TTransportException(TTransportException.END_OF_FILE, "the metastore closed the connection")
        return data

    def write(self, buf: bytes) -> None:
        try:
            self.sock.sendall(buf)
        except OSError as exc:
            raise TTransportException(TTransportException.UNKNOWN, f"writing to the metastore failed: "
                                                                     f"{exc.strerror or exc}") from None

    def flush(self) -> None:
        pass


class MetastoreClient:
    """One open connection: ``client`` is Thrift's generated client over ``sock``, the connection to
    ``member`` at ``address`` (its own address even through a tunnel), secured as ``credentials`` logged in."""

    def __init__(self, client: Any, transport: Any, member: MetastoreConfig, address: HostPort, tunnel: bool,
                 sock: Any, credentials: UpstreamCredentials | None) -> None:
        self.client = client
        self.transport = transport
        self.member = member
        self.address = address
        self.tunnel = tunnel
        self.sock = sock
        self.credentials = credentials

    def describe(self) -> str:
        """How it reached its metastore, in words for ``waggle check --connect``."""
        parts = [f"{self.address}" + (" through its SSH tunnel" if self.tunnel else "")]
        if self.member.security.tls is not None:
            parts.append("TLS")
        mechanism = getattr(self.sock, "mechanism", None)  # a SASL socket: Kerberos
        login = self.credentials.login if self.credentials is not None else None
        if mechanism is not None and login is not None:
            try:
                who = login.principal
            except SaslError:
                who = "?"
            parts.append(f"Kerberos GSSAPI as {who} to {mechanism.service_principal} (qop {mechanism.qop})")
        else:
            parts.append("no Kerberos")
        return ", ".join(parts)

    def close(self) -> None:
        self.transport.close()


def _open(member: MetastoreConfig, addresses: tuple[HostPort, ...], host: str | None,
          credentials: UpstreamCredentials | None, timeout: float) -> MetastoreClient:
    connect_timeout = (member.connect_timeout_ms + member.latency_ms) / 1000.0
    try:
        sock, address = dial(addresses, connect_timeout)
        secured = handshake(sock, member, address, host or address.host, credentials, None, MAX_FRAME_BYTES,
                            connect_timeout)
    except Unreachable as exc:
        raise MetastoreUnavailable(member.name, f"is unreachable: {exc}") from None
    except SecurityFailed as exc:
        raise MetastoreUnavailable(member.name, str(exc)) from None
    secured.settimeout(timeout)
    raw = SocketTransport(secured)
    transport = TFramedTransport(raw) if member.wire.transport is TransportKind.FRAMED else TBufferedTransport(raw)
    protocol = TCompactProtocolAccelerated if member.wire.protocol is ProtocolKind.COMPACT \
        else TBinaryProtocolAccelerated
    shown = HostPort(host, member.uris[0].port) if host else address
    return MetastoreClient(ThriftHiveMetastore.Client(protocol(transport)), transport, member, shown,
                           host is not None, secured, credentials)


@contextlib.contextmanager
def clients(member: MetastoreConfig, count: int, credentials: UpstreamCredentials | None = None,
            timeout: float = 600.0) -> Iterator[list[MetastoreClient]]:
    """``count`` connections to ``member`` (through one SSH tunnel, run in this process, when it has one), each
    waiting at most ``timeout`` seconds for a reply; all closed afterwards. Raises
    :class:`MetastoreUnavailable`, naming the member, when it cannot be reached or refuses the login."""
    with contextlib.ExitStack() as stack:
        host = None
        addresses = member.uris
        if member.tunnel is not None:
            from waggle.tunnel.forward import TunnelError, local_forward
            from waggle.tunnel.spec import spec_for

            try:
                local_host, local_port = stack.enter_context(local_forward(spec_for(member)))
            except TunnelError as exc:
                raise MetastoreUnavailable(member.name, f"cannot be reached through its SSH tunnel: {exc}") \
                    from None
            addresses = (HostPort(local_host, local_port),)
            host = member.uris[0].host  # Kerberos and TLS name the metastore's host, not the tunnel's end
        opened: list[MetastoreClient] = []
        for _ in range(count):
            conn = _open(member, addresses, host, credentials, timeout)
            stack.callback(conn.close)
            opened.append(conn)
        yield opened


@contextlib.contextmanager
def client(member: MetastoreConfig, credentials: UpstreamCredentials | None = None, timeout: float = 600.0
           ) -> Iterator[Any]:
    """One connection to ``member`` (see :func:`clients`): Thrift's generated client."""
    with clients(member, 1, credentials, timeout) as (conn,):
        yield conn.client


def plain_member(host: str, port: int, name: str | None = None, **keys: Any) -> MetastoreConfig:
    """A metastore known only by its address (a local one, or waggle itself), as a federation member."""
    return MetastoreConfig(name=name or f"{host}:{port}", uris=(HostPort(host, port),), primary=False,
                           database_prefix="", **keys)



def reach(member: MetastoreConfig, credentials: UpstreamCredentials | None, timeout: float = 30.0,
          shown: list[str] | None = None) -> str:
    """Connect to ``member`` as the proxy would and make one call: how it was reached and what it holds, in
    words (``waggle check --connect``). Raises :class:`MetastoreUnavailable` or the call's own error. ``shown``
    gets the member's databases as clients see them (its prefix, its name mapping), where they are visible."""
    with clients(member, 1, credentials, timeout) as (conn,):
        databases = conn.client.get_all_databases()
        count = len(databases)
        if shown is not None:
            shown.extend(client_names(member, databases))
        said = f"{conn.describe()}; {count} database(s)"
        if member.cache is CacheMode.EVENTS:
            said += f"; {_log(member, conn.client)}"
        return said


def client_names(member: MetastoreConfig, databases: list[str]) -> list[str]:
    """A member's visible databases as a PREFIXED federation shows them (its prefix, then its mapping), and as
    a MANUAL one does (their own names): both, since grants may be written for either."""
    out = []
    for db in databases:
        real = db.lower()
        if not visible(member, real):
            continue
        mapped = member.database_name_mapping.get(real, real)
        out += [real, mapped, member.database_prefix.lower() + mapped]
    return out


class LogUnreadable(Exception):
    """A member with ``cache: events`` whose notification log cannot be read."""


def _log(member: MetastoreConfig, client: Any) -> str:
    """How a ``cache: events`` member's notification log reads; raises :class:`LogUnreadable` when it cannot."""
    try:
        newest = int(client.get_current_notificationEventId().eventId or 0)
        client.get_next_notification(NotificationEventRequest(lastEvent=max(0, newest - 1), maxEvents=1))
    except Exception as exc:
        raise LogUnreadable(f"metastore '{member.name}' has cache: events, but its notification log cannot be read "
                            f"({type(exc).__name__}: {getattr(exc, 'message', None) or exc})") from exc
    why = missing_listener(_setting(client, key) for key in LISTENER_KEYS)
    if why is not None:
        raise LogUnreadable(f"metastore '{member.name}' has cache: events, but {why}")
    return f"notification log readable (newest event {newest})"


def _setting(client: Any, key: str) -> str | None:
    try:
        return str(client.get_config_value(key, "") or "")
    except Exception:  # it will not say (a setting it keeps hidden): nothing known against it
        return None
