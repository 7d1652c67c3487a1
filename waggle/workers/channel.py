"""The control channel between the supervisor and one worker: messages over a Unix socket pair.

A message is a kind and a body, pickled, behind a 4-byte length. Both ends are waggle's own processes, started
together from one installation, so pickle is safe here and carries the frozen configuration objects whole.

Supervisor to worker: ``start`` (:class:`Start`), ``config`` (a reload), ``health`` and ``tunnel`` (what the
supervisor's checks and tunnels learned), ``log`` (what a read of a ``cache: events`` member's notification log
says: member, when the read began or None when it could not read, what to forget), ``wrote`` (what a write
through another worker forgot: forget it too, and say ``forgot``), ``forgot`` (every other worker forgot what a
write through this one named), ``forget`` (an admin call: a member's cached replies), ``status`` (a question,
answered with a ``status`` of the same id), ``stop`` (drain: delay and grace seconds). Worker to supervisor:
``ready``, ``failed`` (it cannot serve: the reason), ``check`` (a call to a metastore failed, or waits long on it:
check it now), ``down`` (a call found a metastore gone: name and reason), ``wrote`` (a write through it: its ask,
the member and what it forgot), ``forgot``, ``status``.
"""

from __future__ import annotations

import copyreg
import pickle
import socket
import struct
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import gevent.lock

from waggle.config.model import WaggleConfig

_LENGTH = struct.Struct(">I")
#: a message's largest body (a configuration is some kilobytes; a worker's metrics some tens)
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def readonly(d: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    return MappingProxyType(d)


def _mappingproxy(m: MappingProxyType[Any, Any]) -> tuple[Any, tuple[dict[Any, Any]]]:
    return readonly, (dict(m),)


# the configuration's read-only maps travel as what they are
copyreg.pickle(MappingProxyType, _mappingproxy)


class ChannelClosed(Exception):
    """The other end is gone (its process exited)."""


@dataclass(frozen=True, slots=True)
class Start:
    """What a worker needs before it serves."""

    index: int
    workers: int
    #: the pod's Thrift port (the server file's, or the free one the supervisor took for port 0)
    port: int
    config: WaggleConfig
    #: the generation of ``config`` at the supervisor (1, +1 per applied reload)
    generation: int
    #: the random key of waggle's delegation tokens, the same in every worker (no signing-key file)
    token_key: bytes
    #: the supervisor's health of each metastore: name -> (up, since, reason)
    health: dict[str, tuple[bool, float, str]]
    #: the events that bring each tunnel to its state now
    tunnels: dict[str, list[dict[str, Any]]]


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._sending = gevent.lock.Semaphore()

    def send(self, kind: str, body: object = None) -> None:
        """Send one message; raises :class:`ChannelClosed` when the other end is gone."""
        data = pickle.dumps((kind, body), protocol=pickle.HIGHEST_PROTOCOL)
        with self._sending:
            try:
                self.sock.sendall(_LENGTH.pack(len(data)) + data)
            except OSError as exc:
                raise ChannelClosed(str(exc)) from None

    def receive(self) -> tuple[str, Any]:
        """The next message; raises :class:`ChannelClosed` at the end."""
        (length,) = _LENGTH.unpack(self._exactly(_LENGTH.size))
        if length > MAX_MESSAGE_BYTES:
            raise ChannelClosed(f"a control message of {length} bytes")
        kind, body = pickle.loads(self._exactly(length))
        return str(kind), body

    def _exactly(self, n: int) -> bytes:
        chunks: list[bytes] = []
        while n:
            try:
                data = self.sock.recv(min(n, 1 << 20))
            except OSError as exc:
                raise ChannelClosed(str(exc)) from None
            if not data:
                raise ChannelClosed("closed")
            chunks.append(data)
            n -= len(data)
        return b"".join(chunks)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
