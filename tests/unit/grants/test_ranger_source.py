"""Ranger's policies kept current: a policy file read again when it changes, and Ranger admin's plugin download
polled from a stand-in Ranger admin (a real HTTP server in a thread): new policies, 304 with the version and the
ETag sent back, a missing service, Ranger admin gone, and the cache file read at start."""

from __future__ import annotations

import json
import os
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.support.waits import wait_until
from waggle.config.grants_model import RangerConfig
from waggle.config.kinds import Privilege
from waggle.grants.ranger import RangerPolicyError
from waggle.grants.ranger_source import RangerPolicies
from waggle.grants.verdict import Caller

ANN = Caller("ann", frozenset())
EXPORT = Path(__file__).parent / "data" / "ranger_hive_export.json"


def download(version: int, *users: str) -> dict[str, Any]:
    """A plugin download's reply: one policy that lets ``users`` select from sales."""
    return {"serviceName": "hive", "serviceId": 3, "policyVersion": version, "policyUpdateTime": 1732790400000,
            "policies": [{"id": 10, "name": "sales readers", "isEnabled": True, "service": "hive", "policyType": 0,
                          "resources": {"database": {"values": ["sales"]}, "table": {"values": ["*"]}},
                          "policyItems": [{"accesses": [{"type": "select", "isAllowed": True}],
                                           "users": list(users)}]}],
            "serviceDef": {"name": "hive"}, "auditMode": "audit-default"}


