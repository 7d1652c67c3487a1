"""Direct-to-metastore against through-waggle, side by side in one run.

    python bench/bench_proxy.py [--metastore thrift://host:port] [--rounds 2000] [--partitions 3000]

Without ``--metastore`` a local Derby-backed Hive 2.3 metastore is started (Java 17 and pyspark needed).
waggle runs as a subprocess through its real CLI, with the metastore as its primary. With ``--prefixed`` the
metastore sits behind a federation prefix instead, so that every name is rewritten.
Calls alternate direct / waggle so both see the same machine state; the table prints p50, p99 and ratios.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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


def start_waggle(workdir: Path, uri: str, prefixed: bool) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    (workdir / "server.yml").write_text(
        f"port: {port}\nbind-address: 127.0.0.1\ndatabase-resolution: {'PREFIXED' if prefixed else 'MANUAL'}\n"
    )
    if prefixed:
        fed = (f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {uri}\n"
               f"  database-prefix: bench_\n")
    else:
        fed = f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {uri}\n"
    (workdir / "federation.yml").write_text(fed)
    proc = subprocess.Popen(
        [sys.executable, "-m", "waggle", "serve", "--server-config", str(workdir / "server.yml"),
         "--federation-config", str(workdir / "federation.yml")],
        stdout=subprocess.DEVNULL, stderr=open(workdir / "waggle.log", "wb"),
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


def measure(direct, proxied, call, rounds: int) -> tuple[list[float], list[float]]:
    d, w = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        call(direct)
        d.append(time.perf_counter() - t)
        t = time.perf_counter()
        call(proxied)
        w.append(time.perf_counter() - t)
    return d, w


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metastore", help="thrift://host:port of an existing metastore (default: start one)")
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--big-rounds", type=int, default=15)
    ap.add_argument("--partitions", type=int, default=3000)
    ap.add_argument("--prefixed", action="store_true", help="put the metastore behind a prefix (name rewriting)")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="waggle-bench-"))
    store = None
    if args.metastore:
        uri = args.metastore
    else:
        store = LocalMetastore(workdir / "hms").start().wait_ready()
        uri = store.uri
    host, port = uri.removeprefix("thrift://").split(":")
    warehouse = workdir / "data"
    warehouse.mkdir(exist_ok=True)
    print(f"seeding {args.partitions} partitions ...", flush=True)
    seed(host, int(port), args.partitions, warehouse)
    proc, wport = start_waggle(workdir, uri, args.prefixed)
    db_seen = f"bench_{DB}" if args.prefixed else DB
    try:
        with hms_client(host, int(port), timeout=600) as direct, hms_client("127.0.0.1", wport, timeout=600) as prox:
            for c in (direct, prox):
                c.set_ugi(os.environ.get("USER", "bench"), [])
            cases = [
                ("get_all_databases", lambda c, db: c.get_all_databases(), args.rounds),
                ("get_all_tables", lambda c, db: c.get_all_tables(db), args.rounds),
                ("get_table", lambda c, db: c.get_table(db, "small"), args.rounds),
                (f"get_partitions x{args.partitions}", lambda c, db: c.get_partitions(db, "parts", -1),
                 args.big_rounds),
            ]
            print(f"\n{'call':<26}{'direct p50':>11}{'waggle p50':>11}{'added p50':>11}{'ratio p50':>10}"
                  f"{'direct p99':>11}{'waggle p99':>11}{'ratio p99':>10}")
            for label, fn, rounds in cases:
                for _ in range(min(50, rounds)):
                    fn(direct, DB)
                    fn(prox, db_seen)
                d, w = measure(direct, prox, lambda c, fn=fn: fn(c, DB if c is direct else db_seen), rounds)
                d50, w50, d99, w99 = pct(d, 0.5), pct(w, 0.5), pct(d, 0.99), pct(w, 0.99)
                print(f"{label:<26}{d50:>10.3f}m{w50:>10.3f}m{w50 - d50:>10.3f}m{w50 / d50:>9.3f}x"
                      f"{d99:>10.3f}m{w99:>10.3f}m{w99 / d99:>9.3f}x")
            print("\n(m = milliseconds)")
    finally:
        proc.terminate()
        proc.wait(30)
        if store:
            store.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
