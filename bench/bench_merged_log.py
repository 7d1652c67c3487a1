"""The federation's merged notification log (``notification-log: federated``), in one run against two real local
Hive 2.3 metastores: how fresh it is, how fast it pages, and what its merger costs.

    python bench/bench_merged_log.py [--quick] [--json FILE] [--fresh-seconds 30] [--rate 50] [--events 100000]
                                     [--page-connections 8] [--idle-seconds 20]

Two Derby-backed Hive 2.3 metastores are started here (Java 17 and pyspark needed), each writing its notification
log as production metastores do: the **primary** (database ``bench_a``) and member **m2** behind
``database-prefix: m2_`` (database ``bench_b``, which clients see as ``m2_bench_b``). waggles run through the real
CLI, one process each, with ``database-resolution: PREFIXED`` and ``notification-log: federated``; one of them holds
the merger's lease at a time (a waggle stopped gives it up).

1. **Freshness.** Two writers, four connections each, straight at the members, alter a table of each
   (``bench_a.fresh_a``, ``bench_b.fresh_b``: a parameter ``bench_n`` = 1, 2, ...) ``--rate`` times a second each
   for ``--fresh-seconds`` (open loop). A consumer process polls waggle as Impala does: every 0.1 s
   ``get_current_notificationEventId``, then ``get_next_notification`` after its last id (1,000 at a time) until
   it has caught up. For each change, the delay from its ``alter_table`` returning (its commit) to the consumer
   receiving its event (matched by table and ``bench_n`` in the event's table after), and the changes never seen
   or seen twice. Targets: p99 <= 1 s, 0 missed, 0 duplicates. The merging waggle's CPU over the same window.
2. **Paging.** ``--events`` INSERT events (``fire_listener_event``, from ``--page-connections`` connections at
   once) are written into m2's log while the waggle merges; once journaled, they are paged whole with
   ``get_next_notification(maxEvents=1000)`` on one connection: straight from m2 (twice: before and after the
   others; the better pass is the reference), through the byte relay (bench/byte_relay.py), through a waggle
   started after the events were journaled (**cold**: it holds none of them, reads the journal's blocks from the
   primary and fetches every event from m2), the same waggle a second time, and through the merging waggle
   (which held the last 20,000 events it read at the start of its pass). Then the last ``--hot-events`` of them,
   direct and through the merging waggle, which holds them now (**hot**). Target: waggle >= 0.8x direct.
3. **The merger's cost.** A waggle whose members are reached through relays that count calls by method (the
   metastores' audit logs miss the notification calls) merges an idle federation for ``--idle-seconds``: its calls
   per second to each metastore, and its CPU. Then the CPU of the merging waggle (reached direct) while idle, and
   under section 1's load. No target: figures.

Every process started here is stopped at exit (also on Ctrl-C or an error); all traffic stays on 127.0.0.1.
Hive 2.3's message factory deserializes table objects with one shared ``TDeserializer``: two ``alter_table`` calls
at once in one metastore can fail ("Event not set up correctly", rolled back). The writers retry such a call (the
count is printed); the merger's own journal writes (``alter_table`` of views in the primary) can meet the same
failure and are retried by it a round later.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import re
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_cache import metric, pct, serve_files
from bench.bench_follow import CountingRelay
from bench.bench_load import Processes, Waggle, all_pids, cpu_of, http_get, run_bench, start_relay
from waggle.hms.gen.hive_metastore import ttypes
from waggle.local.client import hms_client
from waggle.local.jvm import free_port
from waggle.local.metastore import LocalMetastore
from waggle.local.seed import ensure_database, ensure_table

DB_A, DB_B = "bench_a", "bench_b"
PREFIX = "m2_"
FRESH = {"primary": ("bench_a", "fresh_a", "bench_a"), "m2": ("bench_b", "fresh_b", PREFIX + "bench_b")}
FIRED = "fired"
COLS = [("id", "int"), ("name", "string")]
WRITERS = 4  # connections writing to each member in section 1
POLL = 0.1  # the consumer's poll interval (Impala's events processor polls every few seconds at most)
PAGE = 1000
KEPT = 20_000  # what a merging waggle holds of the events it read (waggle.events.served.KEPT_EVENTS)
_COUNTER = re.compile(r'"bench_n":"(\d+)"')


# -- processes -------------------------------------------------------------------------------------------------
def start_waggle(procs: Processes, workdir: Path, label: str, primary_uri: str, m2_uri: str) -> Waggle:
    """One waggle through the real CLI: PREFIXED, the merged log on, m2 behind ``m2_``."""
    port, http = free_port(), free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    server = (f"port: {port}\nbind-address: 127.0.0.1\nendpoint.port: {http}\nmax-connections: 4000\n"
              "limits.max-in-flight-calls: 10000\nlimits.max-calls-per-metastore: 10000\nlogging.level: warning\n"
              "thrift-server-stop-timeout-val-in-seconds: 2\nhot-reload: false\n"
              "database-resolution: PREFIXED\nnotification-log: federated\n")
    federation = (f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {primary_uri}\n"
                  "  access-control-type: READ_AND_WRITE_AND_CREATE\n"
                  f"federated-meta-stores:\n  - name: m2\n    remote-meta-store-uris: {m2_uri}\n"
                  f"    database-prefix: {PREFIX}\n")
    return serve_files(procs, workdir, label, port, http, server, federation)


def wait_merging(w: Waggle, timeout: float = 60) -> float:
    """Seconds until ``w`` holds the merger's lease (``waggle_merged_log_merging`` 1) and has merged a round."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if metric(w, "waggle_merged_log_merging") == 1:
            time.sleep(0.6)  # a round or two: both members' positions journaled
            return time.monotonic() - t0
        if w.proc.poll() is not None:
            break
        time.sleep(0.1)
    raise SystemExit(f"{w.label} did not take the merger's lease:\n{w.log.read_text(errors='replace')[-3000:]}")


