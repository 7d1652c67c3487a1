"""What the server and its client connections use of what is running: the routes snapshot, the members' health,
the limits, serving and stopping, waggle's own security and the remote databases' services.

:class:`waggle.runtime.Runtime` is one (it assembles them); the server knows only this shape, so it sits below
whatever assembles it. A connection reads :attr:`ServerContext.routes` once per call: the runtime swaps that
reference on a reload or a new database map. The types of what is running that a connection handles (the
routes snapshot, a metastore's pool) are named here too, for the driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from waggle.cache.replies import Replies
    from waggle.common.limiter import Limiter
    from waggle.config.model import WaggleConfig
    from waggle.events.served import MergedLog
    from waggle.grants.service import Grants
    from waggle.hms.methods import MethodSpec as MethodSpec
    from waggle.lifecycle import Lifecycle
    from waggle.remotes.connectors import ConnectorService
    from waggle.remotes.registry import LinkRegistry
    from waggle.routes.links import LinksService
    from waggle.routes.snapshot import Routes as Routes
    from waggle.server.guard import Guard
    from waggle.server.limits import CallLimits
    from waggle.upstream.health import Health
    from waggle.upstream.pool import UpstreamPool as UpstreamPool


class ServerContext(Protocol):
    """What is running, as the server, its connections and the handlers of self-answered calls see it."""

    @property
    def routes(self) -> Routes:
        """The routes snapshot calls are planned with now."""
        ...

    @property
    def config(self) -> WaggleConfig:
        """The configuration served now (the routes snapshot's)."""
        ...

    @property
    def log_calls(self) -> bool:
        """Whether one debug line per successful call is written (the log level is debug)."""
        ...

    @property
    def health(self) -> Health:
        """The metastores' health."""
        ...

    @property
    def lifecycle(self) -> Lifecycle:
        """Serving, stopping, draining."""
        ...

    @property
    def call_limits(self) -> CallLimits:
        """The rate limits of limits.rates."""
        ...

    @property
    def call_slots(self) -> Limiter:
        """Client calls being answered (limits.max-in-flight-calls)."""
        ...

    @property
    def created(self) -> dict[str, set[str]]:
        """Databases created through waggle under *_CREATE_ON_DATABASE_WHITELIST, per member (a call adds to it)."""
        ...

    @property
    def guard(self) -> Guard:
        """Waggle's login, tokens and front door."""
        ...

    @property
    def links(self) -> LinkRegistry:
        """Which primary databases are links, and the remote tables (a link call adds or removes one)."""
        ...

    @property
    def remotes(self) -> LinksService:
        """The links and data connectors at run time: learned, reread, served."""
        ...

    @property
    def connectors(self) -> ConnectorService:
        """Hive 4 data connectors, answered from the primary."""
        ...

    @property
    def replies(self) -> Replies:
        """The replies remembered for members with ``cache`` on."""
        ...

    @property
    def notification_log(self) -> MergedLog:
        """The federation's merged notification log (``notification-log: federated``)."""
        ...

    @property
    def grants(self) -> Grants | None:
        """Per-user and per-group grants (``authorization``); None when off."""
        ...

    def forget_written(self, member: str, spec: MethodSpec, args: Any) -> None:
        """A call went to ``member``: if it writes, forget what it names, here and in the replica's other
        processes, before it is answered."""
        ...

    def close(self) -> None:
        """Stop what runs in the background and close the metastores' connections (the server's last step)."""
        ...


class HttpSide(Protocol):
    """The HTTP endpoint a server starts and stops with its Thrift port (:class:`waggle.endpoint.HttpEndpoint`)."""

    @property
    def port(self) -> int: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...
