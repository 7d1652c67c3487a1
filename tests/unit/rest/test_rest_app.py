"""The Iceberg REST port's WSGI application over a fake serving context: the route table, tokens at
``/v1/oauth/tokens``, bearer checks, ``/v1/config``, scopes (the prefix), and the answers given before any
metastore call (purge refused, a transaction across members, bad bodies), in the spec's error model."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace
from typing import Any

import pytest
from pyiceberg.catalog.rest import Endpoint
from structlog.testing import capture_logs
from werkzeug.test import Client

from waggle.common.metrics import REGISTRY
from waggle.config.kinds import TransportKind
from waggle.config.model import RestClientConfig
from waggle.rest.app import ENDPOINTS, ROUTES, RestApp
from waggle.rest.tokens import Tokens
from waggle.routing.federation import Refused

SECRET = "client-secret-0123456789"
CLIENTS = (RestClientConfig(id="etl", user="etl-user", secret_file="/secrets/etl"),)
#: which member holds each database of the fake federation
DATABASES = {"db": "primary", "analytics_sales": "analytics", "ops_scratch": "ops", "ops_other": "ops"}
MEMBERS = ("primary", "analytics", "ops")


def _context(allow_purge: bool = False) -> Any:
    config = SimpleNamespace(
        federation=SimpleNamespace(members=[SimpleNamespace(name=n, read_timeout_ms=1000) for n in MEMBERS]),
        server=SimpleNamespace(iceberg_rest=SimpleNamespace(allow_purge=allow_purge),
                               wire=SimpleNamespace(transport=TransportKind.BUFFERED, compact=False)))

    def lookup(database: str) -> Any:
        member = DATABASES.get(database)
        return None if member is None else SimpleNamespace(target=SimpleNamespace(member=SimpleNamespace(name=member)))

    def decide(spec: Any, names: list[str], created: Any = None) -> Any:
        """As the planner decides: the analytics member is read-only."""
        refused = any(DATABASES.get(n) == "analytics" for n in names)
        return SimpleNamespace(refusal=f"database '{names[0]}' in metastore 'analytics' is read-only" if refused
                               else None, refused_as=Refused.META)

    return SimpleNamespace(config=config, created={}, grants=None,
                           routes=SimpleNamespace(config=config, planner=SimpleNamespace(lookup=lookup, decide=decide)))


def _client(clients: bool = True, needs_token: bool | None = None, allow_purge: bool = False) -> Client:
    tokens = Tokens({1: b"k" * 32}, CLIENTS, 600, {"etl": SECRET.encode()}) if clients else None
    needs = clients if needs_token is None else needs_token
    return Client(RestApp(_context(allow_purge), lambda: tokens, lambda: needs, lambda: 5.0))


def _token(client: Client) -> str:
    response = client.post("/v1/oauth/tokens", data={"grant_type": "client_credentials", "client_id": "etl",
                                                     "client_secret": SECRET, "scope": "catalog"})
    assert response.status_code == 200, response.text
    return str(response.json["access_token"])


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _error(response: Any, code: int, kind: str) -> str:
    assert response.status_code == code, response.text
    assert response.content_type == "application/json"
    body = response.json
    assert set(body) == {"error"} and body["error"]["code"] == code and body["error"]["type"] == kind, body
    return str(body["error"]["message"])


def _count(route: str, metastore: str, code: int) -> float:
    return REGISTRY.get_sample_value("waggle_iceberg_rest_requests_total",
                                     {"route": route, "metastore": metastore, "code": str(code)}) or 0.0


# -- the route table ------------------------------------------------------------------------------------------------
def test_every_route_has_a_distinct_name_and_a_distinct_method_and_path():
    names = [r.name for r in ROUTES]
    assert len(names) == len(set(names)), names
    assert all(re.fullmatch(r"[a-z_]+", n) for n in names), names
    pairs = [(r.method, r.path) for r in ROUTES]
    assert len(pairs) == len(set(pairs)), pairs


def test_the_endpoints_are_icebergs_endpoint_strings():
    assert sorted(set(ENDPOINTS)) == ENDPOINTS and len(ENDPOINTS) == len(ROUTES)
    for text in ENDPOINTS:
        assert re.fullmatch(r"(GET|POST|DELETE|HEAD) /v1/\{prefix\}(/[a-z]+|/\{namespace\}|/\{table\})+", text), text
        assert str(Endpoint.from_string(text)) == text
    for expected in ("GET /v1/{prefix}/namespaces", "POST /v1/{prefix}/namespaces",
                     "GET /v1/{prefix}/namespaces/{namespace}", "HEAD /v1/{prefix}/namespaces/{namespace}",
                     "DELETE /v1/{prefix}/namespaces/{namespace}",
                     "POST /v1/{prefix}/namespaces/{namespace}/properties",
                     "GET /v1/{prefix}/namespaces/{namespace}/tables",
                     "POST /v1/{prefix}/namespaces/{namespace}/tables",
                     "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
                     "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
                     "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
                     "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
                     "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
                     "POST /v1/{prefix}/namespaces/{namespace}/register",
                     "POST /v1/{prefix}/tables/rename", "POST /v1/{prefix}/transactions/commit"):
        assert expected in ENDPOINTS, expected


# -- tokens ---------------------------------------------------------------------------------------------------------
def test_the_token_endpoint_grants_for_the_right_secret_in_the_form_or_basic_auth():
    client = _client()
    response = client.post("/v1/oauth/tokens", data={"grant_type": "client_credentials", "client_id": "etl",
                                                     "client_secret": SECRET})
    assert response.status_code == 200 and response.headers["Cache-Control"] == "no-store"
    body = response.json
    assert body["token_type"] == "bearer" and body["expires_in"] == 600 and body["access_token"].startswith("wgl1.")
    basic = client.post("/v1/oauth/tokens", data={"grant_type": "client_credentials"},
                        auth=("etl", SECRET))
    assert basic.status_code == 200, basic.text


@pytest.mark.parametrize("form, code, error", [
    ({"grant_type": "client_credentials", "client_id": "etl", "client_secret": "wrong-secret-0123456789"}, 401,
     "invalid_client"),
    ({"grant_type": "client_credentials", "client_id": "nobody", "client_secret": SECRET}, 401, "invalid_client"),
    ({"grant_type": "client_credentials"}, 401, "invalid_client"),
    ({"grant_type": "password", "client_id": "etl", "client_secret": SECRET}, 400, "unsupported_grant_type"),
])
def test_the_token_endpoint_refuses_in_oauths_error_model(form, code, error):
    response = _client().post("/v1/oauth/tokens", data=form)
    assert response.status_code == code
    assert response.json["error"] == error and response.json["error_description"]
    assert SECRET not in response.text


def test_without_clients_the_token_endpoint_grants_nothing():
    response = _client(clients=False).post("/v1/oauth/tokens", data={
        "grant_type": "client_credentials", "client_id": "etl", "client_secret": SECRET})
    assert response.status_code == 401 and response.json["error"] == "invalid_client"


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer ", "Bearer garbage", "Basic ZXRsOnNlY3JldA==",
                                    "Bearer wgl1.e30.AAAA"])
def test_a_request_without_a_good_bearer_token_is_401(header):
    headers = {} if header is None else {"Authorization": header}
    for path in ("/v1/config", "/v1/namespaces", "/v1/ops/namespaces/ops_scratch/tables/t"):
        _error(_client().get(path, headers=headers), 401, "NotAuthorizedException")


def test_an_altered_token_is_401_and_a_good_one_passes():
    client = _client()
    token = _token(client)
    assert client.get("/v1/config", headers=_auth(token)).status_code == 200
    tag, payload, signature = token.split(".")
    altered = f"{tag}.{payload[:-1]}{'A' if payload[-1] != 'A' else 'B'}.{signature}"
    message = _error(client.get("/v1/config", headers=_auth(altered)), 401, "NotAuthorizedException")
    assert token not in message and altered not in message


def test_an_open_port_answers_without_a_token_and_ignores_one():
    client = _client(clients=False)
    assert client.get("/v1/config").status_code == 200
    assert client.get("/v1/config", headers=_auth("anything")).status_code == 200


def test_kerberos_without_clients_needs_a_token_no_one_can_get():
    client = _client(clients=False, needs_token=True)
    _error(client.get("/v1/config"), 401, "NotAuthorizedException")


# -- config and routing ---------------------------------------------------------------------------------------------
def test_config_gives_the_warehouse_as_prefix_and_lists_the_endpoints():
    client = _client(clients=False)
    body = client.get("/v1/config?warehouse=ops").json
    assert body == {"defaults": {}, "overrides": {"prefix": "ops"}, "endpoints": ENDPOINTS}
    assert client.get("/v1/config").json["overrides"] == {"prefix": "federation"}
    assert client.get("/v1/config?warehouse=federation").json["overrides"] == {"prefix": "federation"}
    message = _error(client.get("/v1/config?warehouse=nowhere"), 400, "BadRequestException")
    assert "'nowhere'" in message and "ops" in message


def test_unknown_routes_are_404_and_wrong_methods_405():
    client = _client(clients=False)
    _error(client.get("/v1/ops/views"), 404, "NotFoundException")
    _error(client.get("/v2/config"), 404, "NotFoundException")
    _error(client.put("/v1/namespaces"), 405, "MethodNotAllowedException")
    _error(client.delete("/v1/config"), 405, "MethodNotAllowedException")


def test_an_unknown_prefix_is_404_naming_it():
    message = _error(_client(clients=False).get("/v1/nowhere/namespaces/db"), 404, "NotFoundException")
    assert "'nowhere'" in message


def test_a_namespace_outside_the_prefix_or_nested_is_no_such_namespace():
    client = _client(clients=False)
    before = _count("load_namespace", "primary", 404)
    message = _error(client.get("/v1/ops/namespaces/db"), 404, "NoSuchNamespaceException")
    assert "'db'" in message and "'ops'" in message
    assert _count("load_namespace", "primary", 404) == before + 1  # counted under the namespace's member
    _error(client.get("/v1/ops/namespaces/ops_scratch%1Fsub"), 404, "NoSuchNamespaceException")
    # a table's load answers as Iceberg's clients read it: no such table (Java's then tries a metadata table)
    _error(client.get("/v1/namespaces/ops_scratch%1Fsub/tables/t"), 404, "NoSuchTableException")


def test_head_routes_are_their_own():
    client = _client(clients=False)
    before = _count("namespace_exists", "primary", 404), _count("table_exists", "primary", 404)
    assert client.head("/v1/ops/namespaces/db").status_code == 404
    assert client.head("/v1/ops/namespaces/db/tables/t").status_code == 404
    assert (_count("namespace_exists", "primary", 404), _count("table_exists", "primary", 404)) == \
        (before[0] + 1, before[1] + 1)


def test_report_metrics_is_204():
    client = _client(clients=False)
    response = client.post("/v1/ops/namespaces/ops_scratch/tables/t/metrics", json={"report-type": "scan-report"})
    assert response.status_code == 204 and response.data == b""


def test_a_purge_is_refused_while_allow_purge_is_false_before_any_call():
    client = _client(clients=False)
    message = _error(client.delete("/v1/ops/namespaces/ops_scratch/tables/t?purgeRequested=true"), 403,
                     "ForbiddenException")
    assert "ops_scratch.t" in message and "iceberg-rest.allow-purge" in message
    message = _error(client.delete("/v1/namespaces/ops_scratch/tables/t?purgeRequested=TRUE"), 403,
                     "ForbiddenException")


def _change(namespace: str, name: str) -> dict[str, Any]:
    return {"identifier": {"namespace": [namespace], "name": name}, "requirements": [], "updates": []}


def test_a_transaction_across_members_or_without_changes_is_400_before_any_call():
    client = _client(clients=False)
    message = _error(client.post("/v1/transactions/commit", json={"table-changes": [
        _change("ops_scratch", "a"), _change("db", "b")]}), 400, "BadRequestException")
    assert "share a metastore" in message and "ops" in message and "primary" in message
    _error(client.post("/v1/transactions/commit", json={"table-changes": []}), 400, "BadRequestException")
    _error(client.post("/v1/transactions/commit", json={}), 400, "BadRequestException")
    _error(client.post("/v1/transactions/commit", json={"table-changes": [{"requirements": []}]}), 400,
           "BadRequestException")
    # within a prefix, a table of another member is not in scope
    _error(client.post("/v1/ops/transactions/commit", json={"table-changes": [
        _change("ops_scratch", "a"), _change("db", "b")]}), 404, "NoSuchNamespaceException")


def test_a_rename_across_members_is_400():
    client = _client(clients=False)
    message = _error(client.post("/v1/tables/rename", json={
        "source": {"namespace": ["ops_scratch"], "name": "a"}, "destination": {"namespace": ["db"], "name": "a"}}),
        400, "BadRequestException")
    assert "within its metastore" in message
    _error(client.post("/v1/tables/rename", json={"source": {"namespace": ["ops_scratch"], "name": "a"}}), 400,
           "BadRequestException")
    _error(client.post("/v1/tables/rename", json={
        "source": {"namespace": ["ops_scratch"], "name": "a"}, "destination": {"namespace": ["nope"], "name": "a"}}),
        404, "NoSuchNamespaceException")


@pytest.mark.parametrize("data", [b"not json", b"[1, 2]", b'"text"'])
def test_a_body_that_is_not_a_json_object_is_400(data):
    client = _client(clients=False)
    for path in ("/v1/ops/namespaces/ops_scratch/tables", "/v1/transactions/commit", "/v1/namespaces"):
        _error(client.post(path, data=data, content_type="application/json"), 400, "BadRequestException")


def test_a_namespace_of_several_levels_is_400():
    client = _client(clients=False)
    _error(client.post("/v1/namespaces", json={"namespace": ["a", "b"]}), 400, "BadRequestException")
    _error(client.post("/v1/ops/namespaces", json={"namespace": ["db"]}), 400, "BadRequestException")


def test_the_token_and_the_secret_never_show_in_an_answer_or_a_log_line():
    client = _client()
    with capture_logs() as logs:
        token = _token(client)
        response = client.get("/v1/ops/namespaces/db", headers=_auth(token))
        refused = client.post("/v1/oauth/tokens", data={"grant_type": "client_credentials", "client_id": "etl",
                                                        "client_secret": SECRET + "x"})
        altered = client.get("/v1/config", headers=_auth(token[:-3] + "AAA"))
    assert response.status_code == 404 and token not in response.text
    assert refused.status_code == 401 and altered.status_code == 401 and token[:-3] not in altered.text
    text = json.dumps(logs, default=str)
    assert "rest.token_granted" in text and "rest.token_refused" in text
    assert token not in text and token.split(".")[2] not in text and SECRET not in text


def test_a_refused_commit_is_one_commit_line_and_counted_under_its_member():
    client = _client(clients=False)
    before = _count("commit_transaction", "ops", 400)
    with capture_logs() as logs:
        _error(client.post("/v1/transactions/commit", json={"table-changes": [
            _change("ops_scratch", "a"), _change("db", "b")]}), 400, "BadRequestException")
        _error(client.delete("/v1/ops/namespaces/ops_scratch/tables/t?purgeRequested=true"), 403,
               "ForbiddenException")
    assert _count("commit_transaction", "ops", 400) == before + 1
    lines = [e for e in logs if e["event"] == "rest.commit"]
    assert [(e["route"], e["table"], e["metastore"], e["outcome"], e["error"]) for e in lines] == [
        ("commit_transaction", "ops_scratch.a,db.b", "ops", "failed", "BadRequestException"),
        ("drop_table", "ops_scratch.t", "ops", "failed", "ForbiddenException")]


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/v1/namespaces/analytics_sales/tables", {"name": "t", "schema": {"type": "struct", "fields": []}}),
    ("POST", "/v1/analytics/namespaces/analytics_sales/tables/t", {"requirements": [], "updates": []}),
    ("POST", "/v1/namespaces/analytics_sales/register", {"name": "t", "metadata-location": "file:///m.json"}),
    ("DELETE", "/v1/namespaces/analytics_sales/tables/t", None),
    ("POST", "/v1/tables/rename", {"source": {"namespace": ["ops_scratch"], "name": "a"},
                                   "destination": {"namespace": ["analytics_sales"], "name": "b"}}),
])
def test_a_write_the_access_rules_refuse_is_403_before_any_file_or_call(method, path, body):
    """A table's files are written before its metastore is asked: the door asks the planner first, as the
    Thrift port does, so nothing is written or sent (the fake context has no metastore to send to)."""
    client = _client()
    response = client.open(path, method=method, headers=_auth(_token(client)),
                           json=body if body is not None else None)
    assert "metastore 'analytics' is read-only" in _error(response, 403, "ForbiddenException")
