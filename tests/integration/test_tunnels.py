"""SSH tunnels through real OpenSSH sshd hops on loopback (127.0.0.2, 127.0.0.3, ...).

The federation here:
- the primary, direct;
- ``tun`` (prefix ``tun_``): the analytics metastore, reached through two hops;
- ``ops``: direct;
- ``badhost``: ops behind a hop whose known_hosts entry is wrong;
- ``unknownhost``: ops behind two hops, the second missing from known_hosts;
- ``badkey``: ops behind a hop that does not accept its key;
- ``nokey``: names a key file that does not exist;
- ``nobind``: its tunnel cannot listen on its ``localhost`` address, so its helper cannot run.
"""

from __future__ import annotations

import dataclasses
import getpass
import json
import re
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import hive2_client
from tests.support.env import ROOT, java_available, require
from tests.support.faults import BlackHole, SlowLink
from tests.support.federation import federation_yaml
from tests.support.proxy import WaggleProcess, owner
from tests.support.sshd import Sshd, keygen, sshd_available, write_known_hosts
from tests.support.waits import wait_for
from waggle.local.jvm import free_port

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent


@dataclass
class Hops:
    work: Path
    key: Path  # accepted by every hop
    wrong_key: Path  # accepted by none
    port: int
    servers: list[Sshd]
    known_hosts: Path
    wrong_known_hosts: Path  # hop 1's entry is another host's key
    first_hop_known_hosts: Path  # hop 1 only

    def route(self, *servers: Sshd, user: bool = True) -> str:
        me = getpass.getuser()
        return " -> ".join(f"{me}@{s.address}" if user or i == 0 else s.address for i, s in enumerate(servers))


def start_hops(work: Path, addresses: tuple[str, ...]) -> Hops:
    require(sshd_available(), "OpenSSH sshd is needed for the tunnel tests (scripts/setup.sh --test installs it)")
    work.mkdir(parents=True, exist_ok=True)
    key = keygen(work / "id_waggle")
    wrong = keygen(work / "id_wrong")
    port = free_port(*addresses)
    servers = [Sshd(work / f"hop{i + 1}", addr, port, [key]).start() for i, addr in enumerate(addresses)]
    known = write_known_hosts(work / "known_hosts", *servers)
    impostor = keygen(work / "impostor_host_key")
    kind, blob = Path(f"{impostor}.pub").read_text().split()[:2]
    lines = known.read_text().splitlines()
    lines[0] = f"{lines[0].split()[0]} {kind} {blob}"
    wrong_known = work / "known_hosts_wrong"
    wrong_known.write_text("\n".join(lines) + "\n")
    first_only = write_known_hosts(work / "known_hosts_first", servers[0])
    return Hops(work, key, wrong, port, servers, known, wrong_known, first_only)


def tunnel_yaml(name: str, uri: str, hops: Hops, servers: list[Sshd], keys: str, known: Path,
                extra: str = "") -> str:
    return textwrap.dedent(f"""\
        - name: {name}
          remote-meta-store-uris: {uri}
          database-prefix: {name}_
          metastore-tunnel:
            route: {hops.route(*servers, user=False)}
            private-keys: {keys}
            known-hosts: {known}
            port: {hops.port}
            strict-host-key-checking: yes
            timeout: 10000
        """) + extra


@pytest.fixture(scope="module")
def hops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hops]:
    h = start_hops(tmp_path_factory.mktemp("ssh"), ("127.0.0.2", "127.0.0.3"))
    yield h
    for s in h.servers:
        s.stop()


