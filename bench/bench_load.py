"""waggle under load, in one run: throughput and latency, its own ceiling, CPU per call, upstream connections,
memory per worker.

    python bench/bench_load.py [--seconds 5] [--warmup 1] [--quick] [--json FILE] [--metastore thrift://host:port]
                               [--cpu-only]

Every client is a load generator (bench/load_generator.py): closed-loop connections on raw sockets sending
pre-encoded calls (strict binary, unframed, as Hive and Spark clients send them), each connection first calling
``set_ugi``, then ``get_database`` and ``get_table`` in turn (a cheap read mix, on ``bench_db.small``). A
reply that is byte for byte the previous good reply to the same call is done; any other is parsed just far enough
to find its end and checked for an exception. Each measurement warms up (``--warmup`` s), then counts for
``--seconds`` s. CPU is every thread's run time from ``/proc/PID/task/*/schedstat``, before and after.

1. **Throughput and latency** at 1, 16, 64 and 256 connections, against a real local Derby-backed Hive 2.3
   metastore (started here unless ``--metastore``; Java 17 and pyspark needed): direct, through waggle with 1
   worker, through waggle with 2 workers (``waggle serve --workers 2``, when the CLI has it), and through the
   byte relay (bench/byte_relay.py, no parsing: the floor of a Python hop). Ratios to direct. Target: at 64
   connections, waggle >= 0.95x direct.
2. **waggle's ceiling**, against a stub metastore that answers from memory (bench/stub_metastore.py: one epoll
   loop, pre-encoded replies, only the seqid patched), at ``--ceiling-connections`` from ``--generators``
   generator processes, with 1 and 2 workers, and the CPU the stub and the generators used. Target: 2 workers
   >= 1.6x one worker.
3. **CPU per call** of waggle (all its processes) and of the byte relay, in front of stub metastores, at 1 and
   16 connections; names unchanged, and behind a prefix (``database-resolution: PREFIXED``, member
   ``database-prefix: bench_``: every request and reply rewritten). Targets: waggle <= 1.3x the relay, prefixed
   <= 1.5x (at 16 connections).
4. **Upstream connections opened** by waggle during a 64-connection run (warm-up and measurement): the
   ``waggle_upstream_connections_opened`` counter of ``/metrics`` when waggle has it; otherwise the stub's count
   of accepted connections, and for the real metastore the distinct waggle-owned connections seen by sampling
   ``ss``. Target: at most 64.
5. **RSS per worker** (``VmRSS``) at rest and with 1,000 idle client connections open, each set up by one call
   (``set_ugi``, ``get_database``). Target: <= 100 MB per worker.

``--cpu-only`` runs section 3 alone (no Hive metastore, no 2-worker waggle): a quick way to compare changes;
``--baseline TREE`` adds the same routes through the waggle of another source tree (say, a ``git worktree`` of
an earlier commit), measured in the same run.

Every process started here is stopped at exit (also on Ctrl-C or an error); all traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import resource
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.Thrift import TMessageType
from thrift.transport.TTransport import TMemoryBuffer

from bench.bench_proxy import seed
from bench.cpu_cost import cpu_seconds
from bench.thrift_bytes import is_success, message_end
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
from waggle.local.client import hms_client
from waggle.local.jvm import free_port
from waggle.local.metastore import LocalMetastore

DB = "bench_db"
TABLE = "small"
PREFIX = "bench_"
USER = "bench"
LEVELS = (1, 16, 64, 256)
IDLE_CONNECTIONS = 1000
GENERATOR = ROOT / "bench" / "load_generator.py"
STUB = ROOT / "bench" / "stub_metastore.py"
STUB_NAME = "stub metastore (answers from memory)"


def tell(procs: list[subprocess.Popen[bytes]], line: bytes) -> None:
    """Send ``line`` to each generator's control stdin."""
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(line)
        p.stdin.flush()


def collect(procs: list[subprocess.Popen[bytes]], files: list[Path]) -> tuple[list[dict[str, Any]], list[float]]:
    """Stop the generators and gather what they measured: each one's result, and every latency, sorted."""
    tell(procs, b"stop\n")
    results = [json.loads(readline(p, 60)) for p in procs]
    for p in procs:
        p.wait(30)
    lat = array("d")
    for f in files:
        lat.frombytes(f.read_bytes())
        f.unlink()
    return results, sorted(lat)


def reap(procs: list[subprocess.Popen[bytes]]) -> None:
    """Kill the generators still running (a run that failed half-way)."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


# -- requests --------------------------------------------------------------------------------------------------
def call_bytes(name: str, args: Any, seqid: int) -> bytes:
    buf = TMemoryBuffer()
    proto = TBinaryProtocol(buf)
    proto.writeMessageBegin(name, TMessageType.CALL, seqid)
    args.write(proto)
    proto.writeMessageEnd()
    return bytes(buf.getvalue())


def call_mix(db: str) -> list[bytes]:
    m = ThriftHiveMetastore
    return [call_bytes("get_database", m.get_database_args(name=db), 1),
            call_bytes("get_table", m.get_table_args(dbname=db, tbl_name=TABLE), 2)]


UGI = call_bytes("set_ugi", ThriftHiveMetastore.set_ugi_args(user_name=USER, group_names=[]), 0)


# -- processes -------------------------------------------------------------------------------------------------
class Processes:
    """Everything this bench starts, stopped at exit whatever happens."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.stores: list[LocalMetastore] = []

    def add(self, proc: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[bytes], timeout: float = 15) -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if proc in self.procs:
            self.procs.remove(proc)

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in list(self.procs):
            self.stop(p)
        for s in self.stores:
            s.stop()
        self.stores.clear()


