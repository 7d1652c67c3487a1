"""What the sync records of the tables it keeps current, for the proxy to judge how fresh a copy is.

A batch run whose tables all succeeded, and a follower that is caught up, each write one record to the primary's
``waggle_sys`` database, as a parameter ``waggle.sync.coverage.NAME`` whose value is JSON::

    {"source": "lake", "patterns": ["ice\\\\..*"], "at": 1764100000.0}

``patterns`` are the run's or policy's regexes over the source's ``database.table`` names (matched whole,
case-insensitively), ``at`` the time (epoch seconds) at which every copy they cover was known to match its
source. Pure: the sync writes the records (:mod:`waggle.sync.system`), the proxy reads them
(:mod:`waggle.copies.registry`).
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

    def covers(self, member: str, db: str, table: str) -> bool:
        name = f"{db}.{table}"
        return member == self.source and any(p.fullmatch(name) for p in self.patterns)


def record(source: str, patterns: Iterable[str], at: float) -> str:
    """The value of a coverage parameter."""
    return json.dumps({"source": source, "patterns": list(patterns), "at": round(at, 3)}, separators=(",", ":"))


def read(parameters: Mapping[str, str] | None) -> list[Coverage]:
    """The coverage records among a database's parameters; unreadable ones are left out."""
    out = []
    for key, value in (parameters or {}).items():
        if not key.startswith(PREFIX):
            continue
        try:
            data = json.loads(value)
            patterns = tuple(re.compile(str(p), re.IGNORECASE) for p in data["patterns"])
            out.append(Coverage(key[len(PREFIX):], str(data["source"]), patterns, float(data["at"])))
        except (ValueError, KeyError, TypeError, re.error):
            continue
    return out
