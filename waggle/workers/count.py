"""How many workers ``waggle serve`` runs: ``--workers``, the server file's ``workers``, ``WAGGLE_WORKERS``, or 1.

``auto`` is the CPUs this process may use: its cgroup's CPU limit (a Kubernetes pod's ``limits.cpu``), rounded
up, else the CPUs it may run on (affinity).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from waggle.config.validators import worker_count

#: the environment variable that sets the default (the image sets ``auto``; the Helm chart the pod's CPU)
ENV = "WAGGLE_WORKERS"
_CGROUP = Path("/sys/fs/cgroup")


def cgroup_cpu_limit(root: Path = _CGROUP) -> float | None:
    """The CPU limit of this process's cgroup in CPUs (v2 ``cpu.max``, or v1's CFS quota), None when unlimited."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None


def available_cpus(root: Path = _CGROUP) -> int:
    """The CPUs this process may use: the cgroup limit rounded up, at most the CPUs it may run on."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        affinity = os.cpu_count() or 1
    limit = cgroup_cpu_limit(root)
    if limit is None:
        return max(1, affinity)
    return max(1, min(affinity, math.ceil(limit - 1e-9)))


def parse(text: str, where: str) -> int:
    """A ``--workers`` or ``WAGGLE_WORKERS`` value (0: auto); ValueError naming ``where`` and the value."""
    validator = worker_count()
    try:
        value = validator.convert(text)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: invalid value '{text}': expected {validator.expect}") from None
    assert value is not None
    return value


def resolve(flag: int | None, configured: int | None, environ: dict[str, str] | None = None,
            root: Path = _CGROUP) -> int:
    """The number of workers to run: the first given of the flag, the server file and the environment (0 is
    auto), else 1."""
    env = os.environ if environ is None else environ
    chosen = flag if flag is not None else configured
    if chosen is None:
        text = env.get(ENV, "").strip()
        chosen = parse(text, f"environment variable {ENV}") if text else 1
    return available_cpus(root) if chosen == 0 else chosen
