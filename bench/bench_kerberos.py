"""The cost of waggle's Kerberos front door: the SASL GSSAPI handshake per connection, and the framing per call.

    python bench/bench_kerberos.py [--connections 200] [--calls 3000] [--quick] [--metastore thrift://host:port]

One run starts a real MIT KDC (waggle.local.kdc.LocalKdc, Debian's krb5-kdc, krb5-admin-server and krb5-user
needed) and, without ``--metastore``, a local Derby-backed Hive 2.3 metastore (Java 17 and pyspark needed).
The metastore is plain: the point is the front door's cost, not the upstream's. Two waggles run as
subprocesses through the real CLI, in front of that one metastore:

* **plain**: no SASL, no Kerberos.
* **SASL**: ``hive.metastore.sasl.enabled`` with a keytab for ``waggle/localhost``, offering every protection
  level (``hadoop.rpc.protection: authentication,integrity,privacy``); each client picks ``auth``,
  ``auth-int`` or ``auth-conf``.

The client has a ticket cache from ``kinit``; the service ticket for waggle lands in it on the first
connection, so later handshakes do not talk to the KDC. Every route uses the same small Thrift client: a
socket (wrapped, after the negotiation, in waggle's own ``SaslSocket`` with waggle's ``GssapiClient``) under
``TBufferedTransport`` and the accelerated binary protocol. So the figures are the whole cost a client sees,
its own framing and wrapping included.

1. **Handshake**: ``--connections`` times each, in random order: a plain TCP connect to the plain waggle; a
   TCP connect plus the SASL GSSAPI negotiation (``auth``) to the SASL waggle; and each of those followed by
   one ``get_all_databases`` (a new connection's whole cost until its first answer).
2. **Per call**: one connection per route, ``--calls`` rounds after a warm-up; each round makes the call once on
   every route in random order, so all see the same machine state. Routes: direct to the metastore, the plain
   waggle, and the SASL waggle with ``auth``, ``auth-int`` and ``auth-conf``. The table prints mean, p50 and
   p99 in ms, and what each adds to the plain waggle. Target: ``auth`` adds at most 0.05 ms to a small call.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gssapi
from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
from thrift.transport.TTransport import TBufferedTransport, TTransportBase, TTransportException

from bench.cpu_cost import cpu_seconds
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
from waggle.local.jvm import free_port
from waggle.local.kdc import LocalKdc
from waggle.local.metastore import LocalMetastore
from waggle.security.gss import GssapiClient
from waggle.security.sasl import SaslSocket, initiate

SERVICE = "waggle/localhost"
USER = "bench"
TARGET_MS = 0.05
QOPS = ("auth", "auth-int", "auth-conf")


# -- a Thrift client over a plain or a SASL socket ------------------------------------------------------------
class SocketTransport(TTransportBase):
    """A Thrift transport over a connected socket, plain or :class:`SaslSocket`: one ``sendall`` per message."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock

    def isOpen(self) -> bool:
        return True

    def read(self, sz: int) -> bytes:
        data: bytes = self.sock.recv(sz)
        if not data:
            raise TTransportException(TTransportException.END_OF_FILE, "connection closed")
        return data

    def write(self, buf: bytes) -> None:  # TBufferedTransport writes a whole message, then flushes
        self.sock.sendall(buf)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.sock.close()


class Connector:
    """Opens connections to one waggle (or metastore): plain, or SASL GSSAPI at one protection level."""

    def __init__(self, port: int, qop: str | None = None, creds: gssapi.Credentials | None = None,
                 principal: str = "") -> None:
        self.port = port
        self.qop = qop
        self.creds = creds
        self.principal = principal

    def socket(self) -> Any:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.qop is None:
            return sock
        mech = GssapiClient(self.creds, self.principal, (self.qop,))
        try:
            initiate(sock, mech)
        except BaseException:
            sock.close()
            raise
        if mech.qop != self.qop:
            raise SystemExit(f"asked for {self.qop}, negotiated {mech.qop}")
        return SaslSocket(sock, mech, 1 << 30)

    def client(self) -> ThriftHiveMetastore.Client:
        transport = TBufferedTransport(SocketTransport(self.socket()))
        return ThriftHiveMetastore.Client(TBinaryProtocolAccelerated(transport))


def close(client: ThriftHiveMetastore.Client) -> None:
    client._iprot.trans.close()


# -- processes -------------------------------------------------------------------------------------------------
def start_waggle(workdir: Path, uri: str, connector: Callable[[int], Connector], server_extra: str = ""
                 ) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "server.yml").write_text(
        f"port: {port}\nbind-address: 127.0.0.1\nendpoint.port: {free_port()}\n{server_extra}")
    (workdir / "federation.yml").write_text(f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {uri}\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "waggle", "serve", "--server-config", str(workdir / "server.yml"),
         "--federation-config", str(workdir / "federation.yml")],
        stdout=subprocess.DEVNULL, stderr=open(workdir / "waggle.log", "wb"), cwd=ROOT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            c = connector(port).client()
            try:
                c.get_all_databases()
            finally:
                close(c)
            return proc, port
        except Exception:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("waggle did not start; see " + str(workdir / "waggle.log"))


