"""waggle's Iceberg REST port against pyiceberg's own Hive catalog, in one run against a real local Hive 2.3
metastore: how long ``loadTable`` takes and how many commits a second one writer makes, each against direct.

    python bench/bench_iceberg_rest.py [--quick] [--json FILE] [--rounds 1000] [--snapshots 20] [--blocks 20]
                                       [--block-commits 10] [--cpu-calls 300] [--cpu-repeats 3] [--baseline TREE]

One Derby-backed Hive 2.3 metastore is started here (Java 17 and pyspark needed). It holds database ``ice_db``
with Iceberg tables made by pyiceberg's ``HiveCatalog`` (files under the metastore's warehouse, ``file://``):
``load`` (a two-column table with ``--snapshots`` appends), and one table per commit route. In front of it: a
byte relay (bench/byte_relay.py, parses nothing: the floor of a Python hop) and one waggle through the real CLI
(``database-resolution: PREFIXED``) with its Iceberg REST port on (``iceberg-rest.port``, one client of
``iceberg-rest.clients``; pyiceberg's ``RestCatalog`` signs in once with its id and secret). The metastore is
waggle's primary (``ice_db``) and also member ``bench`` behind ``database-prefix: bench_`` (``bench_ice_db``,
every name of every call and reply rewritten; writes allowed on ``ice_db`` only): the member is the table's home
as clients see it, the realistic case; the primary (names unchanged) is shown beside it.

1. **loadTable.** ``load_table`` of ``ice_db.load`` (``bench_ice_db.load`` through waggle's member) by pyiceberg:
   ``HiveCatalog`` direct (``thrift://`` the metastore: a new connection, ``get_table``, the metadata file read and
   parsed, as pyiceberg does every time), ``HiveCatalog`` through the byte relay, ``HiveCatalog`` through waggle's
   Thrift port, and ``RestCatalog`` through the REST port (keep-alive HTTP; waggle reads the metadata file and
   splices its bytes into the answer, the client parses it), the member and the primary. Every route in random
   order each round, after a warm-up; p50/p99 and ratios to direct. Every route must load the same
   ``metadata_location`` and metadata. Then **back to back**: ``--cpu-repeats`` runs of ``--cpu-calls`` loads in
   a row on one route (as a job loading its tables does; the routes in random order each repeat), their p50/p99,
   and the CPU of waggle (and of the relay) per ``load_table``: every thread's run time from ``/proc``, best run.
   The two orders differ for HTTP: calls in a row on one keep-alive connection meet TCP's delayed ACK wherever a
   reply is written in two pieces (Nagle's algorithm holds the second). Target, in both: REST (member) p50 <=
   1.2x direct.
2. **Commits.** ``table.append`` of a one-row arrow table, sequential, one writer per route, each route on a table
   of its own (so every table's metadata grows alike): ``HiveCatalog`` direct, through the relay, through waggle's
   Thrift port, and ``RestCatalog`` (member and primary). ``--blocks`` blocks of ``--block-commits`` appends, the
   routes in random order each block; commits per second over all blocks of a route, p50/p99 of one append, the
   waggle's CPU per commit. Each table must end with every append's rows. Target: REST (member) >= 0.8x direct's
   commits per second.

``--baseline TREE`` adds the REST route (member) of a second waggle run from another source tree (say, a copy of
an earlier state), measured in the same run: a way to compare changes.

Every process started here is stopped at exit (also on Ctrl-C or an error); all traffic stays on 127.0.0.1.
pyiceberg runs in this process; its own CPU (parsing metadata, writing Parquet and Avro) is in every route's time.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_cache import get_table_req, metric, pct, serve_files
from bench.bench_load import Processes, Waggle, load, run_bench, start_relay
from bench.cpu_cost import cpu_seconds
from waggle.hms.gen.hive_metastore import ttypes
from waggle.local.client import hms_client
from waggle.local.jvm import free_port
from waggle.local.metastore import LocalMetastore

DB = "ice_db"
PREFIX = "bench_"
PDB = PREFIX + DB
LOAD = "load"
CLIENT_ID = "bench-writer"
CLIENT_SECRET = "bench-secret-0123456789abcdef"
CLIENT_USER = "bench"

DIRECT = "HiveCatalog direct"
RELAY = "HiveCatalog via byte relay"
THRIFT = "HiveCatalog via waggle Thrift (member)"
REST = "RestCatalog via waggle REST (member)"
REST_P = "RestCatalog via waggle REST (primary)"
REST_B = "RestCatalog via baseline REST (member)"


# -- processes -------------------------------------------------------------------------------------------------
def start_waggle(procs: Processes, workdir: Path, uri: str, root: Path = ROOT) -> tuple[Waggle, int]:
    """waggle through the real CLI: PREFIXED, the metastore as primary and as member ``bench``; the REST port on.
    ``root``: the source tree whose waggle runs."""
    port, http, rest = free_port(), free_port(), free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    secret, keys = workdir / "rest-client.secret", workdir / "signing.key"
    secret.write_text(CLIENT_SECRET + "\n")
    keys.write_text("1:" + "YmVuY2gtc2lnbmluZy1rZXktMDEyMzQ1Njc4OWFiY2RlZg==\n")
    server = (f"port: {port}\nbind-address: 127.0.0.1\nendpoint.port: {http}\nmax-connections: 4000\n"
              "limits.max-in-flight-calls: 10000\nlimits.max-calls-per-metastore: 10000\nlogging.level: warning\n"
              "thrift-server-stop-timeout-val-in-seconds: 2\nhot-reload: false\ndatabase-resolution: PREFIXED\n"
              f"delegation-tokens:\n  signing-key-file: {keys}\n"
              f"iceberg-rest:\n  port: {rest}\n  clients:\n  - id: {CLIENT_ID}\n    secret-file: {secret}\n"
              f"    user: {CLIENT_USER}\n")
    federation = (f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {uri}\n"
                  "  access-control-type: READ_AND_WRITE_AND_CREATE\n"
                  f"federated-meta-stores:\n  - name: bench\n    remote-meta-store-uris: {uri}\n"
                  f"    database-prefix: {PREFIX}\n    access-control-type: READ_AND_WRITE_ON_DATABASE_WHITELIST\n"
                  f"    writable-database-white-list: [{DB}]\n")
    w = serve_files(procs, workdir, f"waggle of {root}", port, http, server, federation, root=root)
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{rest}/v1/config", timeout=2):
                pass
        except urllib.error.HTTPError:
            break  # it answers (401: a token is needed)
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("waggle's REST port did not open") from None
            time.sleep(0.1)
        else:
            break
    return w, rest


# -- catalogs --------------------------------------------------------------------------------------------------
def hive_catalog(port: int, warehouse: Path) -> Any:
    from pyiceberg.catalog.hive import HiveCatalog

    return HiveCatalog("hive", uri=f"thrift://127.0.0.1:{port}", warehouse=f"file://{warehouse}")


def rest_catalog(port: int) -> Any:
    from pyiceberg.catalog.rest import RestCatalog

    return RestCatalog("waggle-rest", uri=f"http://127.0.0.1:{port}", credential=f"{CLIENT_ID}:{CLIENT_SECRET}")


@dataclass
class Route:
    label: str
    catalog: Any
    db: str
    #: processes whose CPU this route's calls cost (beside the metastore's and this one's)
    pids: list[int] = field(default_factory=list)

    def name(self, table: str) -> str:
        return f"{self.db}.{table}"


def commit_table_name(label: str) -> str:
    return "c_" + "".join(ch if ch.isalnum() else "_" for ch in label.lower()).strip("_")[:40]


def schema() -> Any:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    return Schema(NestedField(1, "id", LongType(), required=False),
                  NestedField(2, "name", StringType(), required=False))


def rows(start: int, n: int = 1) -> Any:
    import pyarrow as pa

    return pa.table({"id": pa.array(range(start, start + n), pa.int64()),
                     "name": pa.array([f"n{i}" for i in range(start, start + n)], pa.string())})


def seed(port: int, warehouse: Path, snapshots: int, routes: list[str]) -> None:
    with hms_client("127.0.0.1", port, timeout=120) as c:
        try:
            c.create_database(ttypes.Database(name=DB, locationUri=f"file://{warehouse}/{DB}.db", parameters={}))
        except ttypes.AlreadyExistsException:
            pass
    cat = hive_catalog(port, warehouse)
    table = cat.create_table(f"{DB}.{LOAD}", schema=schema())
    for i in range(snapshots):
        table.append(rows(i * 10, 10))
    for label in routes:
        cat.create_table(f"{DB}.{commit_table_name(label)}", schema=schema())


def metadata_of(table: Any) -> Any:
    return table.metadata.model_dump()


# -- 1 ---------------------------------------------------------------------------------------------------------
def section_load(args: argparse.Namespace, routes: list[Route], report: dict[str, Any]) -> None:
    want = routes[0].catalog.load_table(routes[0].name(LOAD))
    problems = []
    for r in routes[1:]:
        got = r.catalog.load_table(r.name(LOAD))
        if got.metadata_location != want.metadata_location or metadata_of(got) != metadata_of(want):
            problems.append(r.label)
    if problems:
        raise SystemExit(f"these routes load other metadata than direct: {problems}")
    size = len(Path(urlparse(want.metadata_location).path).read_bytes())
    print(f"checked: every route loads the same metadata_location and metadata ({size:,} bytes of metadata file, "
          f"{len(want.metadata.snapshots)} snapshots)", flush=True)
    for _ in range(args.warmup_rounds):
        for r in routes:
            r.catalog.load_table(r.name(LOAD))
    times: dict[str, list[float]] = {r.label: [] for r in routes}
    for _ in range(args.rounds):
        for r in random.sample(routes, len(routes)):
            name = r.name(LOAD)
            t = time.perf_counter()
            r.catalog.load_table(name)
            times[r.label].append(time.perf_counter() - t)
    d50, d99 = pct(times[DIRECT], 0.5), pct(times[DIRECT], 0.99)
    print(f"\n1. load_table: p50/p99 in ms, {args.rounds} rounds, every route in random order each round, "
          "against direct")
    print(f"{'route':<42}{'p50':>9}{'p99':>9}{'mean':>9}{'p50 vs direct':>15}{'p99 vs direct':>15}")
    out: dict[str, Any] = {}
    for r in routes:
        v = times[r.label]
        p50, p99, mean = pct(v, 0.5), pct(v, 0.99), sum(v) / len(v)
        print(f"{r.label:<42}{p50 * 1e3:>9.3f}{p99 * 1e3:>9.3f}{mean * 1e3:>9.3f}{p50 / d50:>14.3f}x"
              f"{p99 / d99:>14.3f}x")
        out[r.label] = {"p50_ms": p50 * 1e3, "p99_ms": p99 * 1e3, "mean_ms": mean * 1e3, "p50_ratio": p50 / d50,
                        "p99_ratio": p99 / d99}
    report["load_table"] = out
    report["metadata_bytes"] = size

    section_back_to_back(args, routes, report)


def section_back_to_back(args: argparse.Namespace, routes: list[Route], report: dict[str, Any]) -> None:
    """Runs of ``--cpu-calls`` loads on one route after another (as a job loading its tables does), the routes in
    random order each repeat: their latency, and the CPU per call of the route's own process (best run)."""
    times: dict[str, list[float]] = {r.label: [] for r in routes}
    best = {r.label: float("inf") for r in routes if r.pids}
    for _ in range(args.cpu_repeats):
        for r in random.sample(routes, len(routes)):
            name = r.name(LOAD)
            before = sum(cpu_seconds(p) for p in r.pids)
            for _ in range(args.cpu_calls):
                t = time.perf_counter()
                r.catalog.load_table(name)
                times[r.label].append(time.perf_counter() - t)
            if r.pids:
                best[r.label] = min(best[r.label], (sum(cpu_seconds(p) for p in r.pids) - before) / args.cpu_calls)
    d50, d99 = pct(times[DIRECT], 0.5), pct(times[DIRECT], 0.99)
    relay = best[RELAY]
    print(f"\n   back to back: {args.cpu_repeats} runs of {args.cpu_calls} load_table calls in a row per route "
          "(routes in random order each repeat): p50/p99 in ms;\n   CPU per call of the route's own process (us; "
          "every thread, /proc; best run)")
    print(f"{'route':<42}{'p50':>9}{'p99':>9}{'p50 vs direct':>15}{'p99 vs direct':>15}{'CPU us':>9}"
          f"{'vs relay':>10}")
    out: dict[str, Any] = {}
    for r in routes:
        v = times[r.label]
        p50, p99 = pct(v, 0.5), pct(v, 0.99)
        cpu = f"{best[r.label] * 1e6:.0f}" if r.pids else ""
        vs = f"{best[r.label] / relay:.2f}x" if r.pids else ""
        print(f"{r.label:<42}{p50 * 1e3:>9.3f}{p99 * 1e3:>9.3f}{p50 / d50:>14.3f}x{p99 / d99:>14.3f}x{cpu:>9}"
              f"{vs:>10}")
        out[r.label] = {"p50_ms": p50 * 1e3, "p99_ms": p99 * 1e3, "p50_ratio": p50 / d50, "p99_ratio": p99 / d99,
                        **({"cpu_us_per_call": best[r.label] * 1e6, "cpu_vs_relay": best[r.label] / relay}
                           if r.pids else {})}
    report["load_table_back_to_back"] = out


