"""Command line: ``waggle serve | check | access | sync | demo``.

This module parses arguments and nothing else. ``serve`` and ``demo`` monkey-patch with gevent before
importing anything that touches sockets; it is the only place in waggle that patches.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from waggle.config.kinds import Privilege

#: Each command's example, shown first in its ``--help`` (``waggle`` is the command itself).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "waggle": ("waggle demo", "waggle check --strict --server-config waggle-server.yml "
               "--federation-config waggle-federation.yml",
               "waggle serve --server-config waggle-server.yml --federation-config waggle-federation.yml"),
    "serve": ("waggle serve --server-config waggle-server.yml --federation-config waggle-federation.yml",),
    "check": ("waggle check --strict --server-config waggle-server.yml --federation-config waggle-federation.yml",),
    "sync": ("waggle sync --federation-config waggle-federation.yml --source analytics --tables 'sales.*'",
             "waggle sync --config sync.yml --follow"),
    "access": ("waggle access --server-config waggle-server.yml --federation-config waggle-federation.yml "
               "--user alice --group analysts analytics_sales.orders select",),
    "metastore": ("waggle metastore --port 9083 --dir ./metastore",),
    "demo": ("waggle demo",),
}
#: The docs pages each command's ``--help`` points to, relative to the repository (a unit test checks they exist);
#: ``--help`` names them as pages of the docs site (:func:`site_page`), since an installed waggle has no docs/.
DOCS: dict[str, tuple[str, ...]] = {
    "waggle": ("docs/getting-started/quick-start.md", "docs/getting-started/your-own-metastores.md"),
    "serve": ("docs/operations/running.md", "docs/operations/workers.md"),
    "check": ("docs/getting-started/your-own-metastores.md", "docs/reference/configuration.md"),
    "sync": ("docs/guides/sync.md", "docs/guides/sync-follow.md", "docs/reference/sync-configuration.md"),
    "access": ("docs/guides/grants.md",),
    "metastore": ("docs/development.md",),
    "demo": ("docs/getting-started/quick-start.md",),
}
#: What waggle is, in ``waggle --help``.
SUMMARY = "a federating Hive Metastore proxy"
#: Every command and flag.
CLI_REFERENCE = "docs/reference/cli.md"
#: Where the docs site is, as ``--help`` says it.
SITE = "waggle's docs site (from a clone, ./scripts/docs.sh builds it and serves it on http://127.0.0.1:8000/)"


def site_page(path: str) -> str:
    """A page of docs/ as the docs site serves it: ``docs/guides/sync.md`` is ``guides/sync/``."""
    page = path.removeprefix("docs/").removesuffix(".md")
    return "" if page == "index" else f"{page.removesuffix('/index')}/"


def _described(command: str, what: str) -> dict[str, Any]:
    """A parser's description (its example first, then what the command does) and epilog (its docs pages)."""
    lines = EXAMPLES[command]
    example = f"Example: {lines[0]}" if len(lines) == 1 else "Example:\n" + "\n".join(f"  {x}" for x in lines)
    docs = "\n".join(f"  {site_page(path)}" for path in DOCS[command])
    return {"description": f"{example}\n\n{what[0].upper()}{what[1:]}.",
            "epilog": f"Docs, pages of {SITE}:\n{docs}\n  {site_page(CLI_REFERENCE)} (every command and flag)",
            "formatter_class": argparse.RawDescriptionHelpFormatter}


