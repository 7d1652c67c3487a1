"""Prometheus metrics, in waggle's own registry, served on the HTTP endpoint's ``/metrics``.

Per-call metrics are labelled by method and metastore (``*`` for a merged call answered by several). They are
counted in plain lists, one per label pair, and become series only when scraped (:class:`_CallCounts`): a
prometheus_client counter and histogram take a lock on every update (under gevent a lock written in Python), which
measured as 2-3 us a call, a tenth of a relayed call's whole cost.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import NamedTuple

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import INF, floatToGoString

# no *_created series: they double what a scrape carries and nobody reads them
disable_created_metrics()  # type: ignore[no-untyped-call]
REGISTRY = CollectorRegistry(auto_describe=True)

METASTORE_UP = Gauge("waggle_metastore_up", "1 while the metastore answers health checks, else 0.",
                     ["metastore"], registry=REGISTRY)
TUNNEL_UP = Gauge("waggle_tunnel_up", "1 while every hop of the metastore's SSH tunnel is connected, else 0.",
                  ["metastore"], registry=REGISTRY)
TUNNEL_RECONNECTS = Counter("waggle_tunnel_reconnects", "Times the metastore's SSH tunnel was rebuilt after it "
                            "had been up.", ["metastore"], registry=REGISTRY)


class _CallCounts:
    """``waggle_calls``, ``waggle_call_errors`` and ``waggle_call_duration_seconds``, counted per call in plain
    lists and read into series when scraped.

    Each (method, metastore) pair has one list: a count per duration bucket (the last one unbounded), then the sum
    of the durations; the number of calls is the sum of the buckets. Calls are recorded by the greenlets of one
    thread, so an update is never interleaved with another; a scrape reads a copy.
    """

    CALLS_HELP = "Client calls answered, by method and the metastore that answered."
    ERRORS_HELP = ("Client calls answered with an error, by kind: upstream (the metastore failed or is down), "
                   "refused (access control or routing), shed (over a limit), client (the client hung up "
                   "mid-reply), exception (the metastore answered with one).")
    SECONDS_HELP = "Time from a call's last request byte to its answer."
    BOUNDS = (.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, INF)

    def __init__(self) -> None:
        self.cells: dict[tuple[str, str], list[float]] = {}
        self.errors: dict[tuple[str, str, str], int] = {}
        self._les: list[str] = [floatToGoString(b) for b in self.BOUNDS]  # type: ignore[no-untyped-call]

    def cell(self, method: str, metastore: str) -> list[float]:
        cell = self.cells[(method, metastore)] = [0] * len(self.BOUNDS) + [0.0]
        return cell

    def describe(self) -> list[Metric]:
        return list(self._families())

    def _families(self) -> tuple[CounterMetricFamily, CounterMetricFamily, HistogramMetricFamily]:
        return (CounterMetricFamily("waggle_calls", self.CALLS_HELP, labels=("method", "metastore")),
                CounterMetricFamily("waggle_call_errors", self.ERRORS_HELP, labels=("method", "metastore", "kind")),
                HistogramMetricFamily("waggle_call_duration_seconds", self.SECONDS_HELP,
                                      labels=("method", "metastore")))

    def collect(self) -> Iterator[Metric]:
        calls, errors, seconds = self._families()
        for (method, metastore), cell in list(self.cells.items()):
            counts = cell[:]
            buckets: list[tuple[str, float]] = []
            total = 0.0
            for le, n in zip(self._les, counts, strict=False):
                total += n
                buckets.append((le, total))
            calls.add_metric((method, metastore), total)
            seconds.add_metric((method, metastore), buckets, counts[-1])
        for labels, n in list(self.errors.items()):
            errors.add_metric(labels, n)
        yield from (calls, errors, seconds)


_calls = _CallCounts()
REGISTRY.register(_calls)  # type: ignore[arg-type]
CLIENT_CONNECTIONS = Gauge("waggle_client_connections", "Client connections open now.", registry=REGISTRY)
CALLS_IN_FLIGHT = Gauge("waggle_calls_in_flight", "Client calls being answered now.", registry=REGISTRY)
UPSTREAM_IN_USE = Gauge("waggle_upstream_calls_in_flight", "Calls in flight to each metastore.", ["metastore"],
                        registry=REGISTRY)
UPSTREAM_OPENED = Counter("waggle_upstream_connections_opened", "Connections waggle opened to each metastore "
                          "(its pool keeps about as many as calls in flight lately, so under a steady load this "
                          "stops rising).", ["metastore"], registry=REGISTRY)
SHED = Counter("waggle_shed", "Work refused because a limit was reached: connections (max-connections), calls "
               "(limits.max-in-flight-calls) or metastore (limits.max-calls-per-metastore).", ["limit"],
               registry=REGISTRY)
LIMITED = Counter("waggle_limited_calls", "Client calls refused by a rate limit (limits.rates), by rule and method "
                  "family; none of them reached a metastore.", ["limit", "family"], registry=REGISTRY)


class _LimitLevels:
    """``waggle_limit_buckets`` and ``waggle_limit_tokens``: read from the rate limits when scraped, so a call
    pays nothing for them (:func:`watch_limits`)."""

    def __init__(self) -> None:
        self.source: Callable[[], Iterable[tuple[str, int, float]]] | None = None

    def describe(self) -> list[Metric]:
        return list(self._families())

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (GaugeMetricFamily("waggle_limit_buckets", "Token buckets a rate limit holds now (one per user, "
                                  "address, or one for the rule).", labels=("limit",)),
                GaugeMetricFamily("waggle_limit_tokens", "Tokens a rate limit's buckets hold together now: calls "
                                  "they would let through at once.", labels=("limit",)))

    def collect(self) -> Iterator[Metric]:
        buckets, tokens = self._families()
        for name, count, level in (self.source() if self.source is not None else ()):
            buckets.add_metric((name,), count)
            tokens.add_metric((name,), level)
        yield from (buckets, tokens)


_limit_levels = _LimitLevels()
REGISTRY.register(_limit_levels)  # type: ignore[arg-type]


def watch_limits(source: Callable[[], Iterable[tuple[str, int, float]]]) -> None:
    """Where the rate limits' gauges are read from when scraped: (rule, buckets, tokens) per rule."""
    _limit_levels.source = source