# -- 2 ---------------------------------------------------------------------------------------------------------
def section_commits(args: argparse.Namespace, routes: list[Route], report: dict[str, Any]) -> None:
    tables = {r.label: r.catalog.load_table(r.name(commit_table_name(r.label))) for r in routes}
    counts = {r.label: 0 for r in routes}

    def append(r: Route) -> float:
        table = tables[r.label]
        t = time.perf_counter()
        table.append(rows(counts[r.label]))
        took = time.perf_counter() - t
        counts[r.label] += 1
        return took

    for _ in range(args.warmup_commits):
        for r in routes:
            append(r)
    times: dict[str, list[float]] = {r.label: [] for r in routes}
    spans = {r.label: 0.0 for r in routes}
    cpu = {r.label: 0.0 for r in routes}
    for _ in range(args.blocks):
        for r in random.sample(routes, len(routes)):
            before = sum(cpu_seconds(p) for p in r.pids)
            t = time.perf_counter()
            for _ in range(args.block_commits):
                times[r.label].append(append(r))
            spans[r.label] += time.perf_counter() - t
            cpu[r.label] += sum(cpu_seconds(p) for p in r.pids) - before
    problems = []
    for r in routes:
        got = r.catalog.load_table(r.name(commit_table_name(r.label))).scan().to_arrow().column("id").to_pylist()
        if sorted(got) != list(range(counts[r.label])):
            problems.append(f"{r.label}: {len(got)} rows, {counts[r.label]} appended")
    if problems:
        raise SystemExit("appends lost or doubled: " + "; ".join(problems))
    n = args.blocks * args.block_commits
    direct_rate = n / spans[DIRECT]
    print(f"\n2. commits: table.append of one row, sequential, one writer per route on its own table; {args.blocks} "
          f"blocks of {args.block_commits} appends per route (routes in random order each block), after "
          f"{args.warmup_commits} warm-up appends each")
    print(f"{'route':<42}{'commits/s':>10}{'vs direct':>11}{'p50 ms':>9}{'p99 ms':>9}{'CPU us/commit':>15}")
    out: dict[str, Any] = {}
    for r in routes:
        rate = n / spans[r.label]
        v = times[r.label]
        c = f"{cpu[r.label] / n * 1e6:.0f}" if r.pids else ""
        print(f"{r.label:<42}{rate:>10.1f}{rate / direct_rate:>10.3f}x{pct(v, 0.5) * 1e3:>9.1f}"
              f"{pct(v, 0.99) * 1e3:>9.1f}{c:>15}")
        out[r.label] = {"commits_per_s": rate, "ratio": rate / direct_rate, "p50_ms": pct(v, 0.5) * 1e3,
                        "p99_ms": pct(v, 0.99) * 1e3, **({"cpu_us_per_commit": cpu[r.label] / n * 1e6}
                                                         if r.pids else {})}
    print(f"checked: every table holds exactly its appends' rows ({counts[DIRECT]} each)")
    report["commits"] = out