def current(port: int) -> int:
    with hms_client("127.0.0.1", port, timeout=60) as c:
        return int(c.get_current_notificationEventId().eventId)


def wait_current(port: int, at_least: int, timeout: float) -> float:
    t0 = time.monotonic()
    while (now := current(port)) < at_least:
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"the merged log reached id {now}, not {at_least}, in {timeout:.0f} s")
        time.sleep(0.1)
    return time.monotonic() - t0


def seed(store: LocalMetastore, db: str, fresh: str) -> None:
    with hms_client("127.0.0.1", store.port, timeout=120) as c:
        ensure_database(c, db, f"file://{store.warehouse}/{db}.db")
        for t in (fresh, FIRED):
            ensure_table(c, db, t, f"file://{store.warehouse}/{db}.db/{t}", COLS)


# -- 1. freshness ----------------------------------------------------------------------------------------------
def consumer(port: int, start: int, stop: Any, matched: Any, ready: Any, out: Any) -> None:
    """Polls waggle's log as Impala does; sends back every event of the fresh tables it received, with when."""
    logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)
    names = {(db, t): member for member, (_, t, db) in FRESH.items()}
    seen: list[tuple[str, int, int, float]] = []  # member, counter, event id, when received
    ids: list[int] = []
    other_names: Counter[str] = Counter()
    errors, polls, pages = 0, 0, 0
    last = start
    ready.set()
    while not stop.is_set():
        began = time.monotonic()
        try:
            with hms_client("127.0.0.1", port, timeout=30) as c:
                while not stop.is_set():
                    began = time.monotonic()
                    polls += 1
                    newest = int(c.get_current_notificationEventId().eventId)
                    while newest > last:
                        events = c.get_next_notification(
                            ttypes.NotificationEventRequest(lastEvent=last, maxEvents=PAGE)).events or []
                        now = time.monotonic()
                        pages += 1
                        if not events:
                            break
                        for e in events:
                            ids.append(int(e.eventId))
                            member = names.get((e.dbName, e.tableName))
                            if member is None:
                                if (e.tableName or "").startswith("fresh_"):
                                    other_names[f"{e.dbName}.{e.tableName}"] += 1
                                continue
                            if e.eventType != "ALTER_TABLE":
                                continue
                            after = json.loads(e.message).get("tableObjAfterJson", "")
                            found = _COUNTER.search(after)
                            if found:
                                seen.append((member, int(found.group(1)), int(e.eventId), now))
                                with matched.get_lock():
                                    matched.value += 1
                        last = int(events[-1].eventId)
                    stop.wait(max(0.0, began + POLL - time.monotonic()))
        except Exception:
            errors += 1
            stop.wait(max(0.0, began + POLL - time.monotonic()))
    out.put({"seen": seen, "ids": ids, "errors": errors, "polls": polls, "pages": pages,
             "other_names": dict(other_names)})


