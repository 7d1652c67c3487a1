"""The sync's connection to one metastore: paged reads, and batched writes that each wait for their turn under
the run's write-rate limit on that metastore (:class:`~waggle.sync.throttle.WriteThrottle`), which counts them.

Plain blocking Thrift (the sync does not use gevent), with Thrift's C codec, over the connection every tool
uses (:mod:`waggle.upstream.blocking`): a member is reached as the proxy reaches it, through its SSH tunnel (run
in this process), with TLS and Kerberos.

Every call waits at most a given time for its reply: a read of one object or one page of events (the method
table's ``reads`` family) the connection's ``timeout``, and a listing, a read of many partitions or a write (up to
500 partitions added, say) its ``bulk_timeout``. A call that gets no reply in time, or whose connection breaks,
raises :class:`~waggle.upstream.blocking.MetastoreUnavailable` naming the metastore, the call and the time
waited, and closes the connection: a late reply is never read as the next call's, and the connection says it is
:attr:`Metastore.broken` from then on.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from queue import Empty, Queue
from typing import Any

from thrift.transport.TTransport import TTransportException

from waggle.config.kinds import Family
from waggle.config.model import MetastoreConfig
from waggle.hms.gen.hive_metastore.ttypes import (
    DropPartitionsRequest,
    NoSuchObjectException,
    NotificationEventRequest,
    Partition,
    RequestPartsSpec,
    Table,
)
from waggle.hms.methods import METHODS
from waggle.sync.execution import WriteBudget
from waggle.upstream.blocking import MetastoreClient, MetastoreUnavailable, clients
from waggle.upstream.handshake import UpstreamCredentials

#: Partitions per read (``get_partitions_by_names``) and per write (``add_partitions``/``alter_partitions``).
PAGE = 500
#: ``waggle sync --follow`` and ``--status``: the longest wait for the reply to a read of one object or one page of
#: events, and to a bulk call (:func:`is_bulk`); neither more than the member's ``read-timeout`` (:func:`call_timeout`)
FOLLOW_CALL_SECONDS = 30.0
FOLLOW_BULK_SECONDS = 120.0


def call_timeout(member: MetastoreConfig, seconds: float) -> float:
    """How long one call to ``member`` waits for its reply when the caller allows ``seconds``: never more than
    the member's own ``read-timeout``, plus its ``latency`` (as the proxy adds it)."""
    return min(seconds, member.read_timeout_ms / 1000) + member.latency_ms / 1000


def is_bulk(method: str) -> bool:
    """Whether a call may take long by its nature: a listing, a read of many partitions or a write (the method
    table's families other than ``reads``; a method it does not know counts as one)."""
    spec = METHODS.get(method)
    return spec is None or spec.family is not Family.READS


class BoundedClient:
    """Thrift's client of one connection whose calls wait at most ``timeout`` for their reply, or
    ``bulk_timeout`` for a bulk one (:func:`is_bulk`); a call that gets none in time, or whose connection
    breaks, raises ``MetastoreUnavailable`` naming the metastore and the call, and closes the connection
    (:attr:`broken` says why from then on, and every later call fails at once)."""

    def __init__(self, opened: MetastoreClient, timeout: float, bulk_timeout: float | None = None) -> None:
        self._opened = opened
        self.timeout = timeout
        self.bulk_timeout = timeout if bulk_timeout is None else bulk_timeout
        self._set = timeout  # the socket's timeout now
        self.broken: str | None = None

    @property
    def member(self) -> str:
        return self._opened.member.name

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._opened.client, name)
        if not callable(attr):
            return attr
        seconds = self.bulk_timeout if is_bulk(name) else self.timeout

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.broken is not None:
                raise MetastoreUnavailable(self.member, f"connection closed after: {self.broken}")
            try:
                if seconds != self._set:
                    self._opened.sock.settimeout(seconds)
                    self._set = seconds
                return attr(*args, **kwargs)
            except TTransportException as exc:
                timed_out = exc.type == TTransportException.TIMED_OUT
                self._break(f"did not answer {name} within {seconds:g}s" if timed_out
                            else f"failed during {name}: {exc.message or exc}")
            except (EOFError, OSError) as exc:
                self._break(f"failed during {name}: {type(exc).__name__}: {exc}")
            raise MetastoreUnavailable(self.member, str(self.broken)) from None

        return call

    def _break(self, why: str) -> None:
        self.broken = why
        with contextlib.suppress(Exception):
            self._opened.close()