def http_get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return str(r.read().decode())


def waggle_has_workers() -> bool:
    out = subprocess.run([sys.executable, "-m", "waggle", "serve", "--help"], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    return "--workers" in out.stdout


@dataclass
class Waggle:
    label: str
    proc: subprocess.Popen[bytes]
    port: int
    http: int
    workers: int
    log: Path

    def health(self) -> dict[str, Any]:
        return dict(json.loads(http_get(self.http, "/healthz")))

    def pids(self) -> dict[str, list[int]]:
        """{"workers": [...], "supervisor": [...]}: with no ``workers`` in /healthz, the process started is the
        single worker."""
        workers = self.health().get("workers")
        if workers is None:
            return {"workers": [self.proc.pid], "supervisor": []}
        return {"workers": [int(w["pid"]) for w in workers if w.get("alive", True)], "supervisor": [self.proc.pid]}

    def upstream_opened(self) -> float | None:
        """The sum of ``waggle_upstream_connections_opened`` over metastores, or None if waggle lacks it."""
        total, seen = 0.0, False
        for line in http_get(self.http, "/metrics").splitlines():
            m = re.match(r"waggle_upstream_connections_opened(?:_total)?(?:\{[^}]*\})?\s+(\S+)$", line)
            if m:
                total, seen = total + float(m.group(1)), True
        return total if seen else None


def all_pids(w: Waggle) -> list[int]:
    return [pid for group in w.pids().values() for pid in group]


def start_waggle(procs: Processes, workdir: Path, label: str, uri: str, workers: int, has_workers: bool,
                 prefixed: bool = False, root: Path = ROOT) -> Waggle | None:
    """waggle through the real CLI with limits high enough that nothing is shed; None for several workers when the
    CLI cannot run them. ``root``: the source tree whose waggle runs."""
    if workers > 1 and not has_workers:
        return None
    port, http = free_port(), free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    server = (f"port: {port}\nbind-address: 127.0.0.1\nendpoint.port: {http}\nmax-connections: 4000\n"
              "limits.max-in-flight-calls: 10000\nlimits.max-calls-per-metastore: 10000\nlogging.level: warning\n"
              "thrift-server-stop-timeout-val-in-seconds: 2\nhot-reload: false\n")
    federation = f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {uri}\n"
    if prefixed:
        server += "database-resolution: PREFIXED\n"
        federation += (f"federated-meta-stores:\n  - name: bench\n    remote-meta-store-uris: {uri}\n"
                       f"    database-prefix: {PREFIX}\n")
    (workdir / "server.yml").write_text(server)
    (workdir / "federation.yml").write_text(federation)
    log = workdir / "waggle.log"
    cmd = [sys.executable, "-m", "waggle", "serve", "--server-config", str(workdir / "server.yml"),
           "--federation-config", str(workdir / "federation.yml")]
    if has_workers:
        cmd += ["--workers", str(workers)]
    with open(log, "wb") as err:
        proc = procs.add(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=root))
    w = Waggle(label, proc, port, http, workers, log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with hms_client("127.0.0.1", port, timeout=2) as c:
                c.getStatus()
            listed = w.health().get("workers")
            if listed is None or (len(listed) == workers
                                  and all(x.get("serving", x.get("alive", True)) for x in listed)):
                return w
        except Exception:
            pass
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-2000:]
    raise SystemExit(f"{label} did not start:\n{tail}")


def start_relay(procs: Processes, workdir: Path, upstream_port: int) -> tuple[subprocess.Popen[bytes], int]:
    """bench/byte_relay.py in front of ``upstream_port``, its complaints (a client's reset) in a log file."""
    port = free_port()
    with open(workdir / f"relay-{upstream_port}.log", "wb") as err:
        proc = procs.add(subprocess.Popen([sys.executable, str(ROOT / "bench" / "byte_relay.py"), str(port),
                                           str(upstream_port)], stderr=err, cwd=ROOT))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the byte relay did not start")


@dataclass
class Stub:
    proc: subprocess.Popen[bytes]
    port: int

    def stats(self) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(b"stats\n")
        self.proc.stdin.flush()
        return dict(json.loads(readline(self.proc, 10)))


def start_stub(procs: Processes) -> Stub:
    port = free_port()
    proc = procs.add(subprocess.Popen([sys.executable, str(STUB), str(port), "--database", DB, "--table", TABLE],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT))
    if readline(proc, 60).strip() != "ready":
        raise SystemExit("the stub metastore did not start")
    return Stub(proc, port)


