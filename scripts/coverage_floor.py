"""The coverage floor of waggle's pure rooms: each room's branch coverage, from the data the last
``pytest --cov`` wrote (scripts/test.sh runs both), must be at least its floor.

A room is the code of one pure concern (no sockets, no files), named by globs of paths from the project's root;
the rooms are listed here and nowhere else. A room's figure is coverage.py's, over its files together: covered
lines and branches over all its lines and branches. A glob that matches no measured file fails too: a module moved
out of a room is noticed, not silently left unmeasured.

    python scripts/coverage_floor.py              exit 1 when a room is below its floor
    python scripts/coverage_floor.py --advisory   say so, but exit 0 (a run of some tests only)
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

FLOOR = 90.0

#: room -> the globs of its modules
ROOMS: dict[str, tuple[str, ...]] = {
    "call core": ("waggle/call/*.py",),
    "routing": ("waggle/routing/*.py",),
    "copies: planning, serving, catalog": ("waggle/copies/planning.py", "waggle/copies/serve.py",
                                           "waggle/copies/catalog.py"),
    "remotes: planning": ("waggle/remotes/planning.py",),
    "follower: events and plan": ("waggle/sync/follow/events.py", "waggle/sync/follow/plan.py"),
    "configuration": ("waggle/config/*.py",),
}


@dataclass
class Tally:
    lines: int = 0
    covered_lines: int = 0
    branches: int = 0
    covered_branches: int = 0

    def add(self, summary: dict[str, int]) -> None:
        self.lines += summary["num_statements"]
        self.covered_lines += summary["covered_lines"]
        self.branches += summary.get("num_branches", 0)
        self.covered_branches += summary.get("covered_branches", 0)

    @property
    def percent(self) -> float:
        total = self.lines + self.branches
        return 100.0 * (self.covered_lines + self.covered_branches) / total if total else 100.0


def measured_files() -> dict[str, dict[str, int]]:
    """Each measured file's summary, by its path from the project's root."""
    import coverage

    cov = coverage.Coverage()
    cov.load()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "coverage.json"
        cov.json_report(outfile=str(out), ignore_errors=True)  # a module moved away since the run
        files = json.loads(out.read_text())["files"]
    return {Path(name).as_posix(): entry["summary"] for name, entry in files.items()}


def check(files: dict[str, dict[str, int]]) -> tuple[list[str], list[str]]:
    """The report's lines, and the problems (rooms below the floor, globs that match nothing)."""
    lines, problems = [f"{'room':<38} {'lines':>6} {'branches':>9} {'cover':>7}  floor {FLOOR:g}%"], []
    for room, globs in ROOMS.items():
        tally = Tally()
        for glob in globs:
            matched = [name for name in files if fnmatch.fnmatch(name, glob)]
            if not matched:
                problems.append(f"room '{room}': {glob} matches no measured file (moved? update ROOMS in "
                                f"scripts/coverage_floor.py)")
            for name in matched:
                tally.add(files[name])
        below = tally.percent < FLOOR
        lines.append(f"{room:<38} {tally.lines:>6} {tally.branches:>9} {tally.percent:>6.1f}%"
                     f"{'  BELOW' if below else ''}")
        if below:
            problems.append(f"room '{room}' ({', '.join(globs)}) is at {tally.percent:.1f}% branch coverage, "
                            f"{FLOOR - tally.percent:.1f} points below its floor of {FLOOR:g}%")
    return lines, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--advisory", action="store_true", help="report a room below its floor, but exit 0")
    args = parser.parse_args()
    lines, problems = check(measured_files())
    print("\n".join(lines))
    for problem in problems:
        print(f"coverage floor: {problem}", file=sys.stderr)
    if problems and args.advisory:
        print("coverage floor: not enforced (only some tests ran; the whole suite is held to it)", file=sys.stderr)
        return 0
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
