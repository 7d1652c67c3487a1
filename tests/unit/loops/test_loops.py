"""The background loops: rounds go on after a failing one, a loop whose first round was made already waits
first, and closing ends every loop."""

from __future__ import annotations

from structlog.testing import capture_logs

from tests.support.waits import wait_until
from waggle.loops import Loop, Loops


def test_a_failing_round_is_logged_and_the_loop_goes_on() -> None:
    rounds: list[int] = []

    def work() -> None:
        rounds.append(len(rounds))
        if len(rounds) == 1:
            raise ValueError("the primary is away")

    loops = Loops([Loop("thing.refresh_failed", work, lambda: 0.001)])
    with capture_logs() as logs:
        loops.start()
        wait_until(lambda: len(rounds) >= 3, timeout=5.0)
        loops.close()
    assert [e for e in logs if e["event"] == "thing.refresh_failed"] == [
        {"event": "thing.refresh_failed", "error": "ValueError('the primary is away')", "log_level": "error"}]


def test_a_loop_that_waits_first_does_its_first_round_after_the_wait() -> None:
    events: list[str] = []
    waits = iter([0.05, 0.001, 0.001, 0.001, 0.001])

    def seconds() -> float:
        events.append("wait")
        return next(waits, 0.001)

    loops = Loops([Loop("x.failed", lambda: events.append("round"), seconds, wait_first=True),
                   Loop("y.failed", lambda: events.append("other"), lambda: 0.001)])
    loops.start()
    wait_until(lambda: events.count("round") >= 2, timeout=5.0)
    loops.close()
    mine = [e for e in events if e != "other"]
    assert mine[:4] == ["wait", "round", "wait", "round"]
    assert events.index("other") < events.index("round")  # the other loop's first round is at once


def test_closing_ends_every_loop() -> None:
    loops = Loops([Loop("x.failed", lambda: None, lambda: 0.001), Loop("y.failed", lambda: None, lambda: 0.001)])
    loops.start()
    tasks = list(loops._tasks)
    assert len(tasks) == 2
    loops.close()
    wait_until(lambda: all(t.dead for t in tasks), timeout=5.0)