# -- summary ---------------------------------------------------------------------------------------------------
def summary(report: dict[str, Any]) -> None:
    rows_: list[tuple[str, str, bool]] = []
    for key, how in (("load_table", "interleaved"), ("load_table_back_to_back", "back to back")):
        lt = report.get(key)
        if lt:
            v = lt[REST]
            rows_.append((f"1. load_table p50 via REST (member) <= 1.2x HiveCatalog direct, {how}",
                          f"{v['p50_ratio']:.3f}x ({v['p50_ms']:.2f} vs {lt[DIRECT]['p50_ms']:.2f} ms)",
                          v["p50_ratio"] <= 1.2))
    cm = report.get("commits")
    if cm:
        v = cm[REST]
        rows_.append(("2. commits/s via REST (member) >= 0.8x HiveCatalog direct",
                      f"{v['ratio']:.3f}x ({v['commits_per_s']:.1f} vs {cm[DIRECT]['commits_per_s']:.1f}/s)",
                      v["ratio"] >= 0.8))
    print("\nsummary")
    for name, figure, ok in rows_:
        print(f"  {name:<80}{figure:<34}{'MET' if ok else 'NOT MET'}")
    report["summary"] = [{"target": n, "figure": f, "met": ok} for n, f, ok in rows_]


# -- the bench -------------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1000, help="measured rounds of load_table (every route each)")
    ap.add_argument("--warmup-rounds", type=int, default=100)
    ap.add_argument("--snapshots", type=int, default=20, help="appends made to the loaded table first")
    ap.add_argument("--cpu-calls", type=int, default=300, help="load_table calls in a row per route and repeat")
    ap.add_argument("--cpu-repeats", type=int, default=3)
    ap.add_argument("--blocks", type=int, default=20, help="blocks of appends per route")
    ap.add_argument("--block-commits", type=int, default=10, help="appends per block")
    ap.add_argument("--warmup-commits", type=int, default=10, help="appends per route before measuring")
    ap.add_argument("--jit-warmup", type=float, default=20.0, help="seconds of load warming the metastore up first")
    ap.add_argument("--baseline", metavar="TREE", help="also the REST port (member) of the waggle of another source "
                    "tree (a copy or a git worktree of an earlier state), measured in the same run")
    ap.add_argument("--quick", action="store_true", help="a smoke run of about two minutes")
    ap.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.warmup_rounds, args.cpu_calls, args.cpu_repeats = 150, 20, 60, 2
        args.blocks, args.block_commits, args.warmup_commits, args.jit_warmup = 6, 5, 3, 5.0
        args.snapshots = min(args.snapshots, 10)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)
    return run_bench("waggle-bench-iceberg-rest-", run_all, args, {"args": vars(args), "cores": os.cpu_count()})


