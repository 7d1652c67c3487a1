"""Structured logs with structlog: JSON when not on a terminal, readable lines on one.

Context (``conn``, ``peer``, ``user``) is bound per client connection with contextvars, which gevent keeps
per greenlet. Debug-level per-call lines cost nothing when the level is higher: the filtering logger turns
them into no-ops before any processor runs.
"""

from __future__ import annotations

import logging
import sys
import time

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class _CurrentStderr:
    """``sys.stderr`` as it is at each write (a caller that swaps it, as test runners do, gets the lines)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure(level: str = "info", fmt: str = "auto", stream: object = None, worker: int | None = None) -> None:
    """``worker``: every line of this process names it (a worker of ``waggle serve --workers``)."""
    tty = getattr(stream or sys.stderr, "isatty", lambda: False)()
    out = stream or _CurrentStderr()
    use_json = fmt == "json" or (fmt == "auto" and not tty)
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            *([_naming_worker(worker)] if worker is not None else []),
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        # one write per line, newline included: workers share the stream, and a line written in two parts (as
        # print() writes it) can be split by another process's line
        logger_factory=structlog.WriteLoggerFactory(file=out),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    # thrift's own modules log through the standard library; keep their noise out of our stream.
    logging.getLogger("thrift").setLevel(logging.CRITICAL)


def _naming_worker(index: int) -> structlog.typing.Processor:
    def name_worker(_: object, __: str, event: structlog.typing.EventDict) -> structlog.typing.EventDict:
        event["worker"] = index
        return event

    return name_worker


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger(name)  # type: ignore[no-any-return]


class Throttle:
    """At most one ``allow()`` per key per ``interval`` seconds: for lines that a flood would repeat."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last: dict[str, float] = {}

    def allow(self, key: str) -> bool:
        now = time.monotonic()
        if now - self._last.get(key, -self.interval) < self.interval:
            return False
        self._last[key] = now
        return True
