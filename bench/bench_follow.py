"""``waggle sync --follow`` against its limits, all figures from one run.

    python bench/bench_follow.py [--tables 10] [--seconds 60] [--backlog 10000] [--idle-seconds 60]
                                 [--copy-seconds 30] [--workdir DIR] [--profile DIR]

Two local Derby-backed Hive 2.3 metastores (Java 17 and pyspark needed), with full JIT, each writing notification
events with waggle's listener: a *source* (federation member ``src``) and a *target* (the primary). The source
gets ``bench_src.t00`` ... ``t09``: external text tables partitioned by ``part``. The follower runs as a real
``waggle sync --follow --config FILE`` subprocess (one policy, ``follow: true``, the default write limit of 20
calls/s), and is watched from outside only:

1. **Steady lag.** A writer adds one partition a call (``add_partition``), round robin over the tables, open loop
   from four connections (the rate it reached is printed), at 20 events/s for ``--seconds``, then at 60 events/s
   (Uber's daily average). A poller lists the target tables' partition names every 50 ms. A partition's lag is
   from the source call's return (its commit) to the poll that first sees it at the target (so it includes up to
   one poll interval). Goals: p99 <= 2 s at 20/s and <= 5 s at 60/s, mirror mode.
2. **Catch-up.** The follower is stopped (SIGTERM), ``--backlog`` partitions are added at the source one call
   each (that many ADD_PARTITION events, from four connections), and the follower is started again: its rate is
   the backlog over the seconds from its start to the last partition's arrival at the target (the interpreter's
   start included).
   The limit: raw ``add_partitions`` of the same partitions (their directories exist, as the mirrored ones' do),
   500 a call, into a fresh table of the target.
   Goal: >= 0.8x raw.
3. **Idle.** The follower started again with its source behind a relay that counts calls by method (the audit
   log misses the notification calls); 10 s after its start, with nothing written for ``--idle-seconds``: its CPU
   seconds (``/proc``, its children included) and its calls to the source. Goal: under 1% of a core.
4. **Copy mode** (``--copy-seconds``, 0 to skip): the same steady writer at 20/s for a second policy in copy
   mode (each partition holds one small file, copied by Spark's executors, ``local[2]``): lag reported.

Both metastores, the follower, the writer and the poller share this machine's CPUs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from thrift.Thrift import TApplicationException

from bench.thrift_bytes import ProtocolError, message_end
from waggle.hms.gen.hive_metastore import ttypes
from waggle.local.client import hms_client
from waggle.local.jvm import free_port
from waggle.local.metastore import LocalMetastore
from waggle.local.seed import ensure_database, ensure_table, text_sd

SRC_DB = "bench_src"
COLS = [("id", "int"), ("name", "string")]
KEYS = [("part", "string")]
BATCH = 500
HEAP = "2g"
POLL = 0.05  # seconds between the poller's rounds
WRITERS = 4  # the steady writer's connections


def table_names(n: int) -> list[str]:
    return [f"t{i:02d}" for i in range(n)]


# -- the follower, as a subprocess -------------------------------------------------------------------------------
# Runs ``python -m waggle ARGS`` with each thread under cProfile (a policy's batches run in a thread of their own),
# stats written at exit to PROFILE_DIR/<n>-<thread>.prof: ``--profile DIR``.
_PROFILED = """
import atexit, cProfile, os, runpy, sys, threading
out, profiles, run = os.environ["PROFILE_DIR"], [], threading.Thread.run
def profiled(self):
    p = cProfile.Profile()
    profiles.append((self.name, p))
    p.enable()
    try:
        run(self)
    finally:
        p.disable()
threading.Thread.run = profiled
def dump():
    for i, (name, p) in enumerate(profiles):
        p.disable()
        p.dump_stats(os.path.join(out, f"{os.getpid()}-{i:02d}-{name.replace('/', '_')}.prof"))