def run_all(args: argparse.Namespace, workdir: Path, procs: Processes, report: dict[str, Any]) -> None:
    labels = [DIRECT, RELAY, THRIFT, REST, REST_P] + ([REST_B] if args.baseline else [])
    store = LocalMetastore(workdir / "hms", fast_start=False, heap="2g").start()
    procs.stores.append(store)
    store.wait_ready(timeout=180)
    t = time.monotonic()
    seed(store.port, store.warehouse, args.snapshots, labels)
    print(f"metastore {store.uri}: seeded {DB} ({LOAD} with {args.snapshots} snapshots, {len(labels)} tables to "
          f"append to) in {time.monotonic() - t:.0f} s", flush=True)
    relay, relay_port = start_relay(procs, workdir, store.port)
    print(f"warming up the metastore's JIT: {args.jit_warmup:g} s of get_table at 8 connections ...", flush=True)
    load(workdir, store.port, [get_table_req(DB, LOAD)], 8, 0.1, args.jit_warmup)
    w, rest_port = start_waggle(procs, workdir / "waggle", store.uri)
    wh = store.warehouse
    routes = [Route(DIRECT, hive_catalog(store.port, wh), DB),
              Route(RELAY, hive_catalog(relay_port, wh), DB, [relay.pid]),
              Route(THRIFT, hive_catalog(w.port, wh), PDB, [w.proc.pid]),
              Route(REST, rest_catalog(rest_port), PDB, [w.proc.pid]),
              Route(REST_P, rest_catalog(rest_port), DB, [w.proc.pid])]
    where = f"waggle Thrift :{w.port}, waggle REST :{rest_port}"
    if args.baseline:
        base, base_rest = start_waggle(procs, workdir / "baseline", store.uri, Path(args.baseline).resolve())
        routes.append(Route(REST_B, rest_catalog(base_rest), PDB, [base.proc.pid]))
        where += f", baseline REST :{base_rest} (waggle of {Path(args.baseline).resolve()})"
    print(f"routes: direct :{store.port}, relay :{relay_port}, {where} (member db {PDB}, primary db {DB}); work "
          f"files in {workdir}", flush=True)
    section_load(args, routes, report)
    section_commits(args, routes, report)
    total = metric(w, "waggle_iceberg_rest_requests_total")
    commits = metric(w, "waggle_iceberg_rest_commits_total", outcome="committed")
    print(f"waggle_iceberg_rest_requests_total: {total:.0f}; waggle_iceberg_rest_commits_total{{outcome=committed}}: "
          f"{commits:.0f}")
    report["rest_requests"] = total
    report["rest_commits"] = commits
    summary(report)


if __name__ == "__main__":
    sys.exit(main())
