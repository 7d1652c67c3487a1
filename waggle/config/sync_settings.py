"""The keys of a sync file (``waggle sync --config``), declared once like every other setting
(:mod:`waggle.config.registry`): read by :mod:`waggle.sync.runner`, listed in the README from here
(``python -m waggle.config.reference sync``)."""

from __future__ import annotations

from waggle.config.registry import REQUIRED, Section, Setting
from waggle.config.validators import integer, one_of, optional_name, optional_text, yes_no

SYNC = Section("sync")
SYNC_JOB = Section("sync job")
_FLAG = "true or false"


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
    JOBS = SYNC.add("jobs", (), None, "The list of jobs, each with the keys below.", REQUIRED)


class SyncJob:
    """Keys of each job (``jobs[]``) of a sync file."""

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

