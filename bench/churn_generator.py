"""One connection-churn load-generator process for bench/bench_clients.py: closed-loop clients that each open a
connection per operation, as Trino's Hive connector does, on raw non-blocking sockets in one epoll loop.

    python bench/churn_generator.py SPEC_JSON

SPEC: ``port``, ``clients`` (concurrent clients), ``ugi`` (hex of a ``set_ugi`` call), ``request`` (hex of the
one call each operation makes; strict binary, unframed), ``latencies`` (a file for the measured operation times,
float64 seconds).

Each client loops: connect (TCP), ``set_ugi``, the call, close; then again at once. A reply that is byte for byte
the last good reply to the same request is done (the usual case); any other is parsed just far enough to find its
end (bench/thrift_bytes.py) and checked for an exception. It prints ``ready`` and loads at once (the warm-up).
Commands on stdin: ``go`` starts counting operations (those that finish while counting) and their times;
``stop`` stops starting new ones, lets those in flight finish (at most 5 s) and prints one JSON line (operations,
seconds, errors). EOF on stdin stops it too.
"""

from __future__ import annotations

import errno
import json
import os
import select
import socket
import sys
import time
from array import array
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.thrift_bytes import is_success, message_end

CONNECTING, UGI, CALL = 0, 1, 2


def main() -> int:
    spec = json.loads(sys.argv[1])
    address = ("127.0.0.1", int(spec["port"]))
    messages = (bytes.fromhex(spec["ugi"]), bytes.fromhex(spec["request"]))
    expected: list[bytes | None] = [None, None]
    ep = select.epoll()
    cfd = sys.stdin.fileno()
    ep.register(cfd, select.EPOLLIN)
    socks: dict[int, socket.socket] = {}
    phase: dict[int, int] = {}
    began: dict[int, float] = {}
    pending: dict[int, bytes] = {}
    perf = time.perf_counter
    lat = array("d")
    measuring = stopping = False
    errors = 0
    started = stopped = 0.0
    control = b""

    def open_one() -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        fd = s.fileno()
        socks[fd], phase[fd], began[fd] = s, CONNECTING, perf()
        code = s.connect_ex(address)
        if code not in (0, errno.EINPROGRESS):
            raise SystemExit(f"connect: {os.strerror(code)}")
        ep.register(fd, select.EPOLLOUT)

    def end(fd: int, ok: bool) -> None:
        nonlocal errors
        ep.unregister(fd)
        socks.pop(fd).close()
        t0 = began.pop(fd)
        del phase[fd]
        pending.pop(fd, None)
        if measuring:
            if ok:
                lat.append(perf() - t0)
            else:
                errors += 1
        if not stopping:
            open_one()

    for _ in range(spec["clients"]):
        open_one()
    print("ready", flush=True)
    while socks or not stopping:
        if stopping and perf() - stopped > 5:
            break
        for fd, events in ep.poll(0.5):
            if fd == cfd:
                data = os.read(cfd, 4096)
                control += data
                if b"go\n" in control and not measuring and not stopping:
                    measuring, started = True, perf()
                    lat = array("d")
                    errors = 0
                if b"stop\n" in control or not data:
                    stopping, measuring, stopped = True, False, perf()
                    ep.unregister(cfd)
                continue
            sock = socks.get(fd)
            if sock is None:
                continue
            state = phase[fd]
            if state == CONNECTING:
                if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) or events & (select.EPOLLERR | select.EPOLLHUP):
                    end(fd, False)
                    continue
                phase[fd] = UGI
                ep.modify(fd, select.EPOLLIN)
                sock.send(messages[0])
                continue
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                end(fd, False)
                continue
            if fd in pending:
                data = pending.pop(fd) + data
            k = state - 1
            if data != expected[k]:
                parsed = message_end(data)
                if parsed is None:
                    pending[fd] = data
                    continue
                if parsed[0] != len(data) or not is_success(data, parsed):
                    end(fd, False)
                    continue
                expected[k] = data
            if state == UGI:
                phase[fd] = CALL
                sock.send(messages[1])
            else:
                end(fd, True)
    for sock in socks.values():
        sock.close()
    Path(spec["latencies"]).write_bytes(lat.tobytes())
    print(json.dumps({"ops": len(lat), "seconds": (stopped - started) if started else 0.0, "errors": errors}),
          flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(1)
