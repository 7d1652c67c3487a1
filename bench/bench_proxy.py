"""Direct-to-metastore against through-waggle, side by side in one run.

    python bench/bench_proxy.py [--metastore thrift://host:port] [--rounds 2000] [--partitions 3000]

Without ``--metastore`` a local Derby-backed Hive 2.3 metastore is started (Java 17 and pyspark needed).
waggle runs as a subprocess through its real CLI, with the metastore as its primary.
Each round makes the call direct and through waggle in random order, so both see the same machine state (and
neither always lands on the metastore's garbage collections); the table prints p50, p99 and their ratios.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from waggle.hms.gen.hive_metastore import ttypes
from waggle.local.client import hms_client
from waggle.local.metastore import LocalMetastore, free_port
from waggle.local.seed import ensure_partitioned_table

DB = "bench_db"


def seed(host: str, port: int, partitions: int, warehouse: Path) -> None:
    with hms_client(host, port, timeout=600) as c:
        try:
            c.create_database(ttypes.Database(name=DB, locationUri=f"file://{warehouse}/{DB}.db", parameters={}))
        except ttypes.AlreadyExistsException:
            pass
        ensure_partitioned_table(c, DB, "small", f"file://{warehouse}/{DB}.db/small", partitions=0)
        ensure_partitioned_table(c, DB, "parts", f"file://{warehouse}/{DB}.db/parts", partitions=partitions)


def start_waggle(workdir: Path, uri: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    (workdir / "server.yml").write_text(f"port: {port}\nbind-address: 127.0.0.1\n")
    (workdir / "federation.yml").write_text(f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {uri}\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "waggle", "serve", "--server-config", str(workdir / "server.yml"),
         "--federation-config", str(workdir / "federation.yml")],
        stdout=subprocess.DEVNULL, stderr=open(workdir / "waggle.log", "wb"), cwd=ROOT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with hms_client("127.0.0.1", port, timeout=2) as c:
                c.getStatus()
            return proc, port
        except Exception:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("waggle did not start; see " + str(workdir / "waggle.log"))


def start_relay(upstream_port: int) -> tuple[subprocess.Popen[bytes], int]:
    """The floor: a gevent byte relay with no parsing at all, the cost of the extra hop alone."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "byte_relay.py"), str(port), str(upstream_port)])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("byte relay did not start")


def measure(clients: list, call, rounds: int) -> list[list[float]]:
    times: list[list[float]] = [[] for _ in clients]
    pairs = list(zip(clients, times, strict=True))
    for _ in range(rounds):
        for client, out in random.sample(pairs, len(pairs)):
            t = time.perf_counter()
            call(client)
            out.append(time.perf_counter() - t)
    return times


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metastore", help="thrift://host:port of an existing metastore (default: start one)")
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--big-rounds", type=int, default=40)
    ap.add_argument("--partitions", type=int, default=3000)
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="waggle-bench-"))
    store = None
    if args.metastore:
        uri = args.metastore
    else:
        store = LocalMetastore(workdir / "hms", fast_start=False, heap="2g").start().wait_ready()
        uri = store.uri
    host, port = uri.removeprefix("thrift://").split(":")
    warehouse = workdir / "data"
    warehouse.mkdir(exist_ok=True)
    print(f"seeding {args.partitions} partitions ...", flush=True)
    seed(host, int(port), args.partitions, warehouse)
    proc, wport = start_waggle(workdir, uri)
    relay, rport = start_relay(int(port))
    try:
        with hms_client(host, int(port), timeout=600) as direct, \
                hms_client("127.0.0.1", wport, timeout=600) as prox, \
                hms_client("127.0.0.1", rport, timeout=600) as raw:
            clients = [direct, prox, raw]
            for c in clients:
                c.set_ugi(os.environ.get("USER", "bench"), [])
            cases = [
                ("get_all_databases", lambda c: c.get_all_databases(), args.rounds),
                ("get_all_tables", lambda c: c.get_all_tables(DB), args.rounds),
                ("get_table", lambda c: c.get_table(DB, "small"), args.rounds),
                (f"get_partitions x{args.partitions}", lambda c: c.get_partitions(DB, "parts", -1),
                 args.big_rounds),
            ]
            for _label, fn, rounds in cases:  # let the metastore's JIT settle before measuring anything
                for _ in range(max(10, rounds // 2)):
                    for c in clients:
                        fn(c)
            print(f"\n{'call':<22}{'direct':>9}{'waggle':>9}{'added':>8}{'ratio':>8}{'relay':>9}{'added':>8}"
                  f"{'ratio':>8}   {'p99 direct':>10}{'waggle':>9}{'ratio':>8}")
            for label, fn, rounds in cases:
                d, w, r = measure(clients, fn, rounds)
                d50, w50, r50, d99, w99 = pct(d, 0.5), pct(w, 0.5), pct(r, 0.5), pct(d, 0.99), pct(w, 0.99)
                print(f"{label:<22}{d50:>9.3f}{w50:>9.3f}{w50 - d50:>8.3f}{w50 / d50:>7.3f}x{r50:>9.3f}"
                      f"{r50 - d50:>8.3f}{r50 / d50:>7.3f}x   {d99:>10.3f}{w99:>9.3f}{w99 / d99:>7.3f}x")
            print("\np50 unless marked p99, in milliseconds. 'relay' is a byte relay with no parsing "
                  "(bench/byte_relay.py):\nthe cost of an extra hop on this machine, for reference.")
    finally:
        for p in (proc, relay):
            p.terminate()
            p.wait(30)
        if store:
            store.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
