"""Key spelling, as Waggle Dance's users write it.

Waggle Dance reads its YAML through Spring's relaxed binding, so the same setting arrives as
``query-functions-across-all-metastores``, ``queryFunctionsAcrossAllMetastores`` or
``query_functions_across_all_metastores``, and nested settings arrive either nested or as dotted keys
(``endpoint.port: 18000``). :func:`normalize` turns all of them into one nested mapping of kebab-case keys.
Free-form maps (Hive properties, database names) keep their keys exactly as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")

#: Keys whose values are maps of user data: their own keys are never respelled or split on dots.
FREE_FORM_KEYS = frozenset({"configuration-properties", "database-name-mapping"})


def kebab(key: str) -> str:
    return _CAMEL.sub(r"-\1", key).replace("_", "-").lower()


class KeyConflict(ValueError):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


def normalize(data: Mapping[Any, Any], path: str = "") -> dict[str, Any]:
    """Respell keys to kebab-case and expand dotted keys into nested maps."""
    out: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = str(raw_key)
        first, _, rest = key.partition(".")
        head = kebab(first)
        if head in FREE_FORM_KEYS:
            inner = {rest: value} if rest else value
            _merge(out, head, dict(inner) if isinstance(inner, Mapping) else inner, f"{path}{head}")
            continue
        if rest:
            value = {rest: value}
        if isinstance(value, Mapping):
            value = normalize(value, f"{path}{head}.")
        elif isinstance(value, list):
            value = [normalize(v, f"{path}{head}[{i}].") if isinstance(v, Mapping) else v for i, v in enumerate(value)]
        _merge(out, head, value, f"{path}{head}")
    return out


def _merge(out: dict[str, Any], key: str, value: Any, path: str) -> None:
    if key not in out:
        out[key] = value
        return
    existing = out[key]
    if isinstance(existing, dict) and isinstance(value, Mapping):
        for k, v in value.items():
            _merge(existing, k, v, f"{path}.{k}")
        return
    raise KeyConflict(path)
