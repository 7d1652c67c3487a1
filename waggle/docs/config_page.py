"""The configuration reference pages, generated from the settings registry.

:func:`configuration_page` is ``docs/reference/configuration.md`` (the server and federation files and the Hive
properties waggle reads); :func:`sync_configuration_page` is ``docs/reference/sync-configuration.md``.
``python -m waggle.docs`` writes both, with the other generated pages, and a unit test checks that the committed
pages are current.
"""

from __future__ import annotations

from waggle.config.authorization_settings import AUTHORIZATION_SETTINGS, GRANT_RULE_SETTINGS
from waggle.config.hive_properties import HIVE_METASTORE_SETTINGS, HIVE_SERVER_SETTINGS
from waggle.config.member_settings import METASTORE_SETTINGS
from waggle.config.registry import markdown_table
from waggle.config.settings import RATE_RULE_SETTINGS, REST_CLIENT_SETTINGS, SERVER_SETTINGS
from waggle.config.sync_settings import SYNC_JOB_SETTINGS, SYNC_SETTINGS
from waggle.docs import generated

_SOURCES = ("waggle/config/settings.py, waggle/config/member_settings.py, waggle/config/authorization_settings.py "
            "and waggle/config/hive_properties.py")
_SYNC_SOURCES = "waggle/config/sync_settings.py"

_CONFIGURATION_INTRO = """\
waggle reads Waggle Dance's two files:

- the server file (`--server-config`, optional: all of its keys have defaults);
- the federation file (`--federation-config`).

Keys may be written in kebab-case (`database-resolution`), camelCase (`databaseResolution`), snake_case,
and as dotted paths (`endpoint.port: 18000`) or nested maps, just as Spring's relaxed binding accepts them
in Waggle Dance. Maps of your own data (`configuration-properties`, `database-name-mapping`) keep their keys
exactly as written. Commented examples are in the repository's `conf/` directory, and
[connecting your own metastores](../getting-started/your-own-metastores.md) builds a federation file step by step.

Keys marked *(accepted with a warning)* exist in Waggle Dance but are not implemented by waggle. They are
reported by name and otherwise ignored. Unknown keys (typos) are reported too, with the nearest known key;
`waggle check --strict` fails on them.
"""

_SYNC_INTRO = """\
A sync file (`waggle sync --config FILE`) holds many table jobs; with `waggle sync --follow` each job is a
policy that runs as a service. Its top-level keys are defaults of every job; a job's own key wins, and a
command-line flag wins over both where one exists. The [sync guide](../guides/sync.md#a-sync-file) shows one,
and [following the sources](../guides/sync-follow.md) runs one as a service.
"""


def reference() -> str:
    """The tables of the server file, the federation file and the Hive properties."""
    return (f"## Server file\n\n{markdown_table(SERVER_SETTINGS)}\n\n"
            f"Each rule of `limits.rates`:\n\n{markdown_table(RATE_RULE_SETTINGS)}\n\n"
            f"Each client of `iceberg-rest.clients`:\n\n{markdown_table(REST_CLIENT_SETTINGS)}\n\n"
            "The keys of `authorization` (the [grants guide](../guides/grants.md)):\n\n"
            f"{markdown_table(AUTHORIZATION_SETTINGS)}\n\n"
            "Each rule of `authorization.rules`, and of a policy file's `rules`:\n\n"
            f"{markdown_table(GRANT_RULE_SETTINGS)}\n\n"
            "## Federation file: every metastore (`primary-meta-store`, `federated-meta-stores[]`)\n\n"
            f"{markdown_table(METASTORE_SETTINGS)}\n\n"
            "## Hive properties waggle reads (`configuration-properties`)\n\nIn the server file:\n\n"
            f"{markdown_table(HIVE_SERVER_SETTINGS)}\n\nIn a metastore of the federation file:\n\n"
            f"{markdown_table(HIVE_METASTORE_SETTINGS)}")


def sync_reference() -> str:
    """The tables of a sync file: its top-level keys, then each job's."""
    return f"{markdown_table(SYNC_SETTINGS)}\n\nEach job:\n\n{markdown_table(SYNC_JOB_SETTINGS)}"


def configuration_page() -> str:
    """``docs/reference/configuration.md``."""
    return (f"# Configuration reference\n\n{generated(_SOURCES)}\n\n{_CONFIGURATION_INTRO}\n"
            f"{reference()}\n")


def sync_configuration_page() -> str:
    """``docs/reference/sync-configuration.md``."""
    return (f"# Sync file reference\n\n{generated(_SYNC_SOURCES)}\n\n{_SYNC_INTRO}\n## Top-level keys\n\n"
            f"{markdown_table(SYNC_SETTINGS)}\n\n## Each job (`jobs[]`)\n\n{markdown_table(SYNC_JOB_SETTINGS)}\n")
