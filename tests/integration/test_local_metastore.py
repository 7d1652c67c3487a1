"""The local metastores behave as production ones: no ``hive.in.test``, working locks, their own warehouse."""

from __future__ import annotations

import pytest
from hmsclient.genthrift.hive_metastore import ttypes as t

from tests.support.clients import hive2_client

pytestmark = pytest.mark.integration


def test_local_metastores_serve_without_the_test_flag_and_grant_iceberg_style_locks(metastores):
    for store in metastores:
        assert "hive.in.test" not in (store.workdir / "conf" / "hive-site.xml").read_text()
        with hive2_client(store.port) as c:
            # the database each instance was copied from names the template's warehouse; each points at its own
            assert c.get_database("default").locationUri.rstrip("/") == f"file:{store.warehouse}"
            # what Iceberg's clients send: an EXCLUSIVE table lock with no operation type
            component = t.LockComponent(type=t.LockType.EXCLUSIVE, level=t.LockLevel.TABLE, dbname="default",
                                        tablename="iceberg_like")
            lock = c.lock(t.LockRequest(component=[component], user="alice", hostname="client"))
            assert lock.state == t.LockState.ACQUIRED
            assert c.check_lock(t.CheckLockRequest(lockid=lock.lockid)).state == t.LockState.ACQUIRED
            c.unlock(t.UnlockRequest(lockid=lock.lockid))
            assert not c.show_locks(t.ShowLocksRequest()).locks
