"""Direct-to-metastore against through-waggle, side by side in one run, with names unchanged and rewritten.

    python bench/bench_proxy.py [--metastore thrift://host:port] [--rounds 2000] [--big-rounds 40]
                                [--partitions 3000] [--cpu-calls 2000] [--cpu-repeats 5] [--cpu-only]
                                [--baseline TREE]

Without ``--metastore`` a local Derby-backed Hive 2.3 metastore is started (Java 17 and pyspark needed).
Two waggle instances run as subprocesses through the real CLI, both in front of that one metastore:

* **primary (names unchanged)**: the metastore is waggle's primary; database names are the same on both
  sides, so calls and replies are relayed byte for byte.
* **behind a prefix (every name rewritten)**: ``database-resolution: PREFIXED``, and the metastore is also
  a federated member with ``database-prefix: bench_``. Clients call ``bench_bench_db``; waggle rewrites the
  request to ``bench_db`` and decodes, rewrites (``dbName`` of every object back to ``bench_bench_db``) and
  re-encodes each reply that carries a database name. PREFIXED mode still needs a primary, and it only needs
  to be reachable: for simplicity the same metastore URI is the primary too (nothing here calls it through
  the primary's empty prefix). The bench checks once, before measuring, that the answers really were
  rewritten (``bench_bench_db`` through this waggle, ``bench_db`` direct).

A byte relay (bench/byte_relay.py, no parsing) is measured too: the cost of the extra hop alone.

Each round makes the call direct, through both waggles and through the relay, in random order, so all see
the same machine state (and none always lands on the metastore's garbage collections). The table prints p50,
p99 and their ratios to direct, and checks the targets: added p50 of a small call (``get_database``)
<= 0.2 ms, ``get_table`` <= 1.10x direct, ``get_partitions`` of 3,000 partitions <= 1.20x direct.

Then the CPU each server process spends per call (bench/cpu_cost.py: its CPU time before and after
``--cpu-calls`` calls, the best of ``--cpu-repeats``), for both waggles and the relay in the same run, with
waggle's ratio to the relay. Targets: a relayed call (names unchanged) <= 1.3x the relay, a rewritten one
(behind the prefix) <= 1.5x, and ``get_all_databases`` with one member, a merged listing of one, <= 1.3x too
(it costs what a single-target call costs). Behind the prefix ``get_all_databases`` asks both members, so it
is shown but has no target. ``--cpu-only`` skips the latency table. ``--baseline TREE`` adds both waggles of
another source tree (say, a ``git worktree`` of an earlier commit) to the CPU table, measured in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cpu_cost

from waggle.hms.gen.hive_metastore import ttypes
from waggle.local.client import hms_client
from waggle.local.jvm import free_port
from waggle.local.metastore import LocalMetastore
from waggle.local.seed import ensure_partitioned_table

DB = "bench_db"
PREFIX = "bench_"

PRIMARY = "primary (names unchanged)"
PREFIXED = "behind a prefix (every name rewritten)"
RELAY = "byte relay (no parsing)"
BASE_PRIMARY = "baseline tree, primary"
BASE_PREFIXED = "baseline tree, behind a prefix"


def seed(host: str, port: int, partitions: int, warehouse: Path) -> None:
    with hms_client(host, port, timeout=600) as c:
        try:
            c.create_database(ttypes.Database(name=DB, locationUri=f"file://{warehouse}/{DB}.db", parameters={}))
        except ttypes.AlreadyExistsException:
            pass
        ensure_partitioned_table(c, DB, "small", f"file://{warehouse}/{DB}.db/small", partitions=0)
        ensure_partitioned_table(c, DB, "parts", f"file://{warehouse}/{DB}.db/parts", partitions=partitions)


def start_waggle(workdir: Path, uri: str, prefixed: bool, hive_version: str | None = None, member_extra: str = "",
                 root: Path = ROOT) -> tuple[subprocess.Popen[bytes], int]:
    """waggle in front of ``uri``; with ``prefixed``, also as member 'bench' (``member_extra``: more of its YAML,
    indented by four spaces). ``root``: the source tree whose waggle runs."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    server = f"port: {port}\nbind-address: 127.0.0.1\nendpoint.port: {free_port()}\n"
    federation = f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {uri}\n"
    if hive_version:
        federation += f"  hive-version: {hive_version}\n"
    if prefixed:
        # the same metastore is the primary (empty prefix) and a federated member behind "bench_"
        server += "database-resolution: PREFIXED\n"
        federation += (f"federated-meta-stores:\n  - name: bench\n    remote-meta-store-uris: {uri}\n"
                       f"    database-prefix: {PREFIX}\n{member_extra}")
    (workdir / "server.yml").write_text(server)
    (workdir / "federation.yml").write_text(federation)
    proc = subprocess.Popen(
        [sys.executable, "-m", "waggle", "serve", "--server-config", str(workdir / "server.yml"),
         "--federation-config", str(workdir / "federation.yml")],
        stdout=subprocess.DEVNULL, stderr=open(workdir / "waggle.log", "wb"), cwd=root,
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


def metastore(uri: str | None, workdir: Path) -> tuple[str, LocalMetastore | None]:
    """``uri``, or a local metastore started for the bench (which the caller stops)."""
    if uri:
        return uri, None
    store = LocalMetastore(workdir / "hms", fast_start=False, heap="2g").start().wait_ready()
    return store.uri, store


def stop_processes(procs: list[subprocess.Popen[Any]]) -> None:
    """SIGTERM each, then SIGKILL whichever has not exited within 30 s."""
    for p in procs:
        p.terminate()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()


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
    proc.kill()
    raise SystemExit("byte relay did not start")


@dataclass
class Route:
    label: str
    client: Any
    db: str  # the database's name as this route's clients write it


@dataclass
class Case:
    label: str
    call: Callable[[Any, str], Any]
    rounds: int
    target: Callable[[float, float], bool] | None = None  # (direct p50, waggle p50) -> met
    target_text: str = ""
    skip: tuple[str, ...] = ()  # routes this call is not measured on


def measure(routes: list[Route], call: Callable[[Any, str], Any], rounds: int) -> list[list[float]]:
    times: list[list[float]] = [[] for _ in routes]
    pairs = list(zip(routes, times, strict=True))
    for _ in range(rounds):
        for route, out in random.sample(pairs, len(pairs)):
            t = time.perf_counter()
            call(route.client, route.db)
            out.append(time.perf_counter() - t)
    return times


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000


def verify(direct: Route, prefixed: Route) -> None:
    """Fail unless the prefixed waggle really rewrote names (and the direct answers did not change)."""
    want = PREFIX + DB
    problems = []
    if (name := direct.client.get_database(direct.db).name) != DB:
        problems.append(f"direct get_database name {name!r}")
    if (name := direct.client.get_table(direct.db, "small").dbName) != DB:
        problems.append(f"direct get_table dbName {name!r}")
    if (name := prefixed.client.get_database(prefixed.db).name) != want:
        problems.append(f"prefixed get_database name {name!r}")
    if (name := prefixed.client.get_table(prefixed.db, "small").dbName) != want:
        problems.append(f"prefixed get_table dbName {name!r}")
    parts = prefixed.client.get_partitions(prefixed.db, "parts", -1)
    wrong = {p.dbName for p in parts} - {want}
    if wrong:
        problems.append(f"prefixed get_partitions dbName {sorted(wrong)!r}")
    if problems:
        raise SystemExit("names were not rewritten as expected: " + "; ".join(problems))
    print(f"checked: direct answers name '{DB}', the prefixed waggle answers '{want}' "
          f"(get_database, get_table, all {len(parts)} partitions)", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metastore", help="thrift://host:port of an existing metastore (default: start one)")
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--big-rounds", type=int, default=40)
    ap.add_argument("--partitions", type=int, default=3000)
    ap.add_argument("--cpu-calls", type=int, default=2000, help="calls per CPU measurement")
    ap.add_argument("--cpu-repeats", type=int, default=5, help="CPU measurements per server (the best is kept)")
    ap.add_argument("--cpu-only", action="store_true", help="measure CPU per call only (no latency table)")
    ap.add_argument("--baseline", metavar="TREE", help="also measure the CPU per call of another source tree's "
                    "waggles (a checkout of an earlier commit), in the same run")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="waggle-bench-"))
    store = None
    procs: list[subprocess.Popen[bytes]] = []
    try:
        uri, store = metastore(args.metastore, workdir)
        host, port = uri.removeprefix("thrift://").split(":")
        warehouse = workdir / "data"
        warehouse.mkdir(exist_ok=True)
        print(f"seeding {args.partitions} partitions ...", flush=True)
        seed(host, int(port), args.partitions, warehouse)
        plain, plain_port = start_waggle(workdir / "waggle-primary", uri, prefixed=False)
        procs.append(plain)
        pref, pref_port = start_waggle(workdir / "waggle-prefixed", uri, prefixed=True)
        procs.append(pref)
        relay, relay_port = start_relay(int(port))
        procs.append(relay)
        base_ports: list[int] = []
        if args.baseline:
            for label, prefixed in (("base-primary", False), ("base-prefixed", True)):
                p, bport = start_waggle(workdir / label, uri, prefixed=prefixed, root=Path(args.baseline).resolve())
                procs.append(p)
                base_ports.append(bport)
        with contextlib.ExitStack() as stack:
            def client(p: int, h: str = "127.0.0.1") -> Any:
                return stack.enter_context(hms_client(h, p, timeout=600))

            routes = [Route("direct", client(int(port), host), DB), Route(PRIMARY, client(plain_port), DB),
                      Route(PREFIXED, client(pref_port), PREFIX + DB), Route(RELAY, client(relay_port), DB)]
            pids = [plain.pid, pref.pid, relay.pid]
            if base_ports:
                routes += [Route(BASE_PRIMARY, client(base_ports[0]), DB),
                           Route(BASE_PREFIXED, client(base_ports[1]), PREFIX + DB)]
                pids += [p.pid for p in procs[-2:]]
            for r in routes:
                r.client.set_ugi(os.environ.get("USER", "bench"), [])
            verify(routes[0], routes[2])
            if not args.cpu_only:
                run(routes[:4], cases(args))
            cpu(routes[1:], pids, args.cpu_calls, args.cpu_repeats)
    finally:
        stop_processes(procs)
        if store:
            store.stop()
    return 0