@pytest.fixture(scope="module")
def tunnelled(primary: Any, analytics: Any, ops: Any, federation_data: dict[str, Any], hops: Hops,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    both = hops.servers
    members = "federated-meta-stores:\n" + "".join([
        tunnel_yaml("tun", analytics.uri, hops, both, f"{hops.wrong_key}, {hops.key}", hops.known_hosts),
        f"- name: ops\n  remote-meta-store-uris: {ops.uri}\n  database-prefix: ops_\n",
        tunnel_yaml("badhost", ops.uri, hops, both, str(hops.key), hops.wrong_known_hosts),
        tunnel_yaml("unknownhost", ops.uri, hops, both, str(hops.key), hops.first_hop_known_hosts),
        tunnel_yaml("badkey", ops.uri, hops, both[:1], str(hops.wrong_key), hops.known_hosts),
        tunnel_yaml("nokey", ops.uri, hops, both[:1], str(hops.work / "no_such_key"), hops.known_hosts),
        tunnel_yaml("nobind", ops.uri, hops, both[:1], str(hops.key), hops.known_hosts).replace(
            "    timeout: 10000\n", "    timeout: 10000\n    localhost: 192.0.2.1\n"),
    ])
    proc = WaggleProcess(tmp_path_factory.mktemp("waggle-tunnels"), federation_yaml(primary.uri, members),
                         "database-resolution: PREFIXED\n").start()
    yield proc
    proc.stop()


# -- through two hops -------------------------------------------------------------------------------------------
def test_prefixed_member_through_two_hops(tunnelled: WaggleProcess, hops: Hops, analytics: Any) -> None:
    h1, h2 = hops.servers
    before = len(h2.log())  # the hops serve the whole module: count only what this test's clients caused
    with hive2_client(tunnelled.port) as c:
        assert {"tun_sales", "tun_web", "ops_telemetry", "default"} <= set(c.get_all_databases())
        table = c.get_table("tun_sales", "orders")
        assert table.dbName == "tun_sales" and table.tableName == "orders"
        assert [p.values for p in c.get_partitions("tun_sales", "daily", -1)]
        assert c.get_table("ops_telemetry", "events").dbName == "ops_telemetry"
    for _ in range(3):  # more client connections: still the same tunnel
        with hive2_client(tunnelled.port) as c:
            assert c.get_database("tun_web").name == "tun_web"
    # sshd's debug logs show the traffic crossing: hop 1 forwarded to hop 2, hop 2 to the metastore
    assert any(f"target {h2.address} port {hops.port}" in line for line in h1.forwards()), h1.forwards()
    assert any(f"target 127.0.0.1 port {analytics.port}" in line for line in h2.forwards()), h2.forwards()
    # one shared tunnel, however many client connections came: hop 2 (which only 'tun' gets through to)
    # accepted at most the one SSH session of the tunnel (none if the tunnel was up before the test began)
    accepted = [line for line in h2.log()[before:].splitlines() if "Accepted publickey" in line]
    assert len(accepted) <= 1, accepted
    assert len([e for e in tunnelled.events("tunnel.up") if e["member"] == "tun"]) == 1
    health = json.loads(tunnelled.http("/healthz"))["metastores"]
    assert health["tun"]["up"] and health["tun"]["tunnel"]["state"] == "up"
    assert health["tun"]["tunnel"]["route"].startswith(f"{getpass.getuser()}@127.0.0.2:{hops.port} -> ")
    assert tunnelled.metric("waggle_tunnel_up", metastore="tun") == 1
    assert tunnelled.metric("waggle_tunnel_reconnects_total", metastore="tun") == 0


def test_many_concurrent_clients_through_the_tunnel_while_the_primary_stays_fast(
        tunnelled: WaggleProcess, primary: Any) -> None:
    """Clients in another process hammer the tunnelled member while this one times the primary."""
    load = textwrap.dedent(f"""\
        import sys, threading, time, json
        from tests.support.clients import hive2_client  # run from the project root
        from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore  # imported once, not by 24 threads
        calls, errors, going = [0], [], threading.Semaphore(0)
        def run():
            told = False
            try:
                with hive2_client({tunnelled.port}) as c:
                    end = time.monotonic() + 6
                    while time.monotonic() < end:
                        assert c.get_table("tun_sales", "orders").tableName == "orders"
                        assert len(c.get_partitions("tun_sales", "daily", -1)) == 5
                        calls[0] += 1
                        if not told:
                            told = True; going.release()
            except Exception as exc:
                errors.append(repr(exc))
            if not told:
                going.release()
        threads = [threading.Thread(target=run) for _ in range(24)]
        [t.start() for t in threads]; [going.acquire() for t in threads]
        print("running", flush=True)  # every client has made a call
        [t.join() for t in threads]
        print(json.dumps({{"calls": calls[0], "errors": errors}}))
        """)
    with hive2_client(tunnelled.port) as c:
        baseline = []
        for _ in range(100):
            t0 = time.perf_counter()
            c.get_database("default")
            baseline.append(time.perf_counter() - t0)
        loader = subprocess.Popen([sys.executable, "-c", load], stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert loader.stdout is not None
        assert loader.stdout.readline().strip() == "running"  # the load is running
        loaded = []
        while loader.poll() is None and len(loaded) < 3000:
            t0 = time.perf_counter()
            c.get_database("default")
            loaded.append(time.perf_counter() - t0)
            time.sleep(0.002)
        out, _ = loader.communicate(timeout=60)
    result = json.loads(out.strip().splitlines()[-1])
    assert result["errors"] == [] and result["calls"] > 100, result
    p50, p50_base = statistics.median(loaded), statistics.median(baseline)
    worst = max(loaded)
    print(f"primary get_database p50 {1000 * p50_base:.2f} ms idle, {1000 * p50:.2f} ms while 24 clients used the "
          f"tunnel ({result['calls']} calls); worst {1000 * worst:.1f} ms")
    assert p50 < max(10 * p50_base, 0.025), (p50, p50_base)
    assert worst < 1.0, worst  # never stalled behind the tunnel


# -- several workers: one tunnel, one set of health checks ----------------------------------------------------
def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_workers_share_the_supervisors_tunnel(primary: Any, analytics: Any, hops: Hops,
                                                                 federation_data: dict[str, Any],
                                                                 tmp_path: Path) -> None:
    members = "federated-meta-stores:\n" + tunnel_yaml("tun", analytics.uri, hops, hops.servers, str(hops.key),
                                                        hops.known_hosts)
    h2 = hops.servers[1]
    before = len(h2.log())
    proxy = WaggleProcess(tmp_path, federation_yaml(primary.uri, members),
                          "database-resolution: PREFIXED\nlogging:\n  format: json\n",
                          args=("--workers", "2")).start()
    try:
        def serving() -> list[dict[str, Any]] | None:
            workers = [w for w in json.loads(proxy.http("/healthz"))["workers"] if w["serving"] and w["answered"]]
            return workers if len(workers) == 2 else None

        workers = wait_for(serving, 60, "two workers serving")
        pids = [w["pid"] for w in workers]
        served: set[int] = set()
        clients = []
        while served != set(pids) and len(clients) < 40:  # connections on both workers call through the tunnel
            cm = hive2_client(proxy.port)
            c = cm.__enter__()
            clients.append(cm)
            assert c.get_table("tun_sales", "orders").dbName == "tun_sales"
            served.add(owner(proxy, c, pids))
        for cm in clients:
            cm.__exit__(None, None, None)
        assert served == set(pids)
        assert proxy.proc is not None
        helpers = [p for p in _children(proxy.proc.pid) if "waggle.tunnel" in _cmdline(p)]
        assert len(helpers) == 1  # the supervisor's, for both workers
        assert all(not _children(pid) for pid in pids)  # the workers run no helper of their own
        accepted = [line for line in h2.log()[before:].splitlines() if "Accepted publickey" in line]
        assert len(accepted) == 1, accepted  # one SSH session reached the last hop, not one per worker
        health = json.loads(proxy.http("/healthz"))["metastores"]["tun"]
        assert health["up"] and health["tunnel"]["state"] == "up"
    finally:
        proxy.stop()


# -- refusals: only the member concerned is unavailable -----------------------------------------------------------
def test_wrong_known_hosts_entry_leaves_only_that_member_unavailable(tunnelled: WaggleProcess) -> None:
    from hmsclient.genthrift.hive_metastore.ttypes import MetaException

    with hive2_client(tunnelled.port) as c:
        with pytest.raises(MetaException) as err:
            c.get_database("badhost_telemetry")
        message = err.value.message
        assert "badhost" in message and "host key did not match" in message and "127.0.0.2" in message, message
        # everyone else is served
        assert c.get_database("tun_sales").name == "tun_sales"
        assert c.get_database("ops_telemetry").name == "ops_telemetry"
        assert c.get_database("default").name == "default"
        names = set(c.get_all_databases())
        assert "tun_sales" in names and "ops_telemetry" in names and not any(n.startswith("bad") for n in names)
    down = [e for e in tunnelled.events("tunnel.down") if e["member"] == "badhost"]
    assert down and "host key did not match" in down[0]["error"] and "127.0.0.2" in down[0]["error"], down
    assert tunnelled.metric("waggle_tunnel_up", metastore="badhost") == 0
    health = json.loads(tunnelled.http("/healthz"))["metastores"]["badhost"]["tunnel"]
    assert health["state"] == "down" and health["hop"].startswith("hop 1 ("), health


def test_hop_missing_from_known_hosts_is_refused_naming_it(tunnelled: WaggleProcess, hops: Hops) -> None:
    from hmsclient.genthrift.hive_metastore.ttypes import MetaException

    with hive2_client(tunnelled.port) as c, pytest.raises(MetaException) as err:
        c.get_database("unknownhost_telemetry")
    message = err.value.message
    assert "'unknownhost'" in message and f"hop 2 ({getpass.getuser()}@127.0.0.3:{hops.port})" in message
    assert f"host key did not match: 127.0.0.3 ([127.0.0.3]:{hops.port}) is not in known-hosts" in message, message


def test_missing_key_file_names_the_hop_and_the_file(tunnelled: WaggleProcess, hops: Hops) -> None:
    from hmsclient.genthrift.hive_metastore.ttypes import MetaException

    with hive2_client(tunnelled.port) as c, pytest.raises(MetaException) as err:
        c.get_database("nokey_telemetry")
    message = err.value.message
    assert "'nokey'" in message and f"hop 1 ({getpass.getuser()}@127.0.0.2:{hops.port})" in message, message
    assert f"private key '{hops.work / 'no_such_key'}' cannot be read: No such file or directory" in message


def test_wrong_key_names_the_hop_and_never_logs_the_key(tunnelled: WaggleProcess, hops: Hops) -> None:
    from hmsclient.genthrift.hive_metastore.ttypes import MetaException

    with hive2_client(tunnelled.port) as c, pytest.raises(MetaException) as err:
        c.get_database("badkey_telemetry")
    message = err.value.message
    assert "badkey" in message and f"hop 1 ({getpass.getuser()}@127.0.0.2:{hops.port})" in message, message
    assert "authentication failed" in message and str(hops.wrong_key) in message, message
    log = tunnelled.log()
    for key in (hops.key, hops.wrong_key):
        secret = "".join(key.read_text().splitlines()[1:-1])
        assert secret[:40] not in log.replace("\\n", "")
        for line in key.read_text().splitlines()[1:-1]:
            assert line not in log


def test_a_helper_that_cannot_run_fails_calls_at_once_with_the_reason(tunnelled: WaggleProcess) -> None:
    from hmsclient.genthrift.hive_metastore.ttypes import MetaException

    started = time.monotonic()
    with hive2_client(tunnelled.port) as c, pytest.raises(MetaException) as err:
        c.get_database("nobind_telemetry")
    assert time.monotonic() - started < 5
    assert "'nobind'" in err.value.message and "cannot listen on 192.0.2.1" in err.value.message, err.value.message


# -- a hop dies mid-run and comes back ------------------------------------------------------------------------------
def test_killed_hop_fails_calls_in_flight_naming_the_hop_and_waggle_recovers_by_itself(
        primary: Any, analytics: Any, federation_data: dict[str, Any], tmp_path: Path) -> None:
    from hmsclient.genthrift.hive_metastore.ttypes import MetaException

    hops = start_hops(tmp_path / "ssh", ("127.0.0.4", "127.0.0.5"))
    slow = SlowLink(analytics.port, 0.0)  # replies held back while .delay is set: a call stays in flight
    proc = WaggleProcess(tmp_path / "waggle", federation_yaml(primary.uri, "federated-meta-stores:\n" + tunnel_yaml(
        "far", f"thrift://127.0.0.1:{slow.port}", hops, hops.servers, str(hops.key), hops.known_hosts)),
        "database-resolution: PREFIXED\ndown-member-retry: 1\n").start()
    h1 = hops.servers[0]
    try:
        with hive2_client(proc.port) as c:
            assert c.get_database("far_sales").name == "far_sales"
            slow.delay = 3.0
            outcome: dict[str, Any] = {}

            def in_flight() -> None:
                with hive2_client(proc.port) as c2:
                    try:
                        outcome["result"] = c2.get_table("far_sales", "orders")
                    except Exception as exc:
                        outcome["error"] = exc

            t = threading.Thread(target=in_flight)
            t.start()
            wait_for(lambda: slow.holding("get_table"), 10.0, "the call waiting on the slow member")
            h1.kill()  # the bastion dies, with every SSH session through it
            t.join(30)
            slow.delay = 0.0
            error = outcome.get("error")
            assert isinstance(error, MetaException), outcome
            assert "'far'" in error.message and f"hop 1 ({getpass.getuser()}@127.0.0.4:{hops.port})" in \
                error.message and "SSH tunnel" in error.message, error.message
            # while the hop is down, calls fail at once naming it; the primary is unaffected
            with pytest.raises(MetaException) as down:
                c.get_database("far_sales")
            assert "far" in down.value.message and "127.0.0.4" in down.value.message, down.value.message
            assert c.get_database("default").name == "default"
            h1.start()
            deadline = time.monotonic() + 30
            while True:  # the health checker rebuilds the tunnel; no call is needed
                health = json.loads(proc.http("/healthz"))["metastores"]["far"]
                if health["up"] and health["tunnel"]["state"] == "up":
                    break
                assert time.monotonic() < deadline, health
                time.sleep(0.2)
            assert c.get_database("far_sales").name == "far_sales"
            assert health["tunnel"]["reconnects"] == 1
        assert proc.metric("waggle_tunnel_reconnects_total", metastore="far") == 1
        assert [e["member"] for e in proc.events("tunnel.up")] == ["far", "far"]
    finally:
        proc.stop()
        slow.close()
        for s in hops.servers:
            s.stop()


# -- Spark ------------------------------------------------------------------------------------------------------
@pytest.mark.spark
def test_spark_reads_through_the_tunnelled_member(tunnelled: WaggleProcess, federation_data: dict[str, Any],
                                                  tmp_path: Path) -> None:
    require(java_available(), "Java 17 is needed for Spark")
    run = subprocess.run(
        [sys.executable, str(HERE / "spark_query.py"), f"thrift://127.0.0.1:{tunnelled.port}", str(tmp_path / "wh"),
         "SELECT id, customer FROM tun_sales.orders ORDER BY id",
         "SELECT id, customer FROM tun_sales.orders_view ORDER BY id",
         "SHOW PARTITIONS tun_sales.daily"],
        capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    orders, view, partitions = json.loads(next(line for line in run.stdout.splitlines()
                                                if line.startswith("RESULT "))[7:])
    assert orders == [["1", "alice"], ["2", "bob"], ["3", "alice"]]
    assert view == [["2", "bob"], ["3", "alice"]]
    assert len(partitions) == 5


# -- the same tunnel code outside the proxy (what the sync uses) --------------------------------------------------
def test_local_forward_runs_the_same_tunnel_in_process(hops: Hops, analytics: Any,
                                                       federation_data: dict[str, Any], tmp_path: Path) -> None:
    from thrift.transport.TTransport import TTransportException

    from waggle.config.loader import load
    from waggle.local.client import hms_client
    from waggle.tunnel.forward import TunnelError, local_forward
    from waggle.tunnel.spec import spec_for

    fed = tmp_path / "fed.yml"
    fed.write_text(federation_yaml(analytics.uri, "federated-meta-stores:\n" + tunnel_yaml(
        "far", analytics.uri, hops, hops.servers, str(hops.key), hops.known_hosts)))
    spec = spec_for(load(None, str(fed)).federation.members[1])
    with local_forward(spec) as (host, port), hms_client(host, port) as c:
        assert c.get_table("sales", "orders").tableName == "orders"
    with pytest.raises(TunnelError, match=r"hop 1 .*authentication failed"), \
            local_forward(dataclasses.replace(spec, private_keys=(str(hops.wrong_key),))):
        pass
    # the last hop tries the metastore's addresses in order
    dead = free_port("127.0.0.1")
    failover = dataclasses.replace(spec, targets=(("127.0.0.1", dead), *spec.targets))
    with local_forward(failover) as (host, port), hms_client(host, port) as c:
        assert c.get_database("sales").name == "sales"
    events: list[dict[str, Any]] = []
    with local_forward(dataclasses.replace(spec, targets=(("127.0.0.1", dead),)), events.append) as (host, port), \
            pytest.raises(TTransportException), hms_client(host, port) as c:
        c.get_database("sales")
    refused = [e["error"] for e in events if e["event"] == "refused"]
    assert refused and re.match(rf"hop 2 \(.*\): cannot reach the metastore: 127.0.0.1:{dead}: ", refused[0]), events


def test_a_hop_that_never_answers_is_named_within_the_timeout(hops: Hops) -> None:
    from waggle.tunnel.forward import TunnelError, local_forward
    from waggle.tunnel.spec import Hop, TunnelSpec

    silent = BlackHole()  # accepts, never says a word
    try:
        spec = TunnelSpec("far", (Hop("u", "127.0.0.1", silent.port),), (str(hops.key),), str(hops.known_hosts),
                          True, 1000, (("127.0.0.1", 9083),), "127.0.0.1")
        started = time.monotonic()
        with pytest.raises(TunnelError, match=rf"^hop 1 \(u@127.0.0.1:{silent.port}\): SSH handshake failed"), \
                local_forward(spec):
            pass
        assert time.monotonic() - started < 5
    finally:
        silent.close()


# -- hot reload ----------------------------------------------------------------------------------------------------
def _pid_alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().find(b"waggle.tunnel") >= 0
    except OSError:
        return False


def test_hot_reload_opens_keeps_and_closes_a_tunnel(primary: Any, analytics: Any, federation_data: dict[str, Any],
                                                    hops: Hops, tmp_path: Path) -> None:
    proc = WaggleProcess(tmp_path, federation_yaml(primary.uri), "database-resolution: PREFIXED\n").start()

    def federation(*members: str) -> str:
        return federation_yaml(primary.uri, "federated-meta-stores:\n" + "".join(members) if members else "")

    def wait_generation(generation: int) -> dict[str, Any]:
        deadline = time.monotonic() + 30
        while (view := json.loads(proc.http("/api/admin/federations")))["generation"] < generation:
            assert time.monotonic() < deadline, proc.log()[-3000:]
            time.sleep(0.1)
        assert view["generation"] == generation
        return dict(view)

    far = tunnel_yaml("far", analytics.uri, hops, hops.servers, str(hops.key), hops.known_hosts)
    try:
        proc.write_federation(federation(far))  # 1. a tunnelled member arrives
        wait_generation(2)
        with hive2_client(proc.port) as c:
            assert c.get_table("far_sales", "orders").dbName == "far_sales"
        helper = json.loads(proc.http("/healthz"))["metastores"]["far"]["tunnel"]["helper_pid"]
        assert helper and _pid_alive(helper)

        # 2. a new prefix: the same tunnel, the same helper, still one SSH build
        proc.write_federation(federation(far.replace("database-prefix: far_", "database-prefix: remote_")))
        wait_generation(3)
        with hive2_client(proc.port) as c:
            assert c.get_table("remote_sales", "orders").dbName == "remote_sales"
        assert json.loads(proc.http("/healthz"))["metastores"]["far"]["tunnel"]["helper_pid"] == helper
        assert len([e for e in proc.events("tunnel.up") if e["member"] == "far"]) == 1
        kept = proc.events("config.reloaded")[-1]
        assert kept["keep_tunnels"] == ["far"] and "open_tunnels" not in kept

        # 3. a new tunnel whose key file is missing is rejected before anything changes (waggle check's rules)
        missing = tmp_path / "lost_key"
        proc.write_federation(federation(far.replace("database-prefix: far_", "database-prefix: remote_"),
                                                   tunnel_yaml("lost", analytics.uri, hops, hops.servers[:1],
                                                               str(missing), hops.known_hosts)))
        deadline = time.monotonic() + 30
        while not proc.events("config.reload_failed"):
            assert time.monotonic() < deadline, proc.log()[-3000:]
            time.sleep(0.1)
        problem = proc.events("config.reload_failed")[0]["problem"]
        assert str(proc.federation_file) in problem and "'lost'" in problem and str(missing) in problem, problem
        assert wait_generation(3)["metastores"][-1]["name"] == "far"
        # the key arrives (a Secret mounted after its ConfigMap): the same edit is applied, without another
        missing.write_bytes(hops.key.read_bytes())
        missing.chmod(0o600)
        assert [m["name"] for m in wait_generation(4)["metastores"]] == ["primary", "far", "lost"]
        with hive2_client(proc.port) as c:
            assert c.get_table("lost_sales", "orders").dbName == "lost_sales"
        lost_helper = json.loads(proc.http("/healthz"))["metastores"]["lost"]["tunnel"]["helper_pid"]

        # 4. removed: their helper processes end, their gauges go
        proc.write_federation(federation())
        wait_generation(5)
        deadline = time.monotonic() + 15
        while _pid_alive(helper) or _pid_alive(lost_helper):
            assert time.monotonic() < deadline, "a removed member's tunnel helper is still running"
            time.sleep(0.1)
        assert proc.events("config.reloaded")[-1]["close_tunnels"] == ["far", "lost"]
        gauges = [line for line in proc.http("/metrics").splitlines()
                  if line.startswith(("waggle_tunnel_up{", "waggle_metastore_up{"))]
        assert not [g for g in gauges if 'metastore="far"' in g or 'metastore="lost"' in g], gauges
        with hive2_client(proc.port) as c:
            assert "default" in c.get_all_databases()
    finally:
        proc.stop()
