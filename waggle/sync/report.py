"""What a sync run did, per table, and the writes it made to the target metastore with the rate they reached:
as a table for people and as JSON (``--report FILE``)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from waggle.sync.throttle import WriteStats


@dataclass
class TableReport:
    source: str  # member:db.table
    target: str  # db.table
    mode: str
    status: str = "ok"  # ok, failed, planned (dry run)
    table: str = "unchanged"  # created, updated, unchanged
    created: int = 0  # partitions
    updated: int = 0
    dropped: int = 0
    unchanged: int = 0
    kept: int = 0  # deleted at the source, kept at the target (no --propagate-deletes)
    files: int = 0
    bytes: int = 0
    statistics: int = 0  # objects whose column statistics were carried over
    seconds: float = 0.0
    error: str | None = None
    plan: list[str] = field(default_factory=list)  # dry run: what would be done


@dataclass
class RunReport:
    tables: list[TableReport] = field(default_factory=list)
    seconds: float = 0.0
    dry_run: bool = False
    writes: list[WriteStats] = field(default_factory=list)  # per target metastore

    @property
    def failed(self) -> list[TableReport]:
        return [t for t in self.tables if t.status == "failed"]

    def totals(self) -> dict[str, int]:
        keys = ("created", "updated", "dropped", "unchanged", "kept", "files", "bytes")
        out = {k: sum(getattr(t, k) for t in self.tables) for k in keys}
        for state in ("created", "updated", "unchanged"):
            out[f"tables_{state}"] = sum(1 for t in self.tables if t.table == state and t.status != "failed")
        out["tables_failed"] = len(self.failed)
        return out

    def to_json(self) -> str:
        data: dict[str, Any] = {"dry_run": self.dry_run, "seconds": round(self.seconds, 3),
                                "totals": self.totals(), "writes": [asdict(w) for w in self.writes],
                                "tables": [asdict(t) for t in self.tables]}
        return json.dumps(data, indent=2)

    def render(self) -> str:
        head = ("source", "target", "mode", "status", "table", "+parts", "~parts", "-parts", "=parts", "kept",
                "bytes", "secs")
        rows = [head] + [
            (t.source, t.target, t.mode, t.status, t.table, str(t.created), str(t.updated), str(t.dropped),
             str(t.unchanged), str(t.kept), _size(t.bytes), f"{t.seconds:.1f}") for t in self.tables]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        tot = self.totals()
        lines.append("")
        verb = "would be" if self.dry_run else ""
        lines.append(f"{len(self.tables)} table(s) in {self.seconds:.1f}s{' (dry run)' if self.dry_run else ''}: "
                     f"{tot['tables_created']} created, {tot['tables_updated']} updated, "
                     f"{tot['tables_unchanged']} unchanged, {tot['tables_failed']} failed; partitions "
                     f"{verb + ' ' if verb else ''}{tot['created']} created, {tot['updated']} updated, "
                     f"{tot['dropped']} dropped, {tot['unchanged']} unchanged; {_size(tot['bytes'])} copied")
        for w in self.writes:
            lines.append(_writes_line(w))
        for t in self.tables:
            if t.error:
                lines.append(f"error: {t.source} -> {t.target}: {t.error}")
            for step in t.plan:
                lines.append(f"plan: {t.source} -> {t.target}: {step}")
        return "\n".join(lines)


def _writes_line(w: WriteStats) -> str:
    limit = f"limit {w.limit_per_second:g}/s" if w.limit_per_second else "no limit"
    if not w.writes:
        return f"writes to {w.metastore}: none ({limit})"
    return (f"writes to {w.metastore}: {w.writes} call(s) over {w.seconds:.1f}s, {w.mean_per_second:.2f}/s mean, "
            f"{w.peak_per_second} in the busiest second ({limit})")


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"
