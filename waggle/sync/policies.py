"""A sync file read as the service's policies (``waggle sync --follow``): each job is a named policy that
follows its source continuously (``follow``) or runs at fire times (``every``, ``cron``), and may be disabled.

As Hive's REPL v3 policies (a scheduled query of ``REPL DUMP``/``REPL LOAD``, ``ScheduledQueryExecutionService``),
a policy's definition says only what and when: whether a batch is a bootstrap or incremental is the follower's
business (it reads the policy's checkpoint), so a policy moves from one to the other with no change to the file.

Pure: the file's text is read by :func:`waggle.sync.runner.read_sync_data`; every problem names the file, the key
and the value.
"""

from __future__ import annotations

from dataclasses import dataclass

from waggle.config.reader import Reader
from waggle.config.registry import setting_field
from waggle.config.sync_settings import Sync, SyncJob
from waggle.sync.runner import SyncConfigError, SyncRun, TableSpec, parse_sync_data, read_sync_data

FOLLOW, EVERY, CRON = "follow", "every", "cron"


@dataclass(frozen=True, slots=True)
class Policy:
    """One job of the file as a policy. Two policies are equal when their definitions are: an edit that leaves a
    policy equal leaves it running."""

    name: str
    spec: TableSpec
    follow: bool = setting_field(SyncJob.FOLLOW)
    every: float | None = setting_field(SyncJob.EVERY)  # seconds
    cron: str | None = setting_field(SyncJob.CRON)
    enabled: bool = setting_field(SyncJob.ENABLED)

    @property
    def kind(self) -> str:
        """FOLLOW (continuous), EVERY or CRON (scheduled)."""
        return EVERY if self.every is not None else CRON if self.cron is not None else FOLLOW

    @property
    def schedule_text(self) -> str:
        return f"every {self.every:g}s" if self.every is not None else f"cron {self.cron}" if self.cron else "follow"


@dataclass(frozen=True, slots=True)
class PolicyFile:
    """A sync file as the service reads it: the run's settings, the policies, and the service's own settings."""

    path: str
    run: SyncRun
    policies: tuple[Policy, ...]
    http_port: int = setting_field(Sync.HTTP_PORT)  # 0: no HTTP
    lease_seconds: float = setting_field(Sync.LEASE_SECONDS)
    poll_interval_max: float = setting_field(Sync.POLL_INTERVAL_MAX)
    execution_window: float = setting_field(Sync.EXECUTION_WINDOW)
    page_size: int = setting_field(Sync.PAGE_SIZE)

    def policy(self, name: str) -> Policy | None:
        return next((p for p in self.policies if p.name == name), None)


#: where the policy of ``waggle sync --follow`` given by its flags (no sync file) comes from, in messages
COMMAND_LINE = "(the command line)"


def policy_name_of(tables: str) -> str:
    """The name of a policy given by its ``--tables`` alone: its patterns' letters and digits, each run of anything
    else one ``_`` (``web.*`` is ``web``, ``web.clicks,web.visits`` is ``web_clicks_web_visits``)."""
    name = "".join(c if c.isascii() and c.isalnum() else "_" for c in tables.lower())
    name = "_".join(part for part in name.split("_") if part)[:128]
    return name or "policy"


def command_line_policy(federation_config: str, source: str, tables: str, name: str | None = None,
                        http_port: int | None = None, **job: object) -> PolicyFile:
    """The one continuous policy of ``waggle sync --follow`` (``--status``, ``--run-now``) given by the batch
    run's flags instead of a sync file: ``job`` holds the job keys the flags set (``mode``, ``target-database``,
    ...), None for those not given. Problems name the flag's key as a sync file would."""
    data: dict[str, object] = {"federation-config": federation_config, "source": source}
    if http_port is not None:
        data["http-port"] = http_port
    data["jobs"] = [{"name": name or policy_name_of(tables), "tables": tables, "follow": True,
                     **{key: value for key, value in job.items() if value is not None}}]
    return parse_policies(COMMAND_LINE, data)


def load_policies(path: str) -> PolicyFile:
    """Read a sync file as policies; :class:`~waggle.sync.runner.SyncConfigError` lists every problem."""
    return parse_policies(path, read_sync_data(path))


def parse_policies(path: str, data: dict[str, object]) -> PolicyFile:
    problems: list[str] = []
    run, jobs = parse_sync_data(path, data, problems)
    top = Reader(path, data, "", problems, nulls_are_unset=False)
    default_follow = top.get(Sync.FOLLOW)
    policies: list[Policy] = []
    seen: set[str] = set()
    for r, spec in jobs:
        policy = _policy(r, spec, default_follow)
        if policy is None:
            continue
        if policy.name in seen:
            r.fail(SyncJob.NAME.key, policy.name, "another job has this name (policy names are unique)")
            continue
        seen.add(policy.name)
        policies.append(policy)
    result = top.build(PolicyFile, path=path, run=run, policies=tuple(policies))
    if problems:
        raise SyncConfigError(problems)
    return result


def _policy(r: Reader, spec: TableSpec, default_follow: bool) -> Policy | None:
    name = r.get(SyncJob.NAME)
    if r.given(SyncJob.NAME.key) and name is None:
        return None  # refused by its validator: the problem is already said
    if not name:
        r.require(SyncJob.NAME.key, " with --follow: the policy's checkpoint and metrics are named by it")
        return None
    every, cron = r.get(SyncJob.EVERY), r.get(SyncJob.CRON)
    follow = r.get(SyncJob.FOLLOW, default_follow)
    given_follow = r.given(SyncJob.FOLLOW.key) and follow
    if every is not None and cron is not None:
        r.fail(SyncJob.CRON.key, cron, "a policy has 'every' or 'cron', not both")
        return None
    if given_follow and (every is not None or cron is not None):
        key = SyncJob.EVERY.key if every is not None else SyncJob.CRON.key
        r.fail(key, every if every is not None else cron, "'follow: true' is continuous: no 'every' nor 'cron' with it")
        return None
    if not follow and every is None and cron is None:
        r.require(SyncJob.FOLLOW.key, " with --follow: 'follow: true' (continuous), 'every: 30m' or 'cron: ...' "
                  "(or a top-level 'follow: true')")
        return None
    return r.build(Policy, {"follow": follow and every is None and cron is None}, name=name, spec=spec)


__all__ = ["COMMAND_LINE", "CRON", "EVERY", "FOLLOW", "Policy", "PolicyFile", "SyncConfigError", "command_line_policy",
           "load_policies", "parse_policies", "policy_name_of"]
