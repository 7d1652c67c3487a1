"""The benchmark charts of the docs, drawn from the benches' own printed output.

    python bench/charts.py [--results bench/results] [--out docs/internals/img]

Reads what the benches printed, saved as text (``python bench/bench_proxy.py > bench/results/bench_proxy.txt``,
and the same for ``bench_sync.py`` and ``bench_follow.py``), and writes plain SVG charts (no plotting library):

* ``latency.svg``: p50 of each call through waggle (names unchanged, behind a prefix) and through the byte relay,
  as a ratio to the same call direct (bench_proxy.txt, its latency table);
* ``cpu.svg``: CPU per call of each waggle and of the byte relay, in microseconds (bench_proxy.txt, its CPU
  table);
* ``sync-throughput.svg``: ``waggle sync`` mirror against raw ``add_partitions`` and copy against ``cp -r``
  (bench_sync.txt, its summary), and ``--follow`` catching up against raw ``add_partitions`` (bench_follow.txt);
* ``follow-lag.svg``: ``waggle sync --follow`` lag, p50 and p99, at each rate (bench_follow.txt).

Lines that start with ``#`` are notes (where the figures come from) and are ignored. A chart whose bench output is
missing is skipped, and said so. The output is the same for the same input, so
the committed charts change only with the figures.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parents[1]

# -- reading the benches' output ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """One labelled group of bars: (series, value) pairs, in a chart's series order."""

    label: str
    bars: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Chart:
    title: str
    subtitle: str
    unit: str  # shown after each value
    groups: tuple[Group, ...]
    reference: float | None = None  # a dashed line at this value (1.0x: direct)
    digits: int = 2


_PROXY_ROUTES = {"primary (names unchanged)": "waggle, names unchanged",
                 "behind a prefix (every name rewritten)": "waggle, behind a prefix",
                 "byte relay (no parsing)": "byte relay (no parsing)"}
_CALL, _ROUTE = slice(0, 22), slice(22, 62)  # bench_proxy.py's fixed columns


def _proxy_rows(text: str, header: str) -> list[tuple[str, str, list[str]]]:
    """(call, route, the numbers after the route) of the bench_proxy table whose header starts with ``header``."""
    rows: list[tuple[str, str, list[str]]] = []
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith(header))
    except StopIteration:
        return rows
    call = ""
    for line in lines[start + 1:]:
        if not line.strip():
            break
        call = line[_CALL].strip() or call
        route = line[_ROUTE].strip()
        if route in _PROXY_ROUTES:
            rows.append((call, _PROXY_ROUTES[route], line[62:].split()))
    return rows


def _groups(rows: list[tuple[str, str, float]]) -> tuple[Group, ...]:
    calls: dict[str, list[tuple[str, float]]] = {}
    for call, route, value in rows:
        calls.setdefault(call, []).append((route, value))
    return tuple(Group(call, tuple(bars)) for call, bars in calls.items())


def latency_chart(text: str) -> Chart | None:
    rows = []
    for call, route, numbers in _proxy_rows(text, "call                  through"):
        try:
            rows.append((call, route, float(numbers[3].rstrip("x"))))  # direct, via, added, ratio
        except (IndexError, ValueError):
            continue  # a row that was not measured
    if not rows:
        return None
    return Chart("Latency against direct (p50)", "bench_proxy.py: each call direct and through each route, in "
                 "the same rounds; 1.0 is direct", "x", _groups(rows), reference=1.0)


def cpu_chart(text: str) -> Chart | None:
    rows = []
    for call, route, numbers in _proxy_rows(text, "call                  server"):
        rows.append((call, route, float(numbers[0])))
    relays = {}
    for call, _, numbers in _proxy_rows(text, "call                  server"):
        relays[call] = float(numbers[1])
    rows += [(call, _PROXY_ROUTES["byte relay (no parsing)"], us) for call, us in relays.items()]
    if not rows:
        return None
    return Chart("CPU per call", "bench_proxy.py: CPU time of each server process per call, best of its runs",
                 " µs", _groups(rows), digits=0)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def sync_chart(texts: dict[str, str]) -> Chart | None:
    sync, follow = texts.get("bench_sync.txt", ""), texts.get("bench_follow.txt", "")
    mirror = re.search(r"^mirror (\d+) partitions: waggle sync ([\d,.]+)/s vs raw add_partitions ([\d,.]+)/s", sync,
                       re.M)
    copy = re.search(r"^copy: waggle sync ([\d.]+) MB/s, [\d,]+ files/s vs cp -r ([\d.]+) MB/s", sync, re.M)
    catch_up = re.search(r"^catch-up: ([\d,]+) events.*? = ([\d,.]+)/s; raw add_partitions [\d.]+ s = ([\d,.]+)/s",
                         follow, re.M)
    groups = []
    if mirror:
        groups.append(Group(f"mirror, {int(mirror[1]):,} partitions (partitions/s)",
                            (("limit: raw add_partitions", _number(mirror[3])), ("waggle sync", _number(mirror[2])))))
    if copy:
        groups.append(Group("copy (MB/s)", (("limit: cp -r", _number(copy[2])), ("waggle sync", _number(copy[1])))))
    if catch_up:
        groups.append(Group(f"catch-up, {int(_number(catch_up[1])):,} events (events/s)",
                            (("limit: raw add_partitions", _number(catch_up[3])),
                             ("waggle sync", _number(catch_up[2])))))
    if not groups:
        return None
    return Chart("Sync throughput against its limits", "bench_sync.py and bench_follow.py's catch-up: each group on "
                 "its own scale", "", tuple(groups), digits=0)