def writer(port: int, db: str, table: str, rate: float, count: int, t0: float, done: dict[int, float],
           retried: list[int], k: int) -> None:
    """Connection ``k`` of :data:`WRITERS` altering ``db.table``: calls k+1, k+1+WRITERS, ... of ``count``, call i due
    at t0 + i / rate (open loop: a slow call delays only its own connection's next ones); each change's commit
    time."""
    with hms_client("127.0.0.1", port, timeout=60) as c:
        tbl = c.get_table(db, table)
        for i in range(k + 1, count + 1, WRITERS):
            delay = t0 + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            tbl.parameters["bench_n"] = str(i)
            for attempt in range(10):
                try:
                    c.alter_table(db, table, tbl)
                    break
                except ttypes.MetaException:
                    retried[0] += 1  # Hive 2.3's shared deserializer (see the docstring); rolled back
                    if attempt == 9:
                        raise
            done[i] = time.monotonic()


def section_freshness(args: argparse.Namespace, stores: dict[str, LocalMetastore], w: Waggle,
                      report: dict[str, Any]) -> None:
    ctx = multiprocessing.get_context("fork")
    count = int(args.fresh_seconds * args.rate)
    stop, ready, out, matched = ctx.Event(), ctx.Event(), ctx.Queue(), ctx.Value("i", 0)
    start = current(w.port)
    member_start = {m: current(s.port) for m, s in stores.items()}
    p = ctx.Process(target=consumer, args=(w.port, start, stop, matched, ready, out), daemon=True)
    p.start()
    pids = all_pids(w)
    try:
        if not ready.wait(60):
            raise SystemExit("the consumer did not start")
        time.sleep(1.0)
        done: dict[str, dict[int, float]] = {m: {} for m in FRESH}
        retried = {m: [0] for m in FRESH}
        t0 = time.monotonic() + 0.3
        threads = [threading.Thread(target=writer, args=(stores[m].port, db, table, args.rate, count, t0, done[m],
                                                         retried[m], k), daemon=True)
                   for m, (db, table, _) in FRESH.items() for k in range(WRITERS)]
        cpu0, c0 = cpu_of(pids), time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        cpu1, c1 = cpu_of(pids), time.monotonic()
        span = max(max(d.values()) for d in done.values()) - t0
        deadline = time.monotonic() + 15
        while matched.value < 2 * count and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # a duplicate after the last one would come now
        stop.set()
        got = out.get(timeout=120)
    finally:
        stop.set()
        p.join(10)
        if p.is_alive():
            p.kill()
            p.join()
    late = {m: sum(1 for i, t in d.items() if t - (t0 + i / args.rate) > 1 / args.rate) for m, d in done.items()}
    first: dict[tuple[str, int], float] = {}
    times: Counter[tuple[str, int]] = Counter()
    for member, n, _, when in got["seen"]:
        times[(member, n)] += 1
        first.setdefault((member, n), when)
    id_twice = sum(c - 1 for c in Counter(got["ids"]).values() if c > 1)
    out_report: dict[str, Any] = {}
    rows: list[tuple[str, list[float], int, int]] = []
    for m in FRESH:
        lat = [first[(m, i)] - t for i, t in done[m].items() if (m, i) in first]
        missed = sum(1 for i in done[m] if (m, i) not in first)
        twice = sum(c - 1 for (mm, _), c in times.items() if mm == m and c > 1)
        rows.append((m, lat, missed, twice))
    rows.append(("both", [x for r in rows for x in r[1]], sum(r[2] for r in rows), sum(r[3] for r in rows)))
    order_ok = got["ids"] == sorted(set(got["ids"]))
    print(f"\n1. freshness: {count} alter_table calls at each member ({args.rate:g}/s each, open loop, {WRITERS} "
          f"connections each) over {span:.1f} s; late by over one interval: {late}; retried (Hive's shared "
          f"deserializer): { {m: r[0] for m, r in retried.items()} }.\n   A consumer polls waggle every "
          f"{POLL:g} s (get_current_notificationEventId, then get_next_notification after its last id).\n"
          f"   Seconds from a change's alter_table returning to the consumer receiving its event")
    print(f"{'member':<10}{'events':>8}{'p50 s':>9}{'p99 s':>9}{'max s':>9}{'missed':>8}{'twice':>7}")
    for m, lat, missed, twice in rows:
        p50, p99, mx = pct(lat, 0.5), pct(lat, 0.99), max(lat, default=float("nan"))
        print(f"{m:<10}{len(lat):>8}{p50:>9.3f}{p99:>9.3f}{mx:>9.3f}{missed:>8}{twice:>7}")
        out_report[m] = {"events": len(lat), "p50_s": p50, "p99_s": p99, "max_s": mx, "missed": missed,
                         "twice": twice}
    for m, _, missed, _ in rows[:2]:
        if missed:
            explain_missed(stores[m].port, m, member_start[m], {i for i in done[m] if (m, i) not in first},
                           stores["primary"].port, w.port)
    cpu = (cpu1 - cpu0) / (c1 - c0)
    print(f"consumer: {got['polls']} polls, {got['pages']} pages, {len(got['ids'])} events received (every member "
          f"event merged meanwhile, the fresh tables' and others), ids increasing and each once: {order_ok} "
          f"({id_twice} ids twice); errors {got['errors']}; fresh tables under other names: "
          f"{got['other_names'] or 'none'}")
    print(f"the merging waggle's CPU over the writing: {cpu:.1%} of a core "
          f"({cpu1 - cpu0:.2f} s in {c1 - c0:.1f} s)")
    out_report.update({"cpu_share_under_load": cpu, "id_twice": id_twice, "ids_in_order": order_ok,
                       "consumer_errors": got["errors"], "late": late,
                       "writer_retries": {m: r[0] for m, r in retried.items()}})
    report["freshness"] = out_report


