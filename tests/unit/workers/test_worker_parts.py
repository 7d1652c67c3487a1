"""The parts of ``waggle serve --workers`` that need no process: the pod's connection bound, metrics added up,
the worker count, the control channel and a worker's share of the limits."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from waggle.config.loader import load
from waggle.server.budget import ConnectionBudget, PodBudget, clear_slot, shared_page
from waggle.workers import count
from waggle.workers.channel import Channel, ChannelClosed
from waggle.workers.podmetrics import PodCollector
from waggle.workers.worker import for_worker


# -- the pod's bound on connections ----------------------------------------------------------------------------
def test_workers_share_one_bound() -> None:
    fd = shared_page(3)
    try:
        a, b, c = (PodBudget(fd, 3, i, limit=5) for i in range(3))
        assert [a.admit(), a.admit(), b.admit(), c.admit(), b.admit()] == [True] * 5
        assert not a.admit() and not b.admit() and not c.admit()  # five in the pod, whoever asks
        assert a.open() == b.open() == 5
        b.release()
        assert c.admit() and not a.admit()
        clear_slot(fd, 3, 0)  # worker 0 died with its two connections
        assert b.open() == 3 and b.admit() and a.open() == 4
    finally:
        os.close(fd)


def test_one_process_counts_its_own() -> None:
    budget = ConnectionBudget(2)
    assert budget.admit() and budget.admit() and not budget.admit()
    budget.release()
    assert budget.open() == 1 and budget.admit()


# -- metrics added up ----------------------------------------------------------------------------------------------
def _worker_text(calls: float, connections: float, seconds: list[float], links: float = 3) -> str:
    registry = CollectorRegistry()
    Counter("waggle_calls", "calls", ["method"], registry=registry).labels("get_table").inc(calls)
    Gauge("waggle_client_connections", "open", registry=registry).set(connections)
    Gauge("waggle_links", "links", ["metastore"], registry=registry).labels("a").set(links)
    Gauge("waggle_metastore_up", "a worker's own copy", ["metastore"], registry=registry).labels("p").set(7)
    h = Histogram("waggle_call_duration_seconds", "t", registry=registry, buckets=(0.1, 1.0))
    for s in seconds:
        h.observe(s)
    return bytes(generate_latest(registry)).decode()


def _samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text.decode()) for s in f.samples}


def test_workers_metrics_are_added_up_and_a_dead_workers_counters_kept() -> None:
    pod = PodCollector()
    one, two = _worker_text(5, 2, [0.05, 0.5]), _worker_text(7, 3, [2.0])
    out = _samples(pod.exposition([one, two]))
    assert out[("waggle_calls_total", (("method", "get_table"),))] == 12
    assert out[("waggle_client_connections", ())] == 5
    assert out[("waggle_call_duration_seconds_count", ())] == 3
    assert out[("waggle_call_duration_seconds_bucket", (("le", "0.1"),))] == 1
    assert out[("waggle_call_duration_seconds_bucket", (("le", "+Inf"),))] == 3
    assert out[("waggle_links", (("metastore", "a"),))] == 3  # alike in every worker: not doubled
    # the supervisor's own series, not the workers' copies
    assert ("waggle_metastore_up", (("metastore", "p"),)) not in out
    assert ("waggle_workers", ()) in out
    pod.retire(two)  # worker two died: its counters stay, its gauges go
    out = _samples(pod.exposition([one]))
    assert out[("waggle_calls_total", (("method", "get_table"),))] == 12
    assert out[("waggle_client_connections", ())] == 2
    assert out[("waggle_call_duration_seconds_count", ())] == 3


# -- how many workers ------------------------------------------------------------------------------------------------
def test_auto_is_the_cgroup_limit_rounded_up(tmp_path: Path) -> None:
    cpus = len(os.sched_getaffinity(0))
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert count.available_cpus(tmp_path) == min(cpus, 2)
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert count.available_cpus(tmp_path) == cpus
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("50000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert count.available_cpus(tmp_path) == 1  # half a CPU: one worker
    assert count.available_cpus(tmp_path / "nowhere") == cpus


def test_the_flag_then_the_file_then_the_environment_then_one(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("100000 100000\n")
    assert count.resolve(3, 2, {"WAGGLE_WORKERS": "4"}, tmp_path) == 3
    assert count.resolve(None, 2, {"WAGGLE_WORKERS": "4"}, tmp_path) == 2
    assert count.resolve(None, None, {"WAGGLE_WORKERS": "4"}, tmp_path) == 4
    assert count.resolve(None, None, {"WAGGLE_WORKERS": "auto"}, tmp_path) == 1
    assert count.resolve(None, 0, {}, tmp_path) == 1
    assert count.resolve(None, None, {}, tmp_path) == 1
    with pytest.raises(ValueError, match="environment variable WAGGLE_WORKERS: invalid value 'many'"):
        count.resolve(None, None, {"WAGGLE_WORKERS": "many"}, tmp_path)


@pytest.mark.parametrize(("value", "expected"), [("auto", 0), ("AUTO", 0), (4, 4), ("2", 2)])
def test_the_workers_key(tmp_path: Path, value: object, expected: int) -> None:
    server, fed = tmp_path / "s.yml", tmp_path / "f.yml"
    server.write_text(f"workers: {value}\n")
    fed.write_text("primary-meta-store:\n  name: p\n  remote-meta-store-uris: thrift://h:9083\n")
    assert load(str(server), str(fed)).server.workers == expected


@pytest.mark.parametrize("value", ["0", "-1", "many", "1000"])
def test_a_bad_workers_value_names_file_key_and_value(tmp_path: Path, value: str) -> None:
    from waggle.config.loader import ConfigError

    server, fed = tmp_path / "s.yml", tmp_path / "f.yml"
    server.write_text(f"workers: {value}\n")
    fed.write_text("primary-meta-store:\n  name: p\n  remote-meta-store-uris: thrift://h:9083\n")
    with pytest.raises(ConfigError) as exc:
        load(str(server), str(fed))
    (problem,) = exc.value.problems
    assert str(server) in problem and "workers" in problem and value in problem and "auto or an integer" in problem


# -- the control channel, and what a worker applies ------------------------------------------------------------------
def test_a_configuration_crosses_the_channel_whole(tmp_path: Path) -> None:
    server, fed = tmp_path / "s.yml", tmp_path / "f.yml"
    server.write_text("configuration-properties:\n  hive.metastore.server.max.threads: '50'\n"
                      "limits:\n  max-in-flight-calls: 101\n  max-calls-per-metastore: 9\n")
    fed.write_text("primary-meta-store:\n  name: p\n  remote-meta-store-uris: thrift://h:9083\n")
    config = load(str(server), str(fed))
    a, b = socket.socketpair()
    one, other = Channel(a), Channel(b)
    one.send("config", (config, 2))
    kind, (got, generation) = other.receive()
    assert kind == "config" and got == config and generation == 2
    assert got.server.configuration_properties["hive.metastore.server.max.threads"] == "50"
    share = for_worker(got, 4).server
    assert (share.load.max_in_flight_calls, share.load.max_calls_per_metastore, share.max_connections) == (26, 3, 50)
    one.close()
    with pytest.raises(ChannelClosed):
        other.receive()


def test_each_log_line_is_one_write_so_workers_sharing_a_stream_never_split_lines() -> None:
    """Workers write to one stderr; a line written in two parts (text, then newline) can be split by another
    worker's line, as two JSON events on one line."""
    import structlog

    from waggle.common.logging import configure, get_logger

    class Writes:
        def __init__(self) -> None:
            self.writes: list[str] = []

        def write(self, text: str) -> int:
            self.writes.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    stream = Writes()
    try:
        configure("info", "json", stream=stream, worker=1)
        get_logger("waggle.test").warning("worker.orphaned", detail="the supervisor is gone")
    finally:
        structlog.reset_defaults()
        configure()
    assert len(stream.writes) == 1 and stream.writes[0].endswith("}\n"), stream.writes
    assert '"event": "worker.orphaned"' in stream.writes[0]
