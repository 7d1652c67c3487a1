"""The unit tests mirror the rooms: a folder per package (or top-level module) of ``waggle/``, named for it, and
``project/`` for what holds over the whole tree; no test sits loose in ``tests/unit``."""

from __future__ import annotations

from pathlib import Path

UNIT = Path(__file__).resolve().parents[1]
WAGGLE = UNIT.parents[1] / "waggle"


def test_every_unit_test_folder_is_named_for_a_room_of_waggle() -> None:
    rooms = {p.name for p in WAGGLE.iterdir() if p.is_dir() and (p / "__init__.py").exists()} | \
        {p.stem for p in WAGGLE.glob("*.py")}
    folders = {p.name for p in UNIT.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders - {"project"} <= rooms, sorted(folders - {"project"} - rooms)
    assert not sorted(p.name for p in UNIT.glob("test_*.py")), "tests loose in tests/unit"
    assert all(any(d.glob("test_*.py")) for d in UNIT.iterdir() if d.is_dir() and d.name != "__pycache__")