class Metastore:
    """One open connection. Each write call waits for ``throttle`` first (the target's; a source has none)."""

    def __init__(self, client: Any, throttle: WriteBudget | None = None) -> None:
        self.client = client
        self.throttle = throttle

    @property
    def broken(self) -> str | None:
        """Why the connection was closed after a call failed on it (a timeout, a broken connection); None while
        it is usable."""
        return self.client.broken if isinstance(self.client, BoundedClient) else None

    def check(self) -> None:
        """Raise ``MetastoreUnavailable`` when the connection is :attr:`broken`."""
        if isinstance(self.client, BoundedClient) and self.client.broken is not None:
            raise MetastoreUnavailable(self.client.member, self.client.broken)

    def _turn(self) -> None:
        """Before each write call: wait for its turn under the write-rate limit."""
        if self.throttle is not None:
            self.throttle.acquire()

    # -- reads --------------------------------------------------------------------------------------------
    def table(self, db: str, table: str) -> Table | None:
        try:
            return self.client.get_table(db, table)
        except NoSuchObjectException:
            return None

    def has_database(self, db: str) -> bool:
        return self.database_location(db) is not None

    def database_location(self, db: str) -> str | None:
        """The database's location; None when it does not exist."""
        try:
            return str(self.client.get_database(db).locationUri or "")
        except NoSuchObjectException:
            return None

    def databases(self) -> list[str]:
        return list(self.client.get_all_databases())

    def tables(self, db: str) -> list[str]:
        return list(self.client.get_all_tables(db))

    def partition_names(self, db: str, table: str) -> list[str]:
        return list(self.client.get_partition_names(db, table, -1))

    def filtered_partitions(self, db: str, table: str, expr: str) -> list[Partition]:
        """The partitions that match a partition filter (the metastore evaluates it)."""
        return list(self.client.get_partitions_by_filter(db, table, expr, -1))

    def partitions_by_names(self, db: str, table: str, names: list[str]) -> list[Partition]:
        """The named partitions that exist, ``PAGE`` names a call."""
        out: list[Partition] = []
        for i in range(0, len(names), PAGE):
            out += self.client.get_partitions_by_names(db, table, names[i:i + PAGE])
        return out

    def current_event_id(self) -> int:
        return int(self.client.get_current_notificationEventId().eventId or 0)

    def events_for(self, db: str, table: str, after: int, up_to: int) -> int:
        """How many notification events after ``after`` (up to ``up_to``) concern ``db.table``."""
        count, last = 0, after
        while last < up_to:
            response = self.client.get_next_notification(NotificationEventRequest(lastEvent=last, maxEvents=1000))
            events = response.events or []
            if not events:
                break
            for e in events:
                if (e.dbName or "").lower() == db.lower() and (e.tableName or "").lower() == table.lower():
                    count += 1
            last = max(e.eventId for e in events)
        return count

    # -- writes: one turn of the throttle per call ------------------------------------------------------------
    def create_database(self, database: Any) -> None:
        self._turn()
        self.client.create_database(database)

    def create_table(self, table: Table) -> None:
        self._turn()
        self.client.create_table(table)

    def alter_table(self, db: str, name: str, table: Table) -> None:
        self._turn()
        self.client.alter_table(db, name, table)

    def drop_table(self, db: str, name: str) -> None:
        """Drop the table's metadata (never its data: the sync's tables are external)."""
        self._turn()
        self.client.drop_table(db, name, False)

    def add_partitions(self, partitions: list[Partition]) -> None:
        for i in range(0, len(partitions), PAGE):
            self._turn()
            self.client.add_partitions(partitions[i:i + PAGE])

    def alter_partitions(self, db: str, table: str, partitions: list[Partition]) -> None:
        for i in range(0, len(partitions), PAGE):
            self._turn()
            self.client.alter_partitions(db, table, partitions[i:i + PAGE])

    def drop_partitions(self, db: str, table: str, names: list[str]) -> None:
        """Drop the named partitions (metadata only), ``PAGE`` a call; names already gone are skipped."""
        for i in range(0, len(names), PAGE):
            self._turn()
            self.client.drop_partitions_req(DropPartitionsRequest(
                dbName=db, tblName=table, parts=RequestPartsSpec(names=names[i:i + PAGE]), deleteData=False,
                ifExists=True, needResult=False))

    def copy_statistics(self, source: Metastore, src_db: str, src_table: str, table: Table,
                        partition_names: list[str]) -> int:
        """Carry column statistics of the table and of the named partitions over; returns how many objects
        had statistics. Metastores without the calls are skipped quietly."""
        from waggle.hms.gen.hive_metastore.ttypes import (
            ColumnStatistics,
            ColumnStatisticsDesc,
            PartitionsStatsRequest,
            SetPartitionsStatsRequest,
            TableStatsRequest,
        )

        cols = [c.name for c in (table.sd.cols if table.sd else None) or []]
        if not cols:
            return 0
        copied = 0
        with contextlib.suppress(Exception):
            got = source.client.get_table_statistics_req(TableStatsRequest(src_db, src_table, cols))
            if got.tableStats:
                desc = ColumnStatisticsDesc(isTblLevel=True, dbName=table.dbName, tableName=table.tableName)
                self._turn()
                self.client.update_table_column_statistics(ColumnStatistics(desc, got.tableStats))
                copied += 1
        for i in range(0, len(partition_names), PAGE):
            names = partition_names[i:i + PAGE]
            with contextlib.suppress(Exception):
                got = source.client.get_partitions_statistics_req(
                    PartitionsStatsRequest(src_db, src_table, cols, names))
                stats = [ColumnStatistics(ColumnStatisticsDesc(isTblLevel=False, dbName=table.dbName,
                                                               tableName=table.tableName, partName=name), objs)
                         for name, objs in (got.partStats or {}).items() if objs]
                if stats:
                    self._turn()
                    self.client.set_aggr_stats_for(SetPartitionsStatsRequest(colStats=stats))
                    copied += len(stats)
        return copied


