"""The README's configuration reference, generated from the settings registry.

``python -m waggle.config.reference`` prints the tables of the server and federation files and of the Hive
properties waggle reads; ``python -m waggle.config.reference sync`` those of a sync file. A unit test checks that
the README holds both as printed.
"""

from __future__ import annotations

import sys

from waggle.config.hive_properties import HIVE_METASTORE_SETTINGS, HIVE_SERVER_SETTINGS
from waggle.config.registry import markdown_table
from waggle.config.settings import METASTORE_SETTINGS, SERVER_SETTINGS
from waggle.config.sync_settings import SYNC_JOB_SETTINGS, SYNC_SETTINGS


def reference() -> str:
    """The tables of the server file, the federation file and the Hive properties."""
    return (f"### Server file\n\n{markdown_table(SERVER_SETTINGS)}\n\n"
            "### Federation file: every metastore (`primary-meta-store`, `federated-meta-stores[]`)\n\n"
            f"{markdown_table(METASTORE_SETTINGS)}\n\n"
            "### Hive properties waggle reads (`configuration-properties`)\n\nIn the server file:\n\n"
            f"{markdown_table(HIVE_SERVER_SETTINGS)}\n\nIn a metastore of the federation file:\n\n"
            f"{markdown_table(HIVE_METASTORE_SETTINGS)}")


def sync_reference() -> str:
    """The tables of a sync file: its top-level keys, then each job's."""
    return f"{markdown_table(SYNC_SETTINGS)}\n\nEach job:\n\n{markdown_table(SYNC_JOB_SETTINGS)}"


def main(argv: list[str]) -> None:  # pragma: no cover - documentation helper
    print(sync_reference() if argv[1:] == ["sync"] else reference())


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv)
