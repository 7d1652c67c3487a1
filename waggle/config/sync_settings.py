"""The keys of a sync file (``waggle sync --config``), declared once like every other setting
(:mod:`waggle.config.registry`): read by :mod:`waggle.sync.runner` (a batch run) and :mod:`waggle.sync.policies`
(the service's policies: ``waggle sync --follow``), listed in docs/reference/sync-configuration.md from here
(``python -m waggle.docs``)."""

from __future__ import annotations

from waggle.config import hive_values
from waggle.config.cron import parse_cron
from waggle.config.registry import REQUIRED, Section, Setting
from waggle.config.validators import Invalid, Validator, integer, one_of, optional_name, optional_text, yes_no

SYNC = Section("sync")
SYNC_JOB = Section("sync job")
_FLAG = "true or false"
_DURATION = "a duration such as 30s, 15m, 2h or 1d (seconds when no unit)"


def _seconds(low: float) -> Validator[float]:
    """A duration as the project's other durations spell it (:func:`waggle.config.hive_values.duration_ms`),
    with no unit meaning seconds; in seconds, at least ``low``."""

    def convert(v: object) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise Invalid(f"expected {_DURATION}")
        text = str(v).strip()
        try:
            seconds = float(text) if text.replace(".", "", 1).isdigit() else hive_values.duration_ms(text) / 1000
        except ValueError:
            raise Invalid(f"expected {_DURATION}", shown=text) from None
        if seconds < low:
            raise Invalid(f"expected at least {low:g}s", shown=text)
        return seconds

    return Validator(_DURATION, convert)


def _optional_seconds(low: float) -> Validator[float | None]:
    seconds = _seconds(low)
    return Validator(seconds.expect, lambda v: None if v is None else seconds.convert(v))


def _cron() -> Validator[str | None]:
    """Five cron fields (minute hour day-of-month month day-of-week), checked by the cron
    rules (:mod:`waggle.config.cron`), kept as text (the schedule parses it)."""
    expect = "five cron fields such as '*/15 * * * *' (minute hour day-of-month month day-of-week, UTC)"

    def convert(v: object) -> str | None:
        if v is None:
            return None
        if not isinstance(v, str):
            raise Invalid(f"expected {expect}")
        try:
            parse_cron(v)
        except ValueError as exc:
            raise Invalid(f"expected {expect}: {exc}", shown=v) from None
        return v.strip()

    return Validator(expect, convert)


def _policy_name() -> Validator[str | None]:
    expect = "a name of letters, digits, '_', '-' or '.' (at most 128)"

    def convert(v: object) -> str | None:
        if v is None:
            return None
        text = str(v)
        if not text or len(text) > 128 or not all(c.isascii() and (c.isalnum() or c in "_-.") for c in text):
            raise Invalid(f"expected {expect}", shown=text)
        return text

    return Validator(expect, convert)


