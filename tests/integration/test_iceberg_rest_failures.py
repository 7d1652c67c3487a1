"""The Iceberg REST port when things go wrong, with real metastores: missing tables and namespaces, bad tokens,
a read-only member, a member that is down (one whose tables are served from copies: tests/integration/test_copies.py,
beside the other tests of the copies, which make them once), purges, the open port,
TLS, warehouses, multi-table transactions, staged creates and registers, and what the port counts and logs.

Status codes and the spec's error body (``{"error": {"message", "type", "code"}}``) are checked with plain
``requests``; what a client sees, with pyiceberg's own ``RestCatalog``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.audit import audit_text
from tests.support.clients import hive2_client
from tests.support.iceberg_rest import CLIENT_ID, CLIENT_SECRET, rest_catalog, rows, schema, start_rest_waggle
from tests.support.proxy import WaggleProcess
from tests.support.waits import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def rest(primary: Any, analytics: Any, ops: Any, federation_data: dict[str, Any],
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    proc = start_rest_waggle(tmp_path_factory.mktemp("rest-failures"), primary.uri, analytics.uri, ops.uri,
                             extra="logging:\n  level: debug\n")
    yield proc
    proc.stop()


# -- helpers --------------------------------------------------------------------------------------------------------
def _url(proc: WaggleProcess, path: str, scheme: str = "http") -> str:
    return f"{scheme}://127.0.0.1:{proc.rest_port}{path}"  # type: ignore[attr-defined]


def _token(proc: WaggleProcess) -> str:
    response = requests.post(_url(proc, "/v1/oauth/tokens"), data={
        "grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
        "scope": "catalog"}, timeout=30)
    assert response.status_code == 200, response.text
    return str(response.json()["access_token"])


def _call(proc: WaggleProcess, method: str, path: str, token: str | None = "", **kwargs: Any) -> requests.Response:
    """A request of the REST port, with a fresh token unless ``token`` is given (None: none at all)."""
    if token == "":
        token = _token(proc)
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return requests.request(method, _url(proc, path), headers=headers, timeout=60, **kwargs)


def _error(response: requests.Response, code: int, kind: str) -> str:
    """The message of a spec error answer of ``code`` and ``kind``."""
    assert response.status_code == code, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"]["code"] == code and body["error"]["type"] == kind, body
    return str(body["error"]["message"])


def _name() -> str:
    return f"t_{uuid.uuid4().hex[:8]}"


def _create_body(name: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "schema": {"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False}]}, **more}


def _locks(store: Any) -> list[Any]:
    from waggle.hms.gen.hive_metastore.ttypes import ShowLocksRequest

    with hive2_client(store.port) as c:
        return list(c.show_locks(ShowLocksRequest()).locks or [])


def _local(location: str) -> Path:
    from urllib.parse import urlsplit

    return Path(urlsplit(location).path)


# -- missing things -------------------------------------------------------------------------------------------------
def test_a_missing_table_or_namespace_is_404_with_its_type(rest):
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    token = _token(rest)
    message = _error(_call(rest, "GET", "/v1/namespaces/ops_scratch/tables/no_such_table", token), 404,
                     "NoSuchTableException")
    assert "no_such_table" in message
    _error(_call(rest, "GET", "/v1/ops/namespaces/ops_scratch/tables/no_such_table", token), 404,
           "NoSuchTableException")
    _error(_call(rest, "GET", "/v1/namespaces/no_such_db_x", token), 404, "NoSuchNamespaceException")
    _error(_call(rest, "GET", "/v1/namespaces/no_such_db_x/tables", token), 404, "NoSuchNamespaceException")
    assert _call(rest, "HEAD", "/v1/namespaces/ops_scratch/tables/no_such_table", token).status_code == 404
    assert _call(rest, "HEAD", "/v1/namespaces/no_such_db_x", token).status_code == 404

    cat = rest_catalog(rest)
    with pytest.raises(NoSuchTableError):
        cat.load_table("ops_scratch.no_such_table")
    with pytest.raises(NoSuchNamespaceError):
        cat.load_namespace_properties("no_such_db_x")
    with pytest.raises(NoSuchNamespaceError):
        cat.list_tables("no_such_db_x")
    assert not cat.table_exists("ops_scratch.no_such_table")
    assert not cat.namespace_exists("no_such_db_x")


# -- tokens ---------------------------------------------------------------------------------------------------------
def test_bad_tokens_and_wrong_secrets_are_401(rest):
    from pyiceberg.exceptions import OAuthError

    token = _token(rest)
    assert _call(rest, "GET", "/v1/namespaces", token).status_code == 200
    _error(_call(rest, "GET", "/v1/namespaces", None), 401, "NotAuthorizedException")  # no token at all
    _error(_call(rest, "GET", "/v1/config", None), 401, "NotAuthorizedException")
    _error(_call(rest, "GET", "/v1/namespaces", "garbage"), 401, "NotAuthorizedException")
    tag, payload, signature = token.split(".")
    flipped = signature[:-2] + ("A" if signature[-2] != "A" else "B") + signature[-1]
    message = _error(_call(rest, "GET", "/v1/namespaces", f"{tag}.{payload}.{flipped}"), 401,
                     "NotAuthorizedException")
    assert signature not in message and flipped not in message
    wrong = requests.post(_url(rest, "/v1/oauth/tokens"), data={
        "grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": "not-the-secret-0123456789"},
        timeout=30)
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client", wrong.text
    with pytest.raises(OAuthError):
        rest_catalog(rest, credential=f"{CLIENT_ID}:not-the-secret-0123456789").list_namespaces()


# -- refusals and members that are down ----------------------------------------------------------------------------
def test_a_write_to_a_read_only_member_is_403_naming_it_and_never_reaches_it(rest, analytics):
    from pyiceberg.exceptions import ForbiddenError

    name = _name()
    before = len(audit_text(analytics))
    message = _error(_call(rest, "POST", "/v1/namespaces/analytics_sales/tables", json=_create_body(name)), 403,
                     "ForbiddenException")
    assert "'analytics'" in message, message
    with pytest.raises(ForbiddenError, match="analytics"):
        rest_catalog(rest).create_table(f"analytics_sales.{name}", schema=schema())
    _error(_call(rest, "POST", "/v1/namespaces", json={"namespace": [f"analytics_{name}"]}), 403,
           "ForbiddenException")
    reached = audit_text(analytics)[before:]
    assert name not in reached
    assert "create_table" not in reached and "create_database" not in reached


def test_a_member_that_is_down_is_503_naming_it(rest):
    from pyiceberg.exceptions import ServiceUnavailableError

    token = _token(rest)
    before = rest.metric("waggle_iceberg_rest_requests_total", route="list_tables", metastore="gone",
                         code="503") or 0
    message = _error(_call(rest, "GET", "/v1/namespaces/gone_x/tables", token), 503, "ServiceUnavailableException")
    assert "'gone'" in message, message
    assert rest.metric("waggle_iceberg_rest_requests_total", route="list_tables", metastore="gone",
                       code="503") == before + 1
    message = _error(_call(rest, "GET", "/v1/namespaces/gone_x/tables/t", token), 503, "ServiceUnavailableException")
    assert "'gone'" in message, message
    # a write to it is refused as unavailable too, naming it (not an unknown outcome: nothing was sent)
    message = _error(_call(rest, "POST", "/v1/namespaces/gone_x/tables", token, json=_create_body(_name())), 503,
                     "ServiceUnavailableException")
    assert "'gone'" in message, message
    with pytest.raises(ServiceUnavailableError, match="gone"):
        rest_catalog(rest).list_tables("gone_x")


# -- purge ----------------------------------------------------------------------------------------------------------
def test_a_purge_is_refused_and_a_plain_drop_keeps_the_files(rest):
    from pyiceberg.exceptions import ForbiddenError

    cat = rest_catalog(rest)
    name = _name()
    table = cat.create_table(f"ops_scratch.{name}", schema=schema())
    table.append(rows(3))
    table = cat.load_table(f"ops_scratch.{name}")
    metadata = _local(table.metadata_location)
    data = [_local(f) for f in table.inspect.files().column("file_path").to_pylist()]
    assert metadata.exists() and data and all(f.exists() for f in data)

    message = _error(_call(rest, "DELETE", f"/v1/namespaces/ops_scratch/tables/{name}?purgeRequested=true"), 403,
                     "ForbiddenException")
    assert "iceberg-rest.allow-purge" in message
    with pytest.raises(ForbiddenError):
        cat.purge_table(f"ops_scratch.{name}")
    assert cat.table_exists(f"ops_scratch.{name}")

    response = _call(rest, "DELETE", f"/v1/namespaces/ops_scratch/tables/{name}")
    assert response.status_code == 204, response.text
    assert not cat.table_exists(f"ops_scratch.{name}")
    assert metadata.exists() and all(f.exists() for f in data)


# -- the open port and TLS ------------------------------------------------------------------------------------------
def test_a_waggle_without_clients_or_kerberos_is_open_and_warns_at_start(primary, analytics, ops, federation_data,
                                                                         tmp_path):
    proc = start_rest_waggle(tmp_path / "open", primary.uri, analytics.uri, ops.uri, clients=False)
    try:
        response = _call(proc, "GET", "/v1/namespaces", None)
        assert response.status_code == 200, response.text
        assert ["ops_scratch"] in response.json()["namespaces"]
        assert rest_catalog(proc, credential="").list_namespaces()
        opened = wait_for(lambda: proc.events("rest.open"), timeout=10, message=lambda: proc.log()[-3000:])
        assert opened[0]["level"] == "warning" and opened[0]["port"] == proc.rest_port  # type: ignore[attr-defined]
    finally:
        proc.stop()


def test_tls_on_the_port_https_with_the_ca_and_never_plain_http(primary, analytics, ops, federation_data, tmp_path):
    from tests.support.tls_certs import make_certs

    certs = make_certs(tmp_path / "certs")
    proc = start_rest_waggle(tmp_path / "tls", primary.uri, analytics.uri, ops.uri, clients=False,
                             extra=f"  tls:\n    certificate-file: {certs.server.cert}\n"
                                   f"    key-file: {certs.server.key}\n")
    try:
        url = _url(proc, "/v1/config", "https")
        response = wait_for(lambda: _try(lambda: requests.get(url, verify=str(certs.ca), timeout=10)), timeout=10)
        assert response.status_code == 200 and response.json()["overrides"] == {"prefix": "federation"}
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(url, verify=str(certs.other_ca), timeout=10)
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(_url(proc, "/v1/config"), timeout=10)
        assert proc.proc is not None and proc.proc.poll() is None  # a plain request did not stop the port
        assert requests.get(url, verify=str(certs.ca), timeout=10).status_code == 200
    finally:
        proc.stop()


def _try(fn: Any) -> Any:
    try:
        return fn()
    except requests.exceptions.ConnectionError:
        return None


# -- warehouses -----------------------------------------------------------------------------------------------------
def test_a_warehouse_is_a_prefix_showing_one_member(rest):
    from pyiceberg.exceptions import BadRequestError

    token = _token(rest)
    response = _call(rest, "GET", "/v1/config?warehouse=ops", token)
    assert response.status_code == 200 and response.json()["overrides"] == {"prefix": "ops"}, response.text
    listed = _call(rest, "GET", "/v1/ops/namespaces", token).json()["namespaces"]
    assert ["ops_scratch"] in listed and all(ns[0].startswith("ops_") for ns in listed), listed
    everything = _call(rest, "GET", "/v1/namespaces", token).json()["namespaces"]
    assert ["analytics_sales"] in everything and ["ops_scratch"] in everything

    cat = rest_catalog(rest, warehouse="ops")
    names = cat.list_namespaces()
    assert ("ops_scratch",) in names and ("analytics_sales",) not in names, names
    assert {ns[0].split("_")[0] for ns in names} == {"ops"}, names

    message = _error(_call(rest, "GET", "/v1/config?warehouse=nowhere", token), 400, "BadRequestException")
    assert "'nowhere'" in message
    with pytest.raises(BadRequestError):
        rest_catalog(rest, warehouse="nowhere").list_namespaces()


# -- transactions, staged creates, registers --------------------------------------------------------------------------
def _change(table: Any, name: str, uuid_text: str | None = None, **properties: str) -> dict[str, Any]:
    return {"identifier": {"namespace": ["ops_scratch"], "name": name},
            "requirements": [{"type": "assert-table-uuid", "uuid": uuid_text or str(table.metadata.table_uuid)}],
            "updates": [{"action": "set-properties", "updates": properties}]}


def test_a_transaction_of_two_tables_commits_both_or_neither(rest, ops, primary):
    cat = rest_catalog(rest)
    a, b = _name(), _name()
    ta = cat.create_table(f"ops_scratch.{a}", schema=schema())
    tb = cat.create_table(f"ops_scratch.{b}", schema=schema())
    since = len(rest.log())

    response = _call(rest, "POST", "/v1/ops/transactions/commit", json={"table-changes": [
        _change(ta, a, step="one"), _change(tb, b, step="one")]})
    assert response.status_code == 204, response.text
    ta, tb = cat.load_table(f"ops_scratch.{a}"), cat.load_table(f"ops_scratch.{b}")
    assert ta.properties["step"] == tb.properties["step"] == "one"
    with hive2_client(ops.port) as c:
        assert c.get_table("scratch", a).parameters["metadata_location"] == ta.metadata_location
        assert c.get_table("scratch", b).parameters["metadata_location"] == tb.metadata_location

    # one requirement fails: 409, and neither table changed
    message = _error(_call(rest, "POST", "/v1/transactions/commit", json={"table-changes": [
        _change(ta, a, step="two"), _change(tb, b, uuid_text=str(uuid.uuid4()), step="two")]}), 409,
        "CommitFailedException")
    assert "uuid" in message.lower(), message
    assert cat.load_table(f"ops_scratch.{a}").metadata_location == ta.metadata_location
    assert cat.load_table(f"ops_scratch.{b}").metadata_location == tb.metadata_location
    assert cat.load_table(f"ops_scratch.{a}").properties["step"] == "one"

    # tables of two members: 400 before anything is asked of either
    ns = f"rest_{uuid.uuid4().hex[:8]}"
    cat.create_namespace(ns)
    try:
        tp = cat.create_table(f"{ns}.p", schema=schema())
        other = {**_change(tp, "p", step="x"), "identifier": {"namespace": [ns], "name": "p"}}
        message = _error(_call(rest, "POST", "/v1/transactions/commit", json={"table-changes": [
            _change(ta, a, step="x"), other]}), 400, "BadRequestException")
        assert "ops" in message and "primary" in message, message
        assert "step" not in cat.load_table(f"{ns}.p").properties
        cat.drop_table(f"{ns}.p")
    finally:
        cat.drop_namespace(ns)
    assert _locks(ops) == [] and _locks(primary) == []

    commits = rest.events("rest.commit", since)
    outcomes = [(e["route"], e["metastore"], e["outcome"]) for e in commits if e["route"] == "commit_transaction"]
    assert outcomes == [("commit_transaction", "ops", "committed"), ("commit_transaction", "ops", "conflict"),
                        ("commit_transaction", "ops", "failed")], commits
    assert f"ops_scratch.{a}" in commits[0]["table"] and f"ops_scratch.{b}" in commits[0]["table"], commits[0]
    for t in (a, b):
        cat.drop_table(f"ops_scratch.{t}")


def test_a_staged_create_commits_with_assert_create_and_register_adopts_a_metadata_file(rest):
    cat = rest_catalog(rest)
    name = _name()
    # the raw staged create: metadata, no metadata location, no table yet
    staged = _call(rest, "POST", "/v1/namespaces/ops_scratch/tables", json=_create_body(name, **{"stage-create": True}))
    assert staged.status_code == 200, staged.text
    assert staged.json()["metadata-location"] is None and staged.json()["metadata"]["format-version"] in (1, 2)
    assert not cat.table_exists(f"ops_scratch.{name}")

    # pyiceberg's create transaction: a staged create, then one commit with assert-create
    txn = cat.create_table_transaction(f"ops_scratch.{name}", schema=schema(), properties={"made": "staged"})
    txn.set_properties(more="yes")
    txn.commit_transaction()
    table = cat.load_table(f"ops_scratch.{name}")
    assert table.properties["made"] == "staged" and table.properties["more"] == "yes"
    table.append(rows(4))
    table = cat.load_table(f"ops_scratch.{name}")

    # assert-create on a table that exists now: 409
    _error(_call(rest, "POST", f"/v1/namespaces/ops_scratch/tables/{name}", json={
        "requirements": [{"type": "assert-create"}], "updates": []}), 409, "CommitFailedException")

    # register the table's current metadata file under another name
    again = f"{name}_again"
    registered = cat.register_table(f"ops_scratch.{again}", table.metadata_location)
    assert registered.metadata_location == table.metadata_location
    assert sorted(cat.load_table(f"ops_scratch.{again}").scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 3]
    _error(_call(rest, "POST", "/v1/namespaces/ops_scratch/register", json={
        "name": again, "metadata-location": table.metadata_location}), 409, "AlreadyExistsException")
    cat.drop_table(f"ops_scratch.{again}")
    cat.drop_table(f"ops_scratch.{name}")


# -- metrics and the commit log line ----------------------------------------------------------------------------------
def test_requests_are_counted_by_route_member_and_code_and_each_commit_is_one_log_line(rest):
    cat = rest_catalog(rest)
    name = _name()
    since = len(rest.log())
    table = cat.create_table(f"ops_scratch.{name}", schema=schema())

    def loads() -> float:
        return rest.metric("waggle_iceberg_rest_requests_total", route="load_table", metastore="ops",
                           code="200") or 0

    before = loads()
    for _ in range(3):
        cat.load_table(f"ops_scratch.{name}")
    assert loads() == before + 3
    table.append(rows(2))
    with table.update_schema() as update:
        from pyiceberg.types import DoubleType

        update.add_column("score", DoubleType())
    cat.drop_table(f"ops_scratch.{name}")
    assert (rest.metric("waggle_iceberg_rest_commits_total", metastore="ops", outcome="committed") or 0) >= 4

    commits = wait_for(lambda: [e for e in rest.events("rest.commit", since) if name in e["table"]] or None,
                       timeout=5)
    assert [(e["route"], e["table"], e["metastore"], e["outcome"]) for e in commits] == [
        ("create_table", f"ops_scratch.{name}", "ops", "committed"),
        ("commit_table", f"ops_scratch.{name}", "ops", "committed"),
        ("commit_table", f"ops_scratch.{name}", "ops", "committed"),
        ("drop_table", f"ops_scratch.{name}", "ops", "committed")], commits


def test_the_token_and_the_client_secret_never_reach_the_log(rest):
    token = _token(rest)
    _call(rest, "GET", "/v1/namespaces/ops_scratch/tables/no_such_table", token)
    _call(rest, "GET", "/v1/namespaces", token[:-4] + "AAAA")
    requests.post(_url(rest, "/v1/oauth/tokens"), data={
        "grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET + "x"}, timeout=30)
    rest_catalog(rest).list_namespaces()
    log = rest.log()
    assert rest.events("rest.token_granted") and rest.events("rest.token_refused")
    assert token not in log and token.split(".")[2] not in log and token.split(".")[1] not in log
    assert CLIENT_SECRET not in log
