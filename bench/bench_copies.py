"""Reads answered from copies (``read-from-copies``, issue 26) against the same reads answered by the member,
side by side in one run.

    .venv/bin/python bench/bench_copies.py [--partitions 3000] [--rounds 2000] [--big-rounds 40]
                                           [--dead-member refused|silent] [--cpu-calls 1000] [--cpu-repeats 3]

Two local Derby-backed Hive 2.3 metastores are started (Java 17 and pyspark needed), full JIT: ``lake`` (the
source) and ``primary``. ``lake`` gets ``bench_db.parts`` (``--partitions`` partitions) and ``bench_db.small``
(unpartitioned), the tables of bench/bench_proxy.py. Both are copied into the primary's ``copy_bench_db`` by the
real CLI, ``python -m waggle sync --source lake --tables 'bench_db.*' --target-database copy_bench_db
--mode copy`` (copy mode: its time is printed).

Three waggle instances run as subprocesses through the real CLI, each in ``PREFIXED`` mode over the same primary,
with ``lake`` a federated member behind ``lake_`` (clients name ``lake_bench_db``):

* **never**: ``read-from-copies: never``, the reads are answered by ``lake`` (member-served);
* **prefer**: ``read-from-copies: prefer``, ``lake`` up, the reads are answered from the copy (its partition
  reads still ask ``lake`` for its partitions, in parallel with the copy);
* **when-down**: ``read-from-copies: when-down`` with ``lake``'s URI pointing at a dead port: with
  ``--dead-member refused`` (the default) nothing listens there; with ``silent`` a socket accepts connections and
  never answers, so that any call that reached the member would wait for its timeout (``connect-timeout`` /
  ``read-timeout`` 2 s there). The bench waits until waggle sees the member down, then every read is answered
  from the copy.

Before measuring, the bench checks what each route answered: names (``lake_bench_db``), the storage locations
(``lake``'s warehouse or the copy's), and ``waggle.served-from`` / ``waggle.served-reason``.

Each round makes the call on every route in random order (bench_proxy's ``measure``): direct to ``lake``; the byte
relay to ``lake`` (bench/byte_relay.py, the cost of the extra hop alone); the three waggles; through the
when-down waggle to the copy table by its own name (``copy_bench_db``: a read of a local primary table); direct to
the primary's copy table. Calls: ``get_table`` (``small``) and ``get_partitions`` (all of ``parts``).

The table prints p50, p99 and max per route, then the targets of issue 26:

* copy-served vs member-served through waggle (prefer / never, and when-down / never): p50 <= 1.10x;
* with ``lake`` down, a read served from the copy vs a read of a local primary table through waggle: as fast
  (p50 <= 1.10x), and no call waits for a timeout (the max of the when-down route is printed, against the 2 s
  timeout).

Then the CPU each waggle process spends per call (bench/cpu_cost.py, the best of ``--cpu-repeats`` runs of
``--cpu-calls`` calls; ``get_partitions``: a hundredth as many), the byte relay's for reference: waggle's own cost
of each way of answering, which the machine's noise does not inflate as it does latency.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cpu_cost
from bench_proxy import DB, Route, measure, pct, seed, start_relay, stop_processes

from waggle.local.client import hms_client
from waggle.local.jvm import free_port
from waggle.local.metastore import LocalMetastore

PREFIX = "lake_"
COPY_DB = "copy_bench_db"
SERVED_FROM = "waggle.served-from"
SERVED_REASON = "waggle.served-reason"
DEAD_TIMEOUT_MS = 2000  # the dead member's connect-timeout and read-timeout

DIRECT = "direct to lake"
RELAY = "byte relay to lake"
NEVER = "waggle never (lake answers)"
PREFER = "waggle prefer (from the copy)"
DOWN = "waggle when-down (lake down, copy)"
LOCAL = "waggle, local primary table"
PRIMARY = "direct to the primary's copy"


class Waggle:
    """A waggle subprocess in PREFIXED mode over ``primary_uri``, with ``lake`` at ``lake_uri`` as a member."""

    def __init__(self, workdir: Path, primary_uri: str, lake_uri: str, member_extra: str) -> None:
        self.port, self.endpoint = free_port(), free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "server.yml").write_text(
            f"port: {self.port}\nbind-address: 127.0.0.1\nendpoint.port: {self.endpoint}\n"
            "database-resolution: PREFIXED\n")
        (workdir / "federation.yml").write_text(
            f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {primary_uri}\n"
            f"federated-meta-stores:\n- name: lake\n  remote-meta-store-uris: {lake_uri}\n"
            f"  database-prefix: {PREFIX}\n{member_extra}")
        self.log = workdir / "waggle.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "waggle", "serve", "--server-config", str(workdir / "server.yml"),
             "--federation-config", str(workdir / "federation.yml")],
            stdout=subprocess.DEVNULL, stderr=open(self.log, "wb"), cwd=ROOT)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with hms_client("127.0.0.1", self.port, timeout=2) as c:
                    c.getStatus()
                return
            except Exception:
                time.sleep(0.1)
        raise SystemExit(f"waggle did not start; see {self.log}")

    def http(self, path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.endpoint}{path}", timeout=5) as r:
            return str(r.read().decode())

    def lake_up(self) -> bool:
        states = json.loads(self.http("/healthz"))["metastores"]
        return bool(states["lake"]["up"])


def silent_listener() -> tuple[socket.socket, int]:
    """A port whose connections are accepted (by the kernel, into the backlog) and never answered."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1024)
    return s, s.getsockname()[1]


