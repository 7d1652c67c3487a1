"""One load-generator process for bench/bench_load.py: closed-loop Thrift clients on raw sockets, far cheaper per
call than what they measure.

    python bench/load_generator.py SPEC_JSON

SPEC: ``port``, ``connections``, ``requests`` (hex of pre-encoded calls, strict binary and unframed, sent in turn
on every connection, each starting at its own offset), ``ugi`` (hex of a ``set_ugi`` call made once per
connection first, or empty), ``latencies`` (a file for the measured latencies, float64 seconds).

It opens its connections (each: connect, ``set_ugi``), prints ``ready`` and loads at once (the warm-up). One
epoll loop: a reply that is byte for byte the last good reply to the same request is done (the usual case, a
``memcmp``); any other is parsed just far enough to find its end (bench/thrift_bytes.py) and checked for an
exception. Commands on stdin: ``go`` starts counting calls and their latencies; ``stop`` stops, writes the
latencies and prints one JSON line (calls, seconds, errors, connections lost) once the calls in flight are
answered (at most 5 s), so every connection ends cleanly. EOF on stdin stops it too.
"""

from __future__ import annotations

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


def read_reply(sock: socket.socket) -> bytes:
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before answering set_ugi")
        data += chunk
        parsed = message_end(data)
        if parsed is not None:
            if not is_success(data, parsed):
                raise ConnectionError("set_ugi answered with an exception")
            return data


def main() -> int:
    spec = json.loads(sys.argv[1])
    requests = [bytes.fromhex(r) for r in spec["requests"]]
    ugi = bytes.fromhex(spec.get("ugi", ""))
    nreq = len(requests)
    socks: dict[int, socket.socket] = {}
    kinds = [0] * (1 << 16)  # by file descriptor
    for i in range(spec["connections"]):
        s = socket.create_connection(("127.0.0.1", spec["port"]), timeout=60)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ugi:
            s.sendall(ugi)
            read_reply(s)
        s.setblocking(False)
        socks[s.fileno()] = s
        kinds[s.fileno()] = (i + spec.get("offset", 0)) % nreq
    ep = select.epoll()
    cfd = sys.stdin.fileno()
    ep.register(cfd, select.EPOLLIN)
    for fd in socks:
        ep.register(fd, select.EPOLLIN)
    expected: list[bytes | None] = [None] * nreq
    pending: dict[int, bytes] = {}
    t0 = [0.0] * (1 << 16)
    lat = array("d")
    perf = time.perf_counter
    measuring = stopping = False
    errors = lost = 0
    started = stopped = 0.0
    in_flight = len(socks)
    control = b""
    print("ready", flush=True)
    for fd, s in socks.items():
        t0[fd] = perf()
        s.send(requests[kinds[fd]])
    while not stopping or (in_flight and perf() - stopped < 5):
        for fd, _ in ep.poll(0.5):
            sock = socks.get(fd)
            if sock is None:
                if fd != cfd or stopping:
                    continue
                data = os.read(cfd, 4096)
                control += data
                if b"go\n" in control and not measuring:
                    measuring, started = True, perf()
                    lat = array("d")
                    errors = lost = 0
                if b"stop\n" in control or not data:
                    stopping, measuring, stopped = True, False, perf()
                    ep.unregister(cfd)
                continue
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                ep.unregister(fd)
                del socks[fd]
                sock.close()
                lost += 1
                in_flight -= 1
                continue
            if fd in pending:
                data = pending.pop(fd) + data
            k = kinds[fd]
            if data != expected[k]:
                parsed = message_end(data)
                if parsed is None:
                    pending[fd] = data
                    continue
                if parsed[0] != len(data):
                    raise SystemExit(f"{len(data) - parsed[0]} bytes after a reply: the server answered too much")
                if is_success(data, parsed):
                    expected[k] = data
                elif measuring:
                    errors += 1
            now = perf()
            if measuring:
                lat.append(now - t0[fd])
            elif stopping:  # drained: the reply in flight is in, the connection ends cleanly
                in_flight -= 1
                continue
            k = kinds[fd] = (k + 1) % nreq
            t0[fd] = now
            sock.send(requests[k])
    for sock in socks.values():
        sock.close()
    if not started:
        started = stopped
    Path(spec["latencies"]).write_bytes(lat.tobytes())
    print(json.dumps({"calls": len(lat), "seconds": stopped - started, "errors": errors, "lost": lost}), flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(1)
