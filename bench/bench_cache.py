"""waggle's reply cache, in one run against a real local Hive 2.3 metastore: hits, freshness, read-your-writes
and its memory bound, each against direct in the same run.

    python bench/bench_cache.py [--quick] [--json FILE] [--rounds 1000] [--big-rounds 30] [--partitions 3000]
                                [--fresh-seconds 10] [--pairs 10000] [--max-mb 8]

One Derby-backed Hive 2.3 metastore is started here (Java 17 and pyspark needed), writing its notification log as
production metastores do; it holds ``bench_db`` with a table ``small`` and a table ``parts`` of ``--partitions``
partitions. In front of it: a byte relay (bench/byte_relay.py, parses nothing: the floor of a Python hop) and
four waggles through the real CLI, one process each:

* **primary, cache off** and **primary, cache: events**: the metastore is the primary, names unchanged;
* **prefixed, cache off** and **prefixed, cache: events**: ``database-resolution: PREFIXED``, the metastore is
  also member ``bench`` behind ``database-prefix: bench_`` (clients call ``bench_bench_db``, every request and
  reply rewritten); the cache setting is the member's.

1. **Hits.** ``get_table`` and ``get_partitions`` (all partitions, ``max -1``) on raw sockets (pre-encoded calls,
   replies read to their known length and compared byte for byte with the first one, never decoded: the client
   costs next to nothing), every route in random order each round; p50/p99 and ratios to direct. The cached
   routes are warm (read once first); ``waggle_cache_hits_total`` says how many of their calls were hits.
   Targets: a hit's p50 <= 0.3x direct. Then the CPU per call of each route's own process (every thread's run
   time from ``/proc``, best of ``--cpu-repeats``): target, a cached hit <= the relay's CPU per call.
2. **Freshness.** A direct client alters ``bench_db.fresh`` (a parameter ``counter`` = 1, 2, ...) 20 times a
   second for ``--fresh-seconds``, while one reader process per route (direct, both waggles with cache off, both
   with cache: events) reads the table every 5 ms; for each change, the time from its ``alter_table`` returning
   to a reader first seeing it (or a later one). Target: p99 <= 1 s through the cache.
3. **Read-your-writes.** ``--pairs`` pairs, through each cached waggle: connection A alters ``bench_db.ryw``
   (``n`` = i), then connection B reads it; meanwhile another process reads the same table (a read, then 1 ms
   asleep: its replies race the writes into the cache). A read of B that does not say ``n`` = i is stale.
   Target: 0.
4. **Memory.** A fifth waggle (primary, cache: events) with ``cache.max-bytes`` of ``--max-mb`` MiB is read a
   working set five times larger, twice in random order: ``get_partitions`` of ``parts`` with distinct
   ``max_parts`` and ``get_table`` of many distinct tables. ``waggle_cache_bytes`` is sampled after every call.
   Target: at the end within +-10% of ``cache.max-bytes``, and never over 1.1x. Also its RSS, beside the
   cache-off waggle's.

Every process started here is stopped at exit (also on Ctrl-C or an error); all traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.transport.TTransport import TMemoryBuffer

from bench.bench_load import (
    UGI,
    Processes,
    Waggle,
    all_pids,
    call_bytes,
    http_get,
    load,
    rss_mb,
    run_bench,
    start_relay,
)
from bench.cpu_cost import cpu_seconds
from bench.thrift_bytes import is_success, message_end
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.gen.hive_metastore import ttypes
from waggle.local.client import hms_client
from waggle.local.jvm import free_port
from waggle.local.metastore import LocalMetastore
from waggle.local.seed import ensure_partitioned_table, ensure_table

DB = "bench_db"
PREFIX = "bench_"
PDB = PREFIX + DB
USER = "bench"
COLS = [("id", "int"), ("name", "string")]

DIRECT = "direct"
RELAY = "byte relay"
P_OFF = "waggle primary, cache off"
P_EV = "waggle primary, cache: events"
X_OFF = "waggle prefixed, cache off"
X_EV = "waggle prefixed, cache: events"
CACHED = (P_EV, X_EV)


# -- processes -------------------------------------------------------------------------------------------------
def start_waggle(procs: Processes, workdir: Path, label: str, uri: str, cache: str, prefixed: bool,
                 max_bytes: int | None = None) -> Waggle:
    """One waggle process through the real CLI; ``cache`` is the primary's setting, or (``prefixed``) member
    ``bench``'s."""
    port, http = free_port(), free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    server = (f"port: {port}\nbind-address: 127.0.0.1\nendpoint.port: {http}\nmax-connections: 4000\n"
              "limits.max-in-flight-calls: 10000\nlimits.max-calls-per-metastore: 10000\nlogging.level: warning\n"
              "thrift-server-stop-timeout-val-in-seconds: 2\nhot-reload: false\n")
    if max_bytes is not None:
        server += f"cache.max-bytes: {max_bytes}\n"
    federation = (f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {uri}\n"
                  "  access-control-type: READ_AND_WRITE_AND_CREATE\n")
    if prefixed:
        server += "database-resolution: PREFIXED\n"
        federation += (f"federated-meta-stores:\n  - name: bench\n    remote-meta-store-uris: {uri}\n"
                       f"    database-prefix: {PREFIX}\n    cache: \"{cache}\"\n"
                       f"    access-control-type: READ_AND_WRITE_ON_DATABASE_WHITELIST\n"
                       f"    writable-database-white-list: [{DB}]\n")
    else:
        federation += f"  cache: \"{cache}\"\n"
    return serve_files(procs, workdir, label, port, http, server, federation)


