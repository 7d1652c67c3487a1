"""Errors waggle writes itself, as real clients of each Hive release read them: the table of declared exceptions
re-derived from the Hive 2.3.10 jar, and a member that is down answered through a real waggle."""

from __future__ import annotations

import pytest
from thrift.Thrift import TApplicationException

from tests.support.clients import hive2_client, release_client
from tests.support.declared import deriver
from tests.support.env import ROOT, java_available, require
from tests.support.federation import prefixed
from tests.support.proxy import WaggleProcess
from waggle.local.jvm import free_port

pytestmark = pytest.mark.integration


def test_the_committed_table_is_what_the_jar_and_the_generated_code_declare() -> None:
    """2.3 from hive-metastore-2.3.10.jar's ThriftHiveMetastore$<method>_result classes (Java reads their Thrift
    metadata), 3.1 from hive-metastore-client's generated Python, 4.x from waggle's IDL."""
    require(java_available(), "Java 17 is needed to read the Hive 2.3.10 jar")
    d = deriver()
    assert d.render(d.derive()) == (ROOT / "waggle" / "hms" / "declared.py").read_text(), \
        "run .venv/bin/python scripts/declared_exceptions.py --write"


def test_a_member_that_is_down_is_a_meta_exception_naming_it_for_every_client_release(primary, tmp_path) -> None:
    dead = free_port()
    proxy = WaggleProcess(tmp_path, prefixed(primary.uri, ("gone", f"thrift://127.0.0.1:{dead}", "gone_")),
                          "database-resolution: PREFIXED\n").start()
    try:
        # hmsclient (Hive 2 IDL), one connection, as Spark's Hive 2.3 client: the table first, then its partitions
        from hmsclient.genthrift.hive_metastore import ttypes as hive_2

        with hive2_client(proxy.port) as c:
            with pytest.raises(hive_2.MetaException, match="metastore 'gone'"):
                c.get_table("gone_db", "t")
            with pytest.raises(hive_2.MetaException, match="metastore 'gone'"):
                c.get_partition_names("gone_db", "t", -1)  # was: "get_partition_names failed: unknown result"
            with pytest.raises(hive_2.MetaException, match="metastore 'gone'"):
                c.get_partitions_by_names("gone_db", "t", ["p=1"])
        # Hive 3.1's generated client, catalog in the name, as HiveMetaStoreClient 3.1 sends it
        with release_client("3.1", proxy.port) as (c, hive_31):
            for _ in range(2):
                with pytest.raises(hive_31.MetaException, match="metastore 'gone'"):  # never NoSuchObject
                    c.get_partition_names("@hive#gone_db", "t", -1)
        # waggle's 4.x client on a fresh connection whose first call it is (Trino's shape)
        with release_client("4.x", proxy.port) as (c, hive_4), \
                pytest.raises(hive_4.MetaException, match="metastore 'gone'"):
            c.get_partition_names("gone_db", "t", -1)
        # Hive 3.1 declares no exception for get_table_objects_by_name: the message travels as an application error
        with release_client("3.1", proxy.port) as (c, _), pytest.raises(TApplicationException, match="'gone'"):
            c.get_table_objects_by_name("@hive#gone_db", ["t"])
    finally:
        proxy.stop()


@pytest.mark.spark
def test_sparks_hive_2_client_names_a_database_before_it_lists_partitions_on_one_connection(spark, waggle) -> None:
    """The premise of the Hive 2 rule (waggle/hms/client_release.py), seen with Spark's built-in Hive 2.3.10 client
    (Spark's HiveClientImpl over HiveMetaStoreClient 2.3): SHOW PARTITIONS lists partition names on a connection
    that named a database without a catalog in an earlier call, and never a catalog."""
    spark.sql("SHOW PARTITIONS analytics_sales.daily").collect()
    calls = waggle.events("call")
    listed = [i for i, c in enumerate(calls) if c.get("method") == "get_partition_names"]
    assert listed, "Spark did not call get_partition_names"
    conn = calls[listed[-1]]["conn"]
    earlier = [c for c in calls[: listed[-1]] if c.get("conn") == conn]
    assert any(c.get("db") for c in earlier), earlier
    assert not any(str(c.get("db") or "").startswith("@") for c in [*earlier, calls[listed[-1]]])