atexit.register(dump)
runpy.run_module("waggle", run_name="__main__", alter_sys=True)
"""


class Follower:
    profile: Path | None = None

    def __init__(self, work: Path, sync_file: Path, name: str) -> None:
        self.work, self.sync_file, self.name = work, sync_file, name
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0

    def start(self) -> Follower:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(self.work / "pycache")
        log = open(self.work / f"{self.name}.log", "ab")
        self.started = time.perf_counter()
        run = ["-m", "waggle"]
        if self.profile is not None:
            self.profile.mkdir(parents=True, exist_ok=True)
            env["PROFILE_DIR"], run = str(self.profile), ["-c", _PROFILED]
        self.proc = subprocess.Popen([sys.executable, *run, "sync", "--follow", "--config",
                                      str(self.sync_file), "--no-progress"], stdout=log, stderr=subprocess.STDOUT,
                                     cwd=ROOT, env=env)
        log.close()
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def cpu_seconds(self) -> float:
        """User and system CPU of the follower and its children (Spark's JVM, Python workers)."""
        assert self.proc is not None
        total = 0.0
        tick = os.sysconf("SC_CLK_TCK")
        for pid in [self.proc.pid, *_children(self.proc.pid)]:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / tick
            except (OSError, IndexError, ValueError):
                pass
        return total

    def alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            tail = "\n".join((self.work / f"{self.name}.log").read_text(errors="replace").splitlines()[-30:])
            raise SystemExit(f"the follower exited with {self.proc.returncode}:\n{tail}")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            out += [int(child), *_children(int(child))]
    except OSError:
        pass
    return out


# -- a counting relay to the source ---------------------------------------------------------------------------------
class CountingRelay(threading.Thread):
    """A TCP relay to a metastore that counts the calls going through it, by method (the metastore's audit log
    does not show every call: Hive 2.3's ``HMSHandler.get_next_notification`` and
    ``get_current_notificationEventId`` log no audit line)."""

    def __init__(self, upstream_port: int) -> None:
        super().__init__(daemon=True)
        self.upstream_port = upstream_port
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()

    def run(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, count: bool) -> None:
        buf = b""
        try:
            while data := src.recv(262144):
                dst.sendall(data)
                if not count:
                    continue
                buf += data
                while (parsed := message_end(buf)) is not None:
                    with self.lock:
                        self.calls[parsed[2].decode(errors="replace")] += 1
                    buf = buf[parsed[0]:]
        except ProtocolError:
            with self.lock:
                self.calls["(not strict binary Thrift)"] += 1
            while data := src.recv(262144):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def snapshot(self) -> Counter[str]:
        with self.lock:
            return Counter(self.calls)

    def close(self) -> None:
        self.server.close()


# -- writer and poller ------------------------------------------------------------------------------------------
class Poller(threading.Thread):
    """Lists the target's partition names of every table every ``POLL`` seconds; records when each is first
    seen."""

    def __init__(self, port: int, db: str, tables: list[str]) -> None:
        super().__init__(daemon=True)
        self.port, self.db, self.tables = port, db, tables
        self.seen: dict[tuple[str, str], float] = {}
        self.stop = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        try:
            with hms_client("127.0.0.1", self.port, timeout=600) as c:
                while not self.stop.is_set():
                    for t in self.tables:
                        try:
                            names = c.get_partition_names(self.db, t, -1)
                        except (ttypes.NoSuchObjectException, ttypes.MetaException, TApplicationException):
                            continue  # not made yet (Hive 2.3 answers an unknown database with an internal error)
                        now = time.perf_counter()
                        for n in names:
                            self.seen.setdefault((t, n), now)
                    self.stop.wait(POLL)
        except Exception as exc:  # reported by wait_for, not lost in a thread
            self.error = f"the poller of {self.db} stopped: {type(exc).__name__}: {exc}"

    def wait_for(self, keys: list[tuple[str, str]], timeout: float) -> float:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if self.error is not None:
                raise SystemExit(self.error)
            if all(k in self.seen for k in keys):
                return max(self.seen[k] for k in keys)
            time.sleep(POLL)
        missing = [k for k in keys if k not in self.seen]
        raise SystemExit(f"{len(missing)} partition(s) never reached the target, e.g. {missing[:3]}")


def write(port: int, work: Path, tables: list[str], rate: float, seconds: float, start: int, files: bool
          ) -> dict[tuple[str, str], float]:
    """Add partitions one call each at ``rate`` a second for ``seconds``; each one's commit time. Open loop: call
    ``i`` is due at ``i / rate`` and made from connection ``i % WRITERS``, so a slow call delays only its own
    connection's next ones, not the offered rate."""
    committed: dict[tuple[str, str], float] = {}
    t0 = time.perf_counter() + 0.2  # every connection open before the first call is due
    count = int(seconds * rate)

    def writer(k: int) -> None:
        with hms_client("127.0.0.1", port, timeout=600) as c:
            for i in range(k, count, WRITERS):
                delay = t0 + i / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                table = tables[i % len(tables)]
                value = f"p{start + i:07d}"
                location = f"file://{work}/src/{table}/part={value}"
                if files:
                    Path(location[len("file://"):]).mkdir(parents=True, exist_ok=True)
                    Path(location[len("file://"):], "data.csv").write_text(f"{i},name{i}\n")
                c.add_partition(ttypes.Partition(values=[value], dbName=SRC_DB, tableName=table,
                                                 sd=text_sd(location, COLS), parameters={}))
                committed[(table, f"part={value}")] = time.perf_counter()

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(committed) < count:
        raise SystemExit(f"the writer made {len(committed)} of {count} partitions (see the errors above)")
    return committed


def add_one_by_one(port: int, work: Path, partitions: list[tuple[str, str]], threads: int = 4) -> None:
    """Add ``partitions`` at the source one ``add_partition`` call each (one event each), from a few connections at
    once (only the events count, not how fast they were made)."""

    def add(share: list[tuple[str, str]]) -> None:
        with hms_client("127.0.0.1", port, timeout=600) as c:
            for table, name in share:
                c.add_partition(ttypes.Partition(values=[name.split("=", 1)[1]], dbName=SRC_DB, tableName=table,
                                                 sd=text_sd(f"file://{work}/src/{table}/{name}", COLS),
                                                 parameters={}))

    workers = [threading.Thread(target=add, args=(partitions[k::threads],)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def lags(committed: dict[tuple[str, str], float], poller: Poller, timeout: float = 120) -> list[float]:
    poller.wait_for(list(committed), timeout)
    return sorted(poller.seen[k] - t for k, t in committed.items())


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def audit_calls(store: LocalMetastore) -> int:
    return sum(1 for line in store.log_path.read_text(errors="replace").splitlines() if "cmd=" in line)


# -- set-up --------------------------------------------------------------------------------------------------------
def write_files(work: Path, source_uri: str, target: LocalMetastore, tables: list[str], http_port: int,
                mode: str, name: str, target_db: str) -> Path:
    federation = work / f"{name}-federation.yml"
    federation.write_text(
        "primary-meta-store:\n  name: primary\n"
        f"  remote-meta-store-uris: {target.uri}\n  access-control-type: READ_AND_WRITE_AND_CREATE\n"
        f"federated-meta-stores:\n- name: src\n  remote-meta-store-uris: {source_uri}\n  database-prefix: src_\n")
    sync = work / f"{name}.yml"
    sync.write_text(json.dumps({
        "federation-config": str(federation), "source": "src", "http-port": http_port, "master": "local[2]",
        "jobs": [{"name": name, "tables": f"{SRC_DB}\\.({'|'.join(tables)})", "mode": mode,
                  "target-database": target_db, "follow": True}]}))
    return sync


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds of each steady rate")
    parser.add_argument("--backlog", type=int, default=10_000)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--copy-seconds", type=float, default=30.0)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--profile", default=None, help="directory for cProfile stats of the follower's threads")
    args = parser.parse_args()
    Follower.profile = Path(args.profile).resolve() if args.profile else None
    signal.signal(signal.SIGTERM, _on_term)  # a stopped bench still stops its metastores and followers
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-follow-")).resolve()
    tables = table_names(args.tables)
    source = LocalMetastore(work / "source", heap=HEAP, fast_start=False).start()
    target = LocalMetastore(work / "target", heap=HEAP, fast_start=False).start()
    followers: list[Follower] = []
    try:
        source.wait_ready()
        target.wait_ready()
        with hms_client("127.0.0.1", source.port, timeout=600) as c:
            ensure_database(c, SRC_DB, f"file://{work}/src")
            for t in tables:
                ensure_table(c, SRC_DB, t, f"file://{work}/src/{t}", COLS, KEYS)
        results: dict[str, Any] = {}
        sync = write_files(work, source.uri, target, tables, free_port(), "mirror", "steady", "bench_mirror")
        follower = Follower(work, sync, "steady").start()
        followers.append(follower)
        poller = Poller(target.port, "bench_mirror", tables)
        poller.start()
        # warm-up: the bootstrap, then a few events through
        warm = write(source.port, work, tables, 20, 5, 0, False)
        lags(warm, poller, timeout=300)
        start = len(warm)
        for rate in (20, 60):
            began = time.perf_counter()
            committed = write(source.port, work, tables, rate, args.seconds, start, False)
            achieved = len(committed) / (time.perf_counter() - began)
            start += len(committed)
            follower.alive()
            got = lags(committed, poller)
            results[f"mirror {rate}/s"] = got
            print(f"mirror at {rate} events/s (written at {achieved:.1f}/s): {len(got)} partitions, lag p50 "
                  f"{pct(got, 0.5):.2f} s, p99 {pct(got, 0.99):.2f} s, max {got[-1]:.2f} s", flush=True)

        # catch-up
        follower.stop()
        backlog = [(tables[i % len(tables)], f"part=p{start + i:07d}") for i in range(args.backlog)]
        began = time.perf_counter()
        add_one_by_one(source.port, work, backlog)
        written = time.perf_counter() - began
        start += args.backlog
        follower = Follower(work, sync, "steady").start()
        followers.append(follower)
        arrived = poller.wait_for(list(backlog), timeout=1800)
        catch_up = arrived - follower.started
        raw = raw_add(target.port, work, list(backlog))
        print(f"catch-up: {args.backlog} events (written at the source in {written:.1f} s) applied in "
              f"{catch_up:.1f} s = {args.backlog / catch_up:,.0f}/s; raw add_partitions {raw:.1f} s = "
              f"{args.backlog / raw:,.0f}/s; ratio {raw / catch_up:.2f}x (goal >= 0.8x)", flush=True)
        results["catch-up"] = {"seconds": catch_up, "raw_seconds": raw, "ratio": raw / catch_up}

        # idle: the same policy, its source reached through a relay that counts the calls
        follower.stop()
        relay = CountingRelay(source.port)
        relay.start()
        idle_sync = write_files(work, f"thrift://127.0.0.1:{relay.port}", target, tables, free_port(), "mirror",
                                "steady", "bench_mirror")
        follower = Follower(work, idle_sync, "steady").start()
        followers.append(follower)
        time.sleep(10)  # started, checkpoint read, nothing to do: its waits have grown to their longest
        follower.alive()
        cpu0, calls0, audit0, t0 = follower.cpu_seconds(), relay.snapshot(), audit_calls(source), time.perf_counter()
        time.sleep(args.idle_seconds)
        cpu1, calls1, audit1, t1 = follower.cpu_seconds(), relay.snapshot(), audit_calls(source), time.perf_counter()
        follower.alive()
        minutes = (t1 - t0) / 60
        calls = calls1 - calls0
        by_method = ", ".join(f"{m} {n / minutes:.0f}" for m, n in calls.most_common())
        print(f"idle: {(cpu1 - cpu0) / minutes:.2f} CPU s/min ({100 * (cpu1 - cpu0) / (t1 - t0):.2f}% of a core; "
              f"goal < 1%), {calls.total() / minutes:.0f} source calls/min ({by_method or 'none'}; "
              f"{(audit1 - audit0) / minutes:.0f}/min in the source's audit log)", flush=True)
        results["idle"] = {"cpu_percent": 100 * (cpu1 - cpu0) / (t1 - t0),
                           "source_calls_per_minute": calls.total() / minutes,
                           "by_method_per_minute": {m: n / minutes for m, n in calls.items()}}
        follower.stop()
        relay.close()
        poller.stop.set()

        if args.copy_seconds > 0:
            copied = [f"c{i:02d}" for i in range(args.tables)]  # tables of their own, whose partitions hold files
            with hms_client("127.0.0.1", source.port, timeout=600) as c:
                for t in copied:
                    ensure_table(c, SRC_DB, t, f"file://{work}/src/{t}", COLS, KEYS)
            sync = write_files(work, source.uri, target, copied, free_port(), "copy", "copied", "bench_copy")
            follower = Follower(work, sync, "copied").start()
            followers.append(follower)
            poller = Poller(target.port, "bench_copy", copied)
            poller.start()
            lags(write(source.port, work, copied, 5, 4, 0, True), poller, timeout=600)  # bootstrap, Spark started
            began = time.perf_counter()
            committed = write(source.port, work, copied, 20, args.copy_seconds, 100, True)
            achieved = len(committed) / (time.perf_counter() - began)
            got = lags(committed, poller, timeout=600)
            results["copy 20/s"] = got
            print(f"copy at 20 events/s (written at {achieved:.1f}/s): {len(got)} partitions, lag p50 "
                  f"{pct(got, 0.5):.2f} s, p99 {pct(got, 0.99):.2f} s, max {got[-1]:.2f} s", flush=True)
            poller.stop.set()
        events, duplicated = duplicate_event_ids(source.port)
        print(f"source's notification log: {events} events, {len(duplicated)} ids held by more than one event "
              f"(concurrent writers; e.g. {duplicated[:5]})", flush=True)
        results["source events"] = {"events": events, "duplicated_ids": len(duplicated)}
        (work / "results.json").write_text(json.dumps(
            {k: (v if isinstance(v, dict) else {"p50": pct(v, 0.5), "p99": pct(v, 0.99), "n": len(v)})
             for k, v in results.items()}, indent=2))
        print(f"figures in {work / 'results.json'}")
    finally:
        for f in followers:
            f.stop()
        source.stop()
        target.stop()


def duplicate_event_ids(port: int) -> tuple[int, list[int]]:
    """How many events the source's log holds, and the ids more than one of them carry."""
    ids: Counter[int] = Counter()
    last = 0
    with hms_client("127.0.0.1", port, timeout=600) as c:
        while events := c.get_next_notification(ttypes.NotificationEventRequest(lastEvent=last, maxEvents=5000)
                                                ).events or []:
            ids.update(e.eventId for e in events)
            last = events[-1].eventId
    return ids.total(), sorted(i for i, n in ids.items() if n > 1)


def _on_term(signum: int, frame: object) -> None:
    raise SystemExit(f"stopped by signal {signum}")


def raw_add(port: int, work: Path, backlog: list[tuple[str, str]]) -> float:
    """Seconds of ``add_partitions``, ``BATCH`` a call, of the backlog's partitions (values and locations: the
    source's directories, which exist, as the follower's mirrored ones do) into a fresh table of the target."""
    with hms_client("127.0.0.1", port, timeout=600) as c:
        ensure_database(c, "bench_raw", f"file://{work}/raw")
        ensure_table(c, "bench_raw", "t", f"file://{work}/raw/t", COLS, KEYS)
        parts = [ttypes.Partition(values=[name.split("=", 1)[1]], dbName="bench_raw", tableName="t",
                                  sd=text_sd(f"file://{work}/src/{table}/{name}", COLS), parameters={})
                 for table, name in backlog]
        t = time.perf_counter()
        for i in range(0, len(parts), BATCH):
            c.add_partitions(parts[i:i + BATCH])
        return time.perf_counter() - t


if __name__ == "__main__":
    main()