def explain_missed(port: int, member: str, after: int, missed: set[int], primary: int, waggle: int) -> None:
    """Where the changes the consumer never saw are: in the member's own log, in the journal (read from the
    primary's views), and what waggle serves under their merged ids."""
    db, table, _ = FRESH[member]
    found: dict[int, list[int]] = {}
    unmatched: list[tuple[int, str]] = []  # the table's ALTER_TABLE events whose table after names no counter
    with hms_client("127.0.0.1", port, timeout=60) as c:
        while True:
            events = c.get_next_notification(ttypes.NotificationEventRequest(lastEvent=after,
                                                                             maxEvents=PAGE)).events or []
            if not events:
                break
            for e in events:
                if (e.dbName, e.tableName, e.eventType) == (db, table, "ALTER_TABLE"):
                    hit = _COUNTER.search(json.loads(e.message).get("tableObjAfterJson", ""))
                    if hit is None:
                        unmatched.append((int(e.eventId), e.message))
                    elif int(hit.group(1)) in missed:
                        found.setdefault(int(hit.group(1)), []).append(int(e.eventId))
            after = int(events[-1].eventId)
    some = sorted(missed)[:8]
    refs = journal_refs(primary)
    for n in some[:3]:
        for event_id in found.get(n, []):
            hits = [r for r in refs if r.member == member and r.event == event_id]
            served = []
            for r in hits:
                with hms_client("127.0.0.1", waggle, timeout=60) as c:
                    got = c.get_next_notification(ttypes.NotificationEventRequest(lastEvent=r.merged - 1,
                                                                                  maxEvents=1)).events or []
                served.append([(e.eventId, e.dbName, e.tableName, e.eventType) for e in got])
            near = [(r.merged, r.epoch, r.event) for r in refs if r.member == member and (
                abs(r.event - event_id) <= 3 or r.event == 0)]
            print(f"   bench_n {n}: {member} id {event_id} journaled as {hits}; waggle serves there: {served}; "
                  f"{member}'s journaled ids near it (merged, epoch, id; id 0: lost): {near[:12]}")
    print(f"   MISSED at {member}: {len(missed)} changes, e.g. bench_n {some}; in {member}'s own log: "
          f"{len(found)} of them, at member ids {[found.get(n) for n in some]}; its events of {db}.{table} naming "
          f"no bench_n: {len(unmatched)}" + (f", e.g. id {unmatched[0][0]}: {unmatched[0][1][:600]}" if unmatched
                                             else ""))