def cases(args: argparse.Namespace) -> list[Case]:
    return [
        Case("get_database", lambda c, db: c.get_database(db), args.rounds,
             lambda d, w: w - d <= 0.2, "added <= 0.200 ms"),
        # behind a prefix this is a fan-out to both members (here the same metastore, asked twice): not comparable
        Case("get_all_databases", lambda c, db: c.get_all_databases(), args.rounds, skip=(PREFIXED,)),
        Case("get_all_tables", lambda c, db: c.get_all_tables(db), args.rounds),
        Case("get_table", lambda c, db: c.get_table(db, "small"), args.rounds,
             lambda d, w: w / d <= 1.10, "ratio <= 1.10x"),
        Case(f"get_partitions x{args.partitions}", lambda c, db: c.get_partitions(db, "parts", -1),
             args.big_rounds, lambda d, w: w / d <= 1.20, "ratio <= 1.20x"),
    ]


def run(routes: list[Route], all_cases: list[Case]) -> None:
    for case in all_cases:  # let the metastore's JIT settle before measuring anything
        for _ in range(max(10, case.rounds // 2)):
            for r in routes:
                if r.label not in case.skip:
                    case.call(r.client, r.db)
    print(f"\n{'call':<22}{'through':<40}{'direct':>8}{'via':>9}{'added':>8}{'ratio':>8}"
          f"   {'p99 direct':>10}{'via':>9}{'ratio':>8}   target")
    for case in all_cases:
        measured = [r for r in routes if r.label not in case.skip]
        times = dict(zip((r.label for r in measured), measure(measured, case.call, case.rounds), strict=True))
        d = times["direct"]
        d50, d99 = pct(d, 0.5), pct(d, 0.99)
        label = case.label
        for r in routes[1:]:
            if r.label not in times:
                print(f"{label:<22}{r.label:<40}{'(fan-out to both members: not measured)':>41}")
                label = ""
                continue
            w = times[r.label]
            w50, w99 = pct(w, 0.5), pct(w, 0.99)
            verdict = ""
            if case.target is not None and r.label != RELAY:
                verdict = f"{case.target_text}: {'met' if case.target(d50, w50) else 'MISSED'}"
            print(f"{label:<22}{r.label:<40}{d50:>8.3f}{w50:>9.3f}{w50 - d50:>8.3f}{w50 / d50:>7.3f}x"
                  f"   {d99:>10.3f}{w99:>9.3f}{w99 / d99:>7.3f}x   {verdict}")
            label = ""
    print("\np50 unless marked p99, in milliseconds; 'via' is the route named in the row, 'added' and 'ratio' "
          "compare it\nwith direct in the same rounds. 'byte relay' (bench/byte_relay.py) parses nothing: "
          "the cost of an extra hop\non this machine, for reference.")


def cpu(routes: list[Route], pids: list[int], calls: int, repeats: int) -> None:
    """CPU per call of each server process, and each waggle's ratio to the relay's."""
    servers = [cpu_cost.Server(r.label, pid, r.client, r.db) for r, pid in zip(routes, pids, strict=True)]
    limits = {PRIMARY: 1.3, PREFIXED: 1.5, BASE_PRIMARY: 1.3, BASE_PREFIXED: 1.5}
    measured: list[tuple[str, Callable[[Any, str], Any], tuple[str, ...]]] = [
        ("get_database", lambda c, db: c.get_database(db), ()),
        ("get_table", lambda c, db: c.get_table(db, "small"), ()),
        ("get_all_databases", lambda c, db: c.get_all_databases(), (PREFIXED, BASE_PREFIXED)),  # two members
    ]
    print(f"\nCPU per call of each server process, best of {repeats} runs of {calls} calls")
    print(f"{'call':<22}{'server':<40}{'us/call':>9}{'relay':>9}{'ratio':>8}   target")
    for name, call, untargeted in measured:
        per = cpu_cost.per_call(servers, call, calls, repeats)
        relay = per[RELAY]
        label = name
        for s in servers:
            if s.label == RELAY:
                continue
            ratio = per[s.label] / relay
            verdict = ""
            if s.label not in untargeted:
                verdict = f"<= {limits[s.label]:.1f}x: {'met' if ratio <= limits[s.label] else 'MISSED'}"
            else:
                verdict = "(fan-out to two members: no target)"
            print(f"{label:<22}{s.label:<40}{1e6 * per[s.label]:>9.1f}{1e6 * relay:>9.1f}{ratio:>7.2f}x   {verdict}")
            label = ""


if __name__ == "__main__":
    sys.exit(main())