def sync_copy(workdir: Path, primary_uri: str, lake_uri: str) -> tuple[list[str], float]:
    """Copy lake's bench_db.* into the primary's copy_bench_db with the real CLI; the command and its seconds."""
    fed = workdir / "sync-federation.yml"
    fed.write_text(f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {primary_uri}\n"
                   f"  access-control-type: READ_AND_WRITE_AND_CREATE\n"
                   f"federated-meta-stores:\n- name: lake\n  remote-meta-store-uris: {lake_uri}\n")
    report = workdir / "sync.json"
    cmd = [sys.executable, "-m", "waggle", "sync", "--federation-config", str(fed), "--source", "lake",
           "--tables", f"{DB}.*", "--target-database", COPY_DB, "--mode", "copy", "--master", "local[2]",
           "--no-progress", "--report", str(report)]
    log = workdir / "sync.log"
    t = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    seconds = time.perf_counter() - t
    tables = json.loads(report.read_text())["tables"] if report.exists() else []
    if proc.returncode != 0 or len(tables) != 2 or any(t["status"] != "ok" for t in tables):
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise SystemExit(f"waggle sync failed (exit {proc.returncode}): {shlex.join(cmd)}\n{tail}")
    return cmd, seconds


def under(location: str, directory: Path) -> bool:
    """Whether ``location`` (``file:/x``, ``file:///x``) is inside ``directory``."""
    return urlsplit(location).path.startswith(f"{directory}/")