class CacheRow(NamedTuple):
    """One member's cache, as the metrics read it when scraped."""

    member: str
    hits: int
    misses: int
    evictions: int
    bytes: int
    #: cause -> times it made entries go (write, event, gap, restart, down, reload, admin, unreadable)
    invalidations: Mapping[str, int]
    #: seconds between the newest event applied being written at the member and its being applied, or None
    lag: float | None


class _CacheCounts:
    """``waggle_cache_*``: read from the process's cache when scraped (:func:`watch_cache`)."""

    def __init__(self) -> None:
        self.source: Callable[[], Iterable[CacheRow]] | None = None

    def describe(self) -> list[Metric]:
        return list(self._families())

    @staticmethod
    def _families() -> tuple[Metric, ...]:
        member = ("metastore",)
        return (
            CounterMetricFamily("waggle_cache_hits", "Reads answered from waggle's cache.", labels=member),
            CounterMetricFamily("waggle_cache_misses", "Cacheable reads that went to the metastore (not held, or "
                                "held by none yet).", labels=member),
            CounterMetricFamily("waggle_cache_evictions", "Replies dropped to stay within cache.max-bytes.",
                                labels=member),
            CounterMetricFamily("waggle_cache_invalidations", "Times the cache was told to forget a table, a database "
                                "or all of the metastore (held or not), by "
                                "cause: write (through waggle), event (its notification log), gap, restart, down, "
                                "unreadable, reload, admin.", labels=("metastore", "cause")),
            GaugeMetricFamily("waggle_cache_bytes", "Bytes of replies held now.", labels=member),
            GaugeMetricFamily("waggle_cache_lag_seconds", "cache: events -- seconds between the newest event "
                              "applied being written at the metastore and its being applied.", labels=member),
        )

    def collect(self) -> Iterator[Metric]:
        hits, misses, evictions, invalidations, held, lag = families = self._families()
        for row in (self.source() if self.source is not None else ()):
            hits.add_metric((row.member,), row.hits)  # type: ignore[attr-defined]
            misses.add_metric((row.member,), row.misses)  # type: ignore[attr-defined]
            evictions.add_metric((row.member,), row.evictions)  # type: ignore[attr-defined]
            for cause, count in sorted(row.invalidations.items()):
                invalidations.add_metric((row.member, cause), count)  # type: ignore[attr-defined]
            held.add_metric((row.member,), row.bytes)  # type: ignore[attr-defined]
            if row.lag is not None:
                lag.add_metric((row.member,), row.lag)  # type: ignore[attr-defined]
        yield from families