def serve_files(procs: Processes, workdir: Path, label: str, port: int, http: int, server: str, federation: str,
                root: Path = ROOT) -> Waggle:
    """``waggle serve`` of these server and federation files (written in ``workdir``), once it answers; ``root``:
    the source tree whose waggle runs (another one's, to compare a change in one run)."""
    (workdir / "server.yml").write_text(server)
    (workdir / "federation.yml").write_text(federation)
    log = workdir / "waggle.log"
    cmd = [sys.executable, "-m", "waggle", "serve", "--server-config", str(workdir / "server.yml"),
           "--federation-config", str(workdir / "federation.yml")]
    with open(log, "wb") as err:
        proc = procs.add(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=root))
    w = Waggle(label, proc, port, http, 1, log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with hms_client("127.0.0.1", port, timeout=2) as c:
                c.getStatus()
            w.health()
            return w
        except Exception:
            time.sleep(0.2)
    raise SystemExit(f"{label} did not start:\n{log.read_text(errors='replace')[-2000:]}")


def metric(w: Waggle, name: str, **labels: str) -> float:
    """The sum of the series ``name`` of ``w``'s /metrics whose labels include ``labels`` (0 when none)."""
    total = 0.0
    for line in http_get(w.http, "/metrics").splitlines():
        m = re.match(rf"{name}(?:\{{([^}}]*)\}})?\s+(\S+)$", line)
        if not m:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(2))
    return total


def member_of(label: str) -> str:
    return "bench" if label.startswith("waggle prefixed") else "primary"


