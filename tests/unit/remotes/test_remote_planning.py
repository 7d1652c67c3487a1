"""Remote databases as the call core asks them: pure values in, a decision out (no Runtime, no socket)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.remote_view import View, remote_view
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.hms.methods import METHODS
from waggle.hms.service import METHOD_IO
from waggle.remotes import planning
from waggle.routing.links import Link

SERVER = """\
database-resolution: PREFIXED
remote-databases:
  enabled: true
  allowed-metastores: [analytics]
"""
FEDERATION = """\
primary-meta-store: {name: p, remote-meta-store-uris: "thrift://h:1", access-control-type: READ_AND_WRITE_AND_CREATE}
federated-meta-stores:
- {name: analytics, remote-meta-store-uris: "thrift://h:2", database-prefix: an_}
"""


@pytest.fixture
def view(tmp_path: Path) -> View:
    return remote_view(tmp_path, SERVER, FEDERATION)


def _args(method: str, **fields: Any) -> Any:
    return METHOD_IO[method].args(**fields)


def test_a_create_with_link_properties_is_stored_in_a_copy_of_the_arguments(view: View) -> None:
    database = T.Database(name="west", parameters={"waggle.remote.metastore": "analytics",
                                                   "waggle.remote.database": "sales", "comment": "kept"})
    args = _args("create_database", database=database)
    step = planning.link_call("create_database", METHODS["create_database"], args, ("ann", ()), view, set())
    assert isinstance(step, planning.Store) and step.link == Link("west", "sales", "analytics")
    assert step.args is not args and step.args.database.parameters["comment"] == "kept"
    assert "waggle.remote.metastore" in step.args.database.parameters
    assert database.parameters == {"waggle.remote.metastore": "analytics", "waggle.remote.database": "sales",
                                   "comment": "kept"}  # the call's own arguments, as they came


def test_a_link_to_a_metastore_the_policy_does_not_allow_is_refused(view: View) -> None:
    args = _args("create_database", database=T.Database(name="x", parameters={"waggle.remote.metastore": "p"}))
    step = planning.link_call("create_database", METHODS["create_database"], args, None, view, set())
    assert isinstance(step, planning.Refuse) and step.metastore == "p" and "cannot link 'x'" in step.message


def test_dropping_a_link_drops_it_in_the_primary_with_the_call_as_it_came(view: View) -> None:
    args = _args("drop_database", name="EU", deleteData=True, cascade=False)
    step = planning.link_call("drop_database", METHODS["drop_database"], args, None, view, set())
    assert step == planning.Store(link=view.links["eu"])
    plain = _args("drop_database", name="sales", deleteData=True, cascade=False)
    assert planning.link_call("drop_database", METHODS["drop_database"], plain, None, view, set()) is None


def test_an_unknown_data_connector_is_learned_first_then_refused(view: View) -> None:
    database = T.Database(name="r", type="REMOTE", connector_name="Nope", remote_dbname="sales")
    args = _args("create_database", database=database)
    spec = METHODS["create_database"]
    assert planning.link_call("create_database", spec, args, None, view, set()) == \
        planning.Learn(connectors=("nope",))
    refused = planning.link_call("create_database", spec, args, None, view, {"nope"})
    assert isinstance(refused, planning.Refuse) and "no data connector 'Nope'" in refused.message


def test_a_name_never_seen_is_learned_before_planning(view: View) -> None:
    args = _args("get_database", name="fresh")
    assert planning.named_call("get_database", METHODS["get_database"], args, ["fresh"], view, set()) == \
        planning.Learn(("fresh",))


def test_a_call_on_a_remote_table_is_redirected_in_the_remote_names(view: View) -> None:
    args = _args("get_table", dbname="default", tbl_name="EU_Orders")
    step = planning.named_call("get_table", METHODS["get_table"], args, ["default"], view, set())
    assert isinstance(step, planning.Redirect) and step.member.name == "analytics"
    assert (step.args.dbname, step.args.tbl_name) == ("sales", "orders")
    assert (args.dbname, args.tbl_name) == ("default", "EU_Orders")  # unchanged
    unseen = _args("get_table", dbname="default", tbl_name="other")
    assert planning.named_call("get_table", METHODS["get_table"], unseen, ["default"], view, set()) == \
        planning.Learn(tables=(("default", "other"),))
    assert planning.named_call("get_table", METHODS["get_table"], unseen, ["default"], view,
                               {("default", "other")}) is None


def test_writes_to_a_remote_table_are_refused_while_links_are_read_only(view: View) -> None:
    args = _args("drop_table", dbname="default", name="eu_orders", deleteData=False)
    step = planning.named_call("drop_table", METHODS["drop_table"], args, ["default"], view, set())
    assert isinstance(step, planning.Refuse) and "read-only" in step.message