class Sync:
    """Top-level keys of a sync file."""

    FEDERATION_CONFIG = SYNC.add(
        "federation-config", "", None,
        "The proxy's federation file (a relative path is relative to the sync file); its primary is the target. "
        "`--federation-config` wins.", REQUIRED,
    )
    SOURCE = SYNC.add("source", None, optional_name(), "Default `source` of every job.")
    MASTER = SYNC.add("master", None, optional_text(),
                      "Spark master for copies (default `local[*]`, or what `spark-submit` set); `--master` wins.")
    INCREMENTAL = SYNC.add("incremental", False, yes_no(_FLAG, strip=False),
                           "Like `--incremental`: skip tables with no notification event since the last sync.")
    PROPAGATE_DELETES = SYNC.add("propagate-deletes", False, yes_no(_FLAG, strip=False),
                                 "Default `propagate-deletes` of every job.")
    MAX_WRITES_PER_SECOND = SYNC.add(
        "max-writes-per-second", 20, integer(0),
        "Write calls per second to the target metastore, shared by every job and writer of the run; `0` is no "
        "limit. A partition write is one call of up to 500 partitions, so the default leaves batched writes "
        "their full speed and holds back floods of small calls. The report shows the rate reached. "
        "`--max-writes-per-second` wins.",
    )
    FOLLOW = SYNC.add("follow", False, yes_no(_FLAG, strip=False),
                      "Default `follow` of every job: with `waggle sync --follow`, every job without `every` or "
                      "`cron` follows its source continuously.")
    HTTP_PORT = SYNC.add("http-port", 9184, integer(0, 65535),
                         "`waggle sync --follow`: the port of `/healthz`, `/metrics` and "
                         "`POST /policies/NAME/run` (on every interface); `0` is none.")
    LEASE_SECONDS = SYNC.add("lease-seconds", 60.0, _seconds(1.0),
                             "`waggle sync --follow`: how long a policy's lease in the primary lasts without renewal "
                             "(one process at a time follows a policy).")
    POLL_INTERVAL_MAX = SYNC.add("poll-interval-max", 1.0, _seconds(0.1),
                                 "`waggle sync --follow`: the longest wait between two reads of a caught-up source's "
                                 "events (the wait starts at 0.1s and doubles while there is nothing new).")
    EXECUTION_WINDOW = SYNC.add("execution-window", 60.0, _seconds(1.0),
                                "`waggle sync --follow`: a continuous policy's row in "
                                "`waggle_sys.replication_metrics` covers its batches of this long.")
    PAGE_SIZE = SYNC.add("page-size", 1000, integer(1, 100_000),
                         "`waggle sync --follow`: notification events read and applied per batch.")
    JOBS = SYNC.add("jobs", (), None, "The list of jobs, each with the keys below.", REQUIRED)


class SyncJob:
    """Keys of each job (``jobs[]``) of a sync file."""

    NAME = SYNC_JOB.add("name", None, _policy_name(),
                        "The policy's name, unique in the file: its checkpoint, its rows of "
                        "`waggle_sys.replication_metrics` and its series are named by it. Required with `--follow` "
                        "(renaming a policy starts it again from a bootstrap).", "none (required with `--follow`)")
    FOLLOW = SYNC_JOB.add("follow", False, yes_no(_FLAG, strip=False),
                          "`--follow`: apply the source's notification events continuously (a bootstrap first, then "
                          "incremental batches, with no change to the job).", "top-level `follow`")
    EVERY = SYNC_JOB.add("every", None, _optional_seconds(1.0),
                         "`--follow`: run the policy (until caught up) at this interval instead, e.g. `30m`.")
    CRON = SYNC_JOB.add("cron", None, _cron(),
                        "`--follow`: run the policy (until caught up) at these times instead, five cron fields in "
                        "UTC, e.g. `*/15 * * * *`.")
    ENABLED = SYNC_JOB.add("enabled", True, yes_no(_FLAG, strip=False),
                           "`--follow`: `false` stops the policy (after its batch in hand) and keeps its checkpoint; "
                           "`true` again resumes from it.")

    TABLES = SYNC_JOB.add("tables", "", None,
                          "`DB.TABLE` regexes, comma-separated or a YAML list (like `--tables`).", REQUIRED)
    SOURCE = SYNC_JOB.add("source", None, optional_name(), "The member to read from (like `--source`).",
                          "top-level `source`")
    MODE = SYNC_JOB.add("mode", "mirror", one_of(("mirror", "copy"), "mirror or copy", strings_only=False),
                        "`mirror` (metadata only) or `copy` (the data files too), like `--mode`.")
    TARGET_DATABASE = SYNC_JOB.add("target-database", None, optional_text(),
                                   "Like `--target-database`.", "the source database's name")
    PARTITION_FILTER = SYNC_JOB.add("partition-filter", None, optional_text(), "Like `--partition-filter`.")
    LOCATION_ROOT = SYNC_JOB.add("location-root", None, optional_text(), "Like `--location-root`.",
                                 "the target database's location")
    PROPAGATE_DELETES = SYNC_JOB.add("propagate-deletes", False, yes_no(_FLAG, strip=False),
                                     "Like `--propagate-deletes`.", "top-level `propagate-deletes`")
    SWITCH_MODE = SYNC_JOB.add("switch-mode", False, yes_no(_FLAG, strip=False), "Like `--switch-mode`.")


SYNC_SETTINGS: tuple[Setting[object], ...] = SYNC.settings
SYNC_JOB_SETTINGS: tuple[Setting[object], ...] = SYNC_JOB.settings

