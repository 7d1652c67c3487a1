"""The real CLI: ``waggle check``, ``waggle serve`` with bad input, wire options, and a graceful SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from thrift.protocol.TCompactProtocol import TCompactProtocolAccelerated
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TFramedTransport

from tests.support.env import ROOT
from tests.support.faults import SlowLink
from tests.support.federation import federation_yaml
from tests.support.proxy import WaggleProcess, listening
from tests.support.waits import wait_for

WAGGLE = [sys.executable, "-m", "waggle"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WAGGLE, *args], capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_check_accepts_the_example_configs():
    out = run("check", "--server-config", "conf/waggle-server.yml", "--federation-config",
              "conf/waggle-federation.yml")
    assert out.returncode == 0, out.stderr
    assert "ok: 2 metastore(s), primary 'primary'" in out.stdout


def test_check_rejects_a_bad_value_naming_file_key_and_value(tmp_path: Path):
    server = tmp_path / "server.yml"
    server.write_text("port: not-a-port\n")
    fed = tmp_path / "fed.yml"
    fed.write_text(federation_yaml("thrift://127.0.0.1:9083"))
    out = run("check", "--server-config", str(server), "--federation-config", str(fed))
    assert out.returncode != 0
    assert f"{server}: key 'port': invalid value 'not-a-port'" in out.stderr


def test_check_warns_about_unimplemented_keys_without_failing(tmp_path: Path):
    server = tmp_path / "server.yml"
    server.write_text("graphite:\n  host: g\n")
    fed = tmp_path / "fed.yml"
    fed.write_text(federation_yaml("thrift://127.0.0.1:9083"))
    out = run("check", "--server-config", str(server), "--federation-config", str(fed))
    assert out.returncode == 0
    assert "warning:" in out.stderr and "'graphite' is not implemented" in out.stderr


def test_serve_refuses_a_bad_config(tmp_path: Path):
    fed = tmp_path / "fed.yml"
    fed.write_text("primary-meta-store:\n  name: p\n  remote-meta-store-uris: nonsense\n")
    out = run("serve", "--federation-config", str(fed))
    assert out.returncode == 2
    said = f"{fed}: key 'primary-meta-store.remote-meta-store-uris': invalid value 'nonsense'"
    assert said in out.stderr
    assert out.stderr.count(said) == 1, out.stderr  # said once, as waggle check says it
    assert all(line.startswith(("error: ", "warning: ")) for line in out.stderr.splitlines()), out.stderr


def test_serve_strict_refuses_a_typo_that_serve_only_warns_about(tmp_path: Path):
    fed = tmp_path / "fed.yml"
    fed.write_text("primary-meta-store:\n  name: p\n  remote-meta-store-uris: thrift://127.0.0.1:1\n")
    server = tmp_path / "server.yml"
    server.write_text("port: 0\nendpoint:\n  port: 0\ndatabse-resolution: PREFIXED\n")
    out = run("serve", "--strict", "--server-config", str(server), "--federation-config", str(fed))
    assert out.returncode == 2, out.stderr
    assert "databse-resolution" in out.stderr and "database-resolution" in out.stderr  # did you mean ...
    assert out.stderr.startswith("error: "), out.stderr


@pytest.mark.integration
def test_framed_compact_clients_over_a_binary_metastore(primary, tmp_path: Path):
    proxy = WaggleProcess(tmp_path, federation_yaml(primary.uri), "transport: framed\nprotocol: compact\n").start()
    try:
        from waggle.hms.gen.hive_metastore import ThriftHiveMetastore, ttypes

        trans = TFramedTransport(TSocket("127.0.0.1", proxy.port))
        trans.open()
        client = ThriftHiveMetastore.Client(TCompactProtocolAccelerated(trans))
        assert "default" in client.get_all_databases()
        assert client.get_database("default").name == "default"
        with pytest.raises(ttypes.NoSuchObjectException):
            client.get_database("no_such_db_here")
        trans.close()
    finally:
        proxy.stop()


@pytest.mark.integration
def test_sigterm_lets_the_call_in_flight_finish_then_exits_zero(primary, tmp_path: Path):
    link = SlowLink(primary.port, delay=2.0)
    proxy = WaggleProcess(tmp_path, federation_yaml(f"thrift://127.0.0.1:{link.port}"),
                          "thrift-server-stop-timeout-val-in-seconds: 20\n").start()
    result: dict[str, object] = {}

    def slow_call() -> None:
        try:
            with proxy.client(timeout=30) as c:
                result["dbs"] = c.get_all_databases()
        except Exception as exc:
            result["error"] = exc

    try:
        t = threading.Thread(target=slow_call)
        t.start()
        wait_for(lambda: link.holding("get_all_databases"), 10.0, "the call waiting on the slow link")
        assert proxy.proc is not None
        proxy.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: not listening(proxy.port), 10.0, "the listener closed")
        with pytest.raises(OSError):  # no longer accepting
            import socket

            socket.create_connection(("127.0.0.1", proxy.port), timeout=1).close()
        t.join(30)
        assert result.get("dbs") and "default" in result["dbs"], result
        assert proxy.proc.wait(30) == 0
        assert "server.stopped" in proxy.log()
    finally:
        proxy.stop()
        link.close()


def test_only_the_entry_point_monkey_patches():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "waggle").rglob("*.py")
                 if "gen" not in p.parts and "patch_all" in p.read_text() and p.name != "cli.py"]
    assert offenders == []
    code = "import waggle.cli, waggle.app, gevent.monkey; print(gevent.monkey.is_module_patched('socket'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_check_validates_tunnel_files_naming_file_and_key(tmp_path: Path):
    key = tmp_path / "id_missing"
    fed = tmp_path / "fed.yml"
    fed.write_text(federation_yaml("thrift://127.0.0.1:9083", "federated-meta-stores:\n- name: far\n"
                                   "  remote-meta-store-uris: thrift://10.0.0.1:9083\n  metastore-tunnel:\n"
                                   f"    route: ec2-user@bastion\n    private-keys: {key}\n"
                                   f"    known-hosts: {tmp_path / 'known_hosts'}\n"))
    out = run("check", "--federation-config", str(fed))
    assert out.returncode == 2, out
    assert f"error: {fed}: metastore 'far': metastore-tunnel.private-keys: '{key}' cannot be read" in out.stderr
    assert "metastore-tunnel.known-hosts:" in out.stderr and "ok:" not in out.stdout


def test_a_start_with_members_unreachable_is_log_lines_never_a_traceback(tmp_path: Path):
    """Metastores down at start: one warning per member (their first health checks, before the port serves), no
    traceback, and the port serves."""
    fed = "primary-meta-store:\n  name: primary\n  remote-meta-store-uris: thrift://127.0.0.1:1\n" \
          "federated-meta-stores:\n- name: gone\n  remote-meta-store-uris: thrift://127.0.0.1:2\n" \
          "  database-prefix: gone_\n"
    proc = WaggleProcess(tmp_path, fed, "database-resolution: MANUAL\n").start()
    try:
        text = proc.log()
        assert "Traceback" not in text and 'File "' not in text, text
        down = proc.events("metastore.down")
        assert sorted(e["member"] for e in down) == ["gone", "primary"], text
        assert all(e["reason"].startswith("is unreachable: ") for e in down), down
        assert "federation.listing_failed" not in text  # a member known down is not listed
    finally:
        proc.stop()


def test_check_reports_every_problem_of_a_file_with_the_typos_beside_them(tmp_path: Path):
    """Three bad values and a misspelled key: all four are reported at once, the typo with its nearest key."""
    fed = tmp_path / "fed.yml"
    fed.write_text("primary-meta-store:\n  name: p\n  remote-meta-store-uris: thrift://h:1\n"
                   "  acess-control-type: READ_AND_WRITE\n"
                   "federated-meta-stores:\n- name: a\n  remote-meta-store-uris: nonsense\n  latency: -5\n"
                   "  database-prefix: a_\n")
    server = tmp_path / "server.yml"
    server.write_text("port: abc\n")
    out = run("check", "--server-config", str(server), "--federation-config", str(fed))
    assert out.returncode == 2
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 3, out.stderr
    assert f"{server}: key 'port': invalid value 'abc': expected an integer between 0 and 65535" in out.stderr
    assert "invalid literal" not in out.stderr and "out of range" not in out.stderr
    assert (f"warning: {fed}: unknown metastore key 'primary-meta-store.acess-control-type' is ignored "
            f"(did you mean 'primary-meta-store.access-control-type'?)") in out.stderr


def test_check_strict_fails_on_a_misspelled_key(tmp_path: Path):
    fed = tmp_path / "fed.yml"
    fed.write_text("primary-meta-store:\n  name: p\n  remote-meta-store-uris: thrift://h:1\n"
                   "  acess-control-type: READ_AND_WRITE\n")
    lenient = run("check", "--federation-config", str(fed))
    assert lenient.returncode == 0 and "did you mean 'primary-meta-store.access-control-type'" in lenient.stderr
    strict = run("check", "--strict", "--federation-config", str(fed))
    assert strict.returncode == 2
    assert (f"error: {fed}: unknown metastore key 'primary-meta-store.acess-control-type' "
            f"(did you mean 'primary-meta-store.access-control-type'?)") in strict.stderr, strict.stderr


def test_waggle_metastore_on_a_taken_port_says_so_and_starts_nothing(tmp_path: Path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = run("metastore", "--port", str(port), "--dir", str(tmp_path / "ms"))
    assert out.returncode == 1
    assert out.stderr.startswith(f"error: port {port} is taken (Address already in use): another process listens on "
                                 "it: choose another with --port")
    assert "serving" not in out.stdout and "Exception" not in out.stderr and not (tmp_path / "ms").exists()
