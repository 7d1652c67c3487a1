"""Replaying a client sequence (tests/clients/sequences.py) against one side, and comparing two sides' replies.

A side is a port (a metastore, a stub around one, or waggle) and the names a client uses there. Each reply is
reduced to what must be equal on both sides: the side's own database names become ``{db}`` (locations
included, since both sides live in the same metastore's warehouse), and values that differ by clock or counter
(createTime, lastAccessTime, transient_lastDdlTime, lastAnalyzed, ids) are dropped. An error is compared by its
type (and, for TApplicationException, its type code), never by its text: error types are what clients act on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.clients.sequences import Names, Sequence, Step

VOLATILE = frozenset({"createTime", "lastAccessTime", "transient_lastDdlTime", "lastAnalyzed", "id", "writeId",
                      "txnId", "tableId"})
UNKNOWN_METHOD = 1  # TApplicationException.UNKNOWN_METHOD


@dataclass(frozen=True)
class Side:
    """Where a sequence runs: ``port``, the names a client sends there, and the names that become ``{db}``."""

    label: str
    port: int
    names: Names
    own: tuple[str, ...]  # every spelling of this side's database in replies, longest first
    direct: bool = False  # a metastore (or a stub around one), not waggle: steps with an ``equivalent`` use it


@dataclass
class Outcome:
    label: str
    method: str  # the method that answered (a fallback's, when one was taken)
    value: Any  # normalized reply, or ("error", type name[, TApplicationException type])
    raw: Any = None
    error: BaseException | None = None
    calls: int = 1

    @property
    def failed(self) -> bool:
        return self.error is not None

    def comparable(self) -> tuple[str, Any]:
        return self.label, self.value


@dataclass
class Run:
    side: Side
    outcomes: list[Outcome] = field(default_factory=list)

    def by_label(self) -> dict[str, Outcome]:
        return {o.label: o for o in self.outcomes}


def error_value(exc: BaseException) -> tuple[Any, ...]:
    from thrift.Thrift import TApplicationException

    if isinstance(exc, TApplicationException):
        return ("error", "TApplicationException", exc.type)
    return ("error", type(exc).__name__)


def is_thrift_error(exc: BaseException) -> bool:
    from thrift.Thrift import TException

    return isinstance(exc, TException)


def normalize(value: Any, own: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        for name in own:
            value = value.replace(name, "{db}")
        return value
    if isinstance(value, bytes):
        return value
    if isinstance(value, (list, tuple)):
        return [normalize(v, own) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((normalize(v, own) for v in value), key=repr)
    if isinstance(value, dict):
        return {normalize(k, own): normalize(v, own) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
                if k not in VOLATILE}
    if hasattr(value, "thrift_spec"):
        out = {}
        for spec in value.thrift_spec:
            if not spec:
                continue
            key, v = spec[2], getattr(value, spec[2], None)
            if key in VOLATILE or v is None:
                continue
            if key in ("catName", "catalogName") and v == "hive":
                continue  # a real Hive 3+ metastore names the catalog; the stubs (2.3 underneath) leave it unset
            out[key] = normalize(v, own)
        return {type(value).__name__: out}
    return value


class _Connection:
    """One client connection (not a generator context manager: Python 3.11's contextlib sets ``__traceback__``
    on an exception leaving the block, which the frozen exceptions of waggle's generated code refuse)."""

    def __init__(self, release: str, port: int, set_ugi: bool) -> None:
        import importlib

        from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
        from thrift.transport.TSocket import TSocket
        from thrift.transport.TTransport import TBufferedTransport

        service = importlib.import_module(f"{PACKAGES[release]}.ThriftHiveMetastore")
        sock = TSocket("127.0.0.1", port)
        sock.setTimeout(60_000)
        self.transport = TBufferedTransport(sock)
        self.transport.open()
        self.client = service.Client(TBinaryProtocolAccelerated(self.transport))
        if set_ugi:
            self.client.set_ugi("trino", [])

    def close(self) -> None:
        self.transport.close()


PACKAGES = {"2.3": "hmsclient.genthrift.hive_metastore", "3.1": "thrift_files.libraries.thrift_hive_metastore_client",
            "4.x": "waggle.hms.gen.hive_metastore"}


def run_sequence(seq: Sequence, side: Side, stop: Callable[[Step, Outcome], bool] | None = None) -> Run:
    """Run ``seq`` on ``side``: one connection for the sequence, or one per step (Trino), and Trino's
    ``alternativeCall`` fallbacks. ``stop``: whether the client gives up after this step's outcome."""
    run = Run(side)
    results: dict[str, Any] = {}
    session: _Connection | None = None
    try:
        for step in seq.steps:
            if session is not None and step.method == "set_ugi" and step is not seq.steps[0]:
                session.close()  # a Hive client sends set_ugi once, on a connection it has just opened
                session = None
            if session is None and not seq.per_operation:
                session = _Connection(seq.release, side.port, seq.set_ugi)
            outcome = _one_step(seq, step, side, results, session)
            run.outcomes.append(outcome)
            if outcome.error is None:
                results[step.label] = step.keep(outcome.raw) if step.keep is not None else outcome.raw
            if session is not None and (step.method == "shutdown" or (
                    outcome.error is not None and not is_thrift_error(outcome.error))):
                session.close()  # Hive's HiveMetaStoreClient#close sends shutdown, then a new client connects
                session = None
            if stop is not None and stop(step, outcome):
                break
    finally:
        if session is not None:
            session.close()
    return run


def _call(conn: _Connection | None, seq: Sequence, side: Side, method: str, args: Any) -> Any:
    if conn is not None:
        return getattr(conn.client, method)(*args)
    own = _Connection(seq.release, side.port, seq.set_ugi)  # a connection per operation (Trino)
    try:
        return getattr(own.client, method)(*args)
    finally:
        own.close()


def _types(seq: Sequence) -> Any:
    import importlib

    return importlib.import_module(f"{PACKAGES[seq.release]}.ttypes")


def _one_step(seq: Sequence, step: Step, side: Side, results: dict[str, Any], conn: _Connection | None
              ) -> Outcome:
    t = _types(seq)
    n = side.names
    method, build, adapt = step.method, step.args, None
    if side.direct and step.equivalent is not None:
        method, build, adapt = step.equivalent[0], step.equivalent[1], step.equivalent[2]
    built = build(n, t, results)
    if step.many:
        values, raws = [], []
        calls = list(built)
        replies: list[Any] = [None] * len(calls)
        if step.threads > 1:
            def worker(i: int) -> None:
                try:
                    replies[i] = ("ok", _call(None, seq, side, method, calls[i]))
                except Exception as exc:  # compared as an outcome
                    replies[i] = ("error", exc)
            pool = [threading.Thread(target=worker, args=(i,)) for i in range(len(calls))]
            for i in range(0, len(pool), step.threads):
                batch = pool[i:i + step.threads]
                for th in batch:
                    th.start()
                for th in batch:
                    th.join(120)
        else:
            for i, args in enumerate(calls):
                try:
                    replies[i] = ("ok", _call(conn, seq, side, method, args))
                except Exception as exc:  # compared as an outcome
                    replies[i] = ("error", exc)
        first_error = None
        for kind, reply in replies:
            if kind == "error":
                values.append(error_value(reply))
                first_error = first_error or reply
            else:
                raws.append(reply)
                values.append(normalize(reply, side.own))
        return Outcome(step.label, method, values, raws, first_error, calls=len(calls))
    try:
        raw = _call(conn, seq, side, method, built)
        if adapt is not None:
            raw = adapt(raw, t)
    except Exception as exc:
        if step.fallback is not None and _falls_back(step, exc):
            name, fb = step.fallback
            try:
                raw = _call(None if seq.per_operation else conn, seq, side, name, fb(n, t, results))
            except Exception as exc2:
                return Outcome(step.label, name, error_value(exc2), error=exc2)
            return _done(step, name, raw, side, results)
        return Outcome(step.label, method, error_value(exc), error=exc)
    return _done(step, method, raw, side, results)


def _done(step: Step, method: str, raw: Any, side: Side, results: dict[str, Any]) -> Outcome:
    if step.check is not None:
        step.check(raw, side.names, results)
    shown = step.project(raw, side.names) if step.project is not None else raw
    return Outcome(step.label, method, normalize(shown, side.own), raw)


def _falls_back(step: Step, exc: BaseException) -> bool:
    from thrift.Thrift import TApplicationException

    if step.fallback_on == "unknown_method":
        return isinstance(exc, TApplicationException) and exc.type == UNKNOWN_METHOD
    return type(exc).__name__ != "NoSuchObjectException"


def compare(direct: Run, waggle: Run) -> int:
    """Assert that both runs gave the same replies, step by step; the number of replies compared."""
    assert [o.label for o in waggle.outcomes] == [o.label for o in direct.outcomes], \
        f"steps differ: {[o.label for o in direct.outcomes]} vs {[o.label for o in waggle.outcomes]}"
    count = 0
    for d, w in zip(direct.outcomes, waggle.outcomes, strict=False):
        assert w.value == d.value, (f"step {d.label!r} ({d.method} directly, {w.method} through waggle "
                                    f"[{waggle.side.label}]) differs:\n direct: {d.value!r}\n waggle: {w.value!r}"
                                    f"\n waggle error: {w.error!r}")
        count += d.calls
    return count
