"""A failure is known in the call that finds it, with real metastores: a member's JVM SIGKILLed under readers of a
copied table, a member hung by SIGSTOP with calls waiting on it, and a member down when waggle starts.

``lake`` (:mod:`tests.support.lake`) has its ``sales.orders`` copied into the primary; ``sales.nocopy`` has no copy.
waggle serves it with ``read-from-copies: when-down``.
"""

from __future__ import annotations

import json
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hmsclient.genthrift.hive_metastore import ttypes

from tests.support import copies as cp
from tests.support.clients import hive2_client
from tests.support.federation import federation_yaml
from tests.support.lake import Lake
from tests.support.proxy import WaggleProcess
from tests.support.readers import Readers
from tests.support.waits import wait_for

pytestmark = pytest.mark.integration

SERVED_FROM = "waggle.served-from"


@pytest.fixture(autouse=True)
def _own_proxies(lake: Lake) -> Iterator[None]:
    yield
    lake.stop_proxies()
    lake.up()


#: each kill costs a restart of lake's JVM (about 20 s on two cores); four give every window its first read after a
#: kill, reads from lake between kills and reads from the copy inside them, as ten did
KILLS = 4


def _member_up(proxy: WaggleProcess, name: str = "lake") -> bool:
    return bool(json.loads(proxy.http("/healthz"))["metastores"][name]["up"])


def test_a_member_killed_four_times_under_eight_readers_of_a_copied_table_fails_no_read(lake: Lake,
                                                                                       tmp_path: Path) -> None:
    lake.up()
    proxy = lake.proxy(read_from_copies="when-down", args=("--workers", "2"))
    readers = Readers(tmp_path / "readers", proxy.port, "lake_sales", cp.ORDERS, 8).start()
    uncopied = Readers(tmp_path / "uncopied", proxy.port, "lake_sales", cp.NOCOPY, 2).start()
    rng = random.Random(34)
    windows: list[tuple[float, float]] = []  # (killed, restarting): reads inside must come from the copy
    try:
        wait_for(lambda: _member_up(proxy), timeout=10)
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.3, 1.5))  # the readers read from lake meanwhile
            lake.store.kill()
            killed = time.time()
            time.sleep(rng.uniform(0.5, 1.5))  # the copy answers
            restarting = time.time()
            windows.append((killed, restarting))
            lake.up()
            wait_for(lambda: _member_up(proxy), timeout=15, message=lambda: proxy.log()[-3000:])
    finally:
        reads = readers.stop()
        others = uncopied.stop()
    failed = [r for r in reads if not r["ok"]]
    assert not failed, failed[:5]
    # a table without a copy: while lake is down, a MetaException naming it, never a dropped connection
    failed = [r for r in others if not r["ok"]]
    assert failed and all(r["error"].startswith("MetaException(message=\"metastore 'lake' is unavailable since ")
                          for r in failed), [r for r in failed if "is unavailable" not in r["error"]][:5]
    inside = [r for r in reads if any(k <= r["start"] and r["end"] <= s for k, s in windows)]
    assert inside and all(r["served"] == f"{lake.sales_copy}.{cp.ORDERS}" for r in inside), \
        [r for r in inside if not r["served"]][:5]
    assert any(not r["served"] for r in reads)  # between the kills, lake itself answered
    # the first read after each kill was answered from the copy: the kills were found by calls, in the calls
    for killed, _ in windows:
        after = [r for r in reads if r["start"] >= killed]
        assert after and after[0]["served"], after[:1]
    print(f"{len(reads)} reads of the copied table: {sum(1 for r in reads if r['served'])} from the copy, "
          f"{sum(1 for r in reads if not r['served'])} from lake, none failed; {len(others)} reads of the table "
          f"without a copy, {len(failed)} of them answered with lake's down message")
    downs = proxy.events("metastore.down")
    assert len([e for e in downs if e.get("member") == "lake"]) == KILLS, downs


