"""The Iceberg REST port with pyiceberg's own ``RestCatalog``: namespaces and tables on the primary and on a
federated member, the Thrift view agreeing, tokens, and failures answered in the spec's error model."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.clients import hive2_client
from tests.support.iceberg_rest import rest_catalog, rows, schema, start_rest_waggle
from tests.support.proxy import WaggleProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def rest(primary: Any, analytics: Any, ops: Any, federation_data: dict[str, Any],
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    proc = start_rest_waggle(tmp_path_factory.mktemp("rest"), primary.uri, analytics.uri, ops.uri)
    yield proc
    proc.stop()


def _thrift_catalog(proc: WaggleProcess, warehouse: Any) -> Any:
    from pyiceberg.catalog import load_catalog

    return load_catalog("thrift", type="hive", uri=f"thrift://127.0.0.1:{proc.port}", warehouse=f"file://{warehouse}")


@pytest.mark.parametrize("where", ["primary", "member"])
def test_pyiceberg_creates_appends_reads_evolves_and_renames_through_the_rest_port(rest, primary, ops, where,
                                                                                   tmp_path):
    from pyiceberg.types import DoubleType

    cat = rest_catalog(rest)
    if where == "primary":
        ns = f"rest_{uuid.uuid4().hex[:8]}"
        cat.create_namespace(ns, {"owner": "data-platform"})
        store, real_db = primary, ns
    else:
        ns, store, real_db = "ops_scratch", ops, "scratch"
    assert (ns,) in cat.list_namespaces()
    name = f"t_{uuid.uuid4().hex[:8]}"
    table = cat.create_table(f"{ns}.{name}", schema=schema())
    table.append(rows(3))
    table.append(rows(2, start=3))
    assert sorted(cat.load_table(f"{ns}.{name}").scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 3, 4]
    with table.update_schema() as update:
        update.add_column("score", DoubleType())
    table = cat.load_table(f"{ns}.{name}")
    assert [f.name for f in table.schema().fields] == ["id", "name", "score"]

    # the member's own record names the table's current metadata, and the Thrift door reads the same rows
    with hive2_client(store.port) as c:
        assert c.get_table(real_db, name).parameters["metadata_location"] == table.metadata_location
    thrift = _thrift_catalog(rest, tmp_path).load_table(f"{ns}.{name}")
    assert thrift.metadata_location == table.metadata_location
    assert thrift.scan().to_arrow().num_rows == 5

    cat.rename_table(f"{ns}.{name}", f"{ns}.{name}_v2")
    assert (ns, f"{name}_v2") in cat.list_tables(ns) and (ns, name) not in cat.list_tables(ns)
    assert cat.load_table(f"{ns}.{name}_v2").scan().to_arrow().num_rows == 5
    cat.drop_table(f"{ns}.{name}_v2")
    assert not cat.table_exists(f"{ns}.{name}_v2")
    if where == "primary":
        cat.drop_namespace(ns)
        assert (ns,) not in cat.list_namespaces()


def _token(proc: WaggleProcess, client: str, secret: str) -> tuple[int, dict[str, Any]]:
    import requests

    answer = requests.post(f"http://127.0.0.1:{proc.rest_port}/v1/oauth/tokens", timeout=30,  # type: ignore[attr-defined]
                           data={"grant_type": "client_credentials", "client_id": client, "client_secret": secret})
    return answer.status_code, answer.json()


def test_workers_share_the_port_and_check_each_others_tokens_and_a_reload_adds_a_client(
        primary, analytics, ops, federation_data, tmp_path):
    """With two workers the kernel spreads requests over both, and a token granted by one is good on the other
    (one signing key file); an edit of the server file that adds a client reaches every worker."""
    import requests

    from tests.support.iceberg_rest import CLIENT_ID, CLIENT_SECRET

    proc = start_rest_waggle(tmp_path / "rest-workers", primary.uri, analytics.uri, ops.uri, extra_members="",
                             args=("--workers", "2"))
    try:
        code, granted = _token(proc, CLIENT_ID, CLIENT_SECRET)
        assert code == 200, granted
        headers = {"Authorization": f"Bearer {granted['access_token']}"}
        base = f"http://127.0.0.1:{proc.rest_port}/v1"  # type: ignore[attr-defined]
        for _ in range(40):  # new connections each time: both workers answer some of them
            listed = requests.get(f"{base}/namespaces", headers=headers, timeout=30)
            assert listed.status_code == 200, listed.text
            assert ["ops_scratch"] in listed.json()["namespaces"]
        assert requests.get(f"{base}/namespaces", headers={"Authorization": "Bearer x"}, timeout=30).status_code == 401

        second = tmp_path / "rest-workers" / "second.secret"
        second.write_text("another-secret-0123456789\n")
        proc.server_file.write_text(proc.server_file.read_text().replace(
            "  clients:\n", f"  clients:\n  - id: trino\n    secret-file: {second}\n"))
        deadline = time.monotonic() + 60
        while (code := _token(proc, "trino", "another-secret-0123456789")[0]) != 200:
            assert time.monotonic() < deadline, f"the added client is still refused ({code})"
            time.sleep(0.5)
        for _ in range(10):  # every worker took the edit
            assert _token(proc, "trino", "another-secret-0123456789")[0] == 200
        assert "another-secret" not in proc.log() and CLIENT_SECRET not in proc.log()
    finally:
        proc.stop()