def _command(sub: Any, name: str, what: str) -> argparse.ArgumentParser:
    """A subcommand: ``what`` is its line in ``waggle --help`` and, after its example, its own help's text."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=what, **_described(name, what))
    return parser


def _config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server-config", metavar="FILE", help="server YAML (Waggle Dance's waggle-dance-server.yml)")
    p.add_argument("--federation-config", metavar="FILE", required=True,
                   help="federation YAML (Waggle Dance's waggle-dance-federation.yml)")


def _kerberos_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--principal", metavar="PRINCIPAL", help="log in to Kerberized metastores as this principal, "
                   "with --keytab (default: waggle's keytab from --server-config, else the ticket cache, KRB5CCNAME)")
    p.add_argument("--keytab", metavar="FILE", help="the keytab of --principal")


def _kerberos_problem(args: argparse.Namespace) -> str | None:
    if bool(args.principal) != bool(args.keytab):
        return "--principal and --keytab go together"
    return None


def _writes_per_second(text: str) -> int:
    from waggle.config.sync_settings import Sync

    setting = Sync.MAX_WRITES_PER_SECOND
    assert setting.parse is not None
    try:
        return setting.parse.convert(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"invalid value '{text}': expected {setting.parse.expect}") from None


def _workers(text: str) -> int:
    from waggle.workers.count import parse

    try:
        return parse(text, "--workers")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--workers: ")) from None


def build_parser() -> argparse.ArgumentParser:
    from waggle.config.sync_settings import Sync, SyncJob

    parser = argparse.ArgumentParser(prog="waggle", **_described("waggle", SUMMARY))
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="{serve,check,access,sync,demo,metastore}")
    serve = _command(sub, "serve", "serve the HMS Thrift API in front of the configured metastores")
    _config_args(serve)
    serve.add_argument("--strict", action="store_true",
                       help="a key waggle does not know (a typo) is an error, and waggle does not start (default: a "
                       "warning, as Waggle Dance's files may carry keys waggle does not read)")
    serve.add_argument("--workers", metavar="N", type=_workers,
                       help="serving processes on the one port: a number or 'auto' (the CPUs this process may use); "
                       "default: the server file's 'workers', else $WAGGLE_WORKERS, else 1")
    worker = sub.add_parser("_worker")  # a worker process of 'serve --workers', started by its supervisor
    worker.add_argument("--control-fd", type=int, required=True)
    worker.add_argument("--budget-fd", type=int, required=True)
    check = _command(sub, "check", "validate the configuration files and exit")
    _config_args(check)
    check.add_argument("--strict", action="store_true",
                       help="a key waggle does not know (a typo) is an error, not a warning")
    check.add_argument("--connect", action="store_true",
                       help="also connect to every metastore as waggle would (tunnel, TLS, Kerberos) and say how")
    _kerberos_args(check)
    access = _command(sub, "access", "say whether a user may see or do something, and which rule decides "
                      "(the grants of the server file's authorization)")
    _config_args(access)
    access.add_argument("--user", required=True, help="the user's short name (as auth_to_local makes it)")
    access.add_argument("--group", action="append", metavar="GROUP", help="a group of the user (repeat for more); "
                        "default: the groups authorization.groups finds for the user")
    access.add_argument("target", metavar="DB[.TABLE]", help="a database or table, in waggle's names (with its "
                        "member's prefix)")
    access.add_argument("privilege", nargs="?", choices=[p.value for p in Privilege],
                        help="the privilege to decide; without it, whether the object is visible, and each privilege")
    sync = _command(sub, "sync", "bring a federated metastore's tables into the primary (mirror or copy)")
    sync.add_argument("--config", metavar="FILE",
                      help="a sync file with many table jobs (docs/reference/sync-configuration.md)")
    sync.add_argument("--federation-config", metavar="FILE", help="the federation file; the primary is the target")
    sync.add_argument("--server-config", metavar="FILE", help="waggle's server file: its Kerberos keytab is used "
                      "for Kerberized metastores unless --principal is given")
    _kerberos_args(sync)
    sync.add_argument("--source", metavar="NAME", help="the federated metastore to read from")
    sync.add_argument("--tables", metavar="DB.TABLE[,DB.TABLE...]", help="tables, each part a regex")
    sync.add_argument("--mode", choices=["mirror", "copy"], default=SyncJob.MODE.default,
                      help="mirror: metadata pointing at the source's data; copy: copy the data files too")
    sync.add_argument("--target-database", metavar="DB", help="target database (default: the source's name)")
    sync.add_argument("--partition-filter", metavar="EXPR", help="only partitions matching this Hive filter")
    sync.add_argument("--location-root", metavar="URL", help="copy mode: where table copies go "
                      "(default: the target database's location)")
    sync.add_argument("--propagate-deletes", action="store_true",
                      help="drop target partitions whose source partition is gone")
    sync.add_argument("--switch-mode", action="store_true",
                      help="allow turning an existing mirror into a copy, or a copy into a mirror")
    sync.add_argument("--incremental", action="store_true",
                      help="skip tables with no notification event since the last sync (metastores with a log)")
    sync.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    sync.add_argument("--master", metavar="URL", help="Spark master for copies (default: local[*], or "
                      "spark-submit's)")
    sync.add_argument("--max-writes-per-second", metavar="N", type=_writes_per_second,
                      help="write calls per second to the target metastore, over all jobs of the run; 0: no limit "
                      f"(default: the sync file's max-writes-per-second, else {Sync.MAX_WRITES_PER_SECOND.default})")
    sync.add_argument("--report", metavar="FILE", help="also write the report as JSON")
    sync.add_argument("--no-progress", action="store_true", help="no progress bar on a terminal, and no progress "
                      "lines (every 10 s) elsewhere")
    service = sync.add_mutually_exclusive_group()
    service.add_argument("--follow", action="store_true", help="run the sync file's policies as a service "
                         "(continuous and scheduled; hot edits of the file) until SIGTERM; without --config, the "
                         "one continuous policy that --federation-config, --source, --tables and the other job "
                         "flags give")
    service.add_argument("--run-now", metavar="NAME", help="run policy NAME at once in the running service (its "
                         "HTTP port), else once in this process until caught up (a sync file's, or the flags')")
    service.add_argument("--status", action="store_true", help="each policy's checkpoint, lag, last execution, "
                         "failed tables and whether it is failing (exit code 2 when one is): a sync file's, or the "
                         "flags' policy")
    sync.add_argument("--name", metavar="NAME", help="--follow without --config: the policy's name, which names its "
                      "checkpoint, rows and series (default: from --tables, 'web.*' is 'web')")
    sync.add_argument("--http-port", metavar="PORT", type=int, help="--follow without --config: the port of "
                      f"/healthz, /metrics and POST /policies/NAME/run (default {Sync.HTTP_PORT.default}; 0: none)")
    metastore = _command(sub, "metastore", "run one local Hive 2.3 metastore for development (Java 17), "
                         "writing notification events as production ones do")
    metastore.add_argument("--port", type=int, default=9083, help="its Thrift port (default 9083)")
    metastore.add_argument("--dir", default=None, help="where it keeps its files; reuse it to keep the tables "
                           "(default: a new temporary directory)")
    metastore.add_argument("--events-ttl", metavar="SECONDS", type=int, default=None,
                           help="seconds notification events are kept (Hive's default: 86400)")
    metastore.add_argument("--no-events", action="store_true", help="write no notification events")
    demo = _command(sub, "demo", "start two local metastores with sample data and waggle in front")
    demo.add_argument("--port", type=int, default=48869, help="waggle's Thrift port (default 48869)")
    demo.add_argument("--http-port", type=int, default=18000,
                      help="waggle's HTTP port: health, readiness, metrics (default 18000)")
    demo.add_argument("--rest-port", type=int, default=18181,
                      help="waggle's Iceberg REST port (default 18181)")
    demo.add_argument("--workdir", default=None, help="where the demo keeps its files: the metastores' data, the "
                      "configuration files, what a sync writes; kept after Ctrl-C (default: a temporary directory)")
    demo.add_argument("--keep", action="store_true", help="keep the temporary directory after Ctrl-C, and say where")
    return parser


def _check(args: argparse.Namespace) -> int:
    from waggle.checks import file_problems
    from waggle.config.check import tls_findings
    from waggle.config.loader import ConfigError, load

    try:
        config = load(args.server_config, args.federation_config, strict=args.strict)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        for warning in exc.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        return 2
    for warning in (*config.warnings, *tls_findings(config)[1]):
        print(f"warning: {warning}", file=sys.stderr)
    problems = file_problems(config)
    grants = config.server.authorization
    if grants is not None:
        from waggle.grants.check import file_problems as grants_files

        problems += grants_files(grants, config.server_file or "(server defaults)")
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        return 2
    fed = config.federation
    if args.connect:
        from waggle.upstream.blocking import kerberos_identity, reach

        pairing = _kerberos_problem(args)
        if pairing:
            print(f"error: {pairing}", file=sys.stderr)
            return 2
        credentials = kerberos_identity(args.principal, args.keytab, config.server.security.kerberos)
        failed = 0
        shown: list[str] = []
        for member in fed.members:
            try:
                print(f"ok: metastore '{member.name}': {reach(member, credentials, shown=shown)}")
            except Exception as exc:
                failed += 1
                print(f"error: {exc}", file=sys.stderr)
        if failed:
            return 2
        if grants is not None:
            from waggle.grants.check import unmatched

            for warning in unmatched(grants, shown):
                print(f"warning: {warning}", file=sys.stderr)
    print(f"ok: {len(fed.members)} metastore(s), primary '{fed.primary.name}', "
          f"{config.server.database_resolution.value} resolution, port {config.server.port}")
    return 0


def _access(args: argparse.Namespace) -> int:
    from waggle.config.loader import ConfigError, load
    from waggle.grants.explain import explain

    try:
        config = load(args.server_config, args.federation_config, serving=False)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    grants = config.server.authorization
    if grants is None:
        print(f"error: {args.server_config or 'the server file'} has no authorization block: every caller may see "
              "and do what the metastores' access-control-type allows", file=sys.stderr)
        return 2
    allowed, lines = explain(grants, args.user, args.group, args.target,
                             Privilege(args.privilege) if args.privilege else None)
    print("\n".join(lines))
    return 0 if allowed else 1


def _sync(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from waggle.common.logging import configure
    from waggle.sync.runner import SyncConfigError, SyncRun, TableSpec, load_sync_file, parse_patterns, run

    # without a sync file, the flags say what to sync
    missing = [] if args.config else [f"--{k}" for k in ("federation-config", "source", "tables")
                                      if not getattr(args, k.replace("-", "_"))]
    if args.follow or args.run_now or args.status:
        if missing:
            print(f"error: --follow, --run-now and --status need --config FILE, or {', '.join(missing)}",
                  file=sys.stderr)
            return 1
        from waggle.sync import service_main, status

        if args.follow:
            return service_main.main_follow(args)
        return service_main.run_now(args) if args.run_now else status.status(args)
    configure()
    try:
        if args.config:
            sync = load_sync_file(args.config)
            if args.federation_config:
                sync = replace(sync, federation_config=args.federation_config)
        else:
            if missing:
                print(f"error: waggle sync needs --config FILE, or {', '.join(missing)}", file=sys.stderr)
                return 1
            patterns, bad = parse_patterns(args.tables)
            if bad:
                raise SyncConfigError([f"--tables: '{p}': {why}" for p, why in bad])
            sync = SyncRun(args.federation_config, (TableSpec(
                args.source, patterns, args.mode, args.target_database, args.partition_filter, args.location_root,
                args.propagate_deletes, args.switch_mode),))
    except SyncConfigError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 1
    pairing = _kerberos_problem(args)
    if pairing:
        print(f"error: {pairing}", file=sys.stderr)
        return 1
    sync = replace(sync, dry_run=args.dry_run, incremental=args.incremental or sync.incremental,
                   master=args.master or sync.master, report=args.report,
                   progress=False if args.no_progress else None, principal=args.principal, keytab=args.keytab,
                   server_config=args.server_config)
    if args.max_writes_per_second is not None:
        sync = replace(sync, max_writes_per_second=args.max_writes_per_second)
    return run(sync)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.version:
        from importlib.metadata import version

        print(version("waggle"))
        return 0
    if args.command == "check":
        return _check(args)
    if args.command == "sync":
        return _sync(args)
    if args.command == "access":
        return _access(args)
    if args.command == "metastore":
        from waggle.local.dev import run_metastore

        return run_metastore(args.dir, args.port, not args.no_events, args.events_ttl)
    if args.command in ("serve", "demo", "_worker"):
        # prometheus_client first: its metrics then take plain thread locks, which an increment (that never
        # yields) holds for no time, instead of gevent's (0.7 us more per counted call, measured)
        import prometheus_client  # noqa: F401
        from gevent import monkey

        monkey.patch_all()
        if args.command == "serve":
            from waggle.app import serve

            return serve(args.server_config, args.federation_config, args.workers, args.strict)
        if args.command == "_worker":
            from waggle.workers.worker import run

            return run(args.control_fd, args.budget_fd)
        from waggle.local.demo import run_demo

        return run_demo(port=args.port, workdir=args.workdir, http_port=args.http_port, keep=args.keep,
                        rest_port=args.rest_port)
    build_parser().print_help()
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
