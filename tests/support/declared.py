"""The generator of waggle/hms/declared.py (scripts/declared_exceptions.py), loaded for the tests that re-derive
the table."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

from tests.support.env import ROOT


def deriver() -> Any:
    """scripts/declared_exceptions.py as a module."""
    module = sys.modules.get("declared_exceptions")
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location("declared_exceptions", ROOT / "scripts" / "declared_exceptions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["declared_exceptions"] = module
    spec.loader.exec_module(module)
    return module