class RangerAdminStandIn:
    """Ranger admin's plugin download, as far as a plugin sees it: the current document of each service, its
    version and ETag; 304 when the request knows them; 404 for a service it lacks. Every request is kept."""

    def __init__(self) -> None:
        self.documents: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, dict[str, str], dict[str, str]]] = []  # path, query, headers
        self.broken = False  # answers 500
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                stand_in.requests.append((url.path, query, dict(self.headers)))
                prefix = "/service/plugins/policies/download/"
                service = url.path[len(prefix):] if url.path.startswith(prefix) else None
                doc = stand_in.documents.get(service or "")
                if stand_in.broken:
                    self.send_error(500, "Internal Server Error")
                elif doc is None:
                    self.send_error(404, "Not Found")
                elif (query.get("lastKnownVersion") == str(doc["policyVersion"])
                      or self.headers.get("If-None-Match") == f'"v{doc["policyVersion"]}"'):
                    self.send_response(304)
                    self.end_headers()
                else:
                    body = json.dumps(doc).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("ETag", f'"v{doc["policyVersion"]}"')
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Ranger admin gone (again: nothing)."""
        if not self.thread.is_alive():
            return
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def ranger() -> Iterator[RangerAdminStandIn]:
    stand_in = RangerAdminStandIn()
    yield stand_in
    stand_in.close()


def allowed(policies: RangerPolicies, caller: Caller = ANN) -> bool | None:
    source = policies.current()
    assert source is not None
    return source.decide(caller, "sales", "orders", Privilege.SELECT).allowed


# --- the policy file


def test_a_policy_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "policies.json"
    path.write_text(json.dumps(download(1, "bob")))
    policies = RangerPolicies(RangerConfig(policy_file=str(path)))
    assert policies.current() is None
    assert policies.load() is policies.current()
    assert allowed(policies) is None
    assert policies.refresh() is False  # unchanged
    path.write_text(json.dumps(download(2, "ann", "bob")))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000_000))
    assert policies.refresh() is True
    assert allowed(policies) is True
    source = policies.current()
    assert source is not None and source.version == 2 and source.where == str(path)


def test_a_broken_policy_file_keeps_the_last_policies_but_fails_the_first_read(tmp_path: Path) -> None:
    path = tmp_path / "policies.json"
    path.write_text(json.dumps(download(1, "ann")))
    policies = RangerPolicies(RangerConfig(policy_file=str(path)))
    policies.load()
    path.write_text('{"serviceName": "hive", "policies": [{"id": "x"}]}')
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000_000))
    with capture_logs() as logs:
        assert policies.refresh() is False
    assert allowed(policies) is True
    assert [e["event"] for e in logs] == ["ranger.policy_file_unread"]
    assert "policies[0]: id: missing or not a number" in logs[0]["error"]
    with pytest.raises(RangerPolicyError, match=r"policies.json: policies\[0\]: id"):
        RangerPolicies(RangerConfig(policy_file=str(path))).load()
    with pytest.raises(OSError):
        RangerPolicies(RangerConfig(policy_file=str(tmp_path / "absent.json"))).load()


def test_an_export_file_is_read(tmp_path: Path) -> None:
    policies = RangerPolicies(RangerConfig(service="hive", policy_file=str(EXPORT)))
    source = policies.load()
    assert source is not None and len(source) > 10 and source.version is None


def test_neither_a_file_nor_a_url_is_refused() -> None:
    with pytest.raises(ValueError, match="neither 'url' nor 'policy-file'"):
        RangerPolicies(RangerConfig())


# --- Ranger admin


def test_policies_are_downloaded_then_unchanged_with_version_and_etag(ranger: RangerAdminStandIn) -> None:
    ranger.documents["hive"] = download(5, "ann")
    policies = RangerPolicies(RangerConfig(url=ranger.url + "/", poll_seconds=30), plugin_host="edge1")
    assert policies.refresh() is True
    assert allowed(policies) is True
    path, query, headers = ranger.requests[0]
    assert path == "/service/plugins/policies/download/hive"
    assert query == {"lastKnownVersion": "-1", "lastActivationTime": "0", "pluginId": "waggle@edge1-hive",
                     "supportsPolicyDeltas": "false"}
    assert "If-None-Match" not in headers
    source = policies.current()
    assert policies.refresh() is False  # 304: nothing new taken in (logged at debug, which a run at info drops)
    assert policies.current() is source
    _, query, headers = ranger.requests[1]
    assert query["lastKnownVersion"] == "5" and int(query["lastActivationTime"]) > 0
    assert headers["If-None-Match"] == '"v5"'
    ranger.documents["hive"] = download(6, "bob")
    assert policies.refresh() is True
    assert allowed(policies) is None
    source = policies.current()
    assert source is not None and source.version == 6 and source.where == ranger.url + "/"


def test_a_missing_service_an_error_and_ranger_admin_gone_keep_the_last_policies(
        ranger: RangerAdminStandIn) -> None:
    ranger.documents["hive"] = download(1, "ann")
    policies = RangerPolicies(RangerConfig(url=ranger.url), timeout=2.0)
    assert policies.refresh() is True
    del ranger.documents["hive"]
    with capture_logs() as logs:
        assert policies.refresh() is False
        ranger.broken = True
        assert policies.refresh() is False
        ranger.close()
        assert policies.refresh() is False
    assert [(e["event"], e["log_level"]) for e in logs] == [
        ("ranger.service_missing", "warning"), ("ranger.download_failed", "warning"),
        ("ranger.unreachable", "warning")]
    assert logs[0]["service"] == "hive" and logs[1]["status"] == 500
    assert allowed(policies) is True


def test_a_document_waggle_cannot_read_keeps_the_last_policies(ranger: RangerAdminStandIn) -> None:
    ranger.documents["hive"] = download(1, "ann")
    policies = RangerPolicies(RangerConfig(url=ranger.url))
    policies.refresh()
    ranger.documents["hive"] = {**download(2, "bob"), "policies": [{"id": 3, "resources": []}]}
    with capture_logs() as logs:
        assert policies.refresh() is False
    assert [e["event"] for e in logs] == ["ranger.bad_policies"]
    assert "policy 3 '': resources: not a JSON object" in logs[0]["error"]
    assert allowed(policies) is True


def test_the_cache_file_is_written_and_read_at_start_when_ranger_admin_is_away(
        ranger: RangerAdminStandIn, tmp_path: Path) -> None:
    cache = tmp_path / "ranger-cache.json"
    ranger.documents["hive"] = download(4, "ann")
    first = RangerPolicies(RangerConfig(url=ranger.url, cache_file=str(cache)))
    assert first.load() is not None
    assert json.loads(cache.read_text())["policyVersion"] == 4
    away = RangerPolicies(RangerConfig(url="http://127.0.0.1:9", cache_file=str(cache)), timeout=2.0)
    with capture_logs() as logs:
        source = away.load()
    assert source is not None and source.version == 4 and source.where == str(cache)
    assert [e["event"] for e in logs] == ["ranger.unreachable", "ranger.policies_loaded"]
    assert logs[1]["origin"] == "cache file"
    assert allowed(away) is True
    # back, it is asked for what came after the cached version
    back = RangerPolicies(RangerConfig(url=ranger.url, cache_file=str(cache)))
    back._read_cache()
    assert back.refresh() is False
    assert ranger.requests[-1][1]["lastKnownVersion"] == "4"
    assert RangerPolicies(RangerConfig(url="http://127.0.0.1:9"), timeout=2.0).load() is None


def test_the_background_poll_takes_new_policies_in(ranger: RangerAdminStandIn) -> None:
    ranger.documents["hive"] = download(1, "bob")
    policies = RangerPolicies(RangerConfig(url=ranger.url, poll_seconds=0.01))
    policies.load()
    policies.start()
    try:
        ranger.documents["hive"] = download(2, "ann")
        wait_until(lambda: allowed(policies) is True, timeout=5.0)
    finally:
        policies.stop()
    count = len(ranger.requests)
    wait_until(lambda: True)
    assert len(ranger.requests) == count
