"""The cost of per-user and per-group grants (``authorization``), in one run against a real local Hive 2.3
metastore: waggle's CPU per call with 1,000 rules against none, and the time to filter a listing of 10,000 tables.

    python bench/bench_grants.py [--quick] [--json FILE] [--rules 1000] [--rounds 1000] [--cpu-calls 600]
                                 [--cpu-repeats 7] [--listing 10000] [--reps 200] [--wide-tables 10000]
                                 [--wide-rounds 100]

Callers name themselves with ``set_ugi`` (``trust-set-ugi: true``); their groups come from a groups file. The
rules (``--rules``, 1,000) are generated: a few apply to the bench's caller ``bench`` (group ``analysts``): read
``bench_db``, never see ``bench_db.secret_*`` (no such table: the listing's answer is unchanged, but it is filtered
rule by rule), read ``sales.*`` but never ``sales.secret_*``; the rest name other users, other groups and other
databases (some of them everyone's, on other databases), allows and denies, plain names and patterns.

1. **Filtering a listing** of ``--listing`` table names (in this process, no metastore): ``Policy.visible_tables``
   with the 1,000 rules, for callers whose rules are a mixed case (allow ``sales.*``, deny ``sales.secret_*``),
   the whole database, a table pattern (``t_00*``), and none at all (the default, deny); and
   ``waggle.grants.listings.filtered`` on a decoded ``get_all_tables`` result (the mixed case). Warm: the policy
   the server holds, the caller's rules already found; cold: a caller the policy has not seen yet. Median and p90
   over ``--reps`` repetitions (``time.perf_counter``). Target: <= 2 ms (warm, the mixed case).
2. **CPU per call** of a read mix on raw sockets (pre-encoded ``get_table``, ``get_all_tables``, ``get_database``
   of ``bench_db``, 20 tables; the replies compared byte for byte): direct, through a byte relay
   (bench/byte_relay.py, parses nothing: the floor of a Python hop), and through three waggles through the real
   CLI: no ``authorization``, ``authorization`` with the one rule the caller needs, and with the 1,000 rules. Every
   route answers the same. Latency: every route in random order each round, p50/p99 of the three calls and
   ratios to direct. CPU: every thread's run time from ``/proc``, ``--cpu-repeats`` runs of ``--cpu-calls`` calls
   per route, the routes in random order each repeat; median and best run. Target: 1,000 rules <= 1.1x no
   ``authorization`` (median runs).
3. **End to end**, a listing of ``--wide-tables`` tables (``get_all_tables('sales')``, 5% ``secret_*``; 10,000):
   creating that many tables in Derby takes minutes to hours on a busy machine (10 to 100 a second), so the
   upstream here is a stub metastore (this script with ``--serve-stub``: one thread per connection, every answer
   encoded once) answering the listing, ``get_table``, ``get_database``, ``set_ugi`` and ``getStatus``. Direct (the
   stub), waggle without grants (which relays the answer's bytes) and waggle with the 1,000 rules (which decodes
   the answer, filters it for the caller and encodes it again), every route in random order each round: p50
   latency and waggle's CPU per call, and what the grants add.

Other work on the machine makes every figure noisy: the routes are interleaved and the medians reported.

Every process started here is stopped at exit (also on Ctrl-C or an error); all traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml

from bench.bench_cache import Raw, decode, fmt_ratio, pct, serve_files
from bench.bench_load import Processes, Waggle, all_pids, call_bytes, load, readline, run_bench, start_relay
from bench.cpu_cost import cpu_seconds
from waggle.config.grants_model import Authorization
from waggle.config.loader import parse_server
from waggle.grants.listings import Shape, filtered
from waggle.grants.policy import Policy
from waggle.grants.service import policy_of
from waggle.grants.verdict import Caller
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.gen.hive_metastore import ttypes
from waggle.local.client import hms_client
from waggle.local.jvm import free_port
from waggle.local.metastore import LocalMetastore
from waggle.local.seed import ensure_table

DB = "bench_db"
WIDE = "sales"
USER = "bench"  # bench.bench_load.UGI names this user
TABLES = 20  # tables of bench_db, the read mix's listing
COLS = [("id", "int"), ("name", "string")]

DIRECT = "direct"
RELAY = "byte relay"
W_OFF = "waggle, no authorization"
W_ONE = "waggle, 1 rule"
W_MANY = "waggle, {n} rules"


# -- the grants ------------------------------------------------------------------------------------------------
#: who the listing bench asks for, and their groups (the groups file says the same)
CALLERS = {
    "mixed: allow sales.*, deny sales.secret_*": Caller(USER, frozenset({"analysts", "staff"})),
    "whole database: allow sales.*": Caller("carol", frozenset({"readers", "staff"})),
    "table pattern: allow sales.t_00*": Caller("erin", frozenset({"fact_readers"})),
    "no rule applies (default deny)": Caller("dave", frozenset({"staff"})),
}
MIXED = next(iter(CALLERS))


def caller_rules() -> list[dict[str, Any]]:
    """The rules that apply to the bench's callers."""
    return [
        {"name": "bench reads bench_db", "users": [USER], "databases": [DB], "privileges": ["select"]},
        {"name": "bench never sees bench_db secrets", "users": [USER], "databases": [DB], "tables": ["secret_*"],
         "privileges": ["all"], "effect": "deny"},
        {"name": "analysts read sales", "groups": ["analysts"], "databases": [WIDE], "privileges": ["select"]},
        {"name": "analysts never see sales secrets", "groups": ["analysts"], "databases": [WIDE],
         "tables": ["secret_*"], "privileges": ["all"], "effect": "deny"},
        {"name": "readers read sales", "groups": ["readers"], "databases": [WIDE], "privileges": ["select"]},
        {"name": "fact readers read sales t_00*", "groups": ["fact_readers"], "databases": [WIDE],
         "tables": ["t_00*"], "privileges": ["select"]},
    ]


