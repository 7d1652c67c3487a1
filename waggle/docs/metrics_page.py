"""``docs/reference/metrics.md``: every metric of the proxy and of the sync follower, from their registries.

The proxy's series come from :data:`waggle.common.metrics.REGISTRY`, the follower's from
:class:`waggle.sync.http.SyncMetrics`; each collector is walked, custom ones through the families they
describe, so a metric added to either registry is on the page without a word here. Only the labels' meanings
are written here (:data:`LABELS`): a label without one stops the page from being rendered.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from waggle.common import metrics
from waggle.docs import generated
from waggle.sync.http import SyncMetrics
from waggle.workers.podmetrics import SAME_IN_EVERY_WORKER, SUPERVISOR

_ANSWERED = "the `name` of the metastore that answered; `*` for a merged call answered by several"
#: label -> what it holds; (metric, label) -> what it holds in that metric, where it differs.
LABELS: dict[str | tuple[str, str], str] = {
    "metastore": "the metastore's `name` in the federation file",
    **{(name, "metastore"): _ANSWERED for name in ("waggle_calls", "waggle_call_errors",
                                                   "waggle_call_duration_seconds")},
    "method": "the HMS method the client called; `(unknown)` for a method that is not in waggle's IDL, so that "
              "clients cannot create labels",
    ("waggle_call_errors", "kind"): "`upstream` (the metastore failed or is down), `refused` (access control or "
                                    "routing), `shed` (a limit), `client` (the client hung up while its reply "
                                    "streamed to it), `exception` (the metastore answered with one, such as "
                                    "`NoSuchObjectException`)",
    ("waggle_client_auth_failures", "kind"): "the front door of the Thrift port: `tls`, `sasl` or `tls+sasl`",
    "limit": "the limit reached: `connections` (`max-connections`), `calls` (`limits.max-in-flight-calls`), "
             "`metastore` (`limits.max-calls-per-metastore`)",
    **{(name, "limit"): "the rate limit's `name` in `limits.rates`"
       for name in ("waggle_limited_calls", "waggle_limit_buckets", "waggle_limit_tokens")},
    ("waggle_limited_calls", "family"): "the method family the call counted in: `reads`, `writes`, `listings` or "
                                        "`partitions`",
    "result": "`succeeded` or `failed`",
    "route": "the Iceberg REST route: `load_table`, `commit_table`, `list_namespaces`, ... (the guide lists them); "
             "`config`, `token`, or `-` for a path that is no route",
    "code": "the HTTP status answered",
    ("waggle_access_decisions", "outcome"): "`refused` (a write without its privilege), `hidden` (a read of an "
                                            "object the caller may not see, answered as missing) or `allowed` (a "
                                            "write)",
    ("waggle_access_decisions", "rule"): "the rule that decided, as refusals name it (`waggle-server.yml: "
                                         "authorization.rules[0] 'analysts read sales'`, `ranger policy 12 ...`, "
                                         "`authorization.default (deny)`)",
    ("waggle_access_filtered", "kind"): "what was left out: `databases`, `tables` or `events`",
    ("waggle_iceberg_rest_requests", "metastore"): "the `name` of the metastore that owns the request's namespace; "
                                                   "`-` for none",
    ("waggle_iceberg_rest_commits", "outcome"): "`committed`, `conflict` (409: the client retries on fresh "
                                                "metadata), `failed`, or `unknown` (the commit's outcome is "
                                                "not known)",
    "reason": "why a read was answered from a copy: `down` (the member is down), `prefer`, `source` (a `prefer` "
              "read that took some partitions from the member)",
    "file": "the certificate file, as the configuration names it",
    "lost": "how a call lost its metastore: `unreachable` (no connection could be opened), `dropped` (the "
            "connection closed under the call), `released` (found down while the call waited)",
    ("waggle_sync_bootstraps", "reason"): "the reason's first words: `first_run`, `gap`, `policy_changed`, "
                                          "`requested`",
    ("waggle_cache_invalidations", "cause"): "why entries were forgotten: `write` (a write through waggle), "
                                             "`event` (the metastore's notification log), `gap` (events purged or "
                                             "the log started again), `restart` (the log read again from scratch), "
                                             "`down`, `unreadable`, `reload`, `admin`",
    "policy": "the sync policy's `name` in the sync file",
    "source": "the federation member the policy reads from",
    "type": "the notification event's type, such as `ADD_PARTITION`",
    "outcome": "`applied`, `skipped` (out of scope, or no change) or `failed`",
    "phase": "`bootstrap`, `incremental`, or `none` for a batch that failed before it began",
    "status": "`succeeded`, `failed` or `partial` (some tables failed, the rest applied)",
}


@dataclass(frozen=True, slots=True)
class Family:
    name: str  # as registered: counters without _total
    kind: str  # counter, gauge, histogram, ...
    help: str
    labels: tuple[str, ...]

    @property
    def series(self) -> str:
        """The names the scrape shows."""
        if self.kind == "counter":
            return f"`{self.name}_total`"
        if self.kind == "histogram":
            return f"`{self.name}_bucket`, `_sum`, `_count`"
        return f"`{self.name}`"


def families(registry: CollectorRegistry) -> Iterator[Family]:
    """Every family of the registry, in the order its collectors were registered."""
    collectors: Iterable[object] = getattr(registry, "_collector_to_names", {})  # prometheus_client keeps no list
    for collector in collectors:
        # a Counter, Gauge or Histogram knows its label names; a custom collector's families carry theirs
        labels = tuple(getattr(collector, "_labelnames", ()))
        for family in collector.describe():  # type: ignore[attr-defined]
            yield Family(family.name, family.type, family.documentation,
                         tuple(getattr(family, "_labelnames", ())) or labels)


def label_meaning(metric: str, label: str) -> str:
    meaning = LABELS.get((metric, label)) or LABELS.get(label)
    if meaning is None:
        raise LookupError(f"metric {metric}: label '{label}' has no meaning in waggle/docs/metrics_page.py LABELS")
    return meaning


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _pod(name: str) -> str:
    if name in SUPERVISOR:
        return "the supervisor's"
    if name in SAME_IN_EVERY_WORKER:
        return "the largest of the workers'"
    return "summed over the workers"


def _table(found: list[Family], pod: bool) -> list[str]:
    head = "| Series | Type | Labels | Meaning |" + (" With several workers |" if pod else "")
    rows = [head, "|---|---|---|---|" + ("---|" if pod else "")]
    for f in found:
        labels = ", ".join(f"`{label}`" for label in f.labels) or "-"
        row = f"| {f.series} | {f.kind} | {labels} | {_cell(f.help)} |"
        rows.append(row + (f" {_pod(f.name)} |" if pod else ""))
    return rows


def _labels(found: list[Family]) -> list[str]:
    """One row per label and meaning, naming the metrics that carry it."""
    carriers: dict[tuple[str, str], list[str]] = {}
    for f in found:
        for label in f.labels:
            carriers.setdefault((label, label_meaning(f.name, label)), []).append(f.name)
    rows = ["| Label | Values | Metrics |", "|---|---|---|"]
    for (label, meaning), names in carriers.items():
        rows.append(f"| `{label}` | {_cell(meaning)} | {', '.join(f'`{n}`' for n in names)} |")
    return rows


_INTRO = """\
Prometheus text on `/metrics`: the proxy's on its HTTP endpoint (`endpoint.port`), the sync follower's on its
`http-port`. Counters carry `_total` on the scrape; histograms are `_bucket`, `_sum` and `_count` series. No
`_created` series are exported. [Operations: metrics](../operations/metrics.md) says what to alert on.
"""

_PROXY = """\
## The proxy (`waggle serve`)

With several workers (`workers` above 1) the supervisor serves one `/metrics` for the pod: its own series of
what it alone runs, every other series summed over the workers (counters and histograms of workers that exited
included, so that no counter goes down), and the gauges every worker holds alike as the largest.
"""

_SYNC = """\
## The sync follower (`waggle sync --follow`)
"""


def render() -> str:
    proxy = list(families(metrics.REGISTRY))
    sync = list(families(SyncMetrics().registry))
    lines = ["# Metrics reference", "", generated("waggle/common/metrics.py and waggle/sync/http.py"), "", _INTRO,
             _PROXY, *_table(proxy, pod=True), "", "Labels:", "", *_labels(proxy), "", _SYNC, *_table(sync, pod=False),
             "", "Labels:", "", *_labels(sync), ""]
    return "\n".join(lines)
