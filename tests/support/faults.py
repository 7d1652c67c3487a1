"""Network faults on loopback, for the failure tests: a peer that never answers, one that hangs up
mid-call, and a slow link in front of a real metastore. None of them pretends to be a metastore."""

from __future__ import annotations

import socket
import threading
import time


class _Listener:
    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._conns: list[socket.socket] = []
        self._stop = False
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def _accept_loop(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self._conns.append(conn)
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._stop = True
        self.sock.close()
        for c in self._conns:
            try:
                c.close()
            except OSError:
                pass


class BlackHole(_Listener):
    """Accepts connections and reads requests, but never answers."""

    def handle(self, conn: socket.socket) -> None:
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass


class HangUp(_Listener):
    """Reads the first bytes of a request, then closes the connection (a peer dying mid-call)."""

    def handle(self, conn: socket.socket) -> None:
        try:
            conn.recv(16)
        finally:
            conn.close()


class SlowLink(_Listener):
    """A TCP relay to a real server that holds every reply back for ``delay`` seconds (changeable at any time),
    but replies to requests naming a method in ``spare`` (``getStatus``: a slow call to a metastore that answers
    its health checks). :meth:`holding` and :meth:`held` count the replies held back now and so far: a test waits
    on them to know that a call is in flight."""

    def __init__(self, target_port: int, delay: float, spare: tuple[str, ...] = ()) -> None:
        self.target_port = target_port
        self.delay = delay
        self.spare = tuple(method.encode() for method in spare)
        self._holding: list[bytes] = []  # the requests whose replies are held back now
        self._held: list[bytes] = []  # every request whose reply was held back
        self._lock = threading.Lock()
        super().__init__()

    def holding(self, method: str = "") -> int:
        """How many replies are held back now (to requests naming ``method``, if given: health checks call
        ``getStatus`` through the link too)."""
        with self._lock:
            return sum(1 for request in self._holding if method.encode() in request)

    def held(self, method: str = "") -> int:
        """How many replies were held back so far (to requests naming ``method``, if given)."""
        with self._lock:
            return sum(1 for request in self._held if method.encode() in request)

    def handle(self, conn: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.target_port))
        last = [b""]  # the latest request on this connection

        def pump(src: socket.socket, dst: socket.socket, replies: bool) -> None:
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    if not replies:
                        last[0] = data
                    elif self.delay and not any(method in last[0] for method in self.spare):
                        request = last[0]
                        with self._lock:
                            self._holding.append(request)
                            self._held.append(request)
                        try:
                            time.sleep(self.delay)
                        finally:
                            with self._lock:
                                self._holding.remove(request)
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.close()
                    except OSError:
                        pass

        threading.Thread(target=pump, args=(conn, upstream, False), daemon=True).start()
        pump(upstream, conn, True)


class TruncatedReply(_Listener):
    """Answers every call with the start of a long, valid-looking reply, then hangs up mid-message; but a health
    check (``getStatus``) is answered ``ALIVE``, as a metastore that breaks on large replies would answer it."""

    def handle(self, conn: socket.socket) -> None:
        import struct

        try:
            request = conn.recv(65536)
            if b"getStatus" in request:
                (length,) = struct.unpack("!i", request[4:8])
                (seqid,) = struct.unpack("!i", request[8 + length:12 + length])
                name = b"getStatus"
                conn.sendall(struct.pack("!Ii", 0x80010002, len(name)) + name + struct.pack("!i", seqid)
                             + struct.pack("!bhi", 8, 0, 2) + b"\x00")  # field 0, i32: fb_status.ALIVE
                return
            name = b"get_all_databases"
            head = struct.pack("!Ii", 0x80010002, len(name)) + name + struct.pack("!i", 0)
            # field 0: list<string> of 100,000 names; only the first ~200 KB are ever sent
            body = struct.pack("!bhbi", 15, 0, 11, 100_000)
            body += b"".join(struct.pack("!i", 10) + b"database_x" for _ in range(15_000))
            conn.sendall(head + body)
        except OSError:
            pass
        finally:
            conn.close()
