"""``waggle demo``'s options: every port it opens can be moved, and its files can be kept."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from waggle.cli import build_parser
from waggle.config.loader import load
from waggle.local.demo import write_configs


def test_the_demo_moves_its_http_port_and_keeps_its_files_when_asked(tmp_path: Path) -> None:
    args = build_parser().parse_args(["demo", "--port", "48870", "--http-port", "18001", "--keep"])
    assert (args.port, args.http_port, args.keep, args.workdir) == (48870, 18001, True, None)
    defaults = build_parser().parse_args(["demo"])
    assert (defaults.port, defaults.http_port, defaults.keep) == (48869, 18000, False)
    stores = [SimpleNamespace(uri=f"thrift://127.0.0.1:{p}") for p in (9083, 9084)]
    server, federation = write_configs(tmp_path, 48870, stores[0], stores[1], 18001)  # type: ignore[arg-type]
    config = load(str(server), str(federation))
    assert (config.server.port, config.server.endpoint_port) == (48870, 18001)
