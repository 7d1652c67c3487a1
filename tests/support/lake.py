"""The member ``lake`` with copies of its tables in the session's primary (for the copies and failover tests).

``lake`` is a metastore of its own (killed, hung and restarted by the tests), seeded with a partitioned Hive table
(``lake_sales.orders`` to clients), an uncopied table (``lake_sales.nocopy``) and an Iceberg table (``lake_ice.t2``);
``waggle sync --mode copy`` copies ``orders`` and ``t2`` into the primary once per session (:func:`lake_with_copies`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from hmsclient.genthrift.hive_metastore import ttypes

from tests.support import copies as cp
from tests.support.clients import hive2_client
from tests.support.env import java_available, require
from tests.support.federation import federation_yaml
from tests.support.proxy import WaggleProcess
from tests.support.waits import wait_for

#: the server file of the waggle processes the tests start over lake
SERVER = "database-resolution: PREFIXED\ndown-member-retry: 1\ncopies-refresh-seconds: 1\nlogging:\n  level: debug\n"


@dataclass
class Lake:
    store: Any  # the member's LocalMetastore
    primary: Any
    work: Path
    suffix: str
    synced: float = 0.0  # time.time() when the copy run ended
    proxies: list[WaggleProcess] = field(default_factory=list)

    @property
    def sales_copy(self) -> str:
        return f"sales_cp_{self.suffix}"

    @property
    def ice_copy(self) -> str:
        return f"ice_cp_{self.suffix}"

    @property
    def later_copy(self) -> str:
        return f"later_cp_{self.suffix}"

    @property
    def local_db(self) -> str:
        return f"local_{self.suffix}"

    @property
    def orders_location(self) -> str:
        """The source table's location, as lake spells it."""
        return f"file://{self.store.warehouse}/{cp.SALES}.db/{cp.ORDERS}"

    def copy_root(self, db: str) -> str:
        """Where the sync put a copy database's tables: its location in the primary (file:/... path only)."""
        return f"{self.primary.warehouse}/{db}.db"

    def federation(self, **keys: Any) -> str:
        return federation_yaml(self.primary.uri, "federated-meta-stores:\n" + cp.lake_member(self.store.uri, **keys))

    def sync(self, *args: str, sync_file: str | None = None) -> tuple[int, str]:
        import subprocess
        import sys

        from tests.support.env import ROOT

        federation = self.work / "sync-federation.yml"
        federation.write_text(self.federation())
        if sync_file is not None:
            path = self.work / f"sync-{uuid.uuid4().hex[:6]}.yml"
            path.write_text(f"federation-config: {federation}\n{sync_file}")
            given = ["--config", str(path)]
        else:
            given = ["--federation-config", str(federation)]
        run = subprocess.run([sys.executable, "-m", "waggle", "sync", *given, *args], capture_output=True,
                             text=True, timeout=600, cwd=ROOT)
        return run.returncode, run.stdout + run.stderr

    def proxy(self, server: str = "", args: tuple[str, ...] = (), **keys: Any) -> WaggleProcess:
        """A waggle (PREFIXED) over the primary and ``lake`` with these member keys (``read_from_copies="prefer"``),
        ``server``: more lines of its server file, ``args``: more ``waggle serve`` arguments."""
        proc = WaggleProcess(self.work / f"waggle-{uuid.uuid4().hex[:6]}", self.federation(**keys), SERVER + server,
                             args)
        self.proxies.append(proc)
        proc.start()
        if keys.get("read_from_copies", "never") != "never":
            # its first read of the copy registry (a round every copies-refresh-seconds) comes after it listens
            wait_for(lambda: any(e.get("member") == "lake" for e in proc.events("copies.found")), timeout=10,
                     message=lambda: proc.log()[-3000:])
        return proc

    @property
    def copy_orders(self) -> str:
        """The copy of sales.orders: its directory in the primary's storage."""
        return f"{self.copy_root(self.sales_copy)}/{cp.ORDERS}"

    def copy_files(self) -> list[str]:
        """Every file under the copy of sales.orders (hidden ones too), relative to it."""
        return sorted(str(f.relative_to(self.copy_orders)) for f in Path(self.copy_orders).rglob("*")
                      if f.is_file())

    def restore_copy(self) -> None:
        """Remove what a refused write left in the copy's storage, so that later tests read the copy made."""
        import shutil

        root = Path(self.copy_orders)
        made = {f"dt={d}/data.csv" for d in cp.ORDER_ROWS}
        for name in self.copy_files():
            if name not in made:
                (root / name).unlink()
        for d in root.iterdir():
            if d.is_dir() and not any(d.iterdir()):
                shutil.rmtree(d)

    def stop_proxies(self) -> None:
        while self.proxies:
            self.proxies.pop().stop()

    # -- lake's state, as a test needs it ---------------------------------------------------------------------
    def down(self, *proxies: WaggleProcess) -> None:
        """Kill lake's metastore (if it runs) and wait until each proxy sees it down: a table without a copy
        fails at once, saying so."""
        self.store.kill()
        for proc in proxies:
            wait_for(lambda p=proc: unavailable(p), timeout=15, message=lambda p=proc: p.log()[-3000:])

    def up(self) -> None:
        """Start lake again (same directory and port) unless it runs."""
        if self.store.process is None or self.store.process.poll() is not None:
            self.store.start().wait_ready()

    def ensure_new_partition(self) -> None:
        """The partition ``dt=2024-01-03``, added at the source after the copy (never copied)."""
        with hive2_client(self.store.port) as c:
            if f"dt={cp.NEW_PARTITION}" in c.get_partition_names(cp.SALES, cp.ORDERS, -1):
                return
            cp.write_rows(f"{self.orders_location}/dt={cp.NEW_PARTITION}", cp.NEW_ROWS)
            c.add_partition(cp.order_partition(self.orders_location, cp.NEW_PARTITION))


