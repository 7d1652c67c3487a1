"""A federated metastore behind two SSH hops: direct, through the tunnel alone, and through waggle, in one run.

    python bench/bench_tunnel.py [--rounds 1000] [--big-rounds 20] [--partitions 3000] [--connects 20]

Starts a local Derby-backed Hive 2.3 metastore (Java 17 and pyspark needed) and two real OpenSSH sshd hops on
127.0.0.2 and 127.0.0.3 (tests/support/sshd.py; root and openssh-server needed). Routes, measured in random order
each round:

* **direct**: the metastore itself;
* **tunnel alone**: waggle's tunnel helper (``python -m waggle.tunnel``), two hops, no proxy;
* **waggle, direct member**: waggle with the metastore as a federated member behind ``bench_`` (names
  rewritten);
* **waggle, tunnelled member**: the same, with the member reached through the two hops.

Then the cost of a new client connection's first call: through waggle (its shared tunnel and pool) against
building a fresh two-hop SSH chain for the connection, as a tunnel per client connection would. And the
resident memory of waggle and of the tunnel helper.
"""

from __future__ import annotations

import argparse
import getpass
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_proxy import DB, PREFIX, Route, measure, pct, seed, start_waggle, stop_processes
from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport

from tests.support.sshd import Sshd, keygen, write_known_hosts
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
from waggle.local.client import hms_client
from waggle.local.jvm import free_port
from waggle.local.metastore import LocalMetastore
from waggle.tunnel.forward import connect_chain
from waggle.tunnel.spec import Hop, TunnelSpec


def client_over(sock: socket.socket) -> tuple[Any, Any]:
    transport = TBufferedTransport(TSocket())
    transport._TBufferedTransport__trans.handle = sock  # an already-connected socket
    return ThriftHiveMetastore.Client(TBinaryProtocolAccelerated(transport)), transport


def tunnel_client(port: int) -> tuple[Any, Any]:
    """A client of the helper's forwarded port: the status line first, then plain Thrift."""
    sock = socket.create_connection(("127.0.0.1", port))
    assert sock.recv(3) == b"OK\n"
    sock.settimeout(600)
    return client_over(sock)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--big-rounds", type=int, default=20)
    ap.add_argument("--partitions", type=int, default=3000)
    ap.add_argument("--connects", type=int, default=20)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="waggle-bench-tunnel-"))
    procs: list[subprocess.Popen[Any]] = []
    servers: list[Sshd] = []
    store = LocalMetastore(work / "hms", fast_start=False, heap="2g").start().wait_ready()
    try:
        seed("127.0.0.1", store.port, args.partitions, work / "warehouse")
        key = keygen(work / "id_bench")
        ssh_port = free_port("127.0.0.2", "127.0.0.3")
        servers = [Sshd(work / f"hop{i}", addr, ssh_port, [key]).start()
                   for i, addr in enumerate(("127.0.0.2", "127.0.0.3"), 1)]
        known = write_known_hosts(work / "known_hosts", *servers)
        me = getpass.getuser()
        spec = TunnelSpec("far", tuple(Hop(me, s.address, ssh_port) for s in servers), (str(key),), str(known),
                          True, 10000, (("127.0.0.1", store.port),), "127.0.0.1")
        helper = subprocess.Popen([sys.executable, "-m", "waggle.tunnel"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        procs.append(helper)
        assert helper.stdin is not None and helper.stdout is not None
        helper.stdin.write(spec.to_json() + "\n")
        helper.stdin.flush()
        helper_port = json.loads(helper.stdout.readline())["port"]
        tunnel_yaml = (f"    metastore-tunnel:\n      route: {' -> '.join(f'{me}@{s.address}' for s in servers)}\n"
                       f"      private-keys: {key}\n      known-hosts: {known}\n      port: {ssh_port}\n")
        plain, plain_port = start_waggle(work / "plain", store.uri, prefixed=True)
        tunnelled, tunnelled_port = start_waggle(work / "tunnelled", store.uri, prefixed=True,
                                                 member_extra=tunnel_yaml)
        procs += [plain, tunnelled]

        tunnel, tunnel_transport = tunnel_client(helper_port)
        with hms_client("127.0.0.1", store.port, timeout=600) as direct, \
                hms_client("127.0.0.1", plain_port, timeout=600) as via_plain, \
                hms_client("127.0.0.1", tunnelled_port, timeout=600) as via_tunnel:
            routes = [Route("direct", direct, DB), Route("tunnel alone (2 hops)", tunnel, DB),
                      Route("waggle, direct member", via_plain, PREFIX + DB),
                      Route("waggle, tunnelled member", via_tunnel, PREFIX + DB)]
            cases = [("get_database", lambda c, db: c.get_database(db), args.rounds),
                     ("get_table", lambda c, db: c.get_table(db, "small"), args.rounds),
                     (f"get_partitions x{args.partitions}", lambda c, db: c.get_partitions(db, "parts", -1),
                      args.big_rounds)]
            for _, call, rounds in cases:  # warm up the metastore's JIT and every connection
                for _ in range(max(5, rounds // 4)):
                    for r in routes:
                        call(r.client, r.db)
            print(f"\n{'call':<22}{'route':<28}{'p50 ms':>9}{'vs direct':>11}{'p99 ms':>9}")
            for label, call, rounds in cases:
                times = measure(routes, call, rounds)
                d50 = pct(times[0], 0.5)
                for r, t in zip(routes, times, strict=True):
                    print(f"{label:<22}{r.label:<28}{pct(t, 0.5):>9.3f}{pct(t, 0.5) / d50:>10.2f}x"
                          f"{pct(t, 0.99):>9.3f}")
                    label = ""
        tunnel_transport.close()

        # a new client connection's first call: waggle's shared tunnel, or a new SSH chain per connection
        pooled, per_connection = [], []
        for _ in range(args.connects):
            t = time.perf_counter()
            with hms_client("127.0.0.1", tunnelled_port, timeout=60) as c:
                c.get_database(PREFIX + DB)
            pooled.append(time.perf_counter() - t)
            t = time.perf_counter()
            chain = connect_chain(spec, lambda event: None)
            channel = chain.open_channel(("127.0.0.1", store.port), 10)
            client, _ = client_over(channel)  # a paramiko channel is socket-like enough for TSocket
            client.get_database(DB)
            chain.close()
            per_connection.append(time.perf_counter() - t)
        print(f"\nnew client connection + first get_database, p50 of {args.connects}:")
        print(f"  through waggle (shared tunnel, pooled):   {pct(pooled, 0.5):8.2f} ms")
        print(f"  a new 2-hop SSH chain for the connection: {pct(per_connection, 0.5):8.2f} ms  "
              f"({pct(per_connection, 0.5) / pct(pooled, 0.5):.0f}x)")
        print(f"\nresident memory: waggle {rss_mb(tunnelled.pid):.0f} MB, its tunnel helper "
              f"{sum(rss_mb(int(p)) for p in helper_pids(tunnelled.pid)):.0f} MB")
    finally:
        stop_processes(procs)
        for s in servers:
            s.stop()
        store.stop()
    return 0


def helper_pids(parent: int) -> list[str]:
    out = subprocess.run(["pgrep", "-P", str(parent), "-f", "waggle.tunnel"], capture_output=True, text=True)
    return out.stdout.split()


if __name__ == "__main__":
    sys.exit(main())
