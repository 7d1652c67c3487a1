"""The files of a copy-mode partition (waggle.sync.files), on local files: a partition whose source is unchanged
is left alone, unless its directory holds files the source does not (a writer's, refused by the metastore)."""

from __future__ import annotations

from pathlib import Path

from waggle.sync.files import CopyTask, copy_one


def _task(src: Path, dst: Path, recorded: str | None) -> CopyTask:
    return CopyTask("dt=1", f"file://{src}", f"file://{dst}", recorded, "run1")


def test_an_unchanged_copy_is_left_alone_and_a_stray_file_makes_it_again(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "data.csv").write_text("1,ann\n")
    first = copy_one(_task(src, dst, None))
    assert first.copied and first.error is None and (dst / "data.csv").read_text() == "1,ann\n"
    again = copy_one(_task(src, dst, first.files_fingerprint))
    assert not again.copied  # the source's fingerprint is the one recorded, the target holds its files

    (dst / "part-00000-stray").write_text("8,yan\n")  # an INSERT's file, refused at the metastore
    healed = copy_one(_task(src, dst, first.files_fingerprint))
    assert healed.copied and healed.files_fingerprint == first.files_fingerprint
    assert sorted(p.name for p in dst.iterdir()) == ["data.csv"]

    (dst / "data.csv").write_text("1,ann\n2,bob\n")  # a file of the source's name, changed in place
    assert copy_one(_task(src, dst, first.files_fingerprint)).copied
    assert (dst / "data.csv").read_text() == "1,ann\n"
