"""Command line: ``waggle serve | check | demo``.

This module parses arguments and nothing else. ``serve`` and ``demo`` monkey-patch with gevent before
importing anything that touches sockets; it is the only place in waggle that patches.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from waggle.config.model import WaggleConfig


def _config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server-config", metavar="FILE", help="server YAML (Waggle Dance's waggle-dance-server.yml)")
    p.add_argument("--federation-config", metavar="FILE", required=True,
                   help="federation YAML (Waggle Dance's waggle-dance-federation.yml)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="waggle", description="A federating Hive Metastore proxy.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="serve the HMS Thrift API in front of the configured metastores")
    _config_args(serve)
    check = sub.add_parser("check", help="validate the configuration files and exit")
    _config_args(check)
    demo = sub.add_parser("demo", help="start two local metastores with sample data and waggle in front")
    demo.add_argument("--port", type=int, default=48869, help="waggle's Thrift port (default 48869)")
    demo.add_argument("--workdir", default=None, help="where the metastores keep their files (default: a temp dir)")
    return parser


def _check(args: argparse.Namespace) -> int:
    from waggle.config.loader import ConfigError, load

    try:
        config = load(args.server_config, args.federation_config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    for warning in config.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    fed = config.federation
    problems = _tunnel_problems(config)
    for problem in problems:
        print(f"error: {args.federation_config}: {problem}", file=sys.stderr)
    if problems:
        return 2
    print(f"ok: {len(fed.members)} metastore(s), primary '{fed.primary.name}', "
          f"{config.server.database_resolution.value} resolution, port {config.server.port}")
    return 0


def _tunnel_problems(config: WaggleConfig) -> list[str]:
    """The key and known-hosts files of every tunnel: present, readable and usable (nothing is connected)."""
    from waggle.tunnel.spec import check_files, spec_for

    return [p for m in config.federation.members if m.tunnel is not None for p in check_files(spec_for(m))]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.version:
        from importlib.metadata import version

        print(version("waggle"))
        return 0
    if args.command == "check":
        return _check(args)
    if args.command in ("serve", "demo"):
        from gevent import monkey

        monkey.patch_all()
        if args.command == "serve":
            from waggle.app import serve

            return serve(args.server_config, args.federation_config)
        from waggle.local.demo import run_demo

        return run_demo(port=args.port, workdir=args.workdir)
    build_parser().print_help()
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