def follow_chart(texts: dict[str, str]) -> Chart | None:
    groups = []
    for m in re.finditer(r"^(mirror|copy) at (\d+) events/s(?: \(written at ([\d.]+)/s\))?:(?: \d+ partitions,)? "
                         r"lag p50 ([\d.]+) s, p99 ([\d.]+) s", texts.get("bench_follow.txt", ""), re.M):
        written = f" ({float(m[3]):.0f}/s written)" if m[3] else ""
        groups.append(Group(f"{m[1]}, {m[2]} events/s{written}", (("p50", float(m[4])), ("p99", float(m[5])))))
    if not groups:
        return None
    return Chart("Follow lag", "bench_follow.py: from the source call's return to the partition's first sighting "
                 "at the target", " s", tuple(groups))


def _one(name: str, read: Callable[[str], Chart | None]) -> Callable[[dict[str, str]], Chart | None]:
    return lambda texts: read(texts[name]) if name in texts else None


#: chart file -> its reader, given the saved outputs by file name
CHARTS: dict[str, Callable[[dict[str, str]], Chart | None]] = {
    "latency.svg": _one("bench_proxy.txt", latency_chart),
    "cpu.svg": _one("bench_proxy.txt", cpu_chart),
    "sync-throughput.svg": sync_chart,
    "follow-lag.svg": follow_chart,
}

# -- drawing ----------------------------------------------------------------------------------------------------
COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2")
WIDTH, LABEL_WIDTH, BAR, GAP = 760, 250, 16, 14
_PLOT = WIDTH - LABEL_WIDTH - 90  # room for the value after the longest bar


def _text(x: float, y: float, text: str, size: int = 12, anchor: str = "start", weight: str = "normal") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" font-weight="{weight}">'
            f"{escape(text)}</text>")


def _scales(chart: Chart) -> list[float]:
    """The value that fills the plot, per group: one scale for the chart, or one per group when their units
    differ (the sync chart's)."""
    if chart.unit == "":
        return [max(v for _, v in g.bars) or 1.0 for g in chart.groups]
    top = max(max(v for g in chart.groups for _, v in g.bars), chart.reference or 0.0) or 1.0
    return [top] * len(chart.groups)


def _legend(series: list[str], colour: dict[str, str]) -> tuple[list[str], int]:
    """The legend's marks, in rows under the subtitle, and the y where the bars may start."""
    marks: list[str] = []
    x, y = 10.0, 50
    for name in series:
        width = 16 + 6.5 * len(name) + 18
        if x + width > WIDTH:
            x, y = 10.0, y + 18
        marks.append(f'<rect x="{x:.1f}" y="{y}" width="12" height="12" fill="{colour[name]}"/>')
        marks.append(_text(x + 16, y + 10, name, size=11))
        x += width
    return marks, y + 28


def svg(chart: Chart) -> str:
    series = list(dict.fromkeys(name for g in chart.groups for name, _ in g.bars))
    colour = {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(series)}
    scales = _scales(chart)
    legend, top = _legend(series, colour)
    y = top
    body: list[str] = []
    for group, scale in zip(chart.groups, scales, strict=True):
        body.append(_text(LABEL_WIDTH - 10, y + 12, group.label, anchor="end", weight="bold"))
        for name, value in group.bars:
            width = max(value / scale * _PLOT, 1.0)
            body.append(f'<rect x="{LABEL_WIDTH}" y="{y}" width="{width:.1f}" height="{BAR}" '
                        f'fill="{colour[name]}"><title>{escape(f"{group.label}: {name}")}</title></rect>')
            body.append(_text(LABEL_WIDTH + width + 6, y + 12, f"{value:,.{chart.digits}f}{chart.unit}", size=11))
            y += BAR + 2
        y += GAP
    height = y + 10
    if chart.reference is not None:
        x = LABEL_WIDTH + chart.reference / scales[0] * _PLOT
        body.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{height - 14}" stroke="#555" '
                    'stroke-dasharray="4 3"/>')
        body.append(_text(x, height - 2, f"{chart.reference:g}{chart.unit.strip()}", size=10, anchor="middle"))
    head = [_text(10, 22, chart.title, size=16, weight="bold"), _text(10, 40, chart.subtitle, size=11)]
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height + 8}" '
        f'viewBox="0 0 {WIDTH} {height + 8}" font-family="sans-serif" role="img">',
        f"<title>{escape(chart.title)}</title>",
        f'<rect width="{WIDTH}" height="{height + 8}" fill="#fff"/>',
        *head, *legend, *body, "</svg>", ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Draw the docs' benchmark charts from saved bench output.")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results",
                        help="the directory of saved bench output (default: bench/results)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "internals" / "img",
                        help="where the SVG files go (default: docs/internals/img)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    texts = {path.name: path.read_text(encoding="utf-8") for path in sorted(args.results.glob("*.txt"))}
    for name, read in CHARTS.items():
        chart = read(texts)
        if chart is None:
            print(f"skipped {name}: its bench's figures are not in {args.results}", file=sys.stderr)
            continue
        (args.out / name).write_text(svg(chart), encoding="utf-8")
        print(f"wrote {args.out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
