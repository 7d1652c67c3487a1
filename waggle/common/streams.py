"""A connected socket as the stream a :class:`~waggle.hms.wire.Wire` reads and writes with, over gevent's public API.

:class:`SocketStream` wraps a gevent socket, or one of the socket-likes the security layer makes of one (a TLS
socket, a SASL socket): ``recv``, ``send`` and ``sendall`` are the socket's own (no call in between), and the rest
of a connection's life (its timeout, whether it is readable, shutdown, close) goes through the stream.

Before each message, a :class:`~waggle.hms.wire.Wire` waits for it (``wait_readable``) rather than trying a
``recv`` first: the next request or reply is rarely there yet (a client still reading the last answer, a metastore
still working), and a try that finds nothing costs a failed ``recv`` and an exception, about 1 us a message. On a
plain gevent socket the wait is one io watcher of the hub's loop, made once per stream, under the socket's
timeout (``TimeoutError``, as ``recv`` raises). A TLS or SASL socket may hold bytes already read, which no
watcher sees: it is not waited for, and its ``recv`` waits as it always does.

Whatever closes a stream from another greenlet must close the stream, not its socket: :meth:`SocketStream.close`
cancels the wait and closes the stream's watcher first, so a greenlet blocked in ``wait_readable`` is woken with
the ``OSError`` a blocked ``recv`` gets when its socket is closed under it. A shutdown needs nothing of the kind:
it makes the socket readable.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import gevent
import gevent.socket
from gevent import monkey
from gevent.exceptions import ConcurrentObjectUseError

# The unpatched poll: a zero-timeout readiness check needs no trip through the gevent hub.
_poll = monkey.get_original("select", "poll")
_POLLIN = 0x001 | 0x008 | 0x010  # POLLIN | POLLERR | POLLHUP
_READ = 1  # the event loop's read event (EV_READ / UV_READABLE)


class SocketStream:
    """A connected socket as a :class:`~waggle.hms.wire.Channel`. Read by one greenlet at a time."""

    __slots__ = ("_hub", "_poller", "_timeout", "_watcher", "recv", "send", "sendall", "sock", "wait_readable")

    recv: Callable[[int], bytes]
    send: Callable[[bytes | memoryview], int]
    sendall: Callable[[bytes | memoryview], None]
    #: returns once ``recv`` would not block; nothing for a socket-like that may hold bytes already read
    wait_readable: Callable[[], None]

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.recv = sock.recv
        self.send = sock.send
        self.sendall = sock.sendall
        self._timeout: float | None = sock.gettimeout()
        self._poller: Any = None
        self._hub: Any = None
        self._watcher: Any = None
        if type(sock) is gevent.socket.socket:  # a plain gevent socket: nothing is read ahead of recv
            self._hub = gevent.get_hub()
            self._watcher = self._hub.loop.io(sock.fileno(), _READ)
            self.wait_readable = self._wait
        else:
            self.wait_readable = _no_wait

    def _wait(self) -> None:
        watcher = self._watcher
        if watcher is None:
            return  # closed: recv says so
        if watcher.callback is not None:
            raise ConcurrentObjectUseError(f"another greenlet is already waiting to read {self.sock!r}")
        seconds = self._timeout
        if seconds is None:
            self._hub.wait(watcher)
        else:
            with gevent.Timeout(seconds, TimeoutError("timed out")):
                self._hub.wait(watcher)

    def settimeout(self, seconds: float | None) -> None:
        self.sock.settimeout(seconds)
        self._timeout = seconds

    def readable(self) -> bool:
        """Whether ``recv`` has something to return now (bytes, the end, an error): one non-blocking ``poll``
        of the socket, without touching the event loop. A closed socket is readable (its ``recv`` fails)."""
        poller = self._poller
        if poller is None:
            try:
                fd = self.sock.fileno()
            except (OSError, ValueError):
                return True
            if fd < 0:
                return True
            poller = self._poller = _poll()
            poller.register(fd, _POLLIN)
        try:
            return bool(poller.poll(0))
        except (OSError, ValueError):
            return True

    def shutdown(self) -> None:
        """End both directions: a ``recv`` (or a wait) blocked in another greenlet returns, with the end."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        """Close the socket, waking first a greenlet waiting for it to be readable (as closing a gevent socket
        wakes its own waiters): it gets the ``OSError`` of a socket closed in another greenlet."""
        watcher = self._watcher
        if watcher is not None:
            self._watcher = None
            # the waiter gets the error first, then the watcher is closed (its native part released), before the
            # socket's own close releases the descriptor (gevent defers that while a watcher of it is active)
            self._hub.cancel_wait(watcher, gevent.socket.cancel_wait_ex, True)
        try:
            self.sock.close()
        except OSError:
            pass

    def __repr__(self) -> str:
        return f"<SocketStream {self.sock!r}>"


def _no_wait() -> None:
    """A TLS or SASL socket's wait: none (its ``recv`` waits, and may have bytes read already)."""
