"""What every client connection shares: the live configuration and the upstream pools.

A configuration is immutable; replacing it means building a new :class:`Runtime` state and swapping one
reference, so a call in flight finishes on the configuration it started with.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from waggle.config.model import WaggleConfig
from waggle.upstream.deadlines import Deadlines
from waggle.upstream.pool import UpstreamPool


@dataclass(frozen=True, slots=True)
class Routes:
    """The federation as the call path sees it: one pool per metastore."""

    config: WaggleConfig
    pools: dict[str, UpstreamPool] = field(default_factory=dict)

    @property
    def primary(self) -> UpstreamPool:
        return self.pools[self.config.federation.primary.name]


class Runtime:
    def __init__(self, config: WaggleConfig) -> None:
        self.deadlines = Deadlines()
        pools = {m.name: UpstreamPool(m, config.server.upstream_limits, self.deadlines)
                 for m in config.federation.members}
        self.routes = Routes(config, pools)
        self.draining = False
        #: One debug line per call is built only when it will be written.
        self.log_calls = config.server.log_level == "debug"

    @property
    def config(self) -> WaggleConfig:
        return self.routes.config

    def close(self) -> None:
        for pool in self.routes.pools.values():
            pool.close()
        self.deadlines.close()
