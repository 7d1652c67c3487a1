"""Two connected in-memory streams, like h11's paired connections: what one end sends, the other receives.

Each end is a :class:`~waggle.hms.wire.Channel` (what a :class:`~waggle.hms.wire.Wire`, the client driver and an
upstream connection hold), and cooperates with gevent as a gevent socket does: ``recv`` and ``wait_readable``
block the calling greenlet on a gevent event until bytes arrive, the peer closes or shuts down (``recv`` then
returns ``b""``), or the end's timeout passes (``TimeoutError``, as a socket's). Closing an end wakes a greenlet
blocked on it with the ``OSError`` of a socket closed in another greenlet. Sends never block: the buffer has no
bound.
"""

from __future__ import annotations

import errno

import gevent.event


class MemoryStream:
    """One end of a :func:`pair`."""

    def __init__(self, name: str, timeout: float | None = None) -> None:
        self.name = name
        self.peer: MemoryStream = self
        self._inbox = bytearray()
        self._arrived = gevent.event.Event()
        self._timeout = timeout
        self._eof = False  # nothing more will arrive: the peer closed or either end shut down
        self._sending = True  # this end may send
        self.closed = False

    def __repr__(self) -> str:
        return f"<MemoryStream {self.name}{' closed' if self.closed else ''}>"

    # -- reading -----------------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.closed:
            raise OSError(errno.EBADF, "Bad file descriptor")

    def wait_readable(self) -> None:
        self._check_open()
        while not self._inbox and not self._eof:
            self._arrived.clear()
            if not self._arrived.wait(self._timeout):
                raise TimeoutError("timed out")
            if self.closed:
                raise OSError(errno.EBADF, "File descriptor was closed in another greenlet")

    def recv(self, n: int, /) -> bytes:
        self.wait_readable()
        data = bytes(self._inbox[:n])
        del self._inbox[:n]
        return data

    def readable(self) -> bool:
        return self.closed or self._eof or bool(self._inbox)

    # -- writing -----------------------------------------------------------------------------------------------
    def send(self, data: bytes | memoryview, /) -> int:
        self._check_open()
        peer = self.peer
        if not self._sending or peer.closed:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")
        peer._inbox += data
        peer._arrived.set()
        return len(data)

    def sendall(self, data: bytes | memoryview, /) -> None:
        self.send(data)

    # -- the connection ----------------------------------------------------------------------------------------
    def settimeout(self, seconds: float | None, /) -> None:
        self._timeout = seconds

    def gettimeout(self) -> float | None:
        return self._timeout

    def shutdown(self) -> None:
        """Both directions end: this end's reads (and the peer's, once it has read what was sent) see the end."""
        self._sending = False
        self._eof = True
        self._arrived.set()
        peer = self.peer
        peer._eof = True
        peer._arrived.set()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._arrived.set()  # a greenlet blocked on this end: woken, it finds the end closed
        peer = self.peer
        peer._eof = True
        peer._arrived.set()


def pair(timeout: float | None = None, names: tuple[str, str] = ("a", "b")) -> tuple[MemoryStream, MemoryStream]:
    """Two connected streams; ``timeout`` (seconds) bounds every wait on either, as a socket's timeout does."""
    a, b = MemoryStream(names[0], timeout), MemoryStream(names[1], timeout)
    a.peer, b.peer = b, a
    return a, b
