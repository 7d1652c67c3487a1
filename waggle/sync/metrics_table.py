"""``waggle_sys.replication_metrics``: one row per execution of a policy, in a real Hive table of the primary, so
``SELECT * FROM waggle_sys.replication_metrics WHERE policy_name = 'p'`` answers from Spark, Hive or Trino.

Hive's REPL v3 keeps ``sys.replication_metrics`` (the metastore's ``REPLICATION_METRICS`` table: the policy, the
scheduled execution's id, a JSON ``metadata`` and ``progress``, the start time; ``ReplicationMetricCollector``
fills it). This table keeps the same facts as plain columns, one per figure, so they filter and add up in SQL.

An execution is a scheduled run (its batches until caught up), or, for a continuous policy, its batches over one
``execution-window`` (only windows that did something or failed: an idle follower writes no rows). Its columns
(:data:`COLUMNS`):

========================  =========  ===============================================================
policy_name               string     the policy
execution_id              string     unique per row
trigger                   string     ``follow``, ``every``, ``cron`` or ``run-now``
phase                     string     ``bootstrap``, ``incremental``, or ``bootstrap+incremental``
status                    string     ``succeeded``, ``partial`` (some tables failed) or ``failed``
source                    string     the member read from
from_event, to_event      bigint     the checkpoint before the first batch and after the last
batches                   int        batches in the execution
objects                   int        tables and databases created, altered, renamed or dropped
partitions                int        partitions added, altered or dropped
bytes                     bigint     bytes copied (copy mode)
events_applied/skipped/   bigint     notification events read, by outcome
failed
seconds                   double     time spent in the batches
lag_seconds               double     at the end: from the newest applied event's commit to the batch's end
bootstrap_reason          string     why a bootstrap ran (null when none did)
failed_tables             string     JSON map of failed target tables to their error (null when none)
error                     string     the last batch error (null when none)
started_at, ended_at      string     UTC, ISO 8601
========================  =========  ===============================================================

The table is EXTERNAL, TEXTFILE with ``LazySimpleSerDe``: tab-separated fields, ``\\`` as escape character and
``serialization.escape.crlf`` so tabs, newlines and backslashes in errors round-trip (Hive's
``LazyUtils.writeEscaped`` and ``LazySimpleSerDe``'s ``escape.delim``); null is ``\\N``. Each row is one small
file written into the table's location through fsspec (as :mod:`waggle.sync.files` reaches locations), under a
hidden name first and then renamed, so a reader never sees half a row.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from waggle.hms.gen.hive_metastore.ttypes import (
    AlreadyExistsException,
    FieldSchema,
    SerDeInfo,
    StorageDescriptor,
    Table,
)
from waggle.sync.execution import BOOTSTRAP, FAILED, PARTIAL, SUCCEEDED, Execution
from waggle.sync.files import url
from waggle.sync.hms import Metastore
from waggle.sync.system import SYS_DB, ensure_database

TABLE = "replication_metrics"
LAZY_SIMPLE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
TEXT_INPUT = "org.apache.hadoop.mapred.TextInputFormat"
TEXT_OUTPUT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
SERDE_PARAMETERS = {"field.delim": "\t", "serialization.format": "\t", "escape.delim": "\\",
                    "serialization.escape.crlf": "true", "serialization.null.format": "\\N"}

COLUMNS: tuple[tuple[str, str], ...] = (
    ("policy_name", "string"), ("execution_id", "string"), ("trigger", "string"), ("phase", "string"),
    ("status", "string"), ("source", "string"), ("from_event", "bigint"), ("to_event", "bigint"),
    ("batches", "int"), ("objects", "int"), ("partitions", "int"), ("bytes", "bigint"),
    ("events_applied", "bigint"), ("events_skipped", "bigint"), ("events_failed", "bigint"),
    ("seconds", "double"), ("lag_seconds", "double"), ("bootstrap_reason", "string"), ("failed_tables", "string"),
    ("error", "string"), ("started_at", "string"), ("ended_at", "string"),
)


@dataclass(slots=True)
class ExecutionRow:
    """Batches of one policy added up into one row."""

    policy: str
    trigger: str
    source: str
    execution_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    phases: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    from_event: int | None = None
    to_event: int | None = None
    objects: int = 0
    partitions: int = 0
    bytes: int = 0
    applied: int = 0
    skipped: int = 0
    failed: int = 0
    seconds: float = 0.0
    lag_seconds: float | None = None
    bootstrap_reason: str | None = None
    failed_tables: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    started_at: str = ""
    ended_at: str = ""

    @property
    def batches(self) -> int:
        return len(self.statuses)

    def add(self, e: Execution, ended_at: str = "") -> None:
        if e.phase not in self.phases:
            self.phases.append(e.phase)
        self.statuses.append(e.status)
        if self.from_event is None:
            self.from_event = e.from_event
            self.started_at = e.started_at
        self.to_event = e.to_event
        self.objects += e.objects
        self.partitions += e.partitions
        self.bytes += e.bytes
        for (_, outcome), n in e.events.items():
            if outcome == "applied":
                self.applied += n
            elif outcome == "skipped":
                self.skipped += n
            else:
                self.failed += n
        self.seconds += e.seconds
        if e.lag_seconds is not None:
            self.lag_seconds = e.lag_seconds
        if e.phase == BOOTSTRAP and e.bootstrap_reason:
            self.bootstrap_reason = e.bootstrap_reason
        self.failed_tables.update(e.failed_tables)
        if e.error:
            self.error = e.error
        self.ended_at = ended_at or e.started_at

    @property
    def status(self) -> str:
        if not self.statuses or all(s == SUCCEEDED for s in self.statuses):
            return SUCCEEDED
        if all(s == FAILED for s in self.statuses):
            return FAILED
        return PARTIAL

    def values(self) -> tuple[object, ...]:
        """The row's values in :data:`COLUMNS` order."""
        return (self.policy, self.execution_id, self.trigger, "+".join(self.phases) or None, self.status,
                self.source, self.from_event, self.to_event, self.batches, self.objects, self.partitions,
                self.bytes, self.applied, self.skipped, self.failed, round(self.seconds, 3),
                None if self.lag_seconds is None else round(self.lag_seconds, 3), self.bootstrap_reason,
                json.dumps(self.failed_tables, sort_keys=True) if self.failed_tables else None, self.error,
                self.started_at, self.ended_at)


