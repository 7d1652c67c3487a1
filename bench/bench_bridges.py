"""What a version bridge costs: the older call direct to the metastore, against the newer call through waggle.

    python bench/bench_bridges.py [--metastore thrift://host:port] [--rounds 1000] [--big-rounds 30]
                                  [--partitions 3000]

Without ``--metastore`` a local Derby-backed Hive 2.3 metastore is started (Java 17 and pyspark needed). Two
waggle instances run through the real CLI in front of it:

* **down** (``hive-version: 2.3.10``): a Hive 4 client's ``get_database_req`` and ``get_partitions_req`` are
  answered with ``get_database`` and ``get_partitions`` (decoded, translated, re-encoded).
* **up** (``hive-version: 4.0.1``, as if the metastore were Hive 4.0.1): Spark's ``get_table`` is sent as
  ``get_table_req``, which Hive 2.3 also has.

Each row compares the call a client of the metastore's own release would make, direct, with the other
release's call through waggle, in the same rounds and in random order. The relayed call through waggle is
shown too, for the cost of the proxy without a bridge.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_proxy import DB, pct, seed, start_waggle

from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.local.client import hms_client
from waggle.local.metastore import LocalMetastore

Call = Callable[[Any], Any]


def measure(calls: list[tuple[str, Any, Call]], rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {label: [] for label, _, _ in calls}
    for _ in range(rounds):
        for label, client, call in random.sample(calls, len(calls)):
            t = time.perf_counter()
            call(client)
            times[label].append(time.perf_counter() - t)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metastore", help="thrift://host:port of an existing Hive 2.3 metastore (default: start one)")
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--big-rounds", type=int, default=30)
    ap.add_argument("--partitions", type=int, default=3000)
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="waggle-bench-bridges-"))
    with ExitStack() as stack:
        if args.metastore:
            uri = args.metastore
        else:
            store = LocalMetastore(workdir / "hms", fast_start=False, heap="2g").start().wait_ready()
            stack.callback(store.stop)
            uri = store.uri
        host, port = uri.removeprefix("thrift://").split(":")
        warehouse = workdir / "data"
        warehouse.mkdir(exist_ok=True)
        print(f"seeding {args.partitions} partitions ...", flush=True)
        seed(host, int(port), args.partitions, warehouse)
        ports = {}
        for name, version in (("down", "2.3.10"), ("up", "4.0.1")):
            proc, ports[name] = start_waggle(workdir / f"waggle-{name}", uri, prefixed=False, hive_version=version)
            stack.callback(proc.wait, 30)
            stack.callback(proc.terminate)
        direct = stack.enter_context(hms_client(host, int(port), timeout=600))
        down = stack.enter_context(hms_client("127.0.0.1", ports["down"], timeout=600))
        up = stack.enter_context(hms_client("127.0.0.1", ports["up"], timeout=600))
        rows: list[tuple[str, int, list[tuple[str, Any, Call]]]] = [
            ("get_database_req -> get_database", args.rounds, [
                ("direct get_database", direct, lambda c: c.get_database(DB)),
                ("waggle get_database (relayed)", down, lambda c: c.get_database(DB)),
                ("waggle get_database_req (bridged)", down,
                 lambda c: c.get_database_req(T.GetDatabaseRequest(name=DB, catalogName="hive"))),
            ]),
            ("get_table -> get_table_req", args.rounds, [
                ("direct get_table", direct, lambda c: c.get_table(DB, "small")),
                ("waggle get_table_req (relayed)", up,
                 lambda c: c.get_table_req(T.GetTableRequest(dbName=DB, tblName="small"))),
                ("waggle get_table (bridged)", up, lambda c: c.get_table(DB, "small")),
            ]),
            (f"get_partitions_req x{args.partitions} -> get_partitions", args.big_rounds, [
                ("direct get_partitions", direct, lambda c: c.get_partitions(DB, "parts", -1)),
                ("waggle get_partitions (relayed)", down, lambda c: c.get_partitions(DB, "parts", -1)),
                ("waggle get_partitions_req (bridged)", down,
                 lambda c: c.get_partitions_req(T.PartitionsRequest(dbName=DB, tblName="parts"))),
            ]),
        ]
        assert down.get_database_req(T.GetDatabaseRequest(name=DB)).name == DB
        assert len(down.get_partitions_req(T.PartitionsRequest(dbName=DB, tblName="parts")).partitions) \
            == args.partitions
        assert up.get_table(DB, "small").tableName == "small"
        for _, rounds, calls in rows:  # warm the metastore's JIT and waggle's pools
            measure(calls, max(10, rounds // 2))
        print(f"\n{'bridge':<44}{'call':<40}{'p50 ms':>8}{'ratio':>8}{'p99 ms':>9}{'ratio':>8}")
        for title, rounds, calls in rows:
            times = measure(calls, rounds)
            base = times[calls[0][0]]
            b50, b99 = pct(base, 0.5), pct(base, 0.99)
            for i, (label, _, _) in enumerate(calls):
                t50, t99 = pct(times[label], 0.5), pct(times[label], 0.99)
                print(f"{title if i == 0 else '':<44}{label:<40}{t50:>8.3f}{t50 / b50:>7.2f}x"
                      f"{t99:>9.3f}{t99 / b99:>7.2f}x")
        print("\nratios are to the direct call of the same row, measured in the same rounds")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
