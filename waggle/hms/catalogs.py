"""Catalog names in Thrift values: which structs can carry one, and filling them in. Pure.

A Hive 2 metastore has no catalogs; a Hive 3+ client expects every reply to name one. The fields that carry a
catalog name are found once per struct class by the spec walker (:mod:`waggle.hms.specs`).
"""

from __future__ import annotations

from typing import Any

from waggle.hms import specs

#: the struct fields that carry a catalog name
CATALOG_ATTRS = ("catName", "catalogName")

_plans: specs.Plans[bool] = specs.Plans(
    lambda _cls, field: True if field.is_string and field.attr in CATALOG_ATTRS else None)


def carries_catalog(cls: type) -> bool:
    """Whether objects of this class can hold a catalog field anywhere inside."""
    return _plans.reaches(cls)


def fill_catalog(obj: Any, catalog: str) -> None:
    """Set every empty ``catName`` / ``catalogName`` inside a reply to ``catalog``: what a Hive 3+ client gets
    from a Hive 3+ metastore, for replies of a metastore that has no catalogs."""
    def fill(parent: Any, field: specs.Field, _: bool) -> None:
        attr = field.attr
        if getattr(parent, attr, None) is None:
            setattr(parent, attr, catalog)

    _plans.visit(obj, fill)
