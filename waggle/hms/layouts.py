"""Which field of a method's result a client reads an exception from: the layouts of the client releases.

Hive releases declare some methods' exceptions at different field ids (:data:`waggle.hms.declared.DECLARED`,
derived from each release's generated code). A client reads an exception only where its own release declares
it: anything else is an "unknown result", or, worse, another class (a MetaException written at field 1 of
``get_partition_names`` is a NoSuchObjectException to a Hive 3.1+ client, which then stops retrying).

waggle cannot tell Hive 3.1 from Hive 4 clients, so it writes its own errors in one of two layouts: Hive 2.3's,
or the one Hive 3.1 and 4 agree on (:class:`Layout`). Pure: a table lookup.
"""

from __future__ import annotations

import enum

from waggle.hms.declared import DECLARED


class Layout(enum.Enum):
    """The exception layout a client reads."""

    #: Hive 2.3's declarations (Spark's built-in client, hmsclient)
    HIVE_2 = "2.3"
    #: where Hive 3.1 and 4 agree (waggle's IDL elsewhere): Trino and every Hive 3+ client
    CURRENT = "3.1+"

    @property
    def releases(self) -> tuple[str, ...]:
        return ("2.3",) if self is Layout.HIVE_2 else ("3.1", "4.x")


def agreed_fields(method: str, layout: Layout) -> dict[str, int] | None:
    """Exception class name -> the field id every release of ``layout`` that has ``method`` reads it from.

    A class some of those releases do not declare (or declare at different ids) is left out: no field reaches
    all of them. None when ``layout``'s releases read ``method`` as waggle's IDL declares it.
    """
    declared = DECLARED.get(method)
    if declared is None:
        return None
    present = [dict((cls, fid) for fid, cls in declared[r]) for r in layout.releases if r in declared]
    if not present:
        return None  # no release of the layout has the method: its clients never call it
    agreed = {cls: fid for cls, fid in present[0].items() if all(p.get(cls) == fid for p in present[1:])}
    ours = {cls: fid for fid, cls in declared["4.x"]}
    return None if agreed == ours else agreed
