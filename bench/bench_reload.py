"""Hot reload under load: how long an edit takes to serve, and what calls in flight notice.

    python bench/bench_reload.py [--metastore thrift://host:port] [--edits 20] [--gap 1.0]

Without ``--metastore`` a local Derby-backed Hive 2.3 metastore is started. One waggle (PREFIXED, the same
metastore as primary and as member ``bench``) runs through the real CLI. A client calls ``get_database``
direct and through waggle in turn, as fast as it can, while the federation file is edited ``--edits`` times
(the member's access control flips, so its pool is kept). The bench prints the time from each write to
the new generation serving (``/api/admin/federations``), and p50/p99 of both routes, in the half second after
each edit and away from edits, with their ratios (milliseconds). Every call must succeed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from bench_proxy import PREFIX, metastore, pct, start_waggle, stop_processes

from waggle.local.client import hms_client
from waggle.local.seed import ensure_database

ACCESS = ("READ_ONLY", "READ_AND_WRITE_ON_DATABASE_WHITELIST")
#: calls this long after a write count as "during a reload"
WINDOW = 0.5


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metastore", help="thrift://host:port of an existing metastore (default: start one)")
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--gap", type=float, default=2.0, help="seconds between edits")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="waggle-bench-reload-"))
    store = None
    procs = []
    try:
        uri, store = metastore(args.metastore, workdir)
        host, port = uri.removeprefix("thrift://").rsplit(":", 1)
        with hms_client(host, int(port), timeout=60) as c:
            ensure_database(c, "bench_db", f"file://{workdir}/bench_db.db")
        proc, waggle_port = start_waggle(workdir / "waggle", uri, prefixed=True)
        procs.append(proc)
        server = (workdir / "waggle" / "server.yml").read_text()
        http = int(server.split("endpoint.port: ")[1].split()[0])
        federation = workdir / "waggle" / "federation.yml"
        original = federation.read_text()

        def generation() -> int:
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/api/admin/federations", timeout=10) as r:
                return int(json.loads(r.read())["generation"])

        samples: list[tuple[float, str, float]] = []  # (when, route, seconds)
        failures: list[str] = []
        stop = threading.Event()

        def load() -> None:
            with hms_client(host, int(port)) as direct, hms_client("127.0.0.1", waggle_port) as proxied:
                routes = (("direct", direct, "bench_db"), ("waggle", proxied, PREFIX + "bench_db"))
                while not stop.is_set():
                    for route, client, db in routes:
                        started = time.perf_counter()
                        try:
                            client.get_database(db)
                        except Exception as exc:
                            failures.append(f"{route}: {exc!r}")
                        samples.append((time.monotonic(), route, time.perf_counter() - started))

        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        time.sleep(args.gap)
        edits: list[tuple[float, float]] = []  # (when written, seconds until serving)
        for i in range(args.edits):
            text = original + f"    access-control-type: {ACCESS[i % 2]}\n"
            written = time.monotonic()
            federation.write_text(text)
            while generation() < i + 2:
                time.sleep(0.005)
            edits.append((written, time.monotonic() - written))
            time.sleep(args.gap)
        stop.set()
        loader.join(10)

        def near_edit(t: float) -> bool:
            return any(w <= t <= w + WINDOW for w, _ in edits)

        took = [s for _, s in edits]
        print(f"{args.edits} edits of {federation.name}: write -> new generation serving: "
              f"p50 {pct(took, 0.5):.0f} ms, max {1000 * max(took):.0f} ms")
        print(f"\n{'calls to get_database':<34}{'p50 direct':>11}{'waggle':>9}{'ratio':>8}"
              f"{'p99 direct':>12}{'waggle':>9}{'ratio':>8}{'calls':>8}")
        for label, pick in ((f"within {WINDOW} s after an edit", True), ("away from edits", False)):
            d = [x for t, r, x in samples if r == "direct" and near_edit(t) == pick]
            w = [x for t, r, x in samples if r == "waggle" and near_edit(t) == pick]
            print(f"{label:<34}{pct(d, .5):>11.3f}{pct(w, .5):>9.3f}{pct(w, .5) / pct(d, .5):>7.2f}x"
                  f"{pct(d, .99):>12.3f}{pct(w, .99):>9.3f}{pct(w, .99) / pct(d, .99):>7.2f}x{len(w):>8}")
        print(f"\nfailed calls: {len(failures)}" + (f" (first: {failures[0]})" if failures else ""))
        return 1 if failures else 0
    finally:
        stop_processes(procs)
        if store is not None:
            store.stop()


if __name__ == "__main__":
    sys.exit(main())