def readline(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """One line of ``proc``'s stdout within ``timeout`` seconds."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        raise SystemExit(f"process {proc.pid} said nothing for {timeout:.0f} s")
    return proc.stdout.readline().decode()


# -- measurement -----------------------------------------------------------------------------------------------
def cpu_of(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds(pid)
        except OSError:
            pass  # gone
    return total


def machine_busy_seconds() -> float:
    """CPU time every core has spent busy so far, all processes (``/proc/stat``)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait


@dataclass
class Run:
    connections: int
    calls: int
    seconds: float
    errors: int
    lost: int
    p50_ms: float
    p99_ms: float
    cpu: dict[str, float] = field(default_factory=dict)  # seconds per group over the measured window
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.calls / self.seconds if self.seconds else 0.0

    def per_call_us(self, group: str) -> float:
        return self.cpu.get(group, 0.0) / self.calls * 1e6 if self.calls else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {"connections": self.connections, "calls": self.calls, "seconds": round(self.seconds, 3),
                "calls_per_second": round(self.rate, 1), "p50_ms": round(self.p50_ms, 3),
                "p99_ms": round(self.p99_ms, 3), "errors": self.errors, "lost": self.lost,
                "cpu_seconds": {k: round(v, 4) for k, v in self.cpu.items()}, **self.extra}


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")


def load(workdir: Path, port: int, requests: list[bytes], connections: int, seconds: float, warmup: float,
         generators: int = 1, watch: dict[str, list[int]] | None = None,
         before: Callable[[], None] | None = None, tick: Callable[[], None] | None = None) -> Run:
    """``connections`` closed-loop clients from ``generators`` processes: warm up, then count for ``seconds``.
    ``watch``: groups of processes whose CPU over the counted window is reported (the generators' own too).
    ``before`` runs before the generators connect; ``tick``, every 0.2 s until they stop."""
    watch = dict(watch or {})
    gens = max(1, min(generators, connections))
    shares = [connections // gens + (1 if i < connections % gens else 0) for i in range(gens)]
    if before:
        before()
    procs: list[subprocess.Popen[bytes]] = []
    files: list[Path] = []
    try:
        for i, n in enumerate(shares):
            files.append(workdir / f"latencies-{os.getpid()}-{i}.bin")
            spec = {"port": port, "connections": n, "requests": [r.hex() for r in requests], "ugi": UGI.hex(),
                    "latencies": str(files[-1]), "offset": i}
            procs.append(subprocess.Popen([sys.executable, str(GENERATOR), json.dumps(spec)], cwd=ROOT,
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE))
        for p in procs:
            if readline(p, 120).strip() != "ready":
                raise SystemExit("a load generator did not start")
        watch["load generators"] = [p.pid for p in procs]

        def pause(span: float) -> None:
            end = time.monotonic() + span
            while (left := end - time.monotonic()) > 0:
                if tick:
                    tick()
                time.sleep(min(0.2, left))

        pause(warmup)
        cpu0 = {k: cpu_of(v) for k, v in watch.items()}
        cpu0["machine"] = machine_busy_seconds()
        tell(procs, b"go\n")
        pause(seconds)
        cpu1 = {k: cpu_of(v) for k, v in watch.items()}
        cpu1["machine"] = machine_busy_seconds()
        results, ordered = collect(procs, files)
    finally:
        reap(procs)
    window = sum(r["seconds"] for r in results) / len(results)
    return Run(connections, sum(r["calls"] for r in results), window, sum(r["errors"] for r in results),
               sum(r["lost"] for r in results), pct(ordered, 0.5), pct(ordered, 0.99),
               {k: cpu1[k] - cpu0[k] for k in cpu1})


def ss_connections(port: int, pids: set[int]) -> set[tuple[str, str]]:
    """Established connections to 127.0.0.1:``port`` owned by ``pids`` (local address, peer)."""
    out = subprocess.run(["ss", "-tnpH", "state", "established", f"( dport = :{port} )"], capture_output=True,
                         text=True, timeout=10).stdout
    found = set()
    for line in out.splitlines():
        owners = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if owners & pids:
            cols = line.split()
            found.add((cols[2], cols[3]))
    return found


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def open_idle(port: int, n: int, db: str) -> list[socket.socket]:
    """``n`` client connections, each set up by ``set_ugi`` and one ``get_database``, left open."""
    request = call_mix(db)[0]
    socks = []
    try:
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            socks.append(s)
            for req in (UGI, request):
                s.sendall(req)
                data = b""
                while (parsed := message_end(data)) is None:
                    chunk = s.recv(65536)
                    if not chunk:
                        raise SystemExit("waggle closed an idle connection being set up")
                    data += chunk
                if not is_success(data, parsed):
                    raise SystemExit("waggle answered an idle connection's call with an exception")
    except BaseException:
        for s in socks:
            s.close()
        raise
    return socks


# -- the bench ---------------------------------------------------------------------------------------------------
def fmt_ratio(x: float) -> str:
    return f"{x:.2f}x" if x == x else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metastore", help="thrift://host:port of an existing metastore (default: start one)")
    ap.add_argument("--seconds", type=float, default=5.0, help="counted seconds per measurement")
    ap.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds before each measurement")
    ap.add_argument("--jit-warmup", type=float, default=20.0, help="seconds of load warming the metastore up first")
    ap.add_argument("--ceiling-connections", type=int, default=64)
    ap.add_argument("--generators", type=int, default=2, help="load generator processes for the ceiling")
    ap.add_argument("--cpu-seconds", type=float, default=2.0, help="counted seconds per CPU-per-call run")
    ap.add_argument("--repeats", type=int, default=2, help="CPU-per-call runs per route (the lowest is kept)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 1 s levels, short warm-ups")
    ap.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    ap.add_argument("--cpu-only", action="store_true", help="section 3 alone, CPU per call against the stubs")
    ap.add_argument("--baseline", metavar="TREE", help="with --cpu-only: also measure the waggle of another source "
                    "tree (a checkout of an earlier commit), in the same run")
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.warmup, args.cpu_seconds, args.repeats, args.jit_warmup = 1.0, 0.5, 1.0, 1, 4.0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4 * IDLE_CONNECTIONS + 1024
    if soft < want:  # waggle, started below, inherits it
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in the background
    logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)  # refusals while waggle starts
    return run_bench("waggle-bench-load-", run_all, args,
                     {"seconds": args.seconds, "warmup": args.warmup, "cores": os.cpu_count()})


def run_bench(prefix: str, run: Callable[[argparse.Namespace, Path, Processes, dict[str, Any]], None],
              args: argparse.Namespace, report: dict[str, Any]) -> int:
    """Run a bench in a work folder of its own, stop every process it started whatever happens, say how long it
    took, and write its report as JSON when ``--json`` asks."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    procs = Processes()
    started = time.monotonic()
    try:
        run(args, workdir, procs, report)
    finally:
        procs.stop_all()
    print(f"\n(whole run {time.monotonic() - started:.0f} s; work files in {workdir})")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str) + "\n")
    return 0


def run_all(args: argparse.Namespace, workdir: Path, procs: Processes, report: dict[str, Any]) -> None:
    has_workers = waggle_has_workers()
    report["workers_option"] = has_workers
    if args.cpu_only:
        run_cpu_only(args, workdir, procs, report, has_workers)
        return
    if not has_workers:
        print("note: this waggle has no 'serve --workers' yet: every 2-worker figure is left out", flush=True)
    store: LocalMetastore | None = None
    if args.metastore:
        uri = args.metastore
    else:
        store = LocalMetastore(workdir / "hms", fast_start=False, heap="2g").start()
        procs.stores.append(store)
        uri = store.uri
    # the stub side meanwhile: one stub per upstream, so each one's accept count is its own client's
    stubs = {k: start_stub(procs) for k in ("w1", "w2", "prefixed", "relay")}
    sw1 = start_waggle(procs, workdir / "stub-w1", "waggle, 1 worker", f"thrift://127.0.0.1:{stubs['w1'].port}",
                       1, has_workers)
    sw2 = start_waggle(procs, workdir / "stub-w2", "waggle, 2 workers", f"thrift://127.0.0.1:{stubs['w2'].port}",
                       2, has_workers)
    spre = start_waggle(procs, workdir / "stub-prefixed", "waggle, 1 worker, prefixed",
                        f"thrift://127.0.0.1:{stubs['prefixed'].port}", 1, has_workers, prefixed=True)
    assert sw1 is not None and spre is not None
    srelay, srelay_port = start_relay(procs, workdir, stubs["relay"].port)
    if store is not None:
        store.wait_ready(timeout=180)
    host, mport = uri.removeprefix("thrift://").split(":")
    (workdir / "data").mkdir(exist_ok=True)
    seed(host, int(mport), 0, workdir / "data")
    w1 = start_waggle(procs, workdir / "real-w1", "waggle, 1 worker", uri, 1, has_workers)
    w2 = start_waggle(procs, workdir / "real-w2", "waggle, 2 workers", uri, 2, has_workers)
    assert w1 is not None
    relay, relay_port = start_relay(procs, workdir, int(mport))
    print(f"metastore {uri} ({'started here' if store else 'given'}); waggle {w1.port} (1 worker)"
          + (f", {w2.port} (2 workers)" if w2 else "") + f", byte relay {relay_port}; work files in {workdir}",
          flush=True)

    section_throughput(args, workdir, report, uri, store, w1, w2, relay, relay_port)
    # the real metastore's side is done: free its CPU and memory for the rest
    for w in (w1, w2):
        if w is not None:
            procs.stop(w.proc)
    procs.stop(relay)
    if store is not None:
        store.stop()
    section_ceiling(args, workdir, report, stubs, sw1, sw2)
    section_cpu(args, workdir, report, stubs, sw1, sw2, spre, srelay, srelay_port)
    section_rss(report, sw1, sw2)
    summary(report)


def run_cpu_only(args: argparse.Namespace, workdir: Path, procs: Processes, report: dict[str, Any],
                 has_workers: bool) -> None:
    stubs = {k: start_stub(procs) for k in ("w1", "prefixed", "relay")}
    sw1 = start_waggle(procs, workdir / "stub-w1", "waggle, 1 worker", f"thrift://127.0.0.1:{stubs['w1'].port}",
                       1, has_workers)
    spre = start_waggle(procs, workdir / "stub-prefixed", "waggle, 1 worker, prefixed",
                        f"thrift://127.0.0.1:{stubs['prefixed'].port}", 1, has_workers, prefixed=True)
    assert sw1 is not None and spre is not None
    srelay, srelay_port = start_relay(procs, workdir, stubs["relay"].port)
    extra: list[tuple[str, Waggle, str]] = []
    if args.baseline:  # the same routes through another source tree's waggle, each in front of its own stub
        root = Path(args.baseline).resolve()
        for key, label, prefixed in (("base", "baseline", False), ("base-prefixed", "baseline, prefixed", True)):
            stubs[key] = start_stub(procs)
            w = start_waggle(procs, workdir / f"stub-{key}", label, f"thrift://127.0.0.1:{stubs[key].port}", 1,
                             has_workers, prefixed=prefixed, root=root)
            assert w is not None
            extra.append((label, w, PREFIX + DB if prefixed else DB))
        print(f"baseline: {root}", flush=True)
    section_cpu(args, workdir, report, stubs, sw1, None, spre, srelay, srelay_port, extra)
    summary(report)


# -- 1 ---------------------------------------------------------------------------------------------------------
def section_throughput(args: argparse.Namespace, workdir: Path, report: dict[str, Any], uri: str,
                       store: LocalMetastore | None, w1: Waggle, w2: Waggle | None,
                       relay: subprocess.Popen[bytes], relay_port: int) -> None:
    """Each level measures every route twice, for half of ``--seconds`` each, in the order A B C D D C B A
    (A..D shuffled per level): the metastore's own drift (its JIT, its garbage) cancels out."""
    mport = int(uri.rsplit(":", 1)[1])
    routes: list[tuple[str, int, Callable[[], dict[str, list[int]]], Waggle | None]] = [
        ("direct", mport, dict, None),
        ("waggle, 1 worker", w1.port, w1.pids, w1),
        *([("waggle, 2 workers", w2.port, w2.pids, w2)] if w2 else []),
        ("byte relay", relay_port, lambda: {"workers": [relay.pid]}, None),
    ]
    requests = call_mix(DB)
    jvm = [store.process.pid] if store is not None and store.process is not None else []
    log = store.log_path if store is not None else None
    print(f"\nwarming up the metastore's JIT: {args.jit_warmup:g} s at 16 and 64 connections, direct and through "
          "waggle ...", flush=True)
    for i, (n, port) in enumerate(((16, mport), (64, w1.port), (16, w1.port), (64, mport))):
        load(workdir, port, requests, n, 0.1, args.jit_warmup / 4 - 0.1 if i else args.jit_warmup / 4)
    runs: dict[int, dict[str, list[Run]]] = {}
    conns_report: dict[str, Any] = {}
    half = args.seconds / 2
    for level in LEVELS:
        runs[level] = {label: [] for label, *_ in routes}
        order = random.sample(routes, len(routes))
        for label, port, pids, w in order + order[::-1]:
            watch = {k: v for k, v in pids().items() if v}
            if jvm:
                watch["metastore"] = jvm
            if level == 64 and w is not None and label not in conns_report:
                run = counted_upstream_run(args, workdir, w, port, mport, log, requests, watch, half)
                conns_report[label] = run.extra["upstream_connections"]
            else:
                run = load(workdir, port, requests, level, half, args.warmup, watch=watch)
            runs[level][label].append(run)
            print(f"  {level:>3} connections  {label:<20} {run.rate:>9.0f} calls/s  p50 {run.p50_ms:7.3f} ms  "
                  f"p99 {run.p99_ms:7.3f} ms" + (f"  ERRORS {run.errors}" if run.errors else "")
                  + (f"  LOST {run.lost}" if run.lost else ""), flush=True)
    results = {level: {label: merge(rs) for label, rs in by.items()} for level, by in runs.items()}
    labels = [r[0] for r in routes]
    print(f"\n1. throughput and latency: the {len(requests)}-call mix (get_database, get_table) on {DB}.{TABLE}, "
          f"{args.seconds:g} s per route and level (two halves, A B C D D C B A),\n   each after {args.warmup:g} s "
          "of warm-up, against a real Hive 2.3 metastore (Derby)")
    print(f"{'conns':>5}  {'route':<20}{'calls/s':>10}{'vs direct':>11}{'p50 ms':>9}{'p99 ms':>9}"
          f"{'route CPU us/call':>19}{'metastore CPU us/call':>23}{'machine busy, cores':>21}")
    for level in LEVELS:
        d = results[level]["direct"].rate
        for label in labels:
            r = results[level][label]
            own = r.per_call_us("workers") + r.per_call_us("supervisor") if label != "direct" else float("nan")
            print(f"{level:>5}  {label:<20}{r.rate:>10.0f}{fmt_ratio(r.rate / d):>11}{r.p50_ms:>9.3f}"
                  f"{r.p99_ms:>9.3f}{own:>19.1f}{r.per_call_us('metastore'):>23.1f}"
                  f"{r.cpu.get('machine', 0.0) / r.seconds:>21.2f}"
                  + (f"   {r.errors} errors" if r.errors else ""))
    print("route CPU: the byte relay's or waggle's processes (all workers and the supervisor), per call")
    report["throughput"] = {str(level): {k: v.as_dict() for k, v in results[level].items()} for level in LEVELS}
    report["upstream_connections_real"] = conns_report
    for name, key in (("waggle, 1 worker", "w1"), ("waggle, 2 workers", "w2")):
        if name in results[64]:
            report.setdefault("targets", {})[f"throughput_64_{key}"] = results[64][name].rate / results[64][
                "direct"].rate


def merge(runs: list[Run]) -> Run:
    """Runs of one route and level as one: calls and CPU added up, latencies from the runs' own percentiles
    weighted by their calls (close enough for two halves of one measurement)."""
    calls = sum(r.calls for r in runs)

    def weighted(get: Callable[[Run], float]) -> float:
        return sum(get(r) * r.calls for r in runs) / calls if calls else float("nan")

    cpu: dict[str, float] = {}
    for r in runs:
        for k, v in r.cpu.items():
            cpu[k] = cpu.get(k, 0.0) + v
    return Run(runs[0].connections, calls, sum(r.seconds for r in runs), sum(r.errors for r in runs),
               sum(r.lost for r in runs), weighted(lambda r: r.p50_ms), weighted(lambda r: r.p99_ms), cpu,
               {"halves": [r.as_dict() for r in runs]})


def log_count(path: Path | None, offset: int, needle: str) -> tuple[int, int]:
    """Lines of ``path`` from byte ``offset`` holding ``needle``, and the new end offset."""
    if path is None:
        return 0, 0
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    return data.count(needle.encode()), offset + len(data)


def counted_upstream_run(args: argparse.Namespace, workdir: Path, w: Waggle, port: int, upstream_port: int,
                         log: Path | None, requests: list[bytes], watch: dict[str, list[int]], seconds: float
                         ) -> Run:
    """A 64-connection run (warm-up and measurement) that also counts the upstream connections waggle opens:
    its counter when it has one; else connections closed (the metastore logs each one's "Done cleaning up
    thread local RawStore"; waggle is the only client meanwhile) plus waggle-owned connections held after, less
    those held before (``ss``); and, as a floor, distinct waggle-owned connections seen by sampling ``ss``."""
    owners = set(w.pids()["workers"]) | set(w.pids()["supervisor"])
    seen: set[tuple[str, str]] = set()
    marks: dict[str, Any] = {}

    def before() -> None:
        marks["counter0"] = w.upstream_opened()
        marks["held0"] = ss_connections(upstream_port, owners)
        marks["log0"] = log_count(log, 0, "")[1]
        seen.update(marks["held0"])

    def tick() -> None:
        seen.update(ss_connections(upstream_port, owners))

    run = load(workdir, port, requests, 64, seconds, args.warmup, watch=watch, before=before, tick=tick)
    tick()
    counter1 = w.upstream_opened()
    held1 = ss_connections(upstream_port, owners)
    closed, _ = log_count(log, marks["log0"], "Done cleaning up thread local RawStore")
    run.extra["upstream_connections"] = {
        "held_before": len(marks["held0"]), "held_after": len(held1),
        "sampled_new": len(seen - marks["held0"]),
        "closed_per_metastore_log": closed if log is not None else None,
        "opened_from_log": closed + len(held1) - len(marks["held0"]) if log is not None else None,
        "counter": None if marks["counter0"] is None or counter1 is None else counter1 - marks["counter0"],
    }
    return run


# -- 2 ---------------------------------------------------------------------------------------------------------
def section_ceiling(args: argparse.Namespace, workdir: Path, report: dict[str, Any], stubs: dict[str, Stub],
                    sw1: Waggle, sw2: Waggle | None) -> None:
    n = args.ceiling_connections
    requests = call_mix(DB)
    runs: dict[str, Run] = {}
    conns: dict[str, Any] = {}
    for key, w in (("w1", sw1), ("w2", sw2)):
        if w is None:
            continue
        stub = stubs[key]
        pids = w.pids()
        watch = {"waggle workers": pids["workers"], "waggle supervisor": pids["supervisor"], "stub": [stub.proc.pid]}
        marks: dict[str, Any] = {}

        def before(w: Waggle = w, stub: Stub = stub, marks: dict[str, Any] = marks) -> None:
            marks["accepted0"] = stub.stats()["accepted"]
            marks["counter0"] = w.upstream_opened()

        run = load(workdir, w.port, requests, n, args.seconds, args.warmup, generators=args.generators,
                   watch=watch, before=before)
        counter1 = w.upstream_opened()
        conns[w.label] = {"stub_accepted": stub.stats()["accepted"] - marks["accepted0"],
                          "counter": None if counter1 is None or marks["counter0"] is None
                          else counter1 - marks["counter0"], "connections": n}
        run.extra["upstream_connections"] = conns[w.label]
        runs[w.label] = run
    print(f"\n2. waggle's ceiling: in front of a {STUB_NAME}, {n} connections from {args.generators} load "
          f"generator processes, {args.seconds:g} s ({os.cpu_count()} cores shared by all)")
    print(f"{'':<20}{'calls/s':>10}{'p50 ms':>9}{'p99 ms':>9}   CPU used, in cores (us per call):"
          f"{'waggle':>14}{'stub':>14}{'generators':>14}{'anything else':>15}")
    for label, r in runs.items():
        def cores(group: str, r: Run = r) -> str:
            return f"{r.cpu.get(group, 0.0) / r.seconds:.2f} ({r.per_call_us(group):.0f})"
        waggle_cpu = r.cpu.get("waggle workers", 0.0) + r.cpu.get("waggle supervisor", 0.0)
        ours = waggle_cpu + r.cpu.get("stub", 0.0) + r.cpu.get("load generators", 0.0)
        others = max(0.0, r.cpu.get("machine", 0.0) - ours) / r.seconds
        print(f"{label:<20}{r.rate:>10.0f}{r.p50_ms:>9.3f}{r.p99_ms:>9.3f}   {'':<33}"
              f"{f'{waggle_cpu / r.seconds:.2f} ({waggle_cpu / r.calls * 1e6:.0f})':>14}{cores('stub'):>14}"
              f"{cores('load generators'):>14}{others:>15.2f}" + (f"   {r.errors} errors" if r.errors else ""))
    print("anything else: the machine's busy time (/proc/stat) less the three above: the bench itself, the "
          "kernel's\nsoftirqs, other processes (a busy machine shows here)")
    ratio = float("nan")
    if len(runs) == 2:
        one, two = runs.values()
        ratio = two.rate / one.rate
        print(f"2 workers / 1 worker: {ratio:.3f}x")
    else:
        print("2 workers: not measured (no 'serve --workers' in this waggle)")
    report["ceiling"] = {k: v.as_dict() for k, v in runs.items()}
    report["upstream_connections_stub"] = conns
    report.setdefault("targets", {})["ceiling_ratio"] = ratio


# -- 3 ---------------------------------------------------------------------------------------------------------
def section_cpu(args: argparse.Namespace, workdir: Path, report: dict[str, Any], stubs: dict[str, Stub],
                sw1: Waggle, sw2: Waggle | None, spre: Waggle, srelay: subprocess.Popen[bytes],
                srelay_port: int, extra: list[tuple[str, Waggle, str]] | None = None) -> None:
    """``extra``: more waggles to measure, (label, waggle, the database its clients call)."""
    routes: list[tuple[str, int, list[bytes], Callable[[], list[int]]]] = [
        ("byte relay", srelay_port, call_mix(DB), lambda: [srelay.pid]),
        ("waggle, 1 worker", sw1.port, call_mix(DB), lambda: all_pids(sw1)),
        ("waggle, prefixed", spre.port, call_mix(PREFIX + DB), lambda: all_pids(spre)),
    ]
    for label, w, db in extra or ():
        routes.append((label, w.port, call_mix(db), lambda w=w: all_pids(w)))
    if sw2 is not None:
        routes.append(("waggle, 2 workers", sw2.port, call_mix(DB), lambda: all_pids(sw2)))
    verify_prefixed(spre)
    levels = (1, 16)
    best: dict[int, dict[str, Run]] = {level: {} for level in levels}
    for level in levels:
        for _ in range(args.repeats):
            for label, port, requests, pids in random.sample(routes, len(routes)):
                run = load(workdir, port, requests, level, args.cpu_seconds, args.warmup / 2,
                           watch={"route": pids()})
                if label not in best[level] or run.per_call_us("route") < best[level][label].per_call_us("route"):
                    best[level][label] = run
    print("\n3. CPU per call (all of the route's processes), each route in front of its own stub metastore "
          "(answers from memory),\n   the same call mix; "
          f"{args.repeats} run(s) of {args.cpu_seconds:g} s per route, the lowest kept")
    print(f"{'':<22}" + "".join(f"{f'{level} conn us/call':>18}{'vs relay':>10}{'calls/s':>10}" for level in levels))
    for label, *_ in routes:
        line = f"{label:<22}"
        for level in levels:
            r, base = best[level][label], best[level]["byte relay"]
            us = r.per_call_us("route")
            line += f"{us:>18.1f}{fmt_ratio(us / base.per_call_us('route')):>10}{r.rate:>10.0f}"
        print(line)
    print("prefixed: database-resolution PREFIXED, member 'bench' with database-prefix bench_; clients call "
          f"{PREFIX + DB}, every request and reply rewritten")
    report["cpu_per_call"] = {str(level): {k: {"us_per_call": round(v.per_call_us("route"), 2), **v.as_dict()}
                                           for k, v in best[level].items()} for level in levels}
    relay16 = best[16]["byte relay"].per_call_us("route")
    targets = report.setdefault("targets", {})
    targets["cpu_ratio"] = best[16]["waggle, 1 worker"].per_call_us("route") / relay16
    targets["cpu_ratio_prefixed"] = best[16]["waggle, prefixed"].per_call_us("route") / relay16
    targets["cpu_us"] = (best[16]["waggle, 1 worker"].per_call_us("route"),
                         best[16]["waggle, prefixed"].per_call_us("route"), relay16)
    relay1 = best[1]["byte relay"].per_call_us("route")
    targets["cpu_1"] = {k: best[1][k].per_call_us("route") / relay1 for k in ("waggle, 1 worker", "waggle, prefixed")}


def verify_prefixed(spre: Waggle) -> None:
    with hms_client("127.0.0.1", spre.port, timeout=30) as c:
        c.set_ugi(USER, [])
        names = (c.get_database(PREFIX + DB).name, c.get_table(PREFIX + DB, TABLE).dbName)
    if names != (PREFIX + DB, PREFIX + DB):
        raise SystemExit(f"the prefixed waggle did not rewrite names: {names}")


# -- 5 ---------------------------------------------------------------------------------------------------------
def section_rss(report: dict[str, Any], sw1: Waggle, sw2: Waggle | None) -> None:
    print(f"\n5. RSS (VmRSS), MB, at rest and with {IDLE_CONNECTIONS} idle client connections open "
          f"(each set up by set_ugi and get_database), in front of a {STUB_NAME}")
    print(f"{'':<20}{'process':<16}{'at rest':>9}{'1,000 idle':>12}")
    out: dict[str, Any] = {}
    for w in (sw1, sw2):
        if w is None:
            continue
        pids = w.pids()
        rest = {pid: rss_mb(pid) for group in pids.values() for pid in group}
        socks = open_idle(w.port, IDLE_CONNECTIONS, DB)
        try:
            time.sleep(0.5)
            busy = {pid: rss_mb(pid) for pid in rest}
            open_now = w.health().get("workers")
        finally:
            for s in socks:
                s.close()
        rows = []
        label = w.label
        for group, members in pids.items():
            for i, pid in enumerate(members):
                name = f"worker {i}" if group == "workers" else "supervisor"
                print(f"{label:<20}{name:<16}{rest[pid]:>9.1f}{busy[pid]:>12.1f}")
                label = ""
                rows.append({"process": name, "pid": pid, "rest_mb": round(rest[pid], 1),
                             "idle_1000_mb": round(busy[pid], 1)})
        out[w.label] = {"processes": rows, "workers_view": open_now}
    report["rss"] = out
    worst = max((r["idle_1000_mb"] for v in out.values() for r in v["processes"] if r["process"] != "supervisor"),
                default=float("nan"))
    report.setdefault("targets", {})["rss_worst_worker_mb"] = worst


# -- summary ---------------------------------------------------------------------------------------------------
def summary(report: dict[str, Any]) -> None:
    t = report.get("targets", {})

    def verdict(ok: bool | None) -> str:
        return "n/a" if ok is None else ("met" if ok else "NOT MET")

    rows: list[tuple[str, str, str]] = []
    for key, name in (("throughput_64_w1", "1 worker"), ("throughput_64_w2", "2 workers")):
        v = t.get(key)
        rows.append((f"1. 64 connections, waggle ({name}) >= 0.95x direct",
                     "not measured" if v is None else f"{v:.3f}x", verdict(None if v is None else v >= 0.95)))
    v = t.get("ceiling_ratio", float("nan"))
    rows.append(("2. ceiling, 2 workers >= 1.6x 1 worker", f"{v:.3f}x" if v == v else "not measured (no --workers)",
                 verdict(v >= 1.6 if v == v else None)))
    w_us, p_us, r_us = t.get("cpu_us", (float("nan"),) * 3)
    v = t.get("cpu_ratio", float("nan"))
    one = t.get("cpu_1", {})
    rows.append(("3. CPU per call, 16 conns, waggle <= 1.3x byte relay", f"{v:.2f}x ({w_us:.0f} vs {r_us:.0f} us)",
                 verdict(v <= 1.3)))
    v = t.get("cpu_ratio_prefixed", float("nan"))
    rows.append(("3. CPU per call, 16 conns, prefixed <= 1.5x byte relay",
                 f"{v:.2f}x ({p_us:.0f} vs {r_us:.0f} us)", verdict(v <= 1.5)))
    for key, name, bound in (("waggle, 1 worker", "waggle", 1.3), ("waggle, prefixed", "prefixed", 1.5)):
        if key in one:
            rows.append((f"   (the same at 1 connection: {name} <= {bound}x)", f"{one[key]:.2f}x",
                         verdict(one[key] <= bound)))
    for label, info in report.get("upstream_connections_real", {}).items():
        if info["counter"] is not None:
            n, how = info["counter"], "counter"
        elif info["opened_from_log"] is not None:
            n, how = info["opened_from_log"], f"metastore log + ss; ss sampling saw {info['sampled_new']}"
        else:
            n, how = info["sampled_new"], "ss sampling, a floor"
        rows.append((f"4. upstream connections opened, 64 conns, {label} (Hive)", f"{n:.0f} ({how})",
                     verdict(n <= 64)))
    for label, info in report.get("upstream_connections_stub", {}).items():
        n, how = (info["counter"], "counter") if info["counter"] is not None else (info["stub_accepted"],
                                                                                  "stub's accept count")
        rows.append((f"4. upstream connections opened, {info['connections']} conns, {label} (stub)",
                     f"{n:.0f} ({how})", verdict(n <= 64)))
    v = t.get("rss_worst_worker_mb", float("nan"))
    rows.append(("5. RSS per worker, 1,000 idle connections <= 100 MB", f"{v:.1f} MB (largest worker)",
                 verdict(v <= 100 if v == v else None)))
    print("\nsummary")
    for name, figure, result in rows:
        print(f"  {name:<72}{figure:<46}{result}")
    report["summary"] = [{"target": n, "figure": f, "result": r} for n, f, r in rows]


if __name__ == "__main__":
    sys.exit(main())
