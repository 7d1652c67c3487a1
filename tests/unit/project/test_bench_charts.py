"""bench/charts.py draws the docs' benchmark charts from what the benches print (small saved outputs here)."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SVG = "{http://www.w3.org/2000/svg}"

#: what bench_proxy.py (its two tables, cut to two calls) and bench_follow.py print, saved
SAVED = ROOT / "tests" / "support" / "bench_outputs"


def _saved(tmp_path: Path, *names: str) -> Path:
    for name in names:
        (tmp_path / name).write_text((SAVED / name).read_text())
    return tmp_path


def _bars(svg: Path) -> dict[str, str]:
    """Bar title ("group: series") -> the value printed beside it."""
    root = ET.parse(svg).getroot()
    assert root.tag == f"{SVG}svg"
    children = list(root)
    bars = {}
    for i, el in enumerate(children):
        title = el.find(f"{SVG}title")
        if el.tag == f"{SVG}rect" and title is not None:
            bars[title.text or ""] = children[i + 1].text or ""
    return bars


def test_the_charts_are_drawn_from_the_benches_output(tmp_path: Path) -> None:
    _saved(tmp_path, "bench_proxy.txt", "bench_follow.txt")
    out = tmp_path / "img"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "charts.py"), "--results", str(tmp_path),
                           "--out", str(out)], capture_output=True, text=True, check=True)
    assert sorted(p.name for p in out.iterdir()) == ["cpu.svg", "follow-lag.svg", "latency.svg",
                                                    "sync-throughput.svg"]
    assert "skipped" not in done.stderr
    assert _bars(out / "latency.svg") == {
        "get_database: waggle, names unchanged": "1.50x", "get_database: waggle, behind a prefix": "2.00x",
        "get_database: byte relay (no parsing)": "1.30x", "get_all_databases: waggle, names unchanged": "1.76x",
        "get_all_databases: byte relay (no parsing)": "1.37x"}  # the fan-out row was not measured: no bar
    assert _bars(out / "cpu.svg") == {
        "get_database: waggle, names unchanged": "128 µs", "get_database: waggle, behind a prefix": "218 µs",
        "get_database: byte relay (no parsing)": "80 µs"}
    assert _bars(out / "follow-lag.svg") == {"mirror, 20 events/s (20/s written): p50": "0.95 s",
                                             "mirror, 20 events/s (20/s written): p99": "2.40 s"}
    assert _bars(out / "sync-throughput.svg") == {
        "catch-up, 2,000 events (events/s): limit: raw add_partitions": "833",
        "catch-up, 2,000 events (events/s): waggle sync": "571"}
    latency = (out / "latency.svg").read_text()
    assert 'stroke-dasharray="4 3"' in latency  # the 1.0x line: direct


def test_a_chart_without_figures_is_skipped_and_said(tmp_path: Path) -> None:
    _saved(tmp_path, "bench_follow.txt")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "charts.py"), "--results", str(tmp_path),
                           "--out", str(tmp_path / "img")], capture_output=True, text=True, check=True)
    assert sorted(p.name for p in (tmp_path / "img").iterdir()) == ["follow-lag.svg", "sync-throughput.svg"]
    assert "skipped latency.svg" in done.stderr and "skipped cpu.svg" in done.stderr
