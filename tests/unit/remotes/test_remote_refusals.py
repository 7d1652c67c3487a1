"""Links and remote tables as plain values: each reason a create or drop of one is refused, a REMOTE database made
through a data connector, and how a link is shown and reached. No Runtime, no socket."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.remote_view import View, remote_view
from waggle.config.model import HostPort, TunnelConfig
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.hms.methods import METHODS
from waggle.hms.service import METHOD_IO
from waggle.remotes import planning
from waggle.remotes.connectors import Connector
from waggle.routing import links
from waggle.routing.links import Link, LinkError
from waggle.routing.table_links import TableLink

SERVER = """\
database-resolution: PREFIXED
remote-databases:
  enabled: true
  allowed-metastores: [analytics]
  allowed-users: [ann]
  allowed-groups: [linkers]
  max-links: 2
"""
FEDERATION = """\
primary-meta-store: {name: p, remote-meta-store-uris: "thrift://h:1", access-control-type: READ_AND_WRITE_AND_CREATE}
federated-meta-stores:
- {name: analytics, remote-meta-store-uris: "thrift://h:2", database-prefix: an_, mapped-databases: [sales, web]}
"""
ANN = ("ann", ())


@pytest.fixture
def view(tmp_path: Path) -> View:
    return remote_view(tmp_path, SERVER, FEDERATION)


def _call(view: View, method: str, who: tuple[str, tuple[str, ...]] | None = ANN, read: set[str] | None = None,
          **fields: Any) -> planning.Remote | None:
    return planning.link_call(method, METHODS[method], METHOD_IO[method].args(**fields), who, view, read or set())


def _create(view: View, name: str, who: tuple[str, tuple[str, ...]] | None = ANN, **parameters: str) -> Any:
    return _call(view, "create_database", who, database=T.Database(name=name, parameters=parameters))


def _refusal(step: planning.Remote | None) -> str:
    assert isinstance(step, planning.Refuse), step
    assert step.metastore == "p"
    return step.message


LINK = {"waggle.remote.metastore": "analytics", "waggle.remote.database": "sales"}


# -- links: who, what, how many ----------------------------------------------------------------------------------
def test_only_allowed_users_and_groups_create_links(view: View) -> None:
    assert "user 'bob' is not in remote-databases.allowed-users" in _refusal(_create(view, "x", ("bob", ()), **LINK))
    assert "a connection without a user" in _refusal(_create(view, "x", None, **LINK))
    assert isinstance(_create(view, "x", ("bob", ("linkers",)), **LINK), planning.Store)


def test_a_link_clashing_with_a_name_already_served_is_refused(view: View) -> None:
    assert "'eu' is already a link to database 'sales' of metastore 'analytics'" in \
        _refusal(_create(view, "eu", **LINK))
    assert "carries the prefix 'an_' of metastore 'analytics'" in _refusal(_create(view, "an_x", **LINK))


def test_a_link_to_a_hidden_database_is_refused(view: View) -> None:
    hidden = {**LINK, "waggle.remote.database": "secret"}
    assert "'secret' of metastore 'analytics' is hidden by its mapped-databases" in \
        _refusal(_create(view, "x", **hidden))


def test_links_beyond_max_links_are_refused(view: View) -> None:
    full = replace(view, links={**view.links, "other": Link("other", "web", "analytics")})
    assert "the primary holds 2 links, the limit (remote-databases.max-links)" in _refusal(_create(full, "x", **LINK))


def test_malformed_link_properties_are_refused_with_the_reason(view: View) -> None:
    assert "unknown link property waggle.remote.color" in \
        _refusal(_create(view, "x", **LINK, **{"waggle.remote.color": "red"}))
    both = {**LINK, "waggle.remote.uris": "thrift://h:9"}
    assert "either waggle.remote.metastore or waggle.remote.uris, not both" in _refusal(_create(view, "x", **both))


def test_dropping_a_link_needs_an_allowed_user_and_a_catalog_name_is_sent_plain(view: View) -> None:
    assert "user 'bob'" in _refusal(_call(view, "drop_database", ("bob", ()), name="eu", deleteData=False,
                                          cascade=False))
    step = _call(view, "drop_database", name="@hive#EU", deleteData=False, cascade=False)
    assert isinstance(step, planning.Store) and step.link == view.links["eu"]
    assert step.args.name == "EU"


# -- a REMOTE database through a data connector -------------------------------------------------------------------
def test_a_remote_database_through_a_known_connector_is_stored_as_a_plain_link(view: View) -> None:
    view.registry.connectors["hms2"] = Connector("hms2", "thrift://h:2")
    database = T.Database(name="r", type="REMOTE", connector_name="HMS2", remote_dbname="web")
    step = _call(view, "create_database", database=database)
    assert isinstance(step, planning.Store)
    assert step.link == Link("r", "web", "analytics", connector="hms2")
    sent = step.args.database
    assert sent.type is None and sent.connector_name is None and sent.remote_dbname is None
    assert sent.parameters["waggle.remote.metastore"] == "analytics"
    assert database.type == "REMOTE"  # the call's own arguments, as they came


# -- remote tables --------------------------------------------------------------------------------------------------
def _table(db: str, name: str, **parameters: str) -> T.Table:
    return T.Table(dbName=db, tableName=name, parameters=parameters)


REMOTE_TABLE = {"waggle.remote.metastore": "analytics", "waggle.remote.database": "sales",
                "waggle.remote.table": "orders"}


def test_a_remote_table_is_stored_in_a_primary_database(view: View) -> None:
    step = _call(view, "create_table", tbl=_table("default", "US_Orders", **REMOTE_TABLE))
    assert step == planning.Store(table=TableLink("default", "us_orders", "orders",
                                                  Link("default.us_orders", "sales", "analytics")))
    assert _call(view, "create_table", tbl=_table("default", "plain", comment="x")) is None


def test_a_remote_table_is_refused_outside_the_primary_for_a_hidden_database_or_a_stranger(view: View) -> None:
    assert "'an_sales' is not one" in _refusal(_call(view, "create_table",
                                                    tbl=_table("an_sales", "t", **REMOTE_TABLE)))
    assert "'eu' is not one" in _refusal(_call(view, "create_table", tbl=_table("eu", "t", **REMOTE_TABLE)))
    hidden = {**REMOTE_TABLE, "waggle.remote.database": "secret"}
    assert "hidden by its mapped-databases" in _refusal(_call(view, "create_table",
                                                             tbl=_table("default", "t", **hidden)))
    assert "user 'bob'" in _refusal(_call(view, "create_table", ("bob", ()),
                                          tbl=_table("default", "t", **REMOTE_TABLE)))
    malformed = {"waggle.remote.table": "orders", "waggle.remote.database": "sales"}
    assert "a link needs waggle.remote.metastore" in _refusal(_call(view, "create_table",
                                                        tbl=_table("default", "t", **malformed)))


def test_dropping_a_remote_table_drops_its_stub_for_an_allowed_user(view: View) -> None:
    step = _call(view, "drop_table", dbname="default", name="EU_Orders", deleteData=False)
    assert step == planning.Store(table=view.tables[("default", "eu_orders")][1])
    assert "user 'bob'" in _refusal(_call(view, "drop_table", ("bob", ()), dbname="default", name="eu_orders",
                                          deleteData=False))
    assert _call(view, "drop_table", dbname="default", name="plain", deleteData=False) is None


# -- a link's own values -----------------------------------------------------------------------------------------
def test_link_properties_name_one_metastore_and_a_thrift_uri() -> None:
    with pytest.raises(LinkError, match=r"unknown link properties waggle\.remote\.a, waggle\.remote\.b"):
        links.link_of("x", {"waggle.remote.a": "1", "waggle.remote.b": "2"})
    with pytest.raises(LinkError, match=r"needs waggle\.remote\.metastore"):
        links.link_of("x", {"waggle.remote.database": "d"})
    for uri in ("http://h:1", "thrift://h", "thrift://h:1/db", "thrift://h:99999999"):
        with pytest.raises(LinkError, match="is not a thrift://host:port URI"):
            links.link_of("x", {"waggle.remote.uris": uri})
    assert links.link_of("X", {"waggle.remote.uris": "thrift://far:9083"}) == Link("x", "x", None, "thrift://far:9083")
    assert links.link_of("x", {"comment": "plain"}) is None


def test_a_link_is_stored_described_and_reached_as_it_is() -> None:
    by_uri = Link("x", "sales", uri="thrift://far:9083", connector="c")
    assert links.parameters_of(by_uri) == {"waggle.remote.database": "sales", "waggle.remote.uris": "thrift://far:9083",
                                           "waggle.remote.connector": "c"}
    assert links.description(by_uri, None) == "[waggle link to database 'sales' of the metastore at thrift://far:9083]"
    assert links.description(by_uri, "Sales.").startswith("Sales. [waggle link to ")
    member = links.uri_member("thrift://far:9083")
    assert member.name == "far:9083" and member.uris == (HostPort("far", 9083),) and not member.primary
    tunnelled = replace(member, tunnel=TunnelConfig((("ec2-user", "bastion"), ("hadoop", "emr")), ()))
    assert links.reached(tunnelled) == "thrift://far:9083 through SSH ec2-user@bastion -> hadoop@emr"


def test_a_reply_for_a_link_shows_the_remote_description_and_the_link() -> None:
    link = Link("x", "sales", "analytics", connector="c")
    member = links.uri_member("thrift://h:2")
    reply = METHOD_IO["get_database"].result(success=T.Database(name="X", description="Sales.",
                                                                 parameters={"owner": "ann"}))
    links.present_link(reply, link, member)
    db = reply.success
    assert db.description == "Sales. [waggle link to database 'sales' of metastore 'analytics']"
    assert db.parameters == {"owner": "ann", "waggle.remote.database": "sales", "waggle.remote.metastore": "analytics",
                             "waggle.remote.via": "thrift://h:2"}
    assert (db.type, db.connector_name, db.remote_dbname) == (links.REMOTE, "c", "sales")
    other = METHOD_IO["get_database"].result(success=T.Database(name="y", description="kept"))
    links.present_link(other, link)
    assert other.success.description == "kept"