def unavailable(proc: WaggleProcess) -> bool:
    """Whether a call of a table without a copy fails at once with the member's down message."""
    with hive2_client(proc.port, timeout=10) as c:
        try:
            c.get_table("lake_sales", cp.NOCOPY)
        except ttypes.MetaException as exc:
            return "metastore 'lake' is unavailable" in str(exc.message)
        except Exception:
            return False
    return False


def path(location: str) -> str:
    return urlsplit(location).path


def lake_with_copies(primary: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    """lake seeded and copied into the primary (``sales_cp_*.orders``, ``ice_cp_*.t2``), and a local table of the
    primary (``local_*.people``) to join with."""
    require(java_available(), "Java 17 is needed to run the local Hive metastores and Spark")
    try:
        import pyiceberg  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        require(False, f"pyspark and pyiceberg are needed: {exc}")
    from waggle.local.metastore import LocalMetastore
    from waggle.local.seed import ensure_database, ensure_table

    work = tmp_path_factory.mktemp("copies")
    store = LocalMetastore(work / "lake").start().wait_ready()
    env = Lake(store, primary, work, uuid.uuid4().hex[:6])
    try:
        cp.seed_lake(store)
        with hive2_client(primary.port) as c:
            location = f"file://{primary.warehouse}/{env.local_db}.db"
            ensure_database(c, env.local_db, location)
            ensure_table(c, env.local_db, "people", f"{location}/people", [("id", "int"), ("city", "string")],
                         rows=["1,oslo", "3,rome"])
        code, out = env.sync(sync_file=(
            "source: lake\nmaster: local[2]\njobs:\n"
            f"- tables: {cp.SALES}.{cp.ORDERS}\n  mode: copy\n  target-database: {env.sales_copy}\n"
            f"- tables: {cp.ICE}.{cp.T2}\n  mode: copy\n  target-database: {env.ice_copy}\n"))
        assert code == 0, out
        env.synced = time.time()
        yield env
    finally:
        env.stop_proxies()
        store.stop()
        with hive2_client(primary.port) as c:
            for db in (env.sales_copy, env.ice_copy, env.later_copy, env.local_db):
                try:
                    c.drop_database(db, True, True)
                except Exception:
                    pass
