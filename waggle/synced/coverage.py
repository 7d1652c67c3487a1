"""What the sync records of the tables it keeps current, for the proxy to judge how fresh a copy is.

A batch run whose tables all succeeded, and a follower that is caught up, each write one record to the primary's
``waggle_sys`` database, as a parameter ``waggle.sync.coverage.NAME`` whose value is JSON::

    {"source": "lake", "patterns": ["ice\\\\..*"], "target": "ice_copy", "mode": "copy", "at": 1764100000.0}

``patterns`` are the run's or policy's regexes over the source's ``database.table`` names (matched whole,
case-insensitively), ``target`` its target database (null: each source database's own name), ``mode`` its mode,
and ``at`` the time (epoch seconds) at which every copy they cover was known to match its source. Pure: the sync
writes the records (:mod:`waggle.sync.system`), the proxy reads them (:mod:`waggle.copies.registry`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PREFIX = "waggle.sync.coverage."


@dataclass(frozen=True, slots=True)
class Coverage:
    name: str
    source: str
    patterns: tuple[re.Pattern[str], ...]
    at: float
    #: the target database (None: the source database's own name) and the mode; a record that does not say
    #: covers any
    target: str | None = None
    mode: str | None = None
    said_target: bool = False

    def covers(self, member: str, db: str, table: str, copy_db: str | None = None, mode: str | None = None) -> bool:
        """Whether this record covers the copy ``copy_db`` (made in ``mode``) of ``member``'s ``db.table``."""
        if member != self.source or not any(p.fullmatch(f"{db}.{table}") for p in self.patterns):
            return False
        if self.said_target and copy_db is not None and copy_db.lower() != (self.target or db).lower():
            return False
        return self.mode is None or mode is None or mode == self.mode


def record(source: str, patterns: Iterable[str], at: float, target: str | None = None, mode: str | None = None
           ) -> str:
    """The value of a coverage parameter."""
    return json.dumps({"source": source, "patterns": list(patterns), "target": target, "mode": mode,
                       "at": round(at, 3)}, separators=(",", ":"))


def read(parameters: Mapping[str, str] | None) -> list[Coverage]:
    """The coverage records among a database's parameters; unreadable ones are left out."""
    out = []
    for key, value in (parameters or {}).items():
        if not key.startswith(PREFIX):
            continue
        try:
            data = json.loads(value)
            patterns = tuple(re.compile(str(p), re.IGNORECASE) for p in data["patterns"])
            target, mode = data.get("target"), data.get("mode")
            out.append(Coverage(key[len(PREFIX):], str(data["source"]), patterns, float(data["at"]),
                                str(target) if target else None, str(mode) if mode else None, "target" in data))
        except (ValueError, KeyError, TypeError, re.error):
            continue
    return out