def other_rule(i: int) -> dict[str, Any]:
    """Rule ``i`` of those that do not apply to the bench's callers (or apply to everyone, on other databases)."""
    kind = i % 10
    if kind == 0:  # everyone, another database
        return {"name": f"everyone reads archive {i}", "users": ["*"], "databases": [f"archive_{i}"],
                "privileges": ["select"]}
    if kind in (1, 2, 3):  # another user, databases by name and by pattern
        return {"name": f"user {i} owns team {i}", "users": [f"user_{i}"],
                "databases": [f"team_{i}", f"team_{i}_*"], "privileges": ["all"]}
    if kind in (4, 5, 6):  # another group, on the bench's own databases, some tables
        return {"name": f"group {i} reads some of sales", "groups": [f"group_{i}"], "databases": [WIDE, DB],
                "tables": [f"t_{i:05d}", f"x_{i}_*"], "privileges": ["select", "alter"]}
    if kind == 7:  # another group's deny
        return {"name": f"group {i} never sees pii", "groups": [f"group_{i}"], "databases": ["*"],
                "tables": ["pii_*", f"secret_{i}*"], "privileges": ["all"], "effect": "deny"}
    if kind == 8:  # users and groups by name, another database pattern
        return {"name": f"project {i}", "users": [f"user_{i}", f"user_{i + 1}"], "groups": [f"proj_{i}"],
                "databases": [f"proj_{i}_*"], "tables": ["*"], "privileges": ["select", "update", "create"]}
    return {"name": f"user {i} may not drop in lake {i}", "users": [f"user_{i}"], "databases": [f"lake_{i}"],
            "privileges": ["drop"], "effect": "deny"}


def rules(n: int) -> list[dict[str, Any]]:
    mine = caller_rules()
    return mine + [other_rule(i) for i in range(max(0, n - len(mine)))]


def groups_text() -> str:
    lines = {"analysts": [USER, "alice"], "staff": [USER, "carol", "dave"], "readers": ["carol"],
             "fact_readers": ["erin"]}
    for i in range(200):
        lines[f"group_{i}"] = [f"user_{i}", f"user_{i + 1}"]
    return "".join(f"{g}: {', '.join(users)}\n" for g, users in lines.items())


def authorization(n: int | None, groups_file: Path) -> str:
    """The server file's ``authorization`` block with ``n`` rules (1: only 'bench reads bench_db')."""
    if n is None:
        return ""
    block = {"trust-set-ugi": True, "default": "deny",
             "groups": {"source": "file", "file": str(groups_file), "ttl": 300},
             "rules": rules(n) if n > 1 else caller_rules()[:1]}
    return yaml.safe_dump({"authorization": block}, sort_keys=False)


def parsed(n: int, groups_file: Path) -> Authorization:
    """What waggle reads of that block (the rules compiled as the server compiles them)."""
    problems: list[str] = []
    config = parse_server(None, yaml.safe_load(authorization(n, groups_file)), problems, [])
    if problems or config.authorization is None:
        raise SystemExit(f"the generated authorization block does not parse: {problems}")
    return config.authorization