def check(routes: dict[str, Route], lake_dir: Path, copy_dir: Path, partitions: int) -> None:
    """Fail unless each route answered as it should: names, locations, served-from and reason."""
    problems: list[str] = []
    for label, reason in ((NEVER, None), (PREFER, "prefer"), (DOWN, "down")):
        r = routes[label]
        t = r.client.get_table(r.db, "small")
        params = t.parameters or {}
        want_dir = lake_dir if reason is None else copy_dir
        if t.dbName != r.db:
            problems.append(f"{label}: get_table dbName {t.dbName!r}")
        if not under(t.sd.location, want_dir):
            problems.append(f"{label}: get_table location {t.sd.location!r}, not under {want_dir}")
        if params.get(SERVED_REASON) != reason:
            problems.append(f"{label}: {SERVED_REASON} {params.get(SERVED_REASON)!r}, expected {reason!r}")
        if reason and params.get(SERVED_FROM) != f"{COPY_DB}.small":
            problems.append(f"{label}: {SERVED_FROM} {params.get(SERVED_FROM)!r}")
        parts = r.client.get_partitions(r.db, "parts", -1)
        elsewhere = [p.sd.location for p in parts if not under(p.sd.location, want_dir)]
        names = {p.dbName for p in parts} - {r.db}
        if len(parts) != partitions or elsewhere or names:
            problems.append(f"{label}: get_partitions {len(parts)} partitions, {len(elsewhere)} not under "
                            f"{want_dir} (e.g. {elsewhere[:1]}), other dbNames {sorted(names)}")
    if problems:
        raise SystemExit("the routes did not answer as expected:\n  " + "\n  ".join(problems))
    print(f"checked: never answers with lake's locations, prefer and when-down with the copy's ({SERVED_FROM} "
          f"{COPY_DB}.small, reasons prefer and down); get_table and all {partitions} partitions", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=2000, help="rounds of get_table")
    ap.add_argument("--big-rounds", type=int, default=40, help="rounds of get_partitions")
    ap.add_argument("--cpu-calls", type=int, default=1000, help="get_table calls per CPU measurement")
    ap.add_argument("--cpu-repeats", type=int, default=3, help="CPU measurements per server (the best is kept)")
    ap.add_argument("--dead-member", choices=("refused", "silent"), default="refused",
                    help="the when-down waggle's lake URI: a port nothing listens on, or one that never answers")
    args = ap.parse_args()
    print("command: " + shlex.join([sys.executable, *sys.argv]), flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="waggle-bench-copies-"))
    stores: list[LocalMetastore] = []
    procs: list[subprocess.Popen[Any]] = []
    silent: socket.socket | None = None
    try:
        stores = [LocalMetastore(workdir / name, fast_start=False, heap="2g").start() for name in ("lake", "primary")]
        for s in stores:
            s.wait_ready()
        lake, primary = stores
        print(f"seeding {args.partitions} partitions into lake ...", flush=True)
        seed("127.0.0.1", lake.port, args.partitions, lake.warehouse)
        cmd, seconds = sync_copy(workdir, primary.uri, lake.uri)
        print(f"copied into the primary in {seconds:.1f}s: {shlex.join(cmd)}", flush=True)

        if args.dead_member == "silent":
            silent, dead_port = silent_listener()
        else:
            dead_port = free_port()
        timeouts = f"  connect-timeout: {DEAD_TIMEOUT_MS}\n  read-timeout: {DEAD_TIMEOUT_MS}\n"
        waggles = {
            NEVER: Waggle(workdir / "never", primary.uri, lake.uri, "  read-from-copies: never\n"),
            PREFER: Waggle(workdir / "prefer", primary.uri, lake.uri, "  read-from-copies: prefer\n"),
            DOWN: Waggle(workdir / "when-down", primary.uri, f"thrift://127.0.0.1:{dead_port}",
                         "  read-from-copies: when-down\n" + timeouts),
        }
        procs += [w.proc for w in waggles.values()]
        for w in waggles.values():
            w.wait_ready()
        relay, relay_port = start_relay(lake.port)
        procs.append(relay)
        down = waggles[DOWN]
        with hms_client("127.0.0.1", down.port, timeout=30) as c, contextlib.suppress(Exception):
            c.get_table(PREFIX + DB, "small")  # the first call finds lake down
        deadline = time.monotonic() + 30
        while down.lake_up():
            if time.monotonic() > deadline:
                raise SystemExit(f"the when-down waggle does not see lake down; see {down.log}")
            time.sleep(0.1)

        with contextlib.ExitStack() as stack:
            def client(port: int) -> Any:
                return stack.enter_context(hms_client("127.0.0.1", port, timeout=600))

            routes = {
                DIRECT: Route(DIRECT, client(lake.port), DB),
                RELAY: Route(RELAY, client(relay_port), DB),
                NEVER: Route(NEVER, client(waggles[NEVER].port), PREFIX + DB),
                PREFER: Route(PREFER, client(waggles[PREFER].port), PREFIX + DB),
                DOWN: Route(DOWN, client(down.port), PREFIX + DB),
                LOCAL: Route(LOCAL, client(down.port), COPY_DB),
                PRIMARY: Route(PRIMARY, client(primary.port), COPY_DB),
            }
            for r in routes.values():
                r.client.set_ugi(os.environ.get("USER", "bench"), [])
            wait_for_copies(routes, time.monotonic() + 60)
            check(routes, lake.warehouse, primary.warehouse, args.partitions)
            run(list(routes.values()), args)
            pids = {RELAY: relay.pid, NEVER: waggles[NEVER].proc.pid, PREFER: waggles[PREFER].proc.pid,
                    DOWN: down.proc.pid, LOCAL: down.proc.pid}
            cpu([cpu_cost.Server(label, pid, routes[label].client, routes[label].db) for label, pid in pids.items()],
                args)
            for label in (PREFER, DOWN):
                lines = [ln for ln in waggles[label].http("/metrics").splitlines()
                         if ln.startswith("waggle_copy_reads_total")]
                print(f"{label}: " + ("; ".join(lines) or "no waggle_copy_reads_total series"))
        print(f"\nwork directory (logs): {workdir}")
    finally:
        stop_processes(procs)
        for s in stores:
            s.stop()
        if silent is not None:
            silent.close()
    return 0


