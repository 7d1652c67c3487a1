"""``waggle sync`` of Iceberg tables between two real metastores: mirrors that follow the source's commits, and
copies that stand alone once the source is gone. The source tables are written by pyiceberg's HiveCatalog."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from test_sync import SyncEnv, table_report

from tests.support.env import java_available, require
from tests.support.federation import federation_yaml
from tests.support.hive_stubs import HiveStubMetastore
from waggle.local.client import hms_client
from waggle.local.seed import ensure_database

pytestmark = pytest.mark.integration
SRC = "icesrc"


def _catalog(store: Any, name: str = "cat") -> Any:
    try:
        from pyiceberg.catalog import load_catalog
    except ImportError:
        require(False, "pyiceberg is not installed (pip install 'pyiceberg[hive,pyarrow,pyiceberg-core]')")
    return load_catalog(name, type="hive", uri=store.uri, warehouse=f"file://{store.warehouse}")


def _rows(n: int, start: int = 0) -> Any:
    import pyarrow as pa

    return pa.table({"id": pa.array(range(start, start + n), pa.int64()),
                     "day": pa.array([f"2026-11-{1 + i % 3:02d}" for i in range(start, start + n)], pa.string())})


def _create(store: Any, name: str, batches: int = 2) -> Any:
    """A partitioned Iceberg table in the source, with ``batches`` appends of 10 rows."""
    import pyarrow as pa
    from pyiceberg.transforms import IdentityTransform

    cat = _catalog(store)
    schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
    table = cat.create_table(f"{SRC}.{name}", schema=schema)
    with table.update_spec() as spec:
        spec.add_field("day", IdentityTransform(), "day")
    table = cat.load_table(f"{SRC}.{name}")
    for k in range(batches):
        table.append(_rows(10, start=10 * k))
    return cat.load_table(f"{SRC}.{name}")


def _ids(table: Any) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


@pytest.fixture(scope="module")
def env(primary: Any, analytics: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyncEnv]:
    work = tmp_path_factory.mktemp("sync-iceberg")
    with hms_client("127.0.0.1", analytics.port) as c:
        ensure_database(c, SRC, f"file://{analytics.warehouse}/{SRC}.db")
    recorder = HiveStubMetastore("127.0.0.1", primary.port, version="2.3.10").start()
    federation = work / "federation.yml"
    federation.write_text(federation_yaml(recorder.uri, "federated-meta-stores:\n- name: analytics\n"
                                                        f"  remote-meta-store-uris: {analytics.uri}\n"))
    yield SyncEnv(work, federation, recorder, analytics, primary, "")
    recorder.stop()


def _metadata_location(store: Any, db: str, table: str) -> str:
    with hms_client("127.0.0.1", store.port) as c:
        return str(c.get_table(db, table).parameters["metadata_location"])


def test_a_mirror_follows_the_sources_commits_and_a_rerun_without_one_writes_nothing(env: SyncEnv) -> None:
    source = _create(env.analytics, "mirrored")
    args = ("--source", "analytics", "--tables", f"{SRC}.mirrored", "--target-database", "ice_m")
    code, report, out = env.sync(*args)
    assert code == 0, out
    assert table_report(report, "ice_m.mirrored")["table"] == "created"
    assert _metadata_location(env.primary, "ice_m", "mirrored") == source.metadata_location
    assert _ids(_catalog(env.primary).load_table("ice_m.mirrored")) == list(range(20))

    source.append(_rows(5, start=100))
    source = _catalog(env.analytics).load_table(f"{SRC}.mirrored")
    code, report, out = env.sync(*args)
    assert code == 0 and table_report(report, "ice_m.mirrored")["table"] == "updated", out
    assert _metadata_location(env.primary, "ice_m", "mirrored") == source.metadata_location
    assert len(_ids(_catalog(env.primary).load_table("ice_m.mirrored"))) == 25

    env.recorder.clear()
    code, report, out = env.sync(*args)
    assert code == 0 and table_report(report, "ice_m.mirrored")["table"] == "unchanged", out
    assert env.writes() == []


def _table_files(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*") if p.is_file()}


def test_a_copy_stands_alone_reruns_copy_only_new_files_and_bad_tables_fail_alone(env: SyncEnv, tmp_path: Path
                                                                                   ) -> None:
    require(java_available(), "Java 17 is needed for Spark")
    source = _create(env.analytics, "copied")
    broken = _create(env.analytics, "broken", batches=1)
    Path(urlsplit(broken.metadata_location).path).unlink()  # its current metadata file is gone
    with hms_client("127.0.0.1", env.analytics.port) as c:
        delta = c.get_table(SRC, "copied")
        delta.tableName = "deltaish"
        delta.parameters = {"spark.sql.sources.provider": "delta", "EXTERNAL": "TRUE"}
        delta.sd.location = f"file://{env.analytics.warehouse}/{SRC}.db/deltaish"
        c.create_table(delta)
    root = tmp_path / "copies"
    args = ("--source", "analytics", "--tables", f"{SRC}.(copied|broken|deltaish)", "--target-database",
            "ice_c", "--mode", "copy", "--location-root", f"file://{root}", "--master", "local[1]")
    code, report, out = env.sync(*args)
    assert code == 2, out  # some tables failed, the others ran
    copied = table_report(report, "ice_c.copied")
    assert (copied["status"], copied["table"]) == ("ok", "created"), copied
    assert copied["files"] > 0 and copied["bytes"] > 0
    failed = table_report(report, "ice_c.broken")
    assert failed["status"] == "failed" and broken.metadata_location.split("/")[-1] in failed["error"], failed
    assert "does not exist" in failed["error"]
    refused = table_report(report, "ice_c.deltaish")
    assert refused["status"] == "failed" and "Delta Lake" in refused["error"] and "deltaish" in refused["error"]
    with hms_client("127.0.0.1", env.primary.port) as c:
        assert set(c.get_all_tables("ice_c")) == {"copied"}  # nothing written for the failed ones
    target = _metadata_location(env.primary, "ice_c", "copied")
    assert urlsplit(target).path.startswith(f"{root}/copied/metadata/")

    # a rerun after one source commit copies only what it added; a rerun after that writes nothing
    before = _table_files(root)
    source.append(_rows(5, start=100))
    code, report, out = env.sync("--source", "analytics", "--tables", f"{SRC}.copied", "--target-database",
                                 "ice_c", "--mode", "copy", "--location-root", f"file://{root}", "--master",
                                 "local[1]")
    again = table_report(report, "ice_c.copied")
    assert code == 0 and again["table"] == "updated", out
    added = _table_files(root) - before
    assert len(added) == again["files"] <= 3 + 3 and not any("broken" in f for f in added), added
    env.recorder.clear()
    code, report, out = env.sync("--source", "analytics", "--tables", f"{SRC}.copied", "--target-database",
                                 "ice_c", "--mode", "copy", "--location-root", f"file://{root}")
    assert code == 0 and table_report(report, "ice_c.copied")["table"] == "unchanged", out
    assert env.writes() == []

    # the copy reads correctly once the source's files are gone
    expected = _ids(_catalog(env.analytics).load_table(f"{SRC}.copied"))
    shutil.rmtree(urlsplit(source.location()).path)
    copy = _catalog(env.primary).load_table("ice_c.copied")
    assert _ids(copy) == expected and len(expected) == 25
    assert {urlsplit(f).path.startswith(str(root)) for f in copy.inspect.files().column("file_path").to_pylist()} \
        == {True}


def test_a_copy_of_a_table_spark_wrote_with_position_deletes_stands_alone(env: SyncEnv, tmp_path: Path) -> None:
    """Spark with Iceberg's runtime writes the source (merge-on-read: deletes and updates leave position-delete
    files naming data files by absolute path); the copy reads the same rows once the source is deleted."""
    from tests.support import iceberg_spark

    require(java_available(), "Java 17 is needed for Spark")
    require(iceberg_spark.available(), "Spark with Iceberg's runtime is not prepared (scripts/iceberg_spark.sh)")
    t = f"lake.{SRC}.sparked"
    done = iceberg_spark.run_steps(env.analytics.uri, f"file://{env.analytics.warehouse}", [
        ("create", f"CREATE TABLE {t} (id bigint, kind string) USING iceberg PARTITIONED BY (kind) TBLPROPERTIES "
                   "('format-version'='2', 'write.delete.mode'='merge-on-read', "
                   "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')"),
        ("insert", f"INSERT INTO {t} VALUES (1, 'a'), (2, 'a'), (3, 'b'), (4, 'b'), (5, 'b')"),
        ("delete", f"DELETE FROM {t} WHERE id = 2"),
        ("update", f"UPDATE {t} SET id = 40 WHERE id = 4"),
        ("deletes", f"SELECT count(*) FROM {t}.delete_files"),
        ("select", f"SELECT id FROM {t} ORDER BY id"),
    ])
    assert all("error" not in step for step in done.values()), done
    assert int(done["deletes"]["rows"][0][0]) >= 2  # position-delete files, not rewritten data files
    root = tmp_path / "copies"
    code, _, out = env.sync("--source", "analytics", "--tables", f"{SRC}.sparked", "--target-database",
                                 "ice_s", "--mode", "copy", "--location-root", f"file://{root}", "--master",
                                 "local[1]")
    assert code == 0, out
    source = _catalog(env.analytics).load_table(f"{SRC}.sparked")
    shutil.rmtree(urlsplit(source.location()).path)
    copy = _catalog(env.primary).load_table("ice_s.sparked")
    assert _ids(copy) == [int(r[0]) for r in done["select"]["rows"]] == [1, 3, 5, 40]
    files = copy.inspect.files()  # data and delete files
    assert set(files.column("content").to_pylist()) >= {0, 1}
    assert {urlsplit(f).path.startswith(str(root)) for f in files.column("file_path").to_pylist()} == {True}