_cache_counts = _CacheCounts()
REGISTRY.register(_cache_counts)  # type: ignore[arg-type]


def watch_cache(source: Callable[[], Iterable[CacheRow]]) -> None:
    """Where the cache's series are read from when scraped: a row per member with cache on."""
    _cache_counts.source = source


CACHE_LOG_CALLS = Counter("waggle_cache_log_calls", "Calls made to read a cache: events metastore's notification log "
                          "(one a poll while nothing changes).", ["metastore"], registry=REGISTRY)
MERGED_EVENTS_SERVED = Counter("waggle_merged_log_events_served", "Events of the merged notification log "
                               "(notification-log: federated) answered to clients, by the metastore that wrote "
                               "them.", ["metastore"], registry=REGISTRY)
MERGED_LAG = Gauge("waggle_merged_log_lag_seconds", "How long after its commit the newest event of a metastore "
                   "got its merged id (in the process that merges; the event times are the metastore's, in "
                   "seconds).", ["metastore"], registry=REGISTRY)
MERGING = Gauge("waggle_merged_log_merging", "1 while this process merges the members' notification logs (it "
                "holds the merger's lease in the primary), else 0.", registry=REGISTRY)
REST_REQUESTS = Counter("waggle_iceberg_rest_requests", "Requests of the Iceberg REST port, by route, the metastore "
                        "that owns the namespace (`-`: none) and HTTP status.", ["route", "metastore", "code"],
                        registry=REGISTRY)