def wait_for_copies(routes: dict[str, Route], deadline: float) -> None:
    """Until prefer and when-down answer from the copy (each replica reads the copies at start and every
    copies-refresh-seconds)."""
    for label in (PREFER, DOWN):
        r = routes[label]
        while True:
            try:
                if SERVED_FROM in (r.client.get_table(r.db, "small").parameters or {}):
                    break
            except Exception as e:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{label}: get_table failed: {e}") from e
            if time.monotonic() > deadline:
                raise SystemExit(f"{label}: get_table is not served from the copy")
            time.sleep(0.2)


def run(routes: list[Route], args: argparse.Namespace) -> None:
    calls: list[tuple[str, Callable[[Any, str], Any], int]] = [
        ("get_table", lambda c, db: c.get_table(db, "small"), args.rounds),
        (f"get_partitions x{args.partitions}", lambda c, db: c.get_partitions(db, "parts", -1), args.big_rounds),
    ]
    for _, call, rounds in calls:  # let the metastores' JIT settle before measuring anything
        for _ in range(max(10, rounds // 2)):
            for r in routes:
                call(r.client, r.db)
    for name, call, rounds in calls:
        times = dict(zip((r.label for r in routes), measure(routes, call, rounds), strict=True))
        p50 = {k: pct(v, 0.5) for k, v in times.items()}
        p99 = {k: pct(v, 0.99) for k, v in times.items()}
        top = {k: max(v) * 1000 for k, v in times.items()}
        print(f"\n{name}, {rounds} rounds, milliseconds")
        print(f"{'route':<40}{'p50':>9}{'p99':>9}{'max':>9}{'p50/direct':>12}")
        for r in routes:
            print(f"{r.label:<40}{p50[r.label]:>9.3f}{p99[r.label]:>9.3f}{top[r.label]:>9.3f}"
                  f"{p50[r.label] / p50[DIRECT]:>11.3f}x")
        print(f"{'comparison':<52}{'p50':>8}{'p99':>8}   target")
        for label, over, under in (("copy-served (prefer) / member-served (never)", PREFER, NEVER),
                                   ("copy-served (lake down) / member-served (never)", DOWN, NEVER),
                                   ("lake down, copy / local primary table", DOWN, LOCAL)):
            r50, r99 = p50[over] / p50[under], p99[over] / p99[under]
            print(f"{label:<52}{r50:>7.3f}x{r99:>7.3f}x   p50 <= 1.10x: {'met' if r50 <= 1.10 else 'MISSED'}")
        worst = top[DOWN]
        print(f"{'lake down: slowest call served from the copy':<52}{worst:>7.1f} ms   no wait for the "
              f"{DEAD_TIMEOUT_MS} ms timeout: {'met' if worst < DEAD_TIMEOUT_MS / 2 else 'MISSED'}")


def cpu(servers: list[cpu_cost.Server], args: argparse.Namespace) -> None:
    """Each server process's CPU per call, and the ratios of the ways of answering."""
    print(f"\nCPU per call of each server process (not the metastores'), best of {args.cpu_repeats} runs")
    print(f"{'call':<26}{'server':<40}{'us/call':>10}{'vs never':>10}")
    for name, call, calls in (
            ("get_table", lambda c, db: c.get_table(db, "small"), args.cpu_calls),
            (f"get_partitions x{args.partitions}", lambda c, db: c.get_partitions(db, "parts", -1),
             max(3, args.cpu_calls // 100))):
        per = cpu_cost.per_call(servers, call, calls, args.cpu_repeats)
        label = name
        for s in servers:
            print(f"{label:<26}{s.label:<40}{1e6 * per[s.label]:>10.1f}{per[s.label] / per[NEVER]:>9.2f}x")
            label = ""


if __name__ == "__main__":
    sys.exit(main())
