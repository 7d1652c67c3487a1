"""``waggle serve --workers N`` against real metastores: N processes on one port under one supervisor.

Each test starts waggle through the real CLI and finds out which worker serves a client connection from the
kernel's own tables (``/proc``), so "the other worker's clients" means exactly that.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hmsclient.genthrift.hive_metastore import ttypes

from tests.support.clients import hive2_client
from tests.support.faults import SlowLink
from tests.support.federation import prefixed
from tests.support.proxy import WaggleProcess, owner
from tests.support.waits import wait_for

pytestmark = pytest.mark.integration

SERVER = "logging:\n  format: json\n"


federation = partial(prefixed, access="READ_AND_WRITE_AND_CREATE")


def health(proxy: WaggleProcess) -> dict[str, Any]:
    try:
        return dict(json.loads(proxy.http("/healthz")))
    except urllib.error.HTTPError as exc:
        return dict(json.loads(exc.read()))


def serving(proxy: WaggleProcess, n: int) -> list[dict[str, Any]]:
    """Wait until ``n`` workers serve; their statuses."""
    def check() -> list[dict[str, Any]] | None:
        workers = health(proxy).get("workers", [])
        ok = [w for w in workers if w["serving"] and w["answered"]]
        return workers if len(ok) == n else None

    return list(wait_for(check, 60.0, f"{n} workers serving"))


def worker_pids(proxy: WaggleProcess) -> list[int]:
    return [int(w["pid"]) for w in health(proxy)["workers"]]


class Caller(threading.Thread):
    """One client connection calling in a loop; after a failure it reconnects. Failures are kept, and which
    worker served the connection when they happened."""

    def __init__(self, proxy: WaggleProcess, pids: list[int]) -> None:
        super().__init__(daemon=True)
        self.proxy, self.pids = proxy, pids
        self.ok = 0
        self.ok_after_failure = 0
        self.failures: list[str] = []
        self.worker: int | None = None
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                with self.proxy.client(timeout=10) as c:
                    while not self.stopping.is_set():
                        c.get_database("default")
                        if self.worker is None:  # accepted by now
                            self.worker = owner(self.proxy, c, self.pids)
                        self.ok += 1
                        if self.failures:
                            self.ok_after_failure += 1
            except Exception as exc:
                self.failures.append(repr(exc))
                time.sleep(0.05)

    def finish(self) -> None:
        self.stopping.set()
        self.join(30)


@pytest.fixture
def two_workers(tmp_path: Path, primary: Any) -> Iterator[WaggleProcess]:
    proxy = WaggleProcess(tmp_path, federation(primary.uri), SERVER + "max-connections: 200\n",
                          args=("--workers", "2")).start()
    try:
        serving(proxy, 2)
        yield proxy
    finally:
        proxy.stop()


def spread(proxy: WaggleProcess, count: int) -> tuple[list[Any], dict[int, int]]:
    """``count`` open clients (each has made a call on its connection), and how many each worker serves.
    The caller closes them (:func:`close_all`)."""
    pids = worker_pids(proxy)
    clients = []
    served: dict[int, int] = dict.fromkeys(pids, 0)
    for _ in range(count):
        cm = hive2_client(proxy.port)
        c = cm.__enter__()
        c.closing = cm
        c.get_database("default")
        clients.append(c)
        served[owner(proxy, c, pids)] += 1
    return clients, served


def close_all(clients: list[Any]) -> None:
    for c in clients:
        try:
            c.closing.__exit__(None, None, None)
        except Exception:
            pass


def test_workers_share_one_port_and_metrics_add_up(two_workers: WaggleProcess) -> None:
    proxy = two_workers
    workers = health(proxy)["workers"]
    assert len({w["pid"] for w in workers}) == 2 and all(w["alive"] for w in workers)
    assert all(pid != proxy.proc.pid for pid in worker_pids(proxy))  # type: ignore[union-attr]
    before = proxy.metric("waggle_calls_total", method="get_database", metastore="primary") or 0.0
    clients, served = spread(proxy, 24)
    try:
        assert all(n > 0 for n in served.values()), served  # the kernel spreads connections over both
        statuses = health(proxy)["workers"]
        assert sorted(w["connections"] for w in statuses) == sorted(served.values())
        assert proxy.metric("waggle_client_connections") == 24.0
    finally:
        close_all(clients)
    after = proxy.metric("waggle_calls_total", method="get_database", metastore="primary")
    assert after == before + 24  # both workers' calls, added up
    assert proxy.metric("waggle_workers") == 2.0
    assert proxy.metric("waggle_metastore_up", metastore="primary") == 1.0  # the supervisor's own, once
    ready = json.loads(proxy.http("/readyz"))
    assert ready["ready"] is True


def test_a_reload_reaches_every_worker_and_a_rejected_one_none(tmp_path: Path, primary: Any, analytics: Any,
                                                               federation_data: dict[str, Any]
                                                               ) -> None:
    proxy = WaggleProcess(tmp_path, federation(primary.uri), SERVER + "database-resolution: PREFIXED\n",
                          args=("--workers", "2")).start()
    try:
        serving(proxy, 2)
        proxy.write_federation(federation(primary.uri, ("analytics", analytics.uri, "analytics_")))
        wait_for(lambda: all(w.get("generation") == 2 for w in serving(proxy, 2)), 30.0, "generation 2")
        clients, served = spread(proxy, 16)
        try:
            assert all(n > 0 for n in served.values()), served
            for c in clients:  # every connection, on either worker, sees the new member
                assert "analytics_sales" in c.get_all_databases()
            since = len(proxy.log())
            proxy.write_federation(federation(primary.uri, ("analytics", analytics.uri, "analytics_"))
                                             + "  access-control-type: NOT_A_TYPE\n")
            wait_for(lambda: proxy.events("config.reload_failed", since), 30.0, "the rejected reload")
            assert all(w["generation"] == 2 for w in serving(proxy, 2))
            for c in clients:
                assert c.get_table("analytics_sales", "orders").dbName == "analytics_sales"
            assert not proxy.events("config.reloaded", since)
        finally:
            close_all(clients)
    finally:
        proxy.stop()


def test_a_killed_worker_is_replaced_and_the_others_clients_see_no_errors(two_workers: WaggleProcess) -> None:
    proxy = two_workers
    pids = worker_pids(proxy)
    callers = [Caller(proxy, pids) for _ in range(12)]
    for caller in callers:
        caller.start()
    try:
        wait_for(lambda: all(c.worker is not None and c.ok > 5 for c in callers), 30.0, "callers running")
        victim = pids[0]
        on_victim = [c for c in callers if c.worker == victim]
        others = [c for c in callers if c.worker != victim]
        assert on_victim and others, [c.worker for c in callers]
        counted = proxy.metric("waggle_calls_total", method="get_database", metastore="primary")
        os.kill(victim, signal.SIGKILL)
        replaced = wait_for(lambda: (lambda w: w if victim not in w and len(w) == 2 else None)(
            [x["pid"] for x in serving(proxy, 2)]), 30.0, "a new worker")
        done = {c: c.ok for c in callers}
        wait_for(lambda: all(c.ok > done[c] + 5 for c in callers), 30.0, "every caller calling again")
    finally:
        for caller in callers:
            caller.finish()
    assert all(not c.failures for c in others), [c.failures for c in others]
    assert all(c.ok_after_failure > 0 for c in on_victim if c.failures)  # they reconnected
    assert any(c.failures for c in on_victim)
    assert len(set(replaced)) == 2
    assert proxy.metric("waggle_worker_restarts_total") == 1.0
    exited = proxy.events("worker.exited")
    assert exited and exited[-1]["pid"] == victim and exited[-1]["exit"] == "signal 9"
    calls = proxy.metric("waggle_calls_total", method="get_database", metastore="primary")
    assert counted and calls and calls > counted  # the dead worker's calls, as last reported, still count


def test_max_connections_bounds_the_pod(tmp_path: Path, primary: Any) -> None:
    proxy = WaggleProcess(tmp_path, federation(primary.uri), SERVER + "max-connections: 10\n",
                          args=("--workers", "2")).start()
    clients = []
    try:
        serving(proxy, 2)
        pids = worker_pids(proxy)
        admitted: dict[int, int] = dict.fromkeys(pids, 0)
        refused = 0
        for _ in range(40):
            cm = hive2_client(proxy.port, timeout=10)
            c = cm.__enter__()
            clients.append(cm)
            try:
                c.get_database("default")
                admitted[owner(proxy, c, pids)] += 1
            except ttypes.MetaException as exc:
                assert "max-connections" in exc.message
                refused += 1
        assert sum(admitted.values()) == 10 and refused == 30, admitted
        assert all(n > 0 for n in admitted.values())  # both workers took some of the pod's ten
        for cm in clients[:5]:
            cm.__exit__(None, None, None)
        clients = clients[5:]
        wait_for(lambda: proxy.metric("waggle_client_connections") == 5.0, 30.0, "the workers counting the closes")
        cm = hive2_client(proxy.port, timeout=10)
        clients.append(cm)
        assert cm.__enter__().get_database("default").name == "default"  # a freed place is taken again
    finally:
        for cm in clients:
            try:
                cm.__exit__(None, None, None)
            except Exception:
                pass
        proxy.stop()


def test_sigterm_drains_every_worker(tmp_path: Path, primary: Any) -> None:
    link = SlowLink(primary.port, delay=0)
    proxy = WaggleProcess(tmp_path, federation(f"thrift://127.0.0.1:{link.port}"),
                          SERVER + "thrift-server-stop-timeout-val-in-seconds: 20\n", args=("--workers", "2")).start()
    try:
        serving(proxy, 2)
        pids = worker_pids(proxy)
        results: dict[int, str] = {}
        conns: list[tuple[Any, Any]] = []
        while len({owner(proxy, c, pids) for _, c in conns}) < 2 or len(conns) < 4:
            cm = hive2_client(proxy.port, timeout=30)
            c = cm.__enter__()
            c.get_database("default")
            conns.append((cm, c))

        def slow_call(i: int, c: Any) -> None:
            try:
                results[i] = c.get_database("default").name
            except Exception as exc:
                results[i] = repr(exc)

        link.delay = 2.0
        threads = [threading.Thread(target=slow_call, args=(i, c)) for i, (_, c) in enumerate(conns)]
        for t in threads:
            t.start()
        wait_for(lambda: link.held("get_database") >= len(conns), 10.0, "every call reached the slow link")
        assert proxy.proc is not None
        proxy.proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(30)
        assert proxy.proc.wait(30) == 0
        assert all(r == "default" for r in results.values()), results  # calls in flight on both finished
        assert all(not os.path.exists(f"/proc/{pid}") for pid in pids)
        assert proxy.events("server.stopped")
    finally:
        link.close()
        proxy.stop()


def test_workers_follow_the_supervisors_health_checks(tmp_path: Path, primary: Any, analytics: Any,
                                                      federation_data: dict[str, Any]) -> None:
    link = SlowLink(analytics.port, delay=0)
    proxy = WaggleProcess(tmp_path, federation(primary.uri, ("analytics", f"thrift://127.0.0.1:{link.port}",
                                                             "analytics_")),
                          SERVER + "database-resolution: PREFIXED\nstatus-polling-delay: 1\n"
                          "status-polling-delay-time-unit: SECONDS\ndown-member-retry: 1\n",
                          args=("--workers", "3")).start()
    clients: list[Any] = []
    try:
        serving(proxy, 3)
        clients, served = spread(proxy, 24)
        assert sum(1 for n in served.values() if n) >= 2, served
        for c in clients:
            assert c.get_table("analytics_sales", "orders").dbName == "analytics_sales"
        # quiet: only health checks reach the member, one fresh connection each, once a second, from the
        # supervisor alone (three workers checking too would be about four times as many)
        opened, quiet = link.accepted, time.monotonic()
        wait_for(lambda: link.accepted - opened >= 4, 10.0, "four health checks")
        took = time.monotonic() - quiet
        assert took >= 2.5, f"{link.accepted - opened} health checks in {took:.1f} s"
        link.close()  # the member goes away: the supervisor's check finds it, and every worker knows at once
        wait_for(lambda: not health(proxy)["metastores"]["analytics"]["up"], 30.0, "analytics down")
        for c in clients:
            started = time.monotonic()
            with pytest.raises(ttypes.MetaException) as exc:
                c.get_table("analytics_sales", "orders")
            assert "metastore 'analytics' is unavailable" in exc.value.message
            assert time.monotonic() - started < 0.5  # answered from the health it was told, not a timeout
    finally:
        close_all(clients)
        link.close()
        proxy.stop()


def test_workers_leave_with_their_supervisor(tmp_path: Path, primary: Any) -> None:
    proxy = WaggleProcess(tmp_path, federation(primary.uri), SERVER, args=("--workers", "2")).start()
    try:
        pids = [w["pid"] for w in serving(proxy, 2)]
        assert proxy.proc is not None
        proxy.proc.kill()  # the supervisor dies without a word: its workers must not serve on, unsupervised
        proxy.proc.wait()
        wait_for(lambda: not any(os.path.exists(f"/proc/{pid}") and "zombie" not in _state(pid) for pid in pids),
                 30.0, "the workers exiting")
        assert [e for e in proxy.events("worker.orphaned")]
    finally:
        proxy.stop()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].splitlines()[0].lower()
    except (OSError, IndexError):
        return "zombie"