def journal_refs(primary: int) -> list[Any]:
    """Every merged id of the journal with the member event it stands for, read straight from the primary."""
    from waggle.events.journal import BLOCK_PREFIX, Block, block_first, block_name, refs_after

    with hms_client("127.0.0.1", primary, timeout=60) as c:
        firsts = sorted(f for f in (block_first(t) for t in c.get_tables("waggle_sys", BLOCK_PREFIX + "*"))
                        if f is not None)
        blocks = [Block.parse(f, c.get_table("waggle_sys", block_name(f)).parameters or {})
                  for f in firsts]
    return list(refs_after(blocks, 0))


# -- 2. paging -------------------------------------------------------------------------------------------------
def fire(port: int, connections: int, count: int, seconds: float) -> tuple[float, int, int]:
    """``count`` INSERT events in ``bench_b.fired`` (Hive 2's ``fire_listener_event``: waggle's generated types
    number InsertEventRequestData's fields as Hive 3+ does, so hmsclient's), stopping after ``seconds``; seconds
    taken, calls retried, events written."""
    from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore as H2
    from hmsclient.genthrift.hive_metastore import ttypes as h2
    from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
    from thrift.transport.TSocket import TSocket
    from thrift.transport.TTransport import TBufferedTransport

    retried, written = [0], [0]
    deadline = time.monotonic() + seconds

    def one(share: range) -> None:
        sock = TSocket("127.0.0.1", port)
        sock.setTimeout(120_000)
        transport = TBufferedTransport(sock)
        transport.open()
        try:
            c = H2.Client(TBinaryProtocolAccelerated(transport))
            for i in share:
                if time.monotonic() > deadline:
                    return
                files = [f"file:/bench/fired/part-{i:07d}"]
                request = h2.FireEventRequest(successful=True, dbName=DB_B, tableName=FIRED,
                                              data=h2.FireEventRequestData(
                                                  insertData=h2.InsertEventRequestData(filesAdded=files)))
                for attempt in range(10):
                    try:
                        c.fire_listener_event(request)
                        written[0] += 1
                        break
                    except h2.MetaException:
                        retried[0] += 1
                        if attempt == 9:
                            raise
        finally:
            transport.close()

    t0 = time.monotonic()
    threads = [threading.Thread(target=one, args=(range(k, count, connections),)) for k in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - t0, retried[0], written[0]


def page_all(port: int, after: int, total: int) -> tuple[float, int, int, str | None]:
    """Page ``total`` events after id ``after`` 1,000 a call on one new connection: seconds, events, bytes of
    their messages, and the error that ended it early (None: none)."""
    got, size, calls = 0, 0, 0
    with hms_client("127.0.0.1", port, timeout=600) as c:
        c.get_current_notificationEventId()  # the connection set up
        t0 = time.perf_counter()
        while got < total:
            try:
                events = c.get_next_notification(ttypes.NotificationEventRequest(lastEvent=after,
                                                                                 maxEvents=PAGE)).events or []
            except Exception as exc:  # reported, and the route counted as failed
                return time.perf_counter() - t0, got, size, f"after {got:,} events: {type(exc).__name__}: {exc}"
            calls += 1
            if not events:
                raise SystemExit(f"port {port}: no events after id {after}, {got} of {total} paged")
            got += len(events)
            size += sum(len(e.message or "") for e in events)
            after = int(events[-1].eventId)
        took = time.perf_counter() - t0
    return took, got, size, None


def section_paging(args: argparse.Namespace, workdir: Path, procs: Processes, stores: dict[str, LocalMetastore],
                   w: Waggle, report: dict[str, Any]) -> None:
    m2 = stores["m2"]
    _relay, relay_port = start_relay(procs, workdir, m2.port)
    d0, w0 = current(m2.port), current(w.port)
    print(f"\n2. paging: writing {args.events:,} INSERT events into m2's log (fire_listener_event, "
          f"{args.page_connections} connections, {args.max_write_seconds:g} s at most) while the waggle merges ...",
          flush=True)
    took, retried, n = fire(m2.port, args.page_connections, args.events, args.max_write_seconds)
    d1 = current(m2.port)
    caught = wait_current(w.port, w0 + n, timeout=max(120, n / 200))
    w1 = current(w.port)
    print(f"   {n:,} written in {took:.1f} s ({n / took:,.0f}/s, {retried} retried); m2's ids {d0 + 1}..{d1}, "
          f"merged ids {w0 + 1}..{w1} ({caught:.1f} s after the last write)", flush=True)
    if d1 - d0 != n or w1 - w0 != n:
        print(f"   NOTE: {d1 - d0} member ids and {w1 - w0} merged ids for {n} events written")
    cold = start_waggle(procs, workdir / "cold", "waggle, cold", stores["primary"].uri, m2.uri)
    runs: list[tuple[str, int, int, tuple[float, int, int, str | None]]] = []

    def run(label: str, port: int, after: int, total: int) -> None:
        result = page_all(port, after, total)
        runs.append((label, port, total, result))
        print(f"   {label:<58}{result[1]:>8,} events{result[0]:>8.2f} s{result[1] / result[0]:>10,.0f}/s"
              + (f"   FAILED {result[3]}" if result[3] else ""), flush=True)

    run("direct (m2), first pass", m2.port, d0, n)
    run("byte relay", relay_port, d0, n)
    run("waggle started after they were journaled (cold)", cold.port, w0, n)
    run("the same waggle, second pass", cold.port, w0, n)
    run(f"the merging waggle (held the last {KEPT:,} it read)", w.port, w0, n)
    run("direct (m2), second pass", m2.port, d0, n)
    hot = min(args.hot_events, n)
    run(f"direct (m2), the last {hot:,}", m2.port, d1 - hot, hot)
    run(f"the merging waggle, the last {hot:,} (held: hot)", w.port, w1 - hot, hot)
    procs.stop(cold.proc)
    rate = {label: r[1] / r[0] if r[3] is None else 0.0 for label, _, _, r in runs}
    failed = {label: r[3] for label, _, _, r in runs if r[3]}
    direct = max(rate["direct (m2), first pass"], rate["direct (m2), second pass"])
    hot_direct = rate[f"direct (m2), the last {hot:,}"]
    sizes = {label: r[2] / max(1, r[1]) for label, _, _, r in runs}
    print(f"\n   events/s paging {n:,} events, maxEvents {PAGE}, one connection, decoded by the client "
          "(fastbinary); vs direct: the better direct pass")
    print(f"{'route':<58}{'events/s':>10}{'vs direct':>11}{'msg bytes':>11}")
    out_report: dict[str, Any] = {"events": n, "write_seconds": took, "merge_wait_seconds": caught, "routes": {},
                                  "failed": failed}
    for label, _, total, _ in runs:
        ref = hot_direct if total == hot and "last" in label else direct
        print(f"{label:<58}{rate[label]:>10,.0f}{rate[label] / ref:>10.2f}x{sizes[label]:>11.0f}")
        out_report["routes"][label] = {"events_per_s": rate[label], "vs_direct": rate[label] / ref,
                                       "message_bytes": sizes[label]}
    print("msg bytes: mean length of an event's message as received (m2_ renamed inside through waggle); a route "
          "that failed part-way counts 0/s" + "".join(f"\n   FAILED: {k}: {v}" for k, v in failed.items()))
    out_report["cold_vs_direct"] = rate["waggle started after they were journaled (cold)"] / direct
    out_report["merging_vs_direct"] = rate[f"the merging waggle (held the last {KEPT:,} it read)"] / direct
    out_report["hot_vs_direct"] = rate[f"the merging waggle, the last {hot:,} (held: hot)"] / hot_direct
    out_report["relay_vs_direct"] = rate["byte relay"] / direct
    report["paging"] = out_report


# -- 3. the merger's cost --------------------------------------------------------------------------------------
def section_idle(args: argparse.Namespace, workdir: Path, procs: Processes, stores: dict[str, LocalMetastore],
                 report: dict[str, Any]) -> None:
    relays = {m: CountingRelay(s.port) for m, s in stores.items()}
    for r in relays.values():
        r.start()
    w = start_waggle(procs, workdir / "counted", "waggle, counted", f"thrift://127.0.0.1:{relays['primary'].port}",
                     f"thrift://127.0.0.1:{relays['m2'].port}")
    try:
        took = wait_merging(w)
        time.sleep(2.0)
        pids = all_pids(w)
        c0 = {m: r.snapshot() for m, r in relays.items()}
        cpu0, t0 = cpu_of(pids), time.monotonic()
        time.sleep(args.idle_seconds)
        c1 = {m: r.snapshot() for m, r in relays.items()}
        cpu1, t1 = cpu_of(pids), time.monotonic()
    finally:
        procs.stop(w.proc)
        for r in relays.values():
            r.close()
    span = t1 - t0
    print(f"\n3. the merger's cost, idle: a waggle reaching both members through relays that count calls took the "
          f"lease in {took:.1f} s;\n   over {span:.1f} s with nothing written, its calls per second to each "
          "metastore, by method")
    out_report: dict[str, Any] = {"idle_calls_per_s": {}}
    print(f"{'metastore':<12}{'calls/s':>9}   by method (calls/s)")
    for m in relays:
        diff = c1[m] - c0[m]
        total = sum(diff.values()) / span
        detail = ", ".join(f"{k} {v / span:.2f}" for k, v in diff.most_common())
        print(f"{m:<12}{total:>9.2f}   {detail or '-'}")
        out_report["idle_calls_per_s"][m] = {"total": total, **{k: v / span for k, v in diff.items()}}
    cpu = (cpu1 - cpu0) / span
    print(f"its CPU meanwhile: {cpu:.2%} of a core (the relays' own CPU is this bench's, not counted)")
    out_report["idle_cpu_share_counted"] = cpu
    report["merger"] = out_report


def idle_cpu(args: argparse.Namespace, w: Waggle, report: dict[str, Any]) -> None:
    pids = all_pids(w)
    cpu0, t0 = cpu_of(pids), time.monotonic()
    time.sleep(args.idle_seconds)
    cpu = (cpu_of(pids) - cpu0) / (time.monotonic() - t0)
    print(f"\n   the merging waggle (members reached direct), idle for {args.idle_seconds:g} s: {cpu:.2%} of a "
          "core; under section 1's load: see there", flush=True)
    report.setdefault("merger", {})["idle_cpu_share"] = cpu


# -- summary ---------------------------------------------------------------------------------------------------
def summary(report: dict[str, Any]) -> None:
    rows: list[tuple[str, str, bool | None]] = []
    f = report.get("freshness")
    if f:
        b = f["both"]
        rows.append(("1. freshness p99 <= 1 s (both members)", f"p99 {b['p99_s']:.3f} s (p50 {b['p50_s']:.3f}, "
                     f"max {b['max_s']:.3f})", b["p99_s"] <= 1.0))
        rows.append(("1. events missed = 0", f"{b['missed']}", b["missed"] == 0))
        rows.append(("1. events seen twice = 0", f"{b['twice']} (ids twice: {f['id_twice']})",
                     b["twice"] == 0 and f["id_twice"] == 0))
    p = report.get("paging")
    if p:
        for key, name in (("cold_vs_direct", "cold waggle"), ("merging_vs_direct", "merging waggle"),
                          ("hot_vs_direct", "merging waggle, events held (hot)")):
            rows.append((f"2. paging >= 0.8x direct, {name}", f"{p[key]:.2f}x", p[key] >= 0.8))
        rows.append(("2. (for scale) the byte relay", f"{p['relay_vs_direct']:.2f}x", None))
    m = report.get("merger")
    if m:
        calls = m.get("idle_calls_per_s", {})
        rows.append(("3. merger's calls/s while idle (no target)",
                     ", ".join(f"{k} {v['total']:.1f}" for k, v in calls.items()), None))
        cpu = [f"idle {m['idle_cpu_share']:.1%}" if "idle_cpu_share" in m else "",
               f"under 2x load {f['cpu_share_under_load']:.1%}" if f else ""]
        rows.append(("3. merging waggle's CPU, share of a core (no target)", ", ".join(c for c in cpu if c), None))
    print("\nsummary")
    for name, figure, ok in rows:
        print(f"  {name:<56}{figure:<46}{'-' if ok is None else 'MET' if ok else 'NOT MET'}")
    report["summary"] = [{"target": n, "figure": fig, "met": ok} for n, fig, ok in rows]


# -- the bench -------------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fresh-seconds", type=float, default=30.0, help="seconds the two writers write")
    ap.add_argument("--rate", type=float, default=50.0, help="changes per second at each member")
    ap.add_argument("--events", type=int, default=100_000, help="events paged in section 2")
    ap.add_argument("--max-write-seconds", type=float, default=600.0, help="section 2 writes for this long at "
                    "most (a busy machine): the events written then are paged")
    ap.add_argument("--hot-events", type=int, default=15_000, help="the last events paged again, held")
    ap.add_argument("--page-connections", type=int, default=8, help="connections writing section 2's events")
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    ap.add_argument("--quick", action="store_true", help="a smoke run of about two minutes")
    ap.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    args = ap.parse_args()
    if args.quick:
        args.fresh_seconds, args.events, args.hot_events, args.idle_seconds = 8.0, 5_000, 2_000, 6.0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)
    return run_bench("waggle-bench-merged-log-", run_all, args, {"args": vars(args), "cores": os.cpu_count()})


