"""Client processes that read one table through waggle in a loop, each read recorded as a JSON line: when it
started and ended, whether it was answered, and where from (``waggle.served-from``). A read that fails with a
dropped connection is recorded too, and the reader connects again."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

from tests.support.clients import hive2_client


def read_loop(port: int, db: str, table: str, stop: str, out: str) -> None:
    """Read ``db.table`` through waggle at ``port`` until the file ``stop`` exists; append each read to ``out``."""
    with open(out, "a") as records:
        while not os.path.exists(stop):
            try:
                with hive2_client(port, timeout=30) as client:
                    while not os.path.exists(stop):
                        started = time.time()
                        try:
                            found = client.get_table(db, table)
                        except Exception as exc:  # recorded, and asserted on by the test
                            records.write(json.dumps({"start": started, "end": time.time(), "ok": False,
                                                      "error": repr(exc)}) + "\n")
                            records.flush()
                            if "TTransportException" in repr(exc) or isinstance(exc, OSError):
                                break  # the connection is gone: connect again
                            continue
                        records.write(json.dumps({"start": started, "end": time.time(), "ok": True,
                                                  "served": (found.parameters or {}).get("waggle.served-from")})
                                      + "\n")
                        records.flush()
            except Exception as exc:  # could not connect at all: recorded as a failed read
                records.write(json.dumps({"start": time.time(), "end": time.time(), "ok": False,
                                          "error": f"connect: {exc!r}"}) + "\n")
                records.flush()
                time.sleep(0.1)


class Readers:
    """``count`` reader processes of ``db.table`` through waggle at ``port``, their records under ``workdir``."""

    def __init__(self, workdir: Path, port: int, db: str, table: str, count: int) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.stop_file = workdir / "stop"
        self.outputs = [workdir / f"reader-{i}.jsonl" for i in range(count)]
        context = multiprocessing.get_context("spawn")
        self.processes = [context.Process(target=read_loop, args=(port, db, table, str(self.stop_file), str(out)),
                                          daemon=True) for out in self.outputs]

    def start(self) -> Readers:
        for process in self.processes:
            process.start()
        return self

    def stop(self) -> list[dict[str, Any]]:
        """Stop every reader; all their reads, in order of their start."""
        self.stop_file.touch()
        for process in self.processes:
            process.join(60)
            if process.is_alive():
                process.kill()
        reads = []
        for out in self.outputs:
            if out.exists():
                reads += [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
        return sorted(reads, key=lambda r: r["start"])
