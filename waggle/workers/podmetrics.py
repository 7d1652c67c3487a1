"""``/metrics`` of a pod with several workers: the supervisor's own series, and the workers' added up.

Each worker keeps its own registry (:mod:`waggle.common.metrics`) and sends its text form with its status. The
supervisor serves:

- its own series of what it alone runs (:data:`SUPERVISOR`): metastore health, tunnels, configuration reloads,
  Kerberos and certificates, workers;
- every other series summed over the workers (counters, histograms and gauges such as open connections), except
  :data:`SAME_IN_EVERY_WORKER`, which every worker has alike (the largest is shown);
- the counters and histograms of workers that died, as they last reported them, so a restart never makes a
  counter go down.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from waggle.common import metrics

#: families the supervisor owns (its health checks, tunnels, reloads, security watch, workers, the merger)
SUPERVISOR = frozenset({
    "waggle_metastore_up", "waggle_tunnel_up", "waggle_tunnel_reconnects", "waggle_config_reloads",
    "waggle_config_generation", "waggle_config_loaded_timestamp_seconds",
    "waggle_kerberos_ticket_expiry_timestamp_seconds",
    "waggle_kerberos_login_ok", "waggle_tls_certificate_expiry_timestamp_seconds", "waggle_workers",
    "waggle_worker_restarts", "waggle_merged_log_lag_seconds", "waggle_merged_log_merging",
})
#: gauges every worker holds alike
SAME_IN_EVERY_WORKER = frozenset({"waggle_links"})
#: what survives a worker's death
_KEPT_TYPES = frozenset({"counter", "histogram", "summary"})

Key = tuple[str, tuple[tuple[str, str], ...]]


class Families:
    """Parsed families: name -> (type, help, {(sample name, labels): value})."""

    def __init__(self) -> None:
        self.families: dict[str, tuple[str, str, dict[Key, float]]] = {}

    @classmethod
    def parse(cls, text: str) -> Families:
        out = cls()
        for family in text_string_to_metric_families(text):
            if family.name in SUPERVISOR:
                continue
            samples = out._family(family.name, family.type, family.documentation)
            for s in family.samples:
                samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    def _family(self, name: str, kind: str, doc: str) -> dict[Key, float]:
        entry = self.families.get(name)
        if entry is None:
            entry = self.families[name] = (kind, doc, {})
        return entry[2]

    def add(self, other: Families, only_kept: bool = False) -> None:
        """Add ``other``'s samples to these (the largest, for :data:`SAME_IN_EVERY_WORKER`)."""
        for name, (kind, doc, samples) in other.families.items():
            if only_kept and kind not in _KEPT_TYPES:
                continue
            mine = self._family(name, kind, doc)
            same = name in SAME_IN_EVERY_WORKER
            for key, value in samples.items():
                if same:
                    mine[key] = max(mine.get(key, value), value)
                else:
                    mine[key] = mine.get(key, 0.0) + value

    def metrics(self) -> Iterator[Metric]:
        for name, (kind, doc, samples) in self.families.items():
            metric = Metric(name, doc, kind)
            for (sample, labels), value in samples.items():
                metric.add_sample(sample, dict(labels), value)
            yield metric


class PodCollector:
    """A collector of the pod's series, given the workers' latest texts (see the module's text)."""

    def __init__(self) -> None:
        #: counters and histograms of workers gone, as they last reported them
        self.retired = Families()

    def retire(self, last_text: str | None) -> None:
        if last_text:
            self.retired.add(Families.parse(last_text), only_kept=True)

    def exposition(self, worker_texts: Iterable[str]) -> bytes:
        from prometheus_client import generate_latest

        pod = Families()
        pod.add(self.retired)
        for text in worker_texts:
            pod.add(Families.parse(text))
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Fixed([*_own(), *pod.metrics()]))  # type: ignore[arg-type]
        return bytes(generate_latest(registry))


def _own() -> Iterator[Metric]:
    for family in metrics.REGISTRY.collect():
        if family.name in SUPERVISOR:
            yield family


class _Fixed:
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return self._families