def run_all(args: argparse.Namespace, workdir: Path, procs: Processes, report: dict[str, Any]) -> None:
    stores = {m: LocalMetastore(workdir / f"hms-{m}", fast_start=False, heap="2g").start() for m in FRESH}
    procs.stores.extend(stores.values())
    for m, s in stores.items():
        s.wait_ready(timeout=180)
        seed(s, FRESH[m][0], FRESH[m][1])
    print("metastores: " + ", ".join(f"{m} {s.uri}" for m, s in stores.items()) + f"; work files in {workdir}",
          flush=True)
    section_idle(args, workdir, procs, stores, report)  # first: it takes the lease, and gives it up when stopped
    w = start_waggle(procs, workdir / "merging", "waggle, merging", stores["primary"].uri, stores["m2"].uri)
    took = wait_merging(w)
    print(f"the merging waggle :{w.port} took the lease in {took:.1f} s", flush=True)
    idle_cpu(args, w, report)
    section_freshness(args, stores, w, report)
    section_paging(args, workdir, procs, stores, w, report)
    lag = http_get(w.http, "/metrics")
    report["lag_metric"] = [line for line in lag.splitlines() if line.startswith("waggle_merged_log_lag_seconds")]
    summary(report)


if __name__ == "__main__":
    sys.exit(main())
