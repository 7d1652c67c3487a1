"""Operating waggle against real metastores: hot reload under load, the HTTP side after real traffic, load
shedding, and a SIGTERM that drains."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from hmsclient.genthrift.hive_metastore import ttypes
from thrift.Thrift import TApplicationException

from tests.support.clients import encode_call, hive2_client
from tests.support.faults import SlowLink
from tests.support.federation import prefixed
from tests.support.proxy import WaggleProcess, listening
from tests.support.waits import wait_for
from waggle.call import lock_ids

pytestmark = pytest.mark.integration

PREFIXED = "database-resolution: PREFIXED\nlogging:\n  format: json\n"


class CallLoop(threading.Thread):
    """One client calling in a loop; every failure is kept."""

    def __init__(self, proxy: WaggleProcess, *calls: Callable[[Any], object]) -> None:
        super().__init__(daemon=True)
        self.proxy, self.calls = proxy, calls
        self.ok = 0
        self.failures: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        with self.proxy.client() as c:
            while not self.stopping.is_set():
                for call in self.calls:
                    try:
                        call(c)
                        self.ok += 1
                    except Exception as exc:
                        self.failures.append(repr(exc))

    def finish(self) -> None:
        self.stopping.set()
        self.join(30)


class TableCall(threading.Thread):
    """One ``get_table`` through waggle on a connection of its own, in the background."""

    def __init__(self, proxy: WaggleProcess, db: str, table: str) -> None:
        super().__init__(daemon=True)
        self.proxy, self.db, self.table_name = proxy, db, table
        self.table: Any = None
        self.error: Exception | None = None
        self.start()

    def run(self) -> None:
        try:
            with self.proxy.client() as c:
                self.table = c.get_table(self.db, self.table_name)
        except Exception as exc:
            self.error = exc

    def result(self, within: float = 20) -> Any:
        self.join(within)
        assert self.table is not None, f"get_table({self.db}.{self.table_name}) failed: {self.error!r}"
        return self.table


def admin_view(proxy: WaggleProcess) -> dict[str, Any]:
    return dict(json.loads(proxy.http("/api/admin/federations")))


def wait_generation(proxy: WaggleProcess, generation: int, within: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        view = admin_view(proxy)
        if view["generation"] >= generation:
            assert view["generation"] == generation, view
            return view
        assert time.monotonic() < deadline, f"generation {generation} not reached:\n{proxy.log()[-3000:]}"
        time.sleep(0.1)


def request(proxy: WaggleProcess, path: str, method: str = "GET", token: str | None = None) -> tuple[int, Any]:
    return proxy.request(path, method, token)


def test_hot_reload_adds_renames_and_removes_members_while_clients_call(primary, analytics, ops, federation_data,
                                                                          tmp_path):
    link = SlowLink(ops.port, delay=0)
    ops_uri = f"thrift://127.0.0.1:{link.port}"
    proxy = WaggleProcess(tmp_path, prefixed(primary.uri), PREFIXED).start()
    loops: list[CallLoop] = []
    stack = contextlib.ExitStack()
    try:
        loops.append(CallLoop(proxy, lambda c: c.get_database("default"), lambda c: c.get_all_databases()))
        loops[0].start()
        assert admin_view(proxy)["generation"] == 1

        # 1. add two federated members
        proxy.write_federation(prefixed(primary.uri, ("analytics", analytics.uri, "analytics_"),
                                                    ("ops", ops_uri, "ops_")))
        view = wait_generation(proxy, 2)
        assert [m["name"] for m in view["metastores"]] == ["primary", "analytics", "ops"]
        with proxy.client() as c:
            dbs = c.get_all_databases()
            assert {"analytics_sales", "ops_telemetry", "default"} <= set(dbs)
            assert c.get_table("ops_telemetry", "events").dbName == "ops_telemetry"
        loops.append(CallLoop(proxy, lambda c: c.get_table("analytics_sales", "orders")))
        loops[1].start()
        added = proxy.events("config.reloaded")[-1]
        assert added["keep_pools"] == ["primary"] and added["open_pools"] == ["analytics", "ops"]

        # 2. change a prefix: the same metastore, new names; every pool is kept
        proxy.write_federation(prefixed(primary.uri, ("analytics", analytics.uri, "analytics_"),
                                                    ("ops", ops_uri, "tel_")))
        wait_generation(proxy, 3)
        with proxy.client() as c:
            dbs = c.get_all_databases()
            assert "tel_telemetry" in dbs and "ops_telemetry" not in dbs
            assert c.get_table("tel_telemetry", "events").dbName == "tel_telemetry"
            with pytest.raises(ttypes.NoSuchObjectException):
                c.get_database("ops_telemetry")
        renamed = proxy.events("config.reloaded")[-1]
        assert renamed["keep_pools"] == ["primary", "analytics", "ops"] and "open_pools" not in renamed

        # a lock granted by ops, held on a connection of its own across ops's removal
        holder = stack.enter_context(proxy.client())
        lock = holder.lock(ttypes.LockRequest(
            component=[ttypes.LockComponent(type=ttypes.LockType.SHARED_READ, level=ttypes.LockLevel.TABLE,
                                            dbname="tel_telemetry", tablename="events",
                                            operationType=ttypes.DataOperationType.SELECT)],
            user="waggle", hostname="test"))
        assert lock.state == ttypes.LockState.ACQUIRED

        # 3. remove a member while a call to it is in flight: the call finishes on the old configuration
        link.delay = 2.0
        caller = TableCall(proxy, "tel_telemetry", "events")
        wait_for(lambda: link.holding("get_table"), 10.0, "the get_table waiting on the slow link")
        proxy.write_federation(prefixed(primary.uri, ("analytics", analytics.uri, "analytics_")))
        wait_generation(proxy, 4)
        table = caller.result()
        assert table.tableName == "events" and table.dbName == "tel_telemetry"
        removed = proxy.events("config.reloaded")[-1]
        assert removed["close_pools"] == ["ops"] and removed["keep_pools"] == ["primary", "analytics"]
        with proxy.client() as c:
            assert not [d for d in c.get_all_databases() if d.startswith("tel_")]
            with pytest.raises(ttypes.NoSuchObjectException):
                c.get_database("tel_telemetry")
        assert proxy.metric("waggle_metastore_up", metastore="ops") is None  # its gauge went with it
        with pytest.raises(TApplicationException, match="no metastore of the federation has that slot"):
            holder.check_lock(ttypes.CheckLockRequest(lockid=lock.lockid))  # its id names ops's slot
        assert holder.get_database("default").name == "default"  # and the connection goes on
        with hive2_client(ops.port) as direct:
            direct.unlock(ttypes.UnlockRequest(lockid=lock_ids.decode(lock.lockid)[1]))

        # 4. an invalid edit is rejected, named, counted; the running configuration keeps serving
        invalid = prefixed(primary.uri, ("analytics", analytics.uri, "analytics_"),
                             extra="  access-control-type: READ_SOMETIMES\n")
        proxy.write_federation(invalid)
        deadline = time.monotonic() + 20
        while proxy.metric("waggle_config_reloads_total", result="failed") != 1.0:
            assert time.monotonic() < deadline, proxy.log()[-3000:]
            time.sleep(0.1)
        failed = proxy.events("config.reload_failed")
        assert len(failed) == 1
        problem = failed[0]["problem"]
        assert str(proxy.federation_file) in problem and "federated-meta-stores[0].access-control-type" in problem
        assert "READ_SOMETIMES" in problem
        view = admin_view(proxy)
        assert view["generation"] == 4 and view["last_reload_error"] == [problem]
        with proxy.client() as c:
            assert c.get_table("analytics_sales", "orders").tableName == "orders"
        assert proxy.federation_file.read_text() == invalid  # never rewritten
        assert proxy.metric("waggle_config_reloads_total", result="succeeded") == 3.0
        assert proxy.metric("waggle_config_generation") == 4.0

        for loop in loops:
            loop.finish()
        assert [loop.failures for loop in loops] == [[], []]
        assert all(loop.ok > 10 for loop in loops), [loop.ok for loop in loops]
        # state-changing admin calls are off without a token
        status, body = request(proxy, "/api/admin/reload", "POST", token="anything-at-all-here")
        assert status == 403 and "admin.token-file" in body["error"]
    finally:
        stack.close()
        for loop in loops:
            loop.stopping.set()
        proxy.stop()
        link.close()


def test_http_side_after_real_traffic_and_reloads_on_demand(primary, analytics, federation_data, tmp_path):
    from waggle.local.jvm import free_port

    token = "s3cret-admin-token-0123456789"
    token_file = tmp_path / "admin-token"
    token_file.write_text(token + "\n")
    gone = f"thrift://127.0.0.1:{free_port()}"  # nobody listens there
    members = (("analytics", analytics.uri, "analytics_"), ("gone", gone, "gone_"))
    proxy = WaggleProcess(tmp_path, prefixed(primary.uri, *members),
                          PREFIXED + f"hot-reload: false\ndown-member-retry: 1\nadmin:\n  token-file: {token_file}\n"
                          ).start()
    try:
        with proxy.client() as c:
            c.set_ugi("ops_user", [])
            assert c.get_table("analytics_sales", "orders").tableName == "orders"
            with pytest.raises(ttypes.NoSuchObjectException):
                c.get_table("analytics_sales", "nope")
            assert "default" in c.get_all_databases()  # 'gone' is left out of the merge
            assert proxy.metric("waggle_client_connections") == 1.0
        assert proxy.metric("waggle_calls_total", method="get_table", metastore="analytics") == 2.0
        assert proxy.metric("waggle_call_errors_total", method="get_table", metastore="analytics",
                      kind="exception") == 1.0
        assert proxy.metric("waggle_call_duration_seconds_count", method="get_table", metastore="analytics") == 2.0
        assert proxy.metric("waggle_calls_total", method="get_all_databases", metastore="*") == 1.0
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as raw:  # a name out of our IDL
            raw.sendall(encode_call("made_up_method_0123456789", ttypes.Database()))
            assert b"made_up_method_0123456789" in raw.recv(65536)  # the primary's "Invalid method name"
        assert proxy.metric("waggle_calls_total", method="(unknown)", metastore="primary") == 1.0
        assert "made_up" not in proxy.http("/metrics")  # client-chosen names never become labels
        assert proxy.metric("waggle_fanout_omissions_total", method="get_all_databases", metastore="gone") == 1.0
        assert proxy.metric("waggle_metastore_up", metastore="primary") == 1.0
        deadline = time.monotonic() + 10
        while proxy.metric("waggle_metastore_up", metastore="gone") != 0.0:  # checked at once after the failure
            assert time.monotonic() < deadline
            time.sleep(0.1)
        while not proxy.metric("waggle_event_loop_lag_seconds_count"):  # sampled 4 times a second
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert proxy.metric("waggle_event_loop_blocked_total") is not None
        assert proxy.metric("waggle_upstream_calls_in_flight", metastore="analytics") == 0.0

        health = json.loads(proxy.http("/healthz"))
        assert health["status"] == "ok" and health["metastores"]["gone"]["up"] is False
        assert request(proxy, "/readyz") == (200, {"ready": True, "reason": "ok", "generation": 1})
        view = admin_view(proxy)
        by_name = {m["name"]: m for m in view["metastores"]}
        assert by_name["analytics"]["database_prefix"] == "analytics_"
        assert by_name["analytics"]["status"]["up"] is True and by_name["analytics"]["pool"]["opened"] >= 1
        assert by_name["gone"]["status"]["up"] is False and by_name["gone"]["status"]["reason"]
        assert view["federation_file"] == str(proxy.federation_file) and view["database_resolution"] == "PREFIXED"
        assert request(proxy, "/nope")[0] == 404

        # hot-reload: false: an edit waits for SIGHUP or the admin call
        # (no watcher started: it would have logged config.watching before serving this HTTP call, since the
        # start-up logged federation.loaded and then starts the watcher, or not, without yielding)
        wait_for(lambda: proxy.events("federation.loaded"), 10.0, "the start-up logged")
        proxy.write_federation(prefixed(primary.uri, ("analytics", analytics.uri, "an_")))
        assert admin_view(proxy)["generation"] == 1
        assert not proxy.events("config.watching")
        assert request(proxy, "/api/admin/reload", "POST")[0] == 401
        assert request(proxy, "/api/admin/reload", "POST", token="wrong-token-0123456789")[0] == 401
        assert request(proxy, "/api/admin/reload", "GET", token=token)[0] == 405
        status, body = request(proxy, "/api/admin/reload", "POST", token=token)
        assert status == 200 and body == {"reloaded": True, "generation": 2, "problems": []}
        with proxy.client() as c:
            assert c.get_table("an_sales", "orders").dbName == "an_sales"
        proxy.write_federation(prefixed(primary.uri, ("analytics", analytics.uri, "analytics_")))
        assert proxy.proc is not None
        proxy.proc.send_signal(signal.SIGHUP)
        wait_generation(proxy, 3)
        with proxy.client() as c:
            assert c.get_table("analytics_sales", "orders").dbName == "analytics_sales"
        assert proxy.metric("waggle_config_reloads_total", result="succeeded") == 2.0
        assert [e["trigger"] for e in proxy.events("config.reloaded")] == ["POST /api/admin/reload", "SIGHUP"]
        # a rejected reload through the admin call says why
        proxy.write_federation("primary-meta-store: {}\n")
        status, body = request(proxy, "/api/admin/reload", "POST", token=token)
        assert status == 422 and body["reloaded"] is False and body["generation"] == 3
        assert any("primary-meta-store.name" in p for p in body["problems"]), body
    finally:
        proxy.stop()


def test_limits_shed_load_with_a_clear_error(primary, analytics, ops, federation_data, tmp_path):
    links = [SlowLink(analytics.port, delay=0), SlowLink(ops.port, delay=0)]
    members = (("analytics", f"thrift://127.0.0.1:{links[0].port}", "analytics_"),
               ("ops", f"thrift://127.0.0.1:{links[1].port}", "ops_"))
    proxy = WaggleProcess(tmp_path, prefixed(primary.uri, *members), PREFIXED + (
        "limits:\n  max-calls-per-metastore: 1\n  max-in-flight-calls: 2\n  queue-wait-ms: 200\n")).start()
    try:
        with proxy.client() as c:  # warm the pools
            c.get_table("analytics_sales", "orders")
            c.get_table("ops_telemetry", "events")
        for link in links:
            link.delay = 2.0
        first = TableCall(proxy, "analytics_sales", "orders")
        wait_for(lambda: links[0].holding("get_table"), 10.0, "the first call waiting on analytics")
        with proxy.client() as c:
            started = time.monotonic()
            with pytest.raises(ttypes.MetaException) as busy:
                c.get_table("analytics_sales", "orders")
            assert time.monotonic() - started < 1.5, "the call queued instead of being shed"
            assert "metastore 'analytics' is busy" in busy.value.message
            assert "limits.max-calls-per-metastore" in busy.value.message
            assert c.get_database("default").name == "default"  # other metastores are not affected
            second = TableCall(proxy, "ops_telemetry", "events")
            wait_for(lambda: links[1].holding("get_table"), 10.0, "the second call waiting on ops")  # two in flight
            with pytest.raises(ttypes.MetaException) as overloaded:
                c.get_database("default")
            assert "waggle is overloaded" in overloaded.value.message
            assert "limits.max-in-flight-calls" in overloaded.value.message
            with proxy.client() as late:  # set_ugi is never shed: a client would go on as nobody in particular
                assert late.set_ugi("late_user", []) == []
            assert first.result().tableName == "orders" and second.result().tableName == "events"
            assert c.get_database("default").name == "default"
        assert proxy.metric("waggle_shed_total", limit="metastore") == 1.0
        assert proxy.metric("waggle_shed_total", limit="calls") == 1.0
        assert proxy.metric("waggle_call_errors_total", method="get_table", metastore="analytics", kind="shed") == 1.0
        assert proxy.metric("waggle_metastore_up", metastore="analytics") == 1.0  # shedding is no failure
    finally:
        proxy.stop()
        for link in links:
            link.close()


def test_sigterm_fails_readiness_first_then_drains_a_slow_call(primary, analytics, federation_data, tmp_path):
    link = SlowLink(analytics.port, delay=0, spare=("getStatus",))  # a slow call; analytics answers its checks
    proxy = WaggleProcess(tmp_path, prefixed(primary.uri, ("analytics", f"thrift://127.0.0.1:{link.port}",
                                                             "analytics_")),
                          PREFIXED + "shutdown-delay: 2\nthrift-server-stop-timeout-val-in-seconds: 20\n").start()
    try:
        assert request(proxy, "/readyz")[0] == 200
        with proxy.client() as c:
            c.get_table("analytics_sales", "orders")
        link.delay = 4.0
        caller = TableCall(proxy, "analytics_sales", "orders")
        wait_for(lambda: link.holding("get_table"), 10.0, "the slow call waiting on analytics")
        assert proxy.proc is not None
        signalled = time.monotonic()
        proxy.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: request(proxy, "/readyz")[0] == 503, 10.0, "readiness failed")
        status, body = request(proxy, "/readyz")
        assert (status, body["ready"], body["reason"]) == (503, False, "stopping")
        with proxy.client() as c:  # within shutdown-delay: still served, so clients can move away
            assert c.get_database("default").name == "default"
        wait_for(lambda: not listening(proxy.port), 10.0, "the listener closed")
        assert time.monotonic() - signalled >= 2.0  # not before shutdown-delay
        with pytest.raises(OSError):  # then the listener is closed
            socket.create_connection(("127.0.0.1", proxy.port), timeout=1).close()
        assert caller.result().tableName == "orders"
        assert proxy.proc.wait(20) == 0
        assert time.monotonic() - signalled >= 3.5  # it waited for the slow call
        names = [e["event"] for e in proxy.events()]
        assert names.index("server.stopping") < names.index("server.draining") < names.index("server.stopped")
    finally:
        proxy.stop()
        link.close()


def test_manual_federation_reloads_from_a_kubernetes_style_configmap_swap(primary, ops, federation_data, tmp_path):
    """kubelet updates a mounted ConfigMap by pointing the ``..data`` symlink at a new directory."""
    import os

    mount = tmp_path / "etc-waggle"

    def publish(version: int, text: str) -> None:
        (mount / f"..v{version}").mkdir(parents=True)
        (mount / f"..v{version}" / "federation.yml").write_text(text)
        (mount / "..data_tmp").symlink_to(f"..v{version}")
        os.replace(mount / "..data_tmp", mount / "..data")

    publish(1, prefixed(primary.uri))
    (mount / "federation.yml").symlink_to("..data/federation.yml")
    proxy = WaggleProcess(tmp_path, "", "logging:\n  format: json\n")  # MANUAL resolution
    proxy.federation_file = mount / "federation.yml"
    proxy.start()
    loop = CallLoop(proxy, lambda c: c.get_database("default"), lambda c: c.get_all_databases())
    try:
        loop.start()
        with proxy.client() as c, pytest.raises(ttypes.NoSuchObjectException):
            c.get_database("telemetry")
        publish(2, prefixed(primary.uri, ("ops", ops.uri, "ops_")))
        wait_generation(proxy, 2)
        with proxy.client() as c:  # the new member's databases were listed before the swap
            assert c.get_database("telemetry").name == "telemetry"
            assert "telemetry" in c.get_all_databases()
        loop.finish()
        assert loop.failures == [] and loop.ok > 0
        assert [e["trigger"] for e in proxy.events("config.reloaded")] == ["file changed"]
    finally:
        loop.stopping.set()
        proxy.stop()
