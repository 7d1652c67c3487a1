"""What one metastore has, as far as waggle knows: learned once per connection pool, shared by its calls.

A pool's :class:`Capabilities` start from the member's ``hive-version`` hint (nothing is assumed without one)
and learn from the metastore itself:

* a bridged method the metastore answers with ``UNKNOWN_METHOD`` is remembered as missing, and its later calls
  go straight to the bridge (:mod:`waggle.hms.bridges`);
* whether it understands catalog-qualified names (``@hive#db``) is asked once, with ``get_catalogs``, the first
  time a client sends one.

Nothing is probed per call. A metastore that is upgraded underneath waggle is relearned when waggle restarts
(or when its pool is rebuilt). This module sits below the pool, which holds one :class:`Capabilities`; the calls
that stand in for what a metastore lacks, and the probes, are :mod:`waggle.upstream.compat`'s, above the pool.
"""

from __future__ import annotations

from typing import Any

from gevent.lock import Semaphore

from waggle.common.logging import get_logger
from waggle.config.hive_values import Version, parse_version
from waggle.config.model import MetastoreConfig
from waggle.config.timing import PROBE_RETRY_SECONDS
from waggle.hms import bridges
from waggle.hms.bridges import BRIDGES

log = get_logger("waggle.compat")


class Capabilities:
    """What one metastore has, as far as waggle knows. Shared by every call through its pool."""

    __slots__ = ("catalogs", "member", "missing", "probe_failed_at", "probing", "version")

    def __init__(self, member: MetastoreConfig) -> None:
        self.member = member.name
        self.version: Version | None = parse_version(member.hive_version)
        #: methods this metastore does not have (bridged ones from the hint, then any it answered UNKNOWN_METHOD)
        self.missing: set[str] = set(bridges.missing_in(self.version))
        #: understands ``@cat#db``: True (Hive 3+), False (Hive 2), None (not known yet)
        self.catalogs: bool | None = None if self.version is None else self.version >= bridges.HIVE_3
        self.probing = Semaphore()  # one catalog probe at a time; the others wait for its answer
        self.probe_failed_at = -PROBE_RETRY_SECONDS

    def learn_missing(self, method: str) -> None:
        if method not in self.missing:
            self.missing.add(method)
            bridge = BRIDGES.get(method)
            log.info("compat.learned", member=self.member, missing=method, bridge=bridge.via if bridge else None)

    def learn_catalogs(self, understood: bool) -> None:
        if self.catalogs is None:
            self.catalogs = understood
            log.info("compat.learned", member=self.member, catalogs=understood)

    def bridges(self, method: str, args: Any) -> bool:
        """Whether this call goes to the bridge rather than to the metastore as it is."""
        return bridges.bridges_call(method, args, self.missing, self.version)
