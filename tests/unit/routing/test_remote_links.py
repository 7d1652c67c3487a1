"""Links (remote databases) as pure values: their properties, the policy, and the map that serves them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from waggle.config.loader import ConfigError, load
from waggle.config.model import DatabaseResolution, RemotePolicy
from waggle.routing.databases import LinkedMap, PrefixedMap
from waggle.routing.federation import Naming
from waggle.routing.links import Link, LinkError, creator_refusal, description, link_of, policy_refusal

FEDERATION = """\
primary-meta-store: {name: p, remote-meta-store-uris: "thrift://h:1"}
federated-meta-stores:
- {name: analytics, remote-meta-store-uris: "thrift://h:2"}
- {name: ops, remote-meta-store-uris: "thrift://h:3"}
"""


def config(tmp_path: Path, server: str = "") -> object:
    (tmp_path / "s.yml").write_text(server)
    (tmp_path / "f.yml").write_text(FEDERATION)
    return load(str(tmp_path / "s.yml"), str(tmp_path / "f.yml"))


def test_properties_make_a_link_or_say_why_not():
    assert link_of("EU_Sales", {"waggle.remote.metastore": "analytics"}) == Link("eu_sales", "eu_sales", "analytics")
    assert link_of("x", {"waggle.remote.uris": "thrift://h:9083", "waggle.remote.database": "Sales"}) == \
        Link("x", "sales", None, "thrift://h:9083")
    assert link_of("x", {"comment": "plain"}) is None and link_of("x", None) is None
    for props, why in (({"waggle.remote.database": "s"}, "needs waggle.remote.metastore"),
                       ({"waggle.remote.uris": "http://h:1"}, "not a thrift://host:port URI"),
                       ({"waggle.remote.uris": "thrift://h"}, "not a thrift://host:port URI")):
        with pytest.raises(LinkError, match=why):
            link_of("x", props)


def test_the_policy_names_the_rule_that_refuses(tmp_path):
    fed = config(tmp_path).federation  # type: ignore[attr-defined]
    link = Link("x", "sales", "analytics")
    assert "remote-databases.enabled is false" in (policy_refusal(link, RemotePolicy(), fed) or "")
    on = RemotePolicy(enabled=True, allowed_metastores=("ops",))
    assert "not in remote-databases.allowed-metastores" in (policy_refusal(link, on, fed) or "")
    assert policy_refusal(link, RemotePolicy(enabled=True, allowed_metastores=("*",)), fed) is None
    uri = Link("x", "sales", None, "thrift://meta.example.com:9083")
    assert "matches no pattern" in (policy_refusal(uri, on, fed) or "")
    allowed = RemotePolicy(enabled=True, allowed_uris=(re.compile(r"thrift://meta\.example\.com:\d+", re.I),))
    assert policy_refusal(uri, allowed, fed) is None
    strict = RemotePolicy(enabled=True, allowed_users=("etl",), allowed_groups=("data",))
    assert creator_refusal(strict, "etl", ()) is None and creator_refusal(strict, "bob", ("data",)) is None
    assert "user 'bob' is not in remote-databases.allowed-users" in (creator_refusal(strict, "bob", ()) or "")
    assert "without a user" in (creator_refusal(strict, "", ()) or "")


def test_a_linked_name_resolves_to_the_remote_and_replies_answer_in_it(tmp_path):
    fed = config(tmp_path).federation  # type: ignore[attr-defined]
    analytics = fed.member("analytics")
    linked = LinkedMap(PrefixedMap(fed), {"eu_sales": (analytics, Link("eu_sales", "sales", "analytics"))})
    target = linked.resolve("EU_SALES")
    assert target is not None and (target.member.name, target.db, target.link is not None) == (
        "analytics", "sales", True)
    assert linked.client_names(analytics, "sales") == ("analytics_sales", "eu_sales")
    assert linked.resolve("analytics_web") is not None and linked.resolve("default") is not None
    naming = Naming(analytics, linked, DatabaseResolution.PREFIXED)
    assert naming.to_member("eu_sales") == "sales" and not naming.identity
    assert naming.to_client("sales", {"sales": "eu_sales"}) == "eu_sales"
    assert description(Link("eu_sales", "sales", "analytics"), "Sales of the EU") == \
        "Sales of the EU [waggle link to database 'sales' of metastore 'analytics']"


def test_the_policy_is_read_from_the_server_file_and_checked_against_the_federation(tmp_path):
    cfg = config(tmp_path, "remote-databases:\n  enabled: true\n  allowed-metastores: analytics, ops\n"
                           "  allowed-uris: ['thrift://meta[.]example[.]com:9083']\n  allowed-users: [etl]\n"
                           "  access: read_and_write\n  max-links: 5\n")
    policy = cfg.server.remotes  # type: ignore[attr-defined]
    assert policy.enabled and policy.allowed_metastores == ("analytics", "ops") and not policy.read_only
    assert policy.allowed_users == ("etl",) and policy.max_links == 5 and len(policy.allowed_uris) == 1
    with pytest.raises(ConfigError, match=r"key 'remote-databases.allowed-metastores': invalid value 'nowhere': no "
                                          "federated metastore of that name"):
        config(tmp_path, "remote-databases:\n  allowed-metastores: [nowhere]\n")
    with pytest.raises(ConfigError, match=r"key 'remote-databases.access': invalid value 'ALL'"):
        config(tmp_path, "remote-databases:\n  access: ALL\n")


def test_a_remote_table_is_named_by_its_properties_and_replies_take_the_local_names():
    from waggle.call.finish import local_names
    from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
    from waggle.hms.gen.hive_metastore import ttypes as h
    from waggle.routing.table_links import table_link_of

    table = table_link_of("Default", "EU_Daily", {"waggle.remote.metastore": "analytics",
                                                  "waggle.remote.database": "sales", "waggle.remote.table": "daily"})
    assert table is not None and (table.db, table.name, table.table, table.link.database) == (
        "default", "eu_daily", "daily", "sales")
    assert table.describe() == "table 'sales.daily' of metastore 'analytics'"
    assert table_link_of("d", "t", {"waggle.remote.metastore": "analytics"}) is None  # a plain table
    with pytest.raises(LinkError):
        table_link_of("d", "t", {"waggle.remote.table": "x"})
    result = ThriftHiveMetastore.get_partitions_result(success=[
        h.Partition(dbName="sales", tableName="daily", values=["1"]),
        h.Partition(dbName="sales", tableName="daily", values=["2"])])
    local_names(result, table)
    assert {(p.dbName, p.tableName) for p in result.success} == {("default", "eu_daily")}