def wide_names(n: int) -> list[str]:
    """The tables of ``sales``: ``t_00000`` ..., every twentieth ``secret_00000`` ... (5%)."""
    return [f"secret_{i:05d}" if i % 20 == 0 else f"t_{i:05d}" for i in range(n)]


# -- 1 ---------------------------------------------------------------------------------------------------------
def timed(fn: Callable[[], Any], reps: int, setup: Callable[[], Any] | None = None) -> list[float]:
    """Seconds of each of ``reps`` runs of ``fn`` (``setup`` first, untimed)."""
    out = []
    for _ in range(reps):
        if setup is not None:
            setup()
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def cold_runs(fn: Callable[[Caller], Any], new_caller: Callable[[], Caller], reps: int) -> list[float]:
    """Seconds of each of ``reps`` runs of ``fn`` for a caller made anew (untimed) each time."""
    out = []
    for _ in range(reps):
        who = new_caller()
        t = time.perf_counter()
        fn(who)
        out.append(time.perf_counter() - t)
    return out


def section_listing(args: argparse.Namespace, groups_file: Path, report: dict[str, Any]) -> None:
    config = parsed(args.rules, groups_file)
    policy = policy_of(config)
    names = wide_names(args.listing)
    secret = sum(1 for n in names if n.startswith("secret_"))
    print(f"1. filtering a listing of {len(names):,} tables of '{WIDE}' ({secret} secret_*), {len(config.rules)} "
          f"rules, in this process: ms per listing over {args.reps} repetitions; warm: the caller's rules already "
          "found, cold: a caller the policy has not seen", flush=True)
    print(f"{'what':<58}{'kept':>7}{'warm p50':>10}{'warm p90':>10}{'cold p50':>10}{'cold p90':>10}")
    out: dict[str, Any] = {}
    seq = [0]

    def fresh(who: Caller) -> Caller:
        """``who`` with one more group no rule names: the same grants, a caller the policy has not seen."""
        seq[0] += 1
        return Caller(who.user, who.groups | {f"unseen_{seq[0]}"})

    def row(label: str, kept: int, warm: list[float], cold: list[float]) -> None:
        w50, w90 = pct(warm, 0.5) * 1e3, pct(warm, 0.9) * 1e3
        c50, c90 = pct(cold, 0.5) * 1e3, pct(cold, 0.9) * 1e3
        print(f"{label:<58}{kept:>7}{w50:>10.3f}{w90:>10.3f}{c50:>10.3f}{c90:>10.3f}")
        out[label] = {"kept": kept, "warm_p50_ms": w50, "warm_p90_ms": w90, "cold_p50_ms": c50, "cold_p90_ms": c90}

    for label, who in CALLERS.items():
        kept = policy.visible_tables(who, WIDE, names)
        cross_check(policy, who, names, kept, label)
        warm = timed(lambda who=who: policy.visible_tables(who, WIDE, names), args.reps)
        cold = cold_runs(lambda w: policy.visible_tables(w, WIDE, names), lambda who=who: fresh(who),
                         max(10, args.reps // 4))
        row(f"Policy.visible_tables, {label}", len(kept), warm, cold)

    who = CALLERS[MIXED]
    call_args = T.get_all_tables_args(db_name=WIDE)
    result = T.get_all_tables_result(success=list(names))
    filtered(result, Shape.TABLE_NAMES, call_args, policy, who)
    kept_n = len(result.success)

    def refill() -> None:
        result.success = list(names)

    warm = timed(lambda: filtered(result, Shape.TABLE_NAMES, call_args, policy, who), args.reps, setup=refill)

    def cold_filter(w: Caller) -> None:
        filtered(result, Shape.TABLE_NAMES, call_args, policy, w)

    def fresh_refilled() -> Caller:
        refill()
        return fresh(who)

    cold = cold_runs(cold_filter, fresh_refilled, max(10, args.reps // 4))
    row(f"listings.filtered(get_all_tables result), {MIXED.split(':')[0]}", kept_n, warm, cold)

    one = Policy(policy.sources, config.default)  # the same rules, nothing remembered: the first call after reload
    t = time.perf_counter()
    one.visible_tables(who, WIDE, names)
    first = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    policy_of(config)
    build = (time.perf_counter() - t) * 1e3
    print(f"(building the policy of {len(config.rules)} rules, as a reload does: {build:.1f} ms once)")
    out["_policy_build_ms"] = build
    out["_first_listing_ms"] = first
    report["listing"] = out


def cross_check(policy: Policy, who: Caller, names: list[str], kept: list[str], label: str) -> None:
    """The fast listing path keeps exactly what ``Policy.sees`` shows one name at a time, and what the bench's
    rules mean."""
    one_by_one = [n for n in names if policy.sees(who, WIDE, n).allowed]
    if kept != one_by_one:
        raise SystemExit(f"{label}: visible_tables keeps {len(kept)}, sees() one by one {len(one_by_one)}")
    want = {MIXED: [n for n in names if not n.startswith("secret_")],
            "whole database: allow sales.*": names,
            "table pattern: allow sales.t_00*": [n for n in names if n.startswith("t_00")],
            "no rule applies (default deny)": []}[label]
    if kept != want:
        raise SystemExit(f"{label}: kept {len(kept)} names, the rules mean {len(want)}")


# -- seeding ---------------------------------------------------------------------------------------------------
def seed(port: int, warehouse: Path) -> None:
    """``bench_db`` with ``small`` and 19 more tables."""
    with hms_client("127.0.0.1", port, timeout=600) as c:
        try:
            c.create_database(ttypes.Database(name=DB, locationUri=f"file://{warehouse}/{DB}.db", parameters={}))
        except ttypes.AlreadyExistsException:
            pass
        for i in range(TABLES):
            name = "small" if i == 0 else f"t_{i:02d}"
            ensure_table(c, DB, name, f"file://{warehouse}/{DB}.db/{name}", COLS)


# -- the stub upstream of section 3 ----------------------------------------------------------------------------
def serve_stub(port: int, wide: int) -> None:
    """A stub metastore on ``port`` whose ``get_all_tables`` (of any database) answers the ``wide`` names of
    ``sales`` (and ``set_ugi``, ``getStatus``, ``get_database``, ``get_table`` as bench/stub_metastore.py does);
    one thread per connection. Stops when stdin closes."""
    from stub_metastore import encode, replies, unknown
    from thrift.Thrift import TMessageType

    from bench.thrift_bytes import CALL, message_end

    answers = replies(WIDE, "small")
    answers[b"get_all_tables"] = encode("get_all_tables", TMessageType.REPLY,
                                        T.get_all_tables_result(success=wide_names(wide)))
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(256)

    def handle(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        with conn:
            while data := conn.recv(65536):
                buf += data
                while (parsed := message_end(buf)) is not None:
                    end, mtype, name, seqid, _ = parsed
                    buf = buf[end:]
                    if mtype != CALL:
                        continue
                    head, tail = answers.get(name) or unknown(name)
                    conn.sendall(head + seqid.to_bytes(4, "big", signed=True) + tail)

    def accept() -> None:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()


def section_gate(args: argparse.Namespace, groups_file: Path, report: dict[str, Any]) -> None:
    """The grants' own work per call, in this process: what the driver adds to a call under ``authorization``
    (the gate before it is planned, whether its answer is filtered, and a listing answered as filtered before),
    against which waggle's CPU per call in section 2 is the measure."""
    from waggle.call.values import Session
    from waggle.config.kinds import ProtocolKind, TransportKind
    from waggle.config.model import Limits, WireFormat
    from waggle.grants.service import Grants
    from waggle.hms.methods import METHODS
    from waggle.hms.service import METHOD_IO
    from waggle.hms.wire import Header, Wire
    from waggle.server import admission

    class _Nowhere:
        def recv(self, _n: int) -> bytes:
            return b""

        def sendall(self, _b: bytes) -> None:
            pass

        def send(self, b: bytes) -> int:
            return len(b)

        def wait_readable(self) -> None:
            pass

    grants = Grants(parsed(args.rules, groups_file))
    session = Session(identity=(USER, ()))
    wire = Wire(_Nowhere(), WireFormat(TransportKind.BUFFERED, ProtocolKind.BINARY), Limits(1 << 30, 1 << 24, 1 << 24))
    reps = max(2000, args.reps * 20)
    out: dict[str, float] = {}
    print(f"\n1b. the grants' own work per call (us, median of {reps} in this process, {args.rules} rules, caller "
          f"'{USER}'), to set against section 2's CPU per call")
    for method, call_args in (("get_table", T.get_table_args(dbname=DB, tbl_name="small")),
                              ("get_database", T.get_database_args(name=DB)),
                              ("get_all_tables", T.get_all_tables_args(db_name=DB))):
        entry = (METHODS[method], METHOD_IO[method])
        header = Header(method, 1, 7)
        raw = wire.encode(method, 2, 7, METHOD_IO[method].result(
            success=[f"t_{i}" for i in range(TABLES)] + ["secret_x"])) if method == "get_all_tables" else b""

        def one(entry: Any = entry, call_args: Any = call_args, header: Any = header, raw: bytes = raw) -> None:
            _, filtering = admission.admit(grants, session, header, entry, call_args, b"", wire)
            if filtering is not None:
                admission.for_caller(grants, filtering, header, entry[1], call_args, raw, wire)

        one()
        took = statistics.median(timed(one, reps)) * 1e6
        out[method] = took
        print(f"   {method:<16}{took:>8.1f}")
    report["gate_us"] = out


def start_stub(procs: Processes, wide: int) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = procs.add(subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve-stub", str(port),
                                       "--wide-tables", str(wide)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      cwd=ROOT))
    if readline(proc, 60).strip() != "ready":
        raise SystemExit("the stub metastore did not start")
    return proc, port


# -- routes ----------------------------------------------------------------------------------------------------
@dataclass
class Route:
    label: str
    port: int
    pids: list[int] = field(default_factory=list)
    waggle: Waggle | None = None
    conn: Raw | None = None

    def raw(self) -> Raw:
        if self.conn is None:
            self.conn = Raw(self.port)  # its first call: set_ugi('bench')
        return self.conn


def start_waggle(procs: Processes, workdir: Path, label: str, uri: str, grants: str) -> Waggle:
    port, http = free_port(), free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    server = (f"port: {port}\nbind-address: 127.0.0.1\nendpoint.port: {http}\nmax-connections: 4000\n"
              "limits.max-in-flight-calls: 10000\nlimits.max-calls-per-metastore: 10000\nlogging.level: warning\n"
              "thrift-server-stop-timeout-val-in-seconds: 2\nhot-reload: false\n") + grants
    federation = f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {uri}\n"
    return serve_files(procs, workdir, label, port, http, server, federation)


MIX = ("get_table", "get_all_tables", "get_database")


def mix_requests() -> list[bytes]:
    return [call_bytes("get_table", T.get_table_args(dbname=DB, tbl_name="small"), 1),
            call_bytes("get_all_tables", T.get_all_tables_args(db_name=DB), 2),
            call_bytes("get_database", T.get_database_args(name=DB), 3)]


def wide_request() -> bytes:
    return call_bytes("get_all_tables", T.get_all_tables_args(db_name=WIDE), 4)


def verify_mix(routes: list[Route]) -> None:
    """Every route answers the read mix as direct does."""
    reqs = mix_requests()
    results = (T.get_table_result, T.get_all_tables_result, T.get_database_result)
    want = [decode(routes[0].raw().call(r), cls) for r, cls in zip(reqs, results, strict=True)]
    problems = [r.label for r in routes[1:]
                if [decode(r.raw().call(q), cls) for q, cls in zip(reqs, results, strict=True)] != want]
    if problems:
        raise SystemExit(f"these routes answer the read mix otherwise than direct: {problems}")
    print(f"checked: every route answers the read mix as direct does ({len(want[1])} tables in {DB})", flush=True)


# -- 2 ---------------------------------------------------------------------------------------------------------
def section_mix(args: argparse.Namespace, routes: list[Route], many: str, report: dict[str, Any]) -> None:
    verify_mix(routes)
    reqs = mix_requests()
    for _ in range(args.warmup_rounds):
        for r in routes:
            for q in reqs:
                r.raw().call(q)
    per: dict[str, list[list[float]]] = {r.label: [[] for _ in reqs] for r in routes}
    total: dict[str, list[float]] = {r.label: [] for r in routes}
    for _ in range(args.rounds):
        for r in random.sample(routes, len(routes)):
            conn = r.raw()
            s = 0.0
            for k, q in enumerate(reqs):
                t = time.perf_counter()
                conn.call(q)
                d = time.perf_counter() - t
                per[r.label][k].append(d)
                s += d
            total[r.label].append(s)
    d50, d99 = pct(total[DIRECT], 0.5), pct(total[DIRECT], 0.99)
    print(f"\n2. the read mix ({', '.join(MIX)} of {DB}) as '{USER}' (set_ugi), raw sockets: latency in ms, "
          f"{args.rounds} rounds, every route in random order each round; p50/p99 of the three calls together")
    head = "".join(f"{m + ' p50':>20}" for m in MIX)
    print(f"{'route':<28}{head}{'mix p50':>10}{'mix p99':>10}{'p50 vs direct':>15}{'p99 vs direct':>15}")
    lat: dict[str, Any] = {}
    for r in routes:
        cols = "".join(f"{pct(v, 0.5) * 1e3:>20.3f}" for v in per[r.label])
        p50, p99 = pct(total[r.label], 0.5), pct(total[r.label], 0.99)
        print(f"{r.label:<28}{cols}{p50 * 1e3:>10.3f}{p99 * 1e3:>10.3f}{fmt_ratio(p50 / d50):>15}"
              f"{fmt_ratio(p99 / d99):>15}")
        lat[r.label] = {"p50_ms": p50 * 1e3, "p99_ms": p99 * 1e3, "p50_ratio": p50 / d50, "p99_ratio": p99 / d99,
                        **{f"{m}_p50_ms": pct(v, 0.5) * 1e3 for m, v in zip(MIX, per[r.label], strict=True)}}
    report["mix_latency"] = lat

    measured = [r for r in routes if r.pids]
    runs: dict[str, list[float]] = {r.label: [] for r in measured}
    calls = args.cpu_calls - args.cpu_calls % len(reqs)
    for _ in range(args.cpu_repeats):
        for r in random.sample(measured, len(measured)):
            conn = r.raw()
            before = sum(cpu_seconds(p) for p in r.pids)
            for k in range(calls):
                conn.call(reqs[k % len(reqs)])
            runs[r.label].append((sum(cpu_seconds(p) for p in r.pids) - before) / calls)
    base_med = statistics.median(runs[W_OFF])
    base_min = min(runs[W_OFF])
    relay_med = statistics.median(runs[RELAY])
    print(f"\n   CPU per call of the route's own process (us; every thread, /proc): {args.cpu_repeats} runs of {calls} "
          "calls (the mix in turn) per route, routes in random order each run")
    print(f"{'route':<28}{'median':>9}{'best':>9}{'worst':>9}{'median vs no authz':>20}{'best vs no authz':>18}"
          f"{'median vs relay':>17}")
    cpu: dict[str, Any] = {}
    for r in measured:
        v = runs[r.label]
        med, best, worst = statistics.median(v), min(v), max(v)
        print(f"{r.label:<28}{med * 1e6:>9.1f}{best * 1e6:>9.1f}{worst * 1e6:>9.1f}{fmt_ratio(med / base_med):>20}"
              f"{fmt_ratio(best / base_min):>18}{fmt_ratio(med / relay_med):>17}")
        cpu[r.label] = {"median_us": med * 1e6, "best_us": best * 1e6, "worst_us": worst * 1e6,
                        "median_vs_off": med / base_med, "best_vs_off": best / base_min,
                        "median_vs_relay": med / relay_med, "runs_us": [x * 1e6 for x in v]}
    print(f"   waggle with {many.split(', ')[1]} / without authorization: {cpu[many]['median_vs_off']:.3f}x "
          f"(median runs), {cpu[many]['best_vs_off']:.3f}x (best runs)")
    report["mix_cpu"] = cpu
    report["mix_cpu_label_many"] = many
    section_mix_by_method(args, measured, reqs, report)
    differed = {r.label: r.raw().differed for r in routes if r.raw().differed}
    if differed:
        print(f"REPLIES THAT DIFFERED from the route's first reply to the same call: {differed}")


def section_mix_by_method(args: argparse.Namespace, measured: list[Route], reqs: list[bytes],
                          report: dict[str, Any]) -> None:
    """The same CPU per call, one method at a time: where the grants' cost is."""
    calls = max(30, args.cpu_calls // len(reqs))
    runs: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.cpu_repeats):
        for k in random.sample(range(len(reqs)), len(reqs)):
            for r in random.sample(measured, len(measured)):
                conn = r.raw()
                before = sum(cpu_seconds(p) for p in r.pids)
                for _ in range(calls):
                    conn.call(reqs[k])
                runs.setdefault((r.label, MIX[k]), []).append((sum(cpu_seconds(p) for p in r.pids) - before) / calls)
    med = {key: statistics.median(v) for key, v in runs.items()}
    print(f"\n   the same, one method at a time: median us per call of {args.cpu_repeats} runs of {calls} calls "
          "(ratio to no authorization)")
    print(f"{'route':<28}" + "".join(f"{m:>24}" for m in MIX))
    out: dict[str, Any] = {}
    for r in measured:
        cells = "".join(f"{med[(r.label, m)] * 1e6:>14.1f} ({fmt_ratio(med[(r.label, m)] / med[(W_OFF, m)])})"
                        for m in MIX)
        print(f"{r.label:<28}{cells}")
        out[r.label] = {m: {"median_us": med[(r.label, m)] * 1e6, "vs_off": med[(r.label, m)] / med[(W_OFF, m)]}
                        for m in MIX}
    report["mix_cpu_by_method"] = out


# -- 3 ---------------------------------------------------------------------------------------------------------
def section_wide(args: argparse.Namespace, routes: list[Route], many: str, report: dict[str, Any]) -> None:
    req = wide_request()
    names = wide_names(args.wide_tables)
    want = {DIRECT: names, W_OFF: names, many: [n for n in names if not n.startswith("secret_")]}
    routes = [r for r in routes if r.label in want]
    for r in routes:
        got = decode(r.raw().call(req), T.get_all_tables_result)
        if sorted(got) != sorted(want[r.label]):
            raise SystemExit(f"{r.label}: get_all_tables('{WIDE}') answered {len(got)} names, want "
                             f"{len(want[r.label])}")
    for _ in range(max(3, args.wide_rounds // 5)):
        for r in routes:
            r.raw().call(req)
    times: dict[str, list[float]] = {r.label: [] for r in routes}
    cpu: dict[str, list[float]] = {r.label: [] for r in routes if r.pids}
    for _ in range(args.wide_rounds):
        for r in random.sample(routes, len(routes)):
            conn = r.raw()
            before = sum(cpu_seconds(p) for p in r.pids)
            t = time.perf_counter()
            conn.call(req)
            times[r.label].append(time.perf_counter() - t)
            if r.pids:
                cpu[r.label].append(sum(cpu_seconds(p) for p in r.pids) - before)
    print(f"\n3. end to end: get_all_tables('{WIDE}') of {len(names):,} tables ({len(names) - len(want[many]):,} "
          f"secret_*) from the stub metastore, as '{USER}', {args.wide_rounds} rounds, every route in random order "
          "each round; ms")
    print(f"{'route':<28}{'names':>7}{'p50':>9}{'p99':>9}{'p50 vs direct':>15}{'waggle CPU p50':>16}")
    d50 = pct(times[DIRECT], 0.5)
    out: dict[str, Any] = {}
    for r in routes:
        p50, p99 = pct(times[r.label], 0.5), pct(times[r.label], 0.99)
        c = f"{statistics.median(cpu[r.label]) * 1e3:.3f}" if r.pids else ""
        print(f"{r.label:<28}{len(want[r.label]):>7}{p50 * 1e3:>9.3f}{p99 * 1e3:>9.3f}{fmt_ratio(p50 / d50):>15}"
              f"{c:>16}")
        out[r.label] = {"p50_ms": p50 * 1e3, "p99_ms": p99 * 1e3, "p50_ratio": p50 / d50,
                        **({"cpu_ms": statistics.median(cpu[r.label]) * 1e3} if r.pids else {})}
    extra = out[many]["p50_ms"] - out[W_OFF]["p50_ms"]
    extra_cpu = out[many]["cpu_ms"] - out[W_OFF]["cpu_ms"]
    print(f"   the grants add {extra:+.3f} ms p50 and {extra_cpu:+.3f} ms of waggle's CPU per listing (decode, "
          "filter, encode; the no-authorization waggle relays the answer as it came)")
    out["extra_p50_ms"], out["extra_cpu_ms"] = extra, extra_cpu
    report["wide"] = out


# -- summary ---------------------------------------------------------------------------------------------------
def summary(report: dict[str, Any]) -> None:
    rows: list[tuple[str, str, bool | None]] = []
    lst = report.get("listing")
    if lst:
        for key, v in lst.items():
            if key.startswith("_"):
                continue
            if key.startswith("Policy.visible_tables, mixed") or key.startswith("listings.filtered"):
                what = "visible_tables" if key.startswith("Policy") else "filtered"
                rows.append((f"1. {what}, 10k listing, mixed allow/deny, warm p50 <= 2 ms",
                             f"{v['warm_p50_ms']:.3f} ms (cold {v['cold_p50_ms']:.3f})", v["warm_p50_ms"] <= 2.0))
    cpu = report.get("mix_cpu")
    if cpu:
        many = report["mix_cpu_label_many"]
        v = cpu[many]
        rows.append((f"2. CPU per call, {many.split(', ')[1]} <= 1.1x no authorization (median runs)",
                     f"{v['median_vs_off']:.3f}x ({v['median_us']:.0f} vs {cpu[W_OFF]['median_us']:.0f} us; best "
                     f"runs {v['best_vs_off']:.3f}x)", v["median_vs_off"] <= 1.1))
        one = cpu[W_ONE]
        rows.append(("2. CPU per call, 1 rule vs no authorization (no target)",
                     f"{one['median_vs_off']:.3f}x ({one['median_us']:.0f} us; best runs {one['best_vs_off']:.3f}x)",
                     None))
    w = report.get("wide")
    if w:
        rows.append(("3. end to end, extra p50 of a filtered listing (no target)",
                     f"{w['extra_p50_ms']:+.2f} ms, CPU {w['extra_cpu_ms']:+.2f} ms", None))
    print("\nsummary")
    for name, figure, ok in rows:
        verdict = "" if ok is None else "MET" if ok else "NOT MET"
        print(f"  {name:<70}{figure:<50}{verdict}")
    report["summary"] = [{"target": n, "figure": f, "met": ok} for n, f, ok in rows]


# -- the bench -------------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rules", type=int, default=1000, help="rules of the many-rules waggle")
    ap.add_argument("--listing", type=int, default=10000, help="table names of section 1's listing")
    ap.add_argument("--reps", type=int, default=200, help="repetitions of each listing filter (warm)")
    ap.add_argument("--rounds", type=int, default=1000, help="latency rounds of the read mix")
    ap.add_argument("--warmup-rounds", type=int, default=100)
    ap.add_argument("--cpu-calls", type=int, default=900, help="calls per CPU run and route")
    ap.add_argument("--cpu-repeats", type=int, default=15)
    ap.add_argument("--wide-tables", type=int, default=10000, help="tables of 'sales' in section 3's listing (0: "
                    "no section 3)")
    ap.add_argument("--wide-rounds", type=int, default=100)
    ap.add_argument("--serve-stub", type=int, metavar="PORT", help=argparse.SUPPRESS)
    ap.add_argument("--jit-warmup", type=float, default=20.0, help="seconds of load warming the metastore up first")
    ap.add_argument("--quick", action="store_true", help="a smoke run of about two minutes")
    ap.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    args = ap.parse_args()
    if args.serve_stub:
        serve_stub(args.serve_stub, args.wide_tables)
        return 0
    if args.quick:
        args.reps, args.rounds, args.warmup_rounds, args.cpu_calls, args.cpu_repeats = 50, 150, 20, 300, 3
        args.wide_rounds, args.jit_warmup = 20, 5.0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)
    return run_bench("waggle-bench-grants-", run_all, args, {"args": vars(args), "cores": os.cpu_count()})


def run_all(args: argparse.Namespace, workdir: Path, procs: Processes, report: dict[str, Any]) -> None:
    groups_file = workdir / "groups"
    groups_file.write_text(groups_text())
    section_listing(args, groups_file, report)
    section_gate(args, groups_file, report)

    store = LocalMetastore(workdir / "hms", fast_start=False, heap="2g").start()
    procs.stores.append(store)
    store.wait_ready(timeout=180)
    seed(store.port, store.warehouse)
    print(f"\nmetastore {store.uri}: seeded {DB} ({TABLES} tables)", flush=True)
    relay, relay_port = start_relay(procs, workdir, store.port)
    print(f"warming up the metastore's JIT: {args.jit_warmup:g} s of the read mix at 8 connections ...", flush=True)
    load(workdir, store.port, mix_requests(), 8, 0.1, args.jit_warmup)
    many = W_MANY.format(n=args.rules)
    ws = {label: start_waggle(procs, workdir / key, label, store.uri, authorization(n, groups_file))
          for key, label, n in (("off", W_OFF, None), ("one", W_ONE, 1), ("many", many, args.rules))}
    routes = [Route(DIRECT, store.port), Route(RELAY, relay_port, [relay.pid])]
    routes += [Route(label, w.port, all_pids(w), w) for label, w in ws.items()]
    print("routes: " + ", ".join(f"{r.label} :{r.port}" for r in routes) + f"; work files in {workdir}", flush=True)
    try:
        section_mix(args, routes, many, report)
    finally:
        close(routes)
    for w in ws.values():
        procs.stop(w.proc)
    if args.wide_tables:
        _, stub_port = start_stub(procs, args.wide_tables)
        uri = f"thrift://127.0.0.1:{stub_port}"
        wide = [Route(DIRECT, stub_port)]
        for key, label, n in (("wide-off", W_OFF, None), ("wide-many", many, args.rules)):
            w = start_waggle(procs, workdir / key, label, uri, authorization(n, groups_file))
            wide.append(Route(label, w.port, all_pids(w), w))
        print(f"\nstub metastore :{stub_port} (get_all_tables: {args.wide_tables:,} names); routes: "
              + ", ".join(f"{r.label} :{r.port}" for r in wide), flush=True)
        try:
            section_wide(args, wide, many, report)
        finally:
            close(wide)
    summary(report)


def close(routes: list[Route]) -> None:
    for r in routes:
        if r.conn is not None:
            r.conn.close()
            r.conn = None


if __name__ == "__main__":
    sys.exit(main())
