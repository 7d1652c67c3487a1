"""A stub metastore (answers from memory): an upstream far cheaper per call than waggle, so that waggle is what a
load test saturates.

    python bench/stub_metastore.py PORT [--database bench_db] [--table small]

One process, one thread, one epoll loop over plain non-blocking sockets on 127.0.0.1. The wire is the real
metastore's (Hive 2.3's default): unframed, strict ``TBinaryProtocol``. Every answer is encoded once at start-up;
a call costs a dictionary lookup (a request seen before, byte for byte, seqid included: the usual case, since
waggle relays its clients' requests) and one ``send``; a new one, finding where its message ends
(bench/thrift_bytes.py) and patching its seqid into the pre-encoded reply. It answers, whatever the arguments:

* ``set_ugi``: ``["bench"]``;
* fb303 ``getStatus``: ``ALIVE`` (waggle's health checks);
* ``get_all_databases``: ``["default", DATABASE]``;
* ``get_database``: DATABASE;
* ``get_table``: TABLE of DATABASE (an external text table, two columns, as bench/bench_proxy.py seeds it);

and anything else with ``TApplicationException(UNKNOWN_METHOD)``, as a Java Thrift server answers a method it
does not have. On stdin, the line ``stats`` prints one JSON line: connections accepted, calls answered by method.
EOF on stdin (the bench went away) stops it.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import sys
from pathlib import Path
from struct import pack

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.Thrift import TApplicationException, TMessageType
from thrift.transport.TTransport import TMemoryBuffer

from bench.thrift_bytes import CALL, ONEWAY, message_end
from waggle.hms.gen.fb303 import FacebookService
from waggle.hms.gen.fb303.ttypes import fb_status
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore, ttypes
from waggle.local.seed import text_sd


def encode(name: str, mtype: int, result: object) -> tuple[bytes, bytes]:
    """A message with seqid 0, split around the seqid: (everything before it, everything after it)."""
    buf = TMemoryBuffer()
    proto = TBinaryProtocol(buf)
    proto.writeMessageBegin(name, mtype, 0)
    result.write(proto)  # type: ignore[attr-defined]
    proto.writeMessageEnd()
    raw = buf.getvalue()
    head = 8 + len(name.encode())
    return raw[:head], raw[head + 4:]


def replies(database: str, table: str) -> dict[bytes, tuple[bytes, bytes]]:
    location = f"file:/tmp/stub-warehouse/{database}.db"
    db = ttypes.Database(name=database, description=None, locationUri=location, parameters={},
                         ownerName="bench", ownerType=ttypes.PrincipalType.USER)
    tbl = ttypes.Table(
        tableName=table, dbName=database, owner="bench", createTime=1700000000, lastAccessTime=0, retention=0,
        sd=text_sd(f"{location}/{table}", [("id", "int"), ("name", "string")]), partitionKeys=[],
        parameters={"EXTERNAL": "TRUE", "transient_lastDdlTime": "1700000000"}, tableType="EXTERNAL_TABLE",
        privileges=None, temporary=False, rewriteEnabled=False,
    )
    m = ThriftHiveMetastore
    answers: dict[str, object] = {
        "set_ugi": m.set_ugi_result(success=["bench"]),
        "getStatus": FacebookService.getStatus_result(success=fb_status.ALIVE),
        "get_all_databases": m.get_all_databases_result(success=["default", database]),
        "get_database": m.get_database_result(success=db),
        "get_table": m.get_table_result(success=tbl),
    }
    return {name.encode(): encode(name, TMessageType.REPLY, r) for name, r in answers.items()}


def unknown(name: bytes) -> tuple[bytes, bytes]:
    text = name.decode(errors="replace")
    return encode(text, TMessageType.EXCEPTION,
                  TApplicationException(TApplicationException.UNKNOWN_METHOD, f"Invalid method name: '{text}'"))


class Stub:
    def __init__(self, port: int, database: str, table: str) -> None:
        self.replies = replies(database, table)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(4096)
        self.listener.setblocking(False)
        self.accepted = 0
        self.calls: dict[str, int] = {}

    def serve(self) -> None:
        ep = select.epoll()
        lfd, cfd = self.listener.fileno(), sys.stdin.fileno()
        ep.register(lfd, select.EPOLLIN)
        ep.register(cfd, select.EPOLLIN)
        socks: dict[int, socket.socket] = {}
        pending: dict[int, bytes] = {}
        replies, calls = self.replies, self.calls
        #: whole request -> whole reply: a relayed request repeats byte for byte (seqid included)
        known: dict[bytes, tuple[str, bytes]] = {}
        control = b""
        while True:
            for fd, _ in ep.poll():
                sock = socks.get(fd)
                if sock is None:
                    if fd == lfd:
                        while True:
                            try:
                                conn, _ = self.listener.accept()
                            except BlockingIOError:
                                break
                            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                            conn.setblocking(False)
                            socks[conn.fileno()] = conn
                            ep.register(conn.fileno(), select.EPOLLIN)
                            self.accepted += 1
                    elif fd == cfd:
                        data = os.read(cfd, 4096)
                        if not data:
                            return
                        control += data
                        while b"\n" in control:
                            line, control = control.split(b"\n", 1)
                            if line.strip() == b"stats":
                                print(json.dumps({"accepted": self.accepted, "open": len(socks), "calls": calls}),
                                      flush=True)
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
                    pending.pop(fd, None)
                    sock.close()
                    continue
                if fd in pending:
                    data = pending.pop(fd) + data
                hit = known.get(data)
                if hit is not None:
                    calls[hit[0]] += 1
                    try:
                        if sock.send(hit[1]) == len(hit[1]):
                            continue
                    except OSError:
                        continue
                    raise SystemExit("stub: a reply did not fit in the socket's buffer")
                pos, out = 0, []
                while True:
                    parsed = message_end(data, pos)
                    if parsed is None:
                        break
                    pos, mtype, name, seqid, _ = parsed
                    key = name.decode(errors="replace")
                    calls[key] = calls.get(key, 0) + 1
                    if mtype == ONEWAY:
                        continue
                    if mtype != CALL:
                        raise SystemExit(f"stub: message type {mtype} from a client")
                    answer = replies.get(name)
                    if answer is None:
                        answer = replies[name] = unknown(name)
                    out.append(answer[0] + pack(">i", seqid) + answer[1])
                    if pos == len(data) and len(out) == 1 and len(known) < 10000:
                        known[bytes(data)] = (key, out[0])
                if pos < len(data):
                    pending[fd] = data[pos:]
                if out:
                    reply = out[0] if len(out) == 1 else b"".join(out)
                    try:
                        sent = sock.send(reply)
                    except OSError:
                        sent = len(reply)  # the peer is gone; its EOF comes next
                    if sent < len(reply):  # rare: a full socket buffer
                        sock.setblocking(True)
                        sock.sendall(reply[sent:])
                        sock.setblocking(False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("port", type=int)
    ap.add_argument("--database", default="bench_db")
    ap.add_argument("--table", default="small")
    args = ap.parse_args()
    stub = Stub(args.port, args.database, args.table)
    print("ready", flush=True)
    try:
        stub.serve()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