REST_SECONDS = Histogram("waggle_iceberg_rest_request_seconds", "Time to answer a request of the Iceberg REST port, by "
                         "route.", ["route"], registry=REGISTRY,
                         buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
REST_COMMITS = Counter("waggle_iceberg_rest_commits", "Table commits through the Iceberg REST port, by metastore and "
                       "outcome (committed, conflict, failed, unknown).", ["metastore", "outcome"], registry=REGISTRY)
ACCESS_DECISIONS = Counter("waggle_access_decisions", "Decisions of the grants (authorization): refused calls, "
                           "hidden objects, allowed writes, by outcome (refused, hidden, allowed) and the rule that "
                           "decided", ["outcome", "rule"], registry=REGISTRY)
ACCESS_FILTERED = Counter("waggle_access_filtered", "Entries of listings and of the merged notification log left out "
                          "for their caller by the grants, by kind (databases, tables, events)", ["kind"],
                          registry=REGISTRY)
FANOUT_OMISSIONS = Counter("waggle_fanout_omissions", "Metastores left out of a merged call's answer (down, "
                           "failed or late).", ["method", "metastore"], registry=REGISTRY)
CALLS_PLANNED_AGAIN = Counter("waggle_calls_planned_again", "Reads planned again in the same call after their "
                              "metastore was lost under them, by metastore and how: unreachable (no connection "
                              "could be opened), dropped (the connection closed under the call), released (found "
                              "down while the call waited).", ["metastore", "lost"], registry=REGISTRY)
RELEASED_CALLS = Counter("waggle_released_calls", "Calls let go while they waited on a metastore that was found "
                         "down meanwhile.", ["metastore"], registry=REGISTRY)
CONFIG_RELOADS = Counter("waggle_config_reloads", "Configuration reloads, by result (succeeded, failed).",
                         ["result"], registry=REGISTRY)
CONFIG_GENERATION = Gauge("waggle_config_generation", "1 for the configuration waggle started with, +1 per "
                          "applied reload.", registry=REGISTRY)
CONFIG_LOADED = Gauge("waggle_config_loaded_timestamp_seconds", "When the live configuration was applied.",
                      registry=REGISTRY)
LOOP_LAG = Histogram("waggle_event_loop_lag_seconds", "How late the event loop ran a timer that was due: time "
                     "during which no client was served.", registry=REGISTRY,
                     buckets=(.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5))
LOOP_BLOCKED = Counter("waggle_event_loop_blocked", "Times the event loop was blocked for longer than 100 ms.",
                       registry=REGISTRY)

for _limit in ("connections", "calls", "metastore"):
    SHED.labels(_limit)
for _result in ("succeeded", "failed"):
    CONFIG_RELOADS.labels(_result)

_cells = _calls.cells
_errors = _calls.errors
_bounds = _CallCounts.BOUNDS


def observe_call(method: str, metastore: str, seconds: float, error: str | None = None) -> None:
    """Count one answered call, its duration and, if it failed, the kind of failure."""
    cell = _cells.get((method, metastore))
    if cell is None:
        cell = _calls.cell(method, metastore)
    cell[bisect_left(_bounds, seconds)] += 1
    cell[-1] += seconds
    if error is not None:
        key = (method, metastore, error)
        _errors[key] = _errors.get(key, 0) + 1


def forget(metastore: str) -> None:
    """Drop a removed metastore's gauges (its counters stay, as Prometheus expects)."""
    for gauge in (METASTORE_UP, TUNNEL_UP, UPSTREAM_IN_USE):
        try:
            gauge.remove(metastore)
        except KeyError:
            pass
COPY_READS = Counter("waggle_copy_reads", "Reads of a member's tables answered from their copies in the primary "
                     "(read-from-copies), by member and reason: down (the member is down), prefer, or source (a "
                     "prefer read whose partitions came partly from the member).", ["metastore", "reason"],
                     registry=REGISTRY)
LINKS = Gauge("waggle_links", "Remote databases linked from SQL and served now, by the metastore they name.",
              ["metastore"], registry=REGISTRY)
AUTH_FAILURES = Counter("waggle_client_auth_failures", "Client connections refused at the front door (TLS or SASL "
                        "handshake failed, or an untrusted principal or bad token), by front door kind.", ["kind"],
                        registry=REGISTRY)
KERBEROS_TICKET_EXPIRY = Gauge("waggle_kerberos_ticket_expiry_timestamp_seconds", "When waggle's own Kerberos "
                               "ticket expires (it logs in again from its keytab before then).", registry=REGISTRY)
KERBEROS_LOGIN_OK = Gauge("waggle_kerberos_login_ok", "1 when waggle's last Kerberos login from its keytab "
                          "succeeded, else 0.", registry=REGISTRY)
CERTIFICATE_EXPIRY = Gauge("waggle_tls_certificate_expiry_timestamp_seconds", "When a certificate waggle "
                           "presents or trusts expires, by file.", ["file"], registry=REGISTRY)
WORKERS = Gauge("waggle_workers", "Worker processes serving the Thrift port now (waggle serve --workers).",
                registry=REGISTRY)
WORKER_RESTARTS = Counter("waggle_worker_restarts", "Worker processes that exited unasked and were started again.",
                          registry=REGISTRY)
