"""``docs/reference/helm-values.md``: every value of the Helm chart, from helm/waggle/values.yaml.

A key's description is its ``# --`` comment in values.yaml (the helm-docs convention), continued on the comment
lines right below it; its default is what the file sets. Every described key and every leaf gets a row, except
inside a described map of free-form configuration (one with nested maps and no described key inside, such as
``resources`` or ``federation``), which is one row showing its whole default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from waggle.docs import generated

VALUES = Path(__file__).resolve().parents[2] / "helm" / "waggle" / "values.yaml"
_KEY = re.compile(r"^(\s*)([A-Za-z0-9_.-]+):(\s|$)")
_DESCRIBED = re.compile(r"^(\s*)# -- (.*)$")
_MORE = re.compile(r"^(\s*)# (\S.*)$")  # a continued description; commented-out examples have two spaces


@dataclass(frozen=True, slots=True)
class Value:
    path: tuple[str, ...]
    default: Any
    description: str


def descriptions(text: str) -> dict[tuple[str, ...], str]:
    """Key path -> its ``# --`` comment, from the file's lines."""
    found: dict[tuple[str, ...], str] = {}
    stack: list[tuple[int, str]] = []  # (indent, key) of the maps we are in
    pending: list[str] | None = None
    for line in text.splitlines():
        described = _DESCRIBED.match(line)
        if described:
            pending = [described.group(2)]
            continue
        more = _MORE.match(line)
        if more and pending is not None:
            pending.append(more.group(2))
            continue
        key = _KEY.match(line)
        if key:
            indent = len(key.group(1))
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, key.group(2)))
            if pending is not None:
                found[tuple(k for _, k in stack)] = " ".join(pending)
        pending = None
    return found


def _free_form(value: Any, path: tuple[str, ...], described: dict[tuple[str, ...], str]) -> bool:
    inner = any(p[:len(path)] == path and len(p) > len(path) for p in described)
    return path in described and not inner and any(isinstance(v, dict) and v for v in value.values())


def values(text: str) -> list[Value]:
    """Every row of the page, in the file's order."""
    described = descriptions(text)
    rows: list[Value] = []

    def walk(node: dict[str, Any], prefix: tuple[str, ...]) -> None:
        for key, value in node.items():
            path = (*prefix, key)
            if isinstance(value, dict) and value and not _free_form(value, path, described):
                if path in described:
                    rows.append(Value(path, None, described[path]))
                walk(value, path)
            else:
                rows.append(Value(path, value, described.get(path, "")))

    walk(yaml.safe_load(text), ())
    return rows


def _shown(value: Any) -> str:
    """A default as written in a values file of one's own."""
    if isinstance(value, dict | list):
        return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10_000).strip()
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == "":
        return '""'
    return str(value)


def _kind(value: Any) -> str:
    for kind, name in ((bool, "bool"), (int, "int"), (float, "number"), (str, "string"), (list, "list"),
                       (dict, "map")):
        if isinstance(value, kind):
            return name
    return "-"


def _cell(text: str) -> str:
    """Table-cell text: a pipe would end the cell, and ``<name>`` would be read as an HTML tag."""
    return text.replace("|", "\\|").replace("<", "&lt;")


def render(text: str | None = None) -> str:
    text = VALUES.read_text(encoding="utf-8") if text is None else text
    lines = ["# Helm values", "", generated("helm/waggle/values.yaml"), "",
             "The chart's values, with their defaults. Set them with `--set key=value` or a values file of your "
             "own (`-f my-values.yaml`); `helm show values helm/waggle` prints the commented file. "
             "[Kubernetes and Helm](../operations/kubernetes.md) explains the chart.", "",
             "| Key | Type | Default | Description |", "|---|---|---|---|"]
    for v in values(text):
        if v.default is None:  # a described map whose keys have rows of their own
            kind, default = "map", "-"
        else:
            kind, default = _kind(v.default), f"`{_shown(v.default)}`"
        lines.append(f"| `{'.'.join(v.path)}` | {kind} | {default} | {_cell(v.description) or '-'} |")
    return "\n".join(lines) + "\n"
