"""The primary metastore's token store (``add_token``/``get_token``/``remove_token``), a key-value store that
waggle keeps its own records in: its delegation tokens' renewals, and Hive 4 data connectors. It calls through
the primary's pool, so it sits above it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T

if TYPE_CHECKING:
    from waggle.upstream.pool import UpstreamPool


class MetastoreTokenStore:
    """The primary metastore's token store (``add_token``/``get_token``/``remove_token``), a key-value store
    that waggle keeps its own records in: its delegation tokens' renewals, and Hive 4 data connectors."""

    def __init__(self, primary: Callable[[], UpstreamPool]) -> None:
        self._primary = primary

    def put(self, key: str, value: str) -> None:
        """Add or replace the record (the metastore's ``add_token`` never overwrites: a renewal removes first)."""
        pool = self._primary()
        added = pool.invoke(None, "add_token", T.add_token_args(token_identifier=key, delegation_token=value),
                            T.add_token_result)
        if not added.success:
            pool.invoke(None, "remove_token", T.remove_token_args(token_identifier=key), T.remove_token_result)
            pool.invoke(None, "add_token", T.add_token_args(token_identifier=key, delegation_token=value),
                        T.add_token_result)

    def get(self, key: str) -> str | None:
        result = self._primary().exchange(None, "get_token", T.get_token_args(token_identifier=key),
                                          T.get_token_result)
        value = getattr(result, "success", None)
        return value if isinstance(value, str) and value else None

    def remove(self, key: str) -> bool:
        result = self._primary().invoke(None, "remove_token", T.remove_token_args(token_identifier=key),
                                        T.remove_token_result)
        return bool(result.success)

    def identifiers(self, prefix: str) -> list[str]:
        """The keys of the store that start with ``prefix``."""
        result = self._primary().invoke(None, "get_all_token_identifiers", T.get_all_token_identifiers_args(),
                                        T.get_all_token_identifiers_result)
        return [str(k) for k in result.success or () if str(k).startswith(prefix)]
