"""The sync's write-rate limit: real threads on the real clock, kept to a fraction of a second."""

from __future__ import annotations

import threading
import time

import pytest

from waggle.sync.throttle import WriteThrottle


def _acquire_from_threads(throttle: WriteThrottle, threads: int, each: int) -> float:
    def work() -> None:
        for _ in range(each):
            throttle.acquire()

    started = time.monotonic()
    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.monotonic() - started


def test_writes_from_many_threads_share_one_limit() -> None:
    throttle = WriteThrottle("primary", 100)
    seconds = _acquire_from_threads(throttle, threads=4, each=15)
    assert seconds >= 59 / 100 * 0.95  # 60 writes at 100/s, the first at once: 59 intervals of 10 ms
    stats = throttle.stats()
    assert (stats.writes, stats.limit_per_second, stats.peak_per_second) == (60, 100, 60)
    assert stats.mean_per_second == 60  # all within one second
    assert 0.59 * 0.99 <= stats.seconds <= seconds


def test_a_long_run_reaches_the_limit_and_never_passes_it() -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    throttle = WriteThrottle("primary", 50, clock=lambda: now[0], sleep=sleep)
    for _ in range(300):
        throttle.acquire()
    stats = throttle.stats()
    assert stats.writes == 300 and stats.seconds == pytest.approx(299 / 50)
    assert (stats.mean_per_second, stats.peak_per_second) == (50, 50)


def test_no_limit_only_counts() -> None:
    throttle = WriteThrottle("primary", 0)
    seconds = _acquire_from_threads(throttle, threads=4, each=250)
    assert seconds < 0.5
    stats = throttle.stats()
    assert (stats.writes, stats.limit_per_second) == (1000, 0)
    assert stats.peak_per_second == 1000 and stats.mean_per_second == 1000  # all within one second


def test_no_burst_after_a_quiet_spell() -> None:
    throttle = WriteThrottle("primary", 20)
    throttle.acquire()
    time.sleep(0.2)  # four turns go unused; they are not saved up
    started = time.monotonic()
    for _ in range(5):
        throttle.acquire()
    assert time.monotonic() - started >= 4 / 20 * 0.95  # the first at once, then one every 50 ms


def test_the_peak_counts_writes_within_any_one_second() -> None:
    now = [0.0]
    throttle = WriteThrottle("primary", 0, clock=lambda: now[0], sleep=lambda s: None)
    for t in (0.0, 0.1, 0.2, 1.5, 1.6, 1.7, 1.8, 5.0):
        now[0] = t
        throttle.acquire()
    stats = throttle.stats()
    assert (stats.writes, stats.peak_per_second, stats.seconds) == (8, 4, 5.0)
    assert stats.mean_per_second == 1.4  # 7 intervals over 5 s


def test_nothing_written() -> None:
    stats = WriteThrottle("primary", 20).stats()
    assert (stats.writes, stats.seconds, stats.mean_per_second, stats.peak_per_second) == (0, 0.0, 0.0, 0)


def test_a_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError):
        WriteThrottle("primary", -1)


def test_a_run_whose_output_is_not_a_terminal_says_its_progress_every_ten_seconds() -> None:
    import structlog

    from waggle.sync.runner import PROGRESS_LINE_SECONDS, ProgressLines, _progress

    now = [100.0]
    lines = ProgressLines(clock=lambda: now[0])
    with structlog.testing.capture_logs() as logs:
        for _ in range(30):  # 3 s of pages of 100 partitions, every 0.1 s
            now[0] += 0.1
            lines.update(100)
        assert logs == []
        now[0] += PROGRESS_LINE_SECONDS
        lines.update(100)
        now[0] += 1.0
        lines.update(100)  # not yet again
    assert [(e["event"], e["partitions"], e["seconds"], e["per_second"]) for e in logs] == \
        [("sync.progress", 3100, 13.0, 238.5)]
    assert isinstance(_progress(None), ProgressLines)  # pytest's stderr is no terminal
    assert _progress(False) is None