def escape(value: object) -> str:
    """One field as ``LazySimpleSerDe`` reads it with :data:`SERDE_PARAMETERS`: null as ``\\N``; the escape
    character, the field separator, newlines and carriage returns escaped."""
    if value is None:
        return "\\N"
    text = str(value)
    return text.replace("\\", "\\\\").replace("\t", "\\\t").replace("\n", "\\n").replace("\r", "\\r")


def line(values: Sequence[object]) -> str:
    return "\t".join(escape(v) for v in values) + "\n"


def table_definition(location: str) -> Table:
    columns = [FieldSchema(name, kind, None) for name, kind in COLUMNS]
    sd = StorageDescriptor(cols=columns, location=location, inputFormat=TEXT_INPUT, outputFormat=TEXT_OUTPUT,
                           compressed=False, numBuckets=-1,
                           serdeInfo=SerDeInfo(None, LAZY_SIMPLE, dict(SERDE_PARAMETERS)),
                           bucketCols=[], sortCols=[], parameters={})
    return Table(tableName=TABLE, dbName=SYS_DB, owner="waggle", sd=sd, partitionKeys=[],
                 parameters={"EXTERNAL": "TRUE", "comment": "waggle sync: one row per execution of a policy"},
                 tableType="EXTERNAL_TABLE")


def ensure_table(target: Metastore) -> str:
    """Create ``waggle_sys.replication_metrics`` in the target unless it exists; its location."""
    existing = target.table(SYS_DB, TABLE)
    if existing is not None:
        return str(existing.sd.location)
    db_location = ensure_database(target)
    location = f"{db_location.rstrip('/')}/{TABLE}"
    try:
        target.create_table(table_definition(location))
    except AlreadyExistsException:
        pass  # another process made it meanwhile
    made = target.table(SYS_DB, TABLE)
    return str(made.sd.location) if made is not None else location


def write_rows(location: str, rows: Iterable[ExecutionRow]) -> str | None:
    """Write rows as one file into the table's location; its path (None when there were no rows)."""
    import fsspec

    text = "".join(line(r.values()) for r in rows)
    if not text:
        return None
    fs, root = fsspec.core.url_to_fs(url(location))
    fs.makedirs(root, exist_ok=True)
    name = f"{uuid.uuid4().hex}.txt"
    hidden, final = f"{root.rstrip('/')}/.{name}", f"{root.rstrip('/')}/{name}"
    with fs.open(hidden, "w") as out:
        out.write(text)
    fs.mv(hidden, final)
    return final


def unescape_line(text: str) -> list[str | None]:
    """The fields of one line as :func:`line` wrote them (``\\N`` is null)."""
    fields: list[str | None] = []
    current: list[str] = []
    raw_null = True  # the field so far is exactly the two characters of \N, unescaped
    i = 0
    while i <= len(text):
        c = text[i] if i < len(text) else "\t"
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "N" and not current:
                current.append("\\N")
                raw_null = True
            else:
                current.append({"n": "\n", "r": "\r"}.get(nxt, nxt))
                raw_null = False
            i += 2
            continue
        if c == "\t":
            value = "".join(current)
            fields.append(None if raw_null and value == "\\N" else value)
            current, raw_null = [], True
        else:
            current.append(c)
            raw_null = False
        i += 1
    return fields


def read_rows(location: str) -> list[dict[str, str | None]]:
    """Every row written into the table's location, by column name (for ``waggle sync --status``)."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url(location))
    if not fs.exists(root):
        return []
    names = [name for name, _ in COLUMNS]
    rows: list[dict[str, str | None]] = []
    for path in sorted(fs.ls(root, detail=False)):
        if path.rsplit("/", 1)[-1].startswith((".", "_")):
            continue
        with fs.open(path, "r") as f:
            for text in f.read().splitlines():
                if text:
                    rows.append(dict(zip(names, unescape_line(text), strict=False)))
    return rows