def stop_processes(procs: list[subprocess.Popen[Any]]) -> None:
    for p in procs:
        p.terminate()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()


# -- statistics ------------------------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000


def mean_ms(values: list[float]) -> float:
    return statistics.fmean(values) * 1000


def paired_ms(a: list[float], b: list[float]) -> float:
    """The median of ``a[i] - b[i]``, the two measured in the same round: robust to what else the machine does."""
    return statistics.median(x - y for x, y in zip(a, b, strict=True)) * 1000


# -- 1. handshakes ---------------------------------------------------------------------------------------------
def handshakes(plain: Connector, sasl: Connector, n: int) -> None:
    def connect_only(c: Connector) -> Callable[[], None]:
        return lambda: c.socket().close()

    def first_call(c: Connector) -> Callable[[], None]:
        def run() -> None:
            client = c.client()
            client.get_all_databases()
            close(client)
        return run

    kinds: list[tuple[str, Callable[[], None]]] = [
        ("TCP connect, plain waggle", connect_only(plain)),
        ("TCP connect + SASL GSSAPI (auth)", connect_only(sasl)),
        ("... + first get_all_databases, plain", first_call(plain)),
        ("... + first get_all_databases, SASL", first_call(sasl)),
    ]
    for _, fn in kinds:  # warm-up: the service ticket lands in the cache, code paths load
        for _ in range(5):
            fn()
    times: dict[str, list[float]] = {label: [] for label, _ in kinds}
    for _ in range(n):
        for label, fn in random.sample(kinds, len(kinds)):
            t = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - t)
    print(f"\nhandshake: {n} new connections each, ms")
    print(f"{'':<42}{'p50':>9}{'p90':>9}{'mean':>9}")
    for label, _ in kinds:
        v = times[label]
        print(f"{label:<42}{pct(v, 0.5):>9.3f}{pct(v, 0.9):>9.3f}{mean_ms(v):>9.3f}")
    plain_c, sasl_c = times[kinds[0][0]], times[kinds[1][0]]
    plain_f, sasl_f = times[kinds[2][0]], times[kinds[3][0]]
    print(f"SASL GSSAPI adds {pct(sasl_c, 0.5) - pct(plain_c, 0.5):.3f} ms p50 "
          f"({pct(sasl_c, 0.9) - pct(plain_c, 0.9):.3f} ms p90) to opening a connection; "
          f"{pct(sasl_f, 0.5) - pct(plain_f, 0.5):.3f} ms p50 until the first answer", flush=True)