def test_a_hung_member_lets_waiting_calls_go_within_ten_seconds(lake: Lake) -> None:
    lake.up()
    proxy = lake.proxy(read_from_copies="when-down")  # hung-member-check-after and health-check-timeout as shipped
    clients = [proxy.client(timeout=60) for _ in range(4)]
    opened = [c.__enter__() for c in clients]
    copied, uncopied, writer, alterer = opened
    for c in opened:
        c.get_table("lake_sales", cp.NOCOPY)  # each holds a pooled connection to lake
    nocopy = copied.get_table("lake_sales", cp.NOCOPY)
    outcomes: dict[str, tuple[float, Any]] = {}

    def run(name: str, call: Any) -> None:
        started = time.monotonic()
        try:
            got = call()
        except Exception as exc:  # the outcome the test asserts on
            got = exc
        outcomes[name] = (time.monotonic() - started, got)

    nocopy.parameters = {**(nocopy.parameters or {}), "failover-test": "written"}
    sales = writer.get_database("lake_sales")
    sales.parameters = {**(sales.parameters or {}), "failover-test": "written"}
    assert lake.store.process is not None
    lake.store.process.send_signal(signal.SIGSTOP)
    try:
        threads = [threading.Thread(target=run, args=args) for args in (
            ("copied", lambda: copied.get_table("lake_sales", cp.ORDERS)),
            ("uncopied", lambda: uncopied.get_table("lake_sales", cp.NOCOPY)),
            ("write", lambda: writer.alter_database("lake_sales", sales)),
            # an alter_table's Iceberg pointer guard reads the table first: that read is let go, nothing is sent
            ("guarded", lambda: alterer.alter_table("lake_sales", cp.NOCOPY, nocopy)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        took, table = outcomes["copied"]
        assert took < 10 and isinstance(table, ttypes.Table), outcomes
        assert table.parameters[SERVED_FROM] == f"{lake.sales_copy}.{cp.ORDERS}"
        took, error = outcomes["uncopied"]
        assert took < 10 and isinstance(error, ttypes.MetaException), outcomes
        assert "metastore 'lake' is unavailable" in error.message
        took, error = outcomes["write"]
        assert took < 10 and isinstance(error, ttypes.MetaException), outcomes
        assert "The outcome of alter_database is unknown: metastore 'lake' may have applied it" in error.message
        took, error = outcomes["guarded"]
        assert took < 10 and isinstance(error, ttypes.MetaException), outcomes
        assert "could not read table 'lake_sales." in error.message and "nothing was altered" in error.message
        print(f"let go after: copied read {outcomes['copied'][0]:.2f}s, uncopied read "
              f"{outcomes['uncopied'][0]:.2f}s, write {outcomes['write'][0]:.2f}s")  # shown with pytest -s
        # calls from now on are answered at once
        started = time.monotonic()
        assert copied.get_table("lake_sales", cp.ORDERS).parameters[SERVED_FROM]
        assert time.monotonic() - started < 1.0
    finally:
        lake.store.process.send_signal(signal.SIGCONT)
    resumed = time.monotonic()
    # back within down-member-retry (1 s here) and one check
    wait_for(lambda: SERVED_FROM not in copied.get_table("lake_sales", cp.ORDERS).parameters, timeout=10)
    back = time.monotonic() - resumed
    print(f"served by lake again {back:.2f}s after SIGCONT")
    assert back < 1.0 + 2.0 + 1.0
    for c in clients:
        c.__exit__(None, None, None)
    down = [e for e in proxy.events("metastore.down") if e.get("member") == "lake"]
    assert len(down) == 1 and down[0]["released_calls"] >= 3, down
    assert any(e.get("outcome") == "unknown_outcome" and e.get("method") == "alter_database"
               for e in proxy.events("call")), proxy.log()[-3000:]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_member_down_at_start_is_one_warning_line_and_healthz_says_down(primary: Any, tmp_path: Path,
                                                                           workers: int) -> None:
    members = "federated-meta-stores:\n- name: gone\n  remote-meta-store-uris: thrift://127.0.0.1:1\n" \
              "  database-prefix: gone_\n"
    proxy = WaggleProcess(tmp_path / "waggle", federation_yaml(primary.uri, members),
                          "database-resolution: PREFIXED\n", args=("--workers", str(workers)))
    try:
        proxy.start()  # the port serves once every member was checked
        down = [e for e in proxy.events("metastore.down") if e.get("member") == "gone"]
        assert len(down) == 1 and "Connection refused" in down[0]["reason"], proxy.log()[-3000:]
        health = json.loads(proxy.http("/healthz"))["metastores"]
        assert health["gone"]["up"] is False and "Connection refused" in health["gone"]["reason"]
        assert health["primary"]["up"] is True
        with hive2_client(proxy.port) as c:
            with pytest.raises(ttypes.MetaException, match="metastore 'gone' is unavailable"):
                c.get_all_tables("gone_anything")
            assert "default" in c.get_all_databases()
        time.sleep(2.5)  # down-member-retry is 2 s: still down, and said once
        assert len([e for e in proxy.events("metastore.down") if e.get("member") == "gone"]) == 1
    finally:
        proxy.stop()