# -- a raw client ----------------------------------------------------------------------------------------------
class Raw:
    """One connection sending pre-encoded calls (strict binary, unframed). A reply is read to the length of the
    first reply to the same call and compared with it byte for byte; one that differs is parsed to its end and
    counted in :attr:`differed`."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray(16 << 20)
        self.view = memoryview(self.buf)
        self.first: dict[bytes, bytes] = {}
        self.differed = 0
        self.call(UGI)

    def close(self) -> None:
        self.sock.close()

    def call(self, request: bytes) -> bytes:
        self.sock.sendall(request)
        want = self.first.get(request)
        if want is None:
            reply = self._parse_from(0)
            self.first[request] = reply
            return reply
        n, got = len(want), 0
        while got < n:
            k = self.sock.recv_into(self.view[got:])
            if not k:
                raise ConnectionError("closed mid-reply")
            got += k
            if got < n and got == k and message_end(bytes(self.buf[:got])) is not None:
                break  # a shorter reply, whole in the first read
        if got == n and self.view[:n] == want:
            return want
        self.differed += 1
        return self._parse_from(got)

    def _parse_from(self, got: int) -> bytes:
        while (parsed := message_end(bytes(self.buf[:got]))) is None:
            k = self.sock.recv_into(self.view[got:])
            if not k:
                raise ConnectionError("closed mid-reply")
            got += k
        if parsed[0] != got:
            raise SystemExit("more bytes than one reply")
        reply = bytes(self.buf[:got])
        if not is_success(reply, parsed):
            raise SystemExit(f"an exception in reply to {parsed[2].decode()}: {reply[:300]!r}")
        return reply


def decode(reply: bytes, result_cls: Any) -> Any:
    proto = TBinaryProtocol(TMemoryBuffer(reply))
    proto.readMessageBegin()
    result = result_cls()
    result.read(proto)
    return result.success


def get_table_req(db: str, table: str = "small") -> bytes:
    return call_bytes("get_table", T.get_table_args(dbname=db, tbl_name=table), 1)


def get_partitions_req(db: str, max_parts: int = -1) -> bytes:
    return call_bytes("get_partitions", T.get_partitions_args(db_name=db, tbl_name="parts", max_parts=max_parts), 1)


@dataclass
class Route:
    label: str
    port: int
    db: str
    pids: list[int] = field(default_factory=list)
    waggle: Waggle | None = None
    conn: Raw | None = None

    def raw(self) -> Raw:
        if self.conn is None:
            self.conn = Raw(self.port)
        return self.conn


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def fmt_ratio(x: float) -> str:
    return f"{x:.3f}x" if x == x else "-"


# -- seeding ---------------------------------------------------------------------------------------------------
def seed(port: int, warehouse: Path, partitions: int, tables: int) -> None:
    with hms_client("127.0.0.1", port, timeout=600) as c:
        try:
            c.create_database(ttypes.Database(name=DB, locationUri=f"file://{warehouse}/{DB}.db", parameters={}))
        except ttypes.AlreadyExistsException:
            pass
        loc = f"file://{warehouse}/{DB}.db"
        ensure_partitioned_table(c, DB, "small", f"{loc}/small", partitions=0)
        ensure_partitioned_table(c, DB, "parts", f"{loc}/parts", partitions=partitions)
        for name in ("fresh", "ryw"):
            ensure_table(c, DB, name, f"{loc}/{name}", COLS)
        for i in range(tables):
            ensure_table(c, DB, f"m{i:04d}", f"{loc}/m{i:04d}", COLS)


# -- 1 ---------------------------------------------------------------------------------------------------------
def section_hits(args: argparse.Namespace, routes: list[Route], report: dict[str, Any]) -> None:
    by = {r.label: r for r in routes}
    verify(routes)
    cases: list[tuple[str, Callable[[Route], bytes], int]] = [
        ("get_table", lambda r: get_table_req(r.db), args.rounds),
        (f"get_partitions x{args.partitions}", lambda r: get_partitions_req(r.db), args.big_rounds),
    ]
    print("\n1. hits: p50/p99 in ms on raw sockets, every route in random order each round, against direct; "
          "the cached routes warm", flush=True)
    print(f"{'call':<22}{'route':<32}{'p50':>9}{'p99':>9}{'p50 vs direct':>15}{'p99 vs direct':>15}{'hits':>8}")
    out: dict[str, Any] = {}
    for name, req, rounds in cases:
        for _ in range(max(10, rounds // 2)):  # the metastore's JIT, the caches
            for r in routes:
                r.raw().call(req(r))
        hits0 = {lbl: metric(by[lbl].waggle, "waggle_cache_hits_total", metastore=member_of(lbl))  # type: ignore
                 for lbl in CACHED}
        times: dict[str, list[float]] = {r.label: [] for r in routes}
        for _ in range(rounds):
            for r in random.sample(routes, len(routes)):
                conn, request = r.raw(), req(r)
                t = time.perf_counter()
                conn.call(request)
                times[r.label].append(time.perf_counter() - t)
        hits = {lbl: metric(by[lbl].waggle, "waggle_cache_hits_total", metastore=member_of(lbl))  # type: ignore
                - hits0[lbl] for lbl in CACHED}
        d50, d99 = pct(times[DIRECT], 0.5), pct(times[DIRECT], 0.99)
        rows = {}
        label = name
        for r in routes:
            p50, p99 = pct(times[r.label], 0.5), pct(times[r.label], 0.99)
            hit = f"{hits[r.label] / rounds:.0%}" if r.label in hits else ""
            print(f"{label:<22}{r.label:<32}{p50 * 1e3:>9.3f}{p99 * 1e3:>9.3f}{fmt_ratio(p50 / d50):>15}"
                  f"{fmt_ratio(p99 / d99):>15}{hit:>8}")
            label = ""
            rows[r.label] = {"p50_ms": p50 * 1e3, "p99_ms": p99 * 1e3, "p50_ratio": p50 / d50,
                             "p99_ratio": p99 / d99, **({"hit_share": hits[r.label] / rounds} if hit else {})}
        out[name] = rows
    sizes = {r.label: len(r.raw().first[get_partitions_req(r.db)]) for r in routes}
    print(f"hits: waggle_cache_hits_total over the measured calls, per call. Reply of get_partitions: "
          f"{sizes[DIRECT]:,} bytes ({sizes[X_EV]:,} renamed)")
    differed = {r.label: r.raw().differed for r in routes if r.raw().differed}
    if differed:
        print(f"REPLIES THAT DIFFERED from the route's first reply to the same call: {differed}")
    report["hits"] = out
    report["replies_differed"] = differed
    section_cpu(args, routes, report)


def verify(routes: list[Route]) -> None:
    """Every route answers what direct answers (names rewritten behind the prefix), missed and hit alike."""
    by = {r.label: r for r in routes}
    want_t = decode(by[DIRECT].raw().call(get_table_req(DB)), T.get_table_result)
    want_p = decode(by[DIRECT].raw().call(get_partitions_req(DB)), T.get_partitions_result)
    problems = []
    for r in routes[1:]:
        for attempt in ("first", "again"):
            t = decode(r.raw().call(get_table_req(r.db)), T.get_table_result)
            parts = decode(r.raw().call(get_partitions_req(r.db)), T.get_partitions_result)
            if t.dbName != r.db or {p.dbName for p in parts} != {r.db}:
                problems.append(f"{r.label} ({attempt}): names {t.dbName!r}, {sorted({p.dbName for p in parts})}")
            t.dbName = DB
            for p in parts:
                p.dbName = DB
            if t != want_t or parts != want_p:
                problems.append(f"{r.label} ({attempt}): a reply differs from direct's")
    if problems:
        raise SystemExit("wrong answers: " + "; ".join(problems))
    print(f"checked: every route answers what direct does (get_table; get_partitions, {len(want_p)} partitions), "
          f"names '{PDB}' behind the prefix, first call and again", flush=True)


def section_cpu(args: argparse.Namespace, routes: list[Route], report: dict[str, Any]) -> None:
    measured = [r for r in routes if r.label != DIRECT]
    cases: list[tuple[str, Callable[[Route], bytes], int]] = [
        ("get_table", lambda r: get_table_req(r.db), args.cpu_calls),
        (f"get_partitions x{args.partitions}", lambda r: get_partitions_req(r.db), args.cpu_big_calls),
    ]
    print(f"\n   CPU per call of the route's own process (us; every thread, /proc), best of {args.cpu_repeats} runs "
          "of N calls on one connection")
    print(f"{'call':<22}{'route':<32}{'us/call':>10}{'vs relay':>10}{'calls':>7}")
    out: dict[str, Any] = {}
    for name, req, calls in cases:
        best = {r.label: float("inf") for r in measured}
        for r in measured:
            for _ in range(max(3, calls // 10)):
                r.raw().call(req(r))
        for _ in range(args.cpu_repeats):
            for r in random.sample(measured, len(measured)):
                conn, request = r.raw(), req(r)
                before = sum(cpu_seconds(p) for p in r.pids)
                for _ in range(calls):
                    conn.call(request)
                best[r.label] = min(best[r.label], (sum(cpu_seconds(p) for p in r.pids) - before) / calls)
        relay = best[RELAY]
        label = name
        for r in measured:
            print(f"{label:<22}{r.label:<32}{best[r.label] * 1e6:>10.1f}{fmt_ratio(best[r.label] / relay):>10}"
                  f"{calls:>7}")
            label = ""
        out[name] = {k: {"us_per_call": v * 1e6, "vs_relay": v / relay} for k, v in best.items()}
    report["cpu"] = out


# -- 2 ---------------------------------------------------------------------------------------------------------
def fresh_reader(port: int, db: str, stop: Any, ready: Any, out: Any, label: str) -> None:
    """A reader process: reads ``db.fresh`` every 5 ms, noting when each new ``counter`` value is first seen."""
    seen: list[tuple[int, float]] = []
    last = -1
    errors = 0
    with hms_client("127.0.0.1", port, timeout=30) as c:
        c.set_ugi(USER, [])
        c.get_table(db, "fresh")
        ready.set()
        while not stop.is_set():
            try:
                value = int(c.get_table(db, "fresh").parameters.get("counter", "0"))
            except Exception:
                errors += 1
                time.sleep(0.05)
                continue
            now = time.monotonic()
            if value != last:
                seen.append((value, now))
                last = value
            time.sleep(0.005)
    out.put((label, seen, errors))


def section_freshness(args: argparse.Namespace, routes: list[Route], report: dict[str, Any]) -> None:
    ctx = multiprocessing.get_context("fork")
    readers = [r for r in routes if r.label != RELAY]
    stop, out = ctx.Event(), ctx.Queue()
    procs = []
    by = {r.label: r for r in routes}
    try:
        for r in readers:
            ready = ctx.Event()
            p = ctx.Process(target=fresh_reader, args=(r.port, r.db, stop, ready, out, r.label), daemon=True)
            p.start()
            procs.append(p)
            if not ready.wait(60):
                raise SystemExit(f"the freshness reader of {r.label} did not start")
        time.sleep(1.0)
        inv0 = {lbl: metric(by[lbl].waggle, "waggle_cache_hits_total", metastore=member_of(lbl))  # type: ignore
                for lbl in CACHED}
        changes = int(args.fresh_seconds * 20)
        done: list[float] = []
        late = 0
        with hms_client("127.0.0.1", by[DIRECT].port, timeout=60) as w:
            table = w.get_table(DB, "fresh")
            start = time.monotonic()
            for i in range(1, changes + 1):
                table.parameters["counter"] = str(i)
                w.alter_table(DB, "fresh", table)
                done.append(time.monotonic())
                wait = start + i / 20 - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                else:
                    late += 1
            span = time.monotonic() - start
        time.sleep(2.0)
        hits = {lbl: metric(by[lbl].waggle, "waggle_cache_hits_total", metastore=member_of(lbl))  # type: ignore
                - inv0[lbl] for lbl in CACHED}
        lag = {lbl: metric(by[lbl].waggle, "waggle_cache_lag_seconds", metastore=member_of(lbl))  # type: ignore
               for lbl in CACHED}
        stop.set()
        results = {}
        for _ in readers:
            label, seen, errors = out.get(timeout=60)
            results[label] = (seen, errors)
    finally:
        stop.set()
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
    print(f"\n2. freshness: {changes} alter_table calls made direct at {changes / span:.1f}/s over {span:.1f} s "
          f"({late} behind schedule); one reader process per route reads the table every 5 ms.\n   Seconds from "
          "a change's alter_table returning to the reader first seeing it (or a later change)")
    print(f"{'route':<32}{'p50 s':>9}{'p99 s':>9}{'max s':>9}{'unseen':>8}{'errors':>8}{'hits':>8}")
    out_report = {}
    for r in readers:
        seen, errors = results[r.label]
        lat, unseen = [], 0
        j = 0
        for i, t in enumerate(done, start=1):
            while j < len(seen) and seen[j][0] < i:
                j += 1
            if j == len(seen):
                unseen += 1
                continue
            lat.append(seen[j][1] - t)
        p50, p99, mx = pct(lat, 0.5), pct(lat, 0.99), max(lat, default=float("nan"))
        h = f"{hits[r.label]:.0f}" if r.label in hits else ""
        print(f"{r.label:<32}{p50:>9.3f}{p99:>9.3f}{mx:>9.3f}{unseen:>8}{errors:>8}{h:>8}")
        out_report[r.label] = {"p50_s": p50, "p99_s": p99, "max_s": mx, "unseen": unseen, "errors": errors,
                               **({"hits": hits[r.label], "lag_seconds_metric": lag[r.label]} if h else {})}
    print("hits: the cached waggle's hits meanwhile (the reader's 5 ms reads answered from memory between changes); "
          "waggle_cache_lag_seconds at the end: " + ", ".join(f"{k}: {v:.3f}" for k, v in lag.items()))
    report["freshness"] = out_report


# -- 3 ---------------------------------------------------------------------------------------------------------
def hammer(port: int, db: str, stop: Any, ready: Any, out: Any) -> None:
    calls = 0
    with hms_client("127.0.0.1", port, timeout=30) as c:
        c.set_ugi(USER, [])
        c.get_table(db, "ryw")
        ready.set()
        while not stop.is_set():
            c.get_table(db, "ryw")
            calls += 1
            time.sleep(0.001)  # leaves the cores to the pairs: about 500 reads a second, most of them hits
    out.put(calls)


def section_ryw(args: argparse.Namespace, routes: list[Route], report: dict[str, Any]) -> None:
    ctx = multiprocessing.get_context("fork")
    print("\n3. read-your-writes: pairs of (alter_table through waggle on connection A, get_table through waggle on "
          "connection B),\n   while another process reads the same table through the same waggle (a read, then 1 ms "
          "asleep)")
    print(f"{'route':<32}{'pairs':>8}{'stale':>8}{'pair ms':>9}{'hammer calls':>14}{'hits':>8}"
          f"{'write drops':>13}")
    out_report = {}
    for r in routes:
        if r.label not in CACHED:
            continue
        assert r.waggle is not None
        pairs = args.pairs if r.label == P_EV else max(1, args.pairs // 10)
        stop, out, ready = ctx.Event(), ctx.Queue(), ctx.Event()
        p = ctx.Process(target=hammer, args=(r.port, r.db, stop, ready, out), daemon=True)
        p.start()
        try:
            if not ready.wait(60):
                raise SystemExit("the hammer did not start")
            member = member_of(r.label)
            hits0 = metric(r.waggle, "waggle_cache_hits_total", metastore=member)
            writes0 = metric(r.waggle, "waggle_cache_invalidations_total", metastore=member, cause="write")
            stale = 0
            examples: list[tuple[int, str | None]] = []
            with hms_client("127.0.0.1", r.port, timeout=60) as a, hms_client("127.0.0.1", r.port, timeout=60) as b:
                a.set_ugi(USER, [])
                b.set_ugi(USER, [])
                table = a.get_table(r.db, "ryw")
                start = time.monotonic()
                for i in range(pairs):
                    table.parameters["n"] = f"{r.label[:8]}{i}"
                    a.alter_table(r.db, "ryw", table)
                    got = b.get_table(r.db, "ryw").parameters.get("n")
                    if got != table.parameters["n"]:
                        stale += 1
                        if len(examples) < 5:
                            examples.append((i, got))
                span = time.monotonic() - start
            hits = metric(r.waggle, "waggle_cache_hits_total", metastore=member) - hits0
            writes = metric(r.waggle, "waggle_cache_invalidations_total", metastore=member, cause="write") - writes0
            stop.set()
            hammered = out.get(timeout=60)
        finally:
            stop.set()
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
        print(f"{r.label:<32}{pairs:>8}{stale:>8}{span / pairs * 1e3:>9.2f}{hammered:>14}{hits:>8.0f}{writes:>13.0f}"
              + (f"   STALE, first (pair, read): {examples}" if examples else ""))
        out_report[r.label] = {"pairs": pairs, "stale": stale, "examples": examples, "pair_ms": span / pairs * 1e3,
                               "hammer_calls": hammered, "hits": hits, "write_invalidations": writes}
    print("hits: all hits of the waggle meanwhile (the racing reader's); write drops: "
          "waggle_cache_invalidations_total{cause=\"write\"}")
    report["read_your_writes"] = out_report


# -- 4 ---------------------------------------------------------------------------------------------------------
def section_memory(args: argparse.Namespace, procs: Processes, workdir: Path, uri: str, off: Waggle,
                   part_bytes: int, report: dict[str, Any]) -> None:
    max_bytes = int(args.max_mb * 1024 * 1024)
    w = start_waggle(procs, workdir / "memory", f"waggle, cache.max-bytes {args.max_mb:g} MiB", uri, "events",
                     False, max_bytes=max_bytes)
    rss0 = rss_mb(w.proc.pid)
    per_part = part_bytes / args.partitions
    biggest = min(args.partitions, int(max_bytes / 4 / per_part * 0.95))  # a reply over a quarter is not kept
    calls = [get_table_req(DB, f"m{i:04d}") for i in range(args.tables)]
    est = args.tables * 2500.0
    k = 0
    step = max(10, biggest // 40)
    while est < 5 * max_bytes:
        k = k + step if k + step <= biggest else step + (k + step) % biggest  # distinct max_parts, wrapping
        while get_partitions_req(DB, k) in calls:
            k += 1
        calls.append(get_partitions_req(DB, k))
        est += k * per_part
    conn = Raw(w.port)
    time.sleep(1.0)  # the log read through once: entries are kept
    samples: list[float] = []
    working = 0
    started = time.monotonic()
    for n in range(2):
        for req in random.sample(calls, len(calls)):
            reply = conn.call(req)
            if n == 0:
                working += len(reply) + len(req) + 200
            samples.append(metric(w, "waggle_cache_bytes", metastore="primary"))
    span = time.monotonic() - started
    final = metric(w, "waggle_cache_bytes", metastore="primary")
    evictions = metric(w, "waggle_cache_evictions_total", metastore="primary")
    hits = metric(w, "waggle_cache_hits_total", metastore="primary")
    rss1, rss_off = rss_mb(w.proc.pid), rss_mb(off.proc.pid)
    conn.close()
    print(f"\n4. memory: a waggle with cache.max-bytes {max_bytes:,} read a working set of {len(calls)} distinct "
          f"replies ({args.tables} get_table of distinct tables,\n   {len(calls) - args.tables} get_partitions of "
          f"distinct max_parts up to {biggest}), {working:,} bytes ({working / max_bytes:.1f}x the bound), "
          f"twice in random order ({span:.0f} s)")
    print(f"   waggle_cache_bytes: at the end {final:,.0f} ({final / max_bytes:.3f}x max-bytes); sampled after "
          f"every call: max {max(samples):,.0f} ({max(samples) / max_bytes:.3f}x), min over the second pass "
          f"{min(samples[len(calls):]):,.0f}")
    print(f"   evictions {evictions:.0f}, hits {hits:.0f}; RSS {rss0:.1f} MB at start, {rss1:.1f} MB after "
          f"(a cache-off waggle beside it: {rss_off:.1f} MB)")
    report["memory"] = {"max_bytes": max_bytes, "working_set_bytes": working, "final_bytes": final,
                        "max_sampled_bytes": max(samples), "min_sampled_second_pass": min(samples[len(calls):]),
                        "evictions": evictions, "hits": hits, "rss_start_mb": rss0, "rss_end_mb": rss1,
                        "rss_cache_off_mb": rss_off, "calls": len(calls)}
    procs.stop(w.proc)


# -- summary ---------------------------------------------------------------------------------------------------
def summary(report: dict[str, Any]) -> None:
    rows: list[tuple[str, str, bool]] = []
    for call, by in report.get("hits", {}).items():
        for lbl in CACHED:
            v = by[lbl]["p50_ratio"]
            rows.append((f"1. {call} hit p50 <= 0.3x direct, {lbl.removeprefix('waggle ')}",
                         f"{v:.3f}x ({by[lbl]['p50_ms']:.3f} vs {by[DIRECT]['p50_ms']:.3f} ms)", v <= 0.3))
    for call, by in report.get("cpu", {}).items():
        for lbl in CACHED:
            v = by[lbl]["vs_relay"]
            rows.append((f"1. {call} hit CPU <= relay's, {lbl.removeprefix('waggle ')}",
                         f"{v:.2f}x ({by[lbl]['us_per_call']:.0f} vs {by[RELAY]['us_per_call']:.0f} us)", v <= 1.0))
    for lbl in CACHED:
        f = report.get("freshness", {}).get(lbl)
        if f:
            rows.append((f"2. freshness p99 <= 1 s, {lbl.removeprefix('waggle ')}",
                         f"p99 {f['p99_s']:.3f} s (p50 {f['p50_s']:.3f}, {f['unseen']} unseen)",
                         f["p99_s"] <= 1.0 and f["unseen"] == 0))
    for lbl, r in report.get("read_your_writes", {}).items():
        rows.append((f"3. stale reads after own write = 0, {lbl.removeprefix('waggle ')}",
                     f"{r['stale']} of {r['pairs']}", r["stale"] == 0))
    m = report.get("memory")
    if m:
        ratio = m["final_bytes"] / m["max_bytes"]
        rows.append(("4. waggle_cache_bytes within max-bytes +-10%", f"{ratio:.3f}x ({m['final_bytes']:,.0f} B)",
                     0.9 <= ratio <= 1.1))
        peak = m["max_sampled_bytes"] / m["max_bytes"]
        rows.append(("4. never over 1.1x max-bytes (sampled after every call)", f"{peak:.3f}x", peak <= 1.1))
    print("\nsummary")
    for name, figure, ok in rows:
        print(f"  {name:<72}{figure:<42}{'MET' if ok else 'NOT MET'}")
    report["summary"] = [{"target": n, "figure": f, "met": ok} for n, f, ok in rows]


# -- the bench -------------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1000, help="measured rounds of get_table")
    ap.add_argument("--big-rounds", type=int, default=30, help="measured rounds of get_partitions")
    ap.add_argument("--partitions", type=int, default=3000)
    ap.add_argument("--cpu-calls", type=int, default=1000, help="get_table calls per CPU measurement")
    ap.add_argument("--cpu-big-calls", type=int, default=20, help="get_partitions calls per CPU measurement")
    ap.add_argument("--cpu-repeats", type=int, default=3)
    ap.add_argument("--fresh-seconds", type=float, default=10.0)
    ap.add_argument("--pairs", type=int, default=10000, help="read-your-writes pairs through the primary (a tenth "
                    "of them behind the prefix)")
    ap.add_argument("--max-mb", type=float, default=8.0, help="cache.max-bytes of section 4, MiB")
    ap.add_argument("--tables", type=int, default=100, help="distinct small tables in section 4's working set")
    ap.add_argument("--jit-warmup", type=float, default=20.0, help="seconds of load warming the metastore up first")
    ap.add_argument("--quick", action="store_true", help="a smoke run of about a minute")
    ap.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.big_rounds, args.cpu_calls, args.cpu_big_calls, args.cpu_repeats = 200, 6, 300, 4, 1
        args.fresh_seconds, args.pairs, args.tables, args.jit_warmup = 3.0, 500, 40, 5.0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)
    return run_bench("waggle-bench-cache-", run_all, args, {"args": vars(args), "cores": os.cpu_count()})


def run_all(args: argparse.Namespace, workdir: Path, procs: Processes, report: dict[str, Any]) -> None:
    store = LocalMetastore(workdir / "hms", fast_start=False, heap="2g").start()
    procs.stores.append(store)
    store.wait_ready(timeout=180)
    t = time.monotonic()
    seed(store.port, store.warehouse, args.partitions, args.tables)
    print(f"metastore {store.uri}: seeded {DB} (small, parts with {args.partitions} partitions, fresh, ryw, "
          f"{args.tables} small tables) in {time.monotonic() - t:.0f} s", flush=True)
    relay, relay_port = start_relay(procs, workdir, store.port)
    print(f"warming up the metastore's JIT: {args.jit_warmup:g} s of get_table at 16 connections ...", flush=True)
    load(workdir, store.port, [get_table_req(DB)], 16, 0.1, args.jit_warmup)
    ws = {label: start_waggle(procs, workdir / key, label, store.uri, cache, prefixed)
          for key, label, cache, prefixed in (("p-off", P_OFF, "off", False), ("p-ev", P_EV, "events", False),
                                              ("x-off", X_OFF, "off", True), ("x-ev", X_EV, "events", True))}
    assert store.process is not None
    routes = [Route(DIRECT, store.port, DB), Route(RELAY, relay_port, DB, [relay.pid])]
    for label, w in ws.items():
        routes.append(Route(label, w.port, PDB if "prefixed" in label else DB, all_pids(w), w))
    print("routes: " + ", ".join(f"{r.label} :{r.port}" for r in routes) + f"; work files in {workdir}", flush=True)
    try:
        section_hits(args, routes, report)
        part_bytes = len(routes[0].raw().first[get_partitions_req(DB)])
    finally:
        for r in routes:
            if r.conn is not None:
                r.conn.close()
                r.conn = None
    section_freshness(args, routes, report)
    section_ryw(args, routes, report)
    section_memory(args, procs, workdir, store.uri, ws[P_OFF], part_bytes, report)
    summary(report)


if __name__ == "__main__":
    sys.exit(main())
