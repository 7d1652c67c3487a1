"""One connection to one upstream metastore: connect with a timeout, call, read the reply with a timeout."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from thrift.Thrift import TMessageType

from waggle.config.model import HostPort, Limits, MetastoreConfig
from waggle.wire import Header, PeerClosed, Wire, WireError

#: A client identity as given to ``set_ugi``: (user, groups). ``None`` means the client never called it.
Identity = tuple[str, tuple[str, ...]]


class UpstreamError(Exception):
    """The metastore could not be reached, or failed mid-call. ``str()`` names the metastore."""

    def __init__(self, member: str, detail: str) -> None:
        super().__init__(f"metastore '{member}' {detail}")
        self.member = member
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Reply:
    header: Header
    raw: bytes
    first_field: int  # 0: success; >0: a declared exception; -1: empty/void; see Wire.first_field_id


def _tune(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)


class UpstreamConnection:
    """A connected socket to one metastore, used by one call at a time (the pool guarantees it)."""

    __slots__ = ("_read_timeout", "address", "broken", "identity", "member", "wire")

    def __init__(self, member: str, address: HostPort, sock: socket.socket, config: MetastoreConfig,
                 limits: Limits) -> None:
        self.member = member
        self.address = address
        self.wire = Wire(sock, config.wire, limits)
        self.identity: Identity | None = None
        self.broken = False
        self._read_timeout = (config.read_timeout_ms + config.latency_ms) / 1000.0
        sock.settimeout(self._read_timeout)

    def call(self, raw: bytes, oneway: bool = False) -> Reply | None:
        """Send one encoded request and return the raw reply. Any failure marks the connection broken."""
        wire = self.wire
        try:
            wire.send_raw(raw)
            if oneway:
                return None
            header = wire.read_begin()
            wire.skip_struct()
            raw_reply = wire.read_end()
        except TimeoutError as exc:
            self.broken = True
            raise UpstreamError(self.member, f"did not answer within {self._read_timeout:g}s ({self.address})") from exc
        except PeerClosed as exc:
            self.broken = True
            raise UpstreamError(self.member, f"closed the connection ({self.address})") from exc
        except WireError as exc:
            self.broken = True
            raise UpstreamError(self.member, f"sent an invalid reply ({self.address}): {exc}") from exc
        except OSError as exc:
            self.broken = True
            raise UpstreamError(self.member, f"connection failed ({self.address}): {exc.strerror or exc}") from exc
        first = wire.first_field_id(raw_reply) if header.mtype == TMessageType.REPLY else -1
        return Reply(header, raw_reply, first)

    def is_reusable(self) -> bool:
        """False when the peer has closed (or sent unsolicited bytes on) this idle connection."""
        if self.broken:
            return False
        sock = self.wire.sock
        try:
            sock.settimeout(0.0)
            try:
                data = sock.recv(1, socket.MSG_PEEK)
            finally:
                sock.settimeout(self._read_timeout)
        except BlockingIOError:
            return True
        except OSError:
            return False
        del data  # EOF (b"") or unsolicited bytes: either way the connection is out of step
        return False

    def close(self) -> None:
        self.broken = True
        try:
            self.wire.sock.close()
        except OSError:
            pass


def connect(config: MetastoreConfig, limits: Limits, addresses: tuple[HostPort, ...] | None = None
            ) -> UpstreamConnection:
    """Connect to the first of the metastore's URIs that accepts, in order."""
    timeout = (config.connect_timeout_ms + config.latency_ms) / 1000.0
    errors = []
    for address in addresses or config.uris:
        started = time.monotonic()
        try:
            sock = socket.create_connection((address.host, address.port), timeout=timeout)
        except OSError as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
            errors.append(f"{address}: {reason} after {1000 * (time.monotonic() - started):.0f} ms")
            continue
        _tune(sock)
        return UpstreamConnection(config.name, address, sock, config, limits)
    raise UpstreamError(config.name, "is unreachable: " + "; ".join(errors))