# -- 2. per call -----------------------------------------------------------------------------------------------
def per_call(routes: list[tuple[str, ThriftHiveMetastore.Client]], label: str,
             call: Callable[[ThriftHiveMetastore.Client], Any], rounds: int) -> dict[str, list[float]]:
    for _ in range(max(300, rounds // 3)):  # warm-up (the metastore's JIT, waggle's caches)
        for _, c in routes:
            call(c)
    times: dict[str, list[float]] = {name: [] for name, _ in routes}
    for _ in range(rounds):
        for name, c in random.sample(routes, len(routes)):
            t = time.perf_counter()
            call(c)
            times[name].append(time.perf_counter() - t)
    base = times["waggle, plain"]
    b_mean, b50, b99 = mean_ms(base), pct(base, 0.5), pct(base, 0.99)
    print(f"\n{label}: {rounds} calls per route on one connection each, ms")
    print(f"{'route':<28}{'mean':>9}{'p50':>9}{'p99':>9}   added to plain waggle:{'mean':>7}{'p50':>9}{'p99':>9}"
          f"{'paired':>9}")
    for name, _ in routes:
        v = times[name]
        m, p50, p99 = mean_ms(v), pct(v, 0.5), pct(v, 0.99)
        added = "" if name == "direct" or name == "waggle, plain" else \
            f"   {'':<22}{m - b_mean:>+7.3f}{p50 - b50:>+9.3f}{p99 - b99:>+9.3f}{paired_ms(v, base):>+9.3f}"
        print(f"{name:<28}{m:>9.3f}{p50:>9.3f}{p99:>9.3f}{added}")
    print("'paired': the median of (route - plain waggle) over rounds, both measured in the same round")
    return times


def server_cpu(pids: dict[str, int], routes: list[tuple[str, ThriftHiveMetastore.Client]],
               call: Callable[[ThriftHiveMetastore.Client], Any], label: str, calls: int, repeats: int = 3
               ) -> dict[str, float]:
    """waggle's own CPU time per call on each route (its process's CPU, not the wall clock, so other load on
    the machine hardly moves it): the route's calls alone, ``repeats`` times, the lowest kept."""
    cpu: dict[str, list[float]] = {name: [] for name, _ in routes if name in pids}
    for _ in range(repeats):
        for name, c in random.sample(routes, len(routes)):
            if name not in pids:
                continue
            before = cpu_seconds(pids[name])
            for _ in range(calls):
                call(c)
            cpu[name].append((cpu_seconds(pids[name]) - before) / calls * 1e6)
    best = {name: min(v) for name, v in cpu.items()}
    base = best["waggle, plain"]
    print(f"\nwaggle's CPU per {label} (its process, {calls} calls x {repeats}, the lowest run), microseconds")
    for name, us in best.items():
        added = "" if name == "waggle, plain" else f"   {us - base:>+8.1f} us ({(us - base) / 1000:+.4f} ms)"
        print(f"{name:<28}{us:>9.1f}{added}")
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metastore", help="thrift://host:port of an existing plain metastore (default: start one)")
    ap.add_argument("--connections", type=int, default=200)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--quick", action="store_true", help="a smoke run: 20 connections, 300 calls")
    args = ap.parse_args()
    if args.quick:
        args.connections, args.calls = min(args.connections, 20), min(args.calls, 300)
    workdir = Path(tempfile.mkdtemp(prefix="waggle-bench-krb-"))
    started = time.monotonic()
    store: LocalMetastore | None = None
    kdc: LocalKdc | None = None
    procs: list[subprocess.Popen[bytes]] = []
    clients: list[ThriftHiveMetastore.Client] = []
    try:
        if args.metastore:
            uri = args.metastore
        else:
            store = LocalMetastore(workdir / "hms", fast_start=False, heap="1g").start()
            uri = store.uri
        kdc = LocalKdc(workdir / "kdc").start()
        os.environ.update(kdc.env())  # python-gssapi here and the waggle subprocesses use this KDC
        keytab = kdc.add_principal(SERVICE)
        cache = kdc.kinit(USER, kdc.add_principal(USER), workdir / "client.ccache")
        creds = gssapi.Credentials(usage="initiate", store={"ccache": f"FILE:{cache}"})  # type: ignore[dict-item]
        principal = kdc.principal(SERVICE)
        if store is not None:
            store.wait_ready(timeout=180)
        host, mport = uri.removeprefix("thrift://").split(":")

        plain_w, plain_port = start_waggle(workdir / "waggle-plain", uri, lambda p: Connector(p))
        procs.append(plain_w)
        sasl_server = (
            "configuration-properties:\n"
            "  hive.metastore.sasl.enabled: true\n"
            f"  hive.metastore.kerberos.principal: {principal}\n"
            f"  hive.metastore.kerberos.keytab.file: {keytab}\n"
            "  hadoop.rpc.protection: authentication,integrity,privacy\n"
        )
        sasl_w, sasl_port = start_waggle(workdir / "waggle-sasl", uri,
                                         lambda p: Connector(p, "auth", creds, principal), sasl_server)
        procs.append(sasl_w)
        print(f"KDC {kdc.realm} on port {kdc.port}, metastore {uri}, plain waggle :{plain_port}, "
              f"SASL waggle :{sasl_port} ({principal}); ready in {time.monotonic() - started:.0f}s", flush=True)

        handshakes(Connector(plain_port), Connector(sasl_port, "auth", creds, principal), args.connections)

        if host not in ("127.0.0.1", "localhost"):
            raise SystemExit("--metastore must be on this machine (the client connects to 127.0.0.1)")
        routes = [("direct", Connector(int(mport)).client()), ("waggle, plain", Connector(plain_port).client())]
        routes += [(f"waggle, SASL {q}", Connector(sasl_port, q, creds, principal).client()) for q in QOPS]
        clients = [c for _, c in routes]
        for _, c in routes:
            c.set_ugi(USER, [])
        small = ("get_database('default')", lambda c: c.get_database("default"))
        times = per_call(routes, small[0], small[1], args.calls)
        per_call(routes, "get_all_databases()", lambda c: c.get_all_databases(), args.calls)
        pids = {"waggle, plain": plain_w.pid, **{f"waggle, SASL {q}": sasl_w.pid for q in QOPS}}
        cpu = server_cpu(pids, routes, small[1], small[0], max(200, args.calls // 3))
        auth, base = times["waggle, SASL auth"], times["waggle, plain"]
        wall = paired_ms(auth, base)
        added_cpu = (cpu["waggle, SASL auth"] - cpu["waggle, plain"]) / 1000
        met = max(wall, added_cpu) <= TARGET_MS
        print(f"\nSASL auth adds {wall:+.3f} ms per {small[0]} (paired wall clock; "
              f"mean {mean_ms(auth) - mean_ms(base):+.3f}, p50 {pct(auth, 0.5) - pct(base, 0.5):+.3f}), "
              f"{added_cpu:+.4f} ms of waggle's CPU: "
              f"target <= {TARGET_MS} ms {'met' if met else 'MISSED'}", flush=True)
        print(f"\nwhole run {time.monotonic() - started:.0f}s; every figure includes the client's own framing and "
              f"wrapping (waggle's SaslSocket and GssapiClient, the same code as the server side's)")
    finally:
        for c in clients:
            try:
                close(c)
            except OSError:
                pass
        stop_processes(procs)
        if store is not None:
            store.stop()
        if kdc is not None:
            kdc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