def read_pages(readers: list[Metastore], db: str, table: str, names: list[str]) -> Iterator[list[Partition]]:
    """The named partitions, a page at a time and in order, so that 100,000 of them never sit in memory at
    once. Each connection reads its share of the pages in a background thread, up to two pages ahead, while the
    caller works on the current one."""
    pages = [names[i:i + PAGE] for i in range(0, len(names), PAGE)]
    n = len(readers)
    queues: list[Queue[tuple[bool, Any]]] = [Queue(maxsize=2) for _ in readers]
    stop = threading.Event()

    def produce(k: int) -> None:
        try:
            for page in pages[k::n]:
                if stop.is_set():
                    return
                queues[k].put((True, list(readers[k].client.get_partitions_by_names(db, table, page))))
        except BaseException as exc:  # handed to the consumer
            queues[k].put((False, exc))

    threads = [threading.Thread(target=produce, args=(k,), name=f"read-{k}", daemon=True) for k in range(n)]
    for thread in threads:
        thread.start()
    try:
        for i in range(len(pages)):
            ok, item = queues[i % n].get()
            if not ok:
                raise item
            yield item
    finally:
        stop.set()
        for thread, queue in zip(threads, queues, strict=True):
            while thread.is_alive():  # let a blocked producer finish, so its connection is free again
                try:
                    queue.get(timeout=0.1)
                except Empty:
                    pass
                thread.join(0.01)


class WritePool:
    """Writes run by background threads, one per connection, while the caller prepares the next batch.
    ``submit(fn)`` queues ``fn(metastore)``; the first error is raised by the next ``submit`` or by ``close``."""

    def __init__(self, connections: list[Metastore]) -> None:
        self._queue: Queue[Any] = Queue(maxsize=2 * len(connections))
        self._errors: list[BaseException] = []
        self._threads = [threading.Thread(target=self._work, args=(m,), name=f"write-{i}", daemon=True)
                         for i, m in enumerate(connections)]
        for thread in self._threads:
            thread.start()

    def _work(self, metastore: Metastore) -> None:
        while (job := self._queue.get()) is not None:
            if self._errors:
                continue  # drain without writing more after a failure
            try:
                job(metastore)
            except BaseException as exc:
                self._errors.append(exc)

    def submit(self, job: Any) -> None:
        if self._errors:
            raise self._errors[0]
        self._queue.put(job)

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()
        if self._errors:
            raise self._errors[0]

    def __enter__(self) -> WritePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def connections(member: MetastoreConfig, count: int, credentials: UpstreamCredentials | None = None,
                timeout: float = 600.0, throttle: WriteBudget | None = None, bulk_timeout: float | None = None
                ) -> Iterator[list[Metastore]]:
    """``count`` connections to a federation member, as the proxy reaches it (its SSH tunnel, TLS, Kerberos as
    ``credentials``: see :mod:`waggle.upstream.blocking`); each call waits at most ``timeout`` for its reply, or
    ``bulk_timeout`` (``timeout`` when None) for a listing, a read of many partitions or a write; each write
    first waits for ``throttle``."""
    with clients(member, count, credentials, timeout) as opened:
        yield [Metastore(BoundedClient(c, timeout, bulk_timeout), throttle) for c in opened]



def follow_connections(member: MetastoreConfig, count: int, credentials: UpstreamCredentials | None = None,
                       throttle: WriteBudget | None = None, call: float = FOLLOW_CALL_SECONDS,
                       bulk: float = FOLLOW_BULK_SECONDS) -> AbstractContextManager[list[Metastore]]:
    """:func:`connections` as ``waggle sync --follow`` and ``--status`` open them: a call waits at most ``call``
    seconds for its reply, a bulk one ``bulk``, each bounded by the member's ``read-timeout``
    (:func:`call_timeout`): a hung metastore fails the batch within them."""
    return connections(member, count, credentials, call_timeout(member, call), throttle, call_timeout(member, bulk))
