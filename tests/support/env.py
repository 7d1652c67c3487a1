"""Where the project is, and what a test needs from the machine: skipped locally when missing, failed in CI."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(condition: bool, reason: str) -> None:
    """Skip locally, fail in CI."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required component missing in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def java_available() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    return bool((java_home and Path(java_home, "bin", "java").exists()) or shutil.which("java"))
