"""The generated reference pages hold everything their source declares: metrics, commands and flags, Helm values."""

from __future__ import annotations

import argparse

import pytest
import yaml

from waggle.cli import build_parser
from waggle.common import metrics
from waggle.docs import cli_page, helm_page, metrics_page
from waggle.sync.http import SyncMetrics


def test_every_metric_and_its_labels_are_on_the_metrics_page() -> None:
    page = metrics_page.render()
    found = [*metrics_page.families(metrics.REGISTRY), *metrics_page.families(SyncMetrics().registry)]
    names = {f.name for f in found}
    # the custom collector's families (counted in plain lists, read when scraped) are walked too
    assert {"waggle_calls", "waggle_call_errors", "waggle_call_duration_seconds", "waggle_sync_lag_seconds"} <= names
    for family in found:
        assert f"| {family.series} | {family.kind} |" in page
    assert "| `waggle_calls_total` | counter | `method`, `metastore` |" in page
    assert "| `waggle_call_duration_seconds_bucket`, `_sum`, `_count` | histogram |" in page


def test_a_label_without_a_meaning_stops_the_metrics_page() -> None:
    with pytest.raises(LookupError, match="label 'colour' has no meaning"):
        metrics_page.label_meaning("waggle_paint", "colour")


def _public(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: p for name, p in sub.choices.items() if not name.startswith("_")}


def test_every_command_and_flag_is_on_the_cli_page() -> None:
    page = cli_page.render()
    commands = _public(build_parser())
    assert set(commands) == {"serve", "check", "access", "sync", "metastore", "demo"}
    assert "_worker" not in page and "--control-fd" not in page
    for name, parser in commands.items():
        section = page.split(f"## `waggle {name}`\n", 1)[1].split("\n## ", 1)[0]
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}`" in section, (name, flag)
    assert "| `--follow` | - | - |" in page and "(not with `--run-now`, `--status`)" in page
    assert "| `--mode` | `mirror` \\| `copy` | `mirror` |" in page


VALUES = """\
# A header comment, not a description.

# -- The image.
image:
  repository: waggle
  # -- Defaults to the chart's appVersion,
  # continued here.
  tag: ""

# -- Free-form: shown whole.
resources:
  requests:
    cpu: 100m

server: {}
#  commented-out: example
# -- Pods.
replicaCount: 2
"""


def test_helm_values_take_their_descriptions_from_the_comments() -> None:
    assert helm_page.descriptions(VALUES) == {
        ("image",): "The image.", ("image", "tag"): "Defaults to the chart's appVersion, continued here.",
        ("resources",): "Free-form: shown whole.", ("replicaCount",): "Pods."}
    rows = {".".join(v.path): v for v in helm_page.values(VALUES)}
    assert list(rows) == ["image", "image.repository", "image.tag", "resources", "server", "replicaCount"]
    page = helm_page.render(VALUES)
    assert "| `resources` | map | `{requests: {cpu: 100m}}` | Free-form: shown whole. |" in page
    assert "| `image.tag` | string | `\"\"` | Defaults to the chart's appVersion, continued here. |" in page
    assert "| `server` | map | `{}` | - |" in page


def test_every_leaf_of_the_charts_values_is_on_its_page() -> None:
    page = helm_page.render()

    def leaves(node: dict[str, object], prefix: str) -> list[str]:
        out = []
        for key, value in node.items():
            path = f"{prefix}{key}"
            out += leaves(value, path + ".") if isinstance(value, dict) and value else [path]
        return out

    free_form = ("resources.", "federation.", "probes.", "strategy.", "podSecurityContext.", "securityContext.",
                 "sync.resources.")
    for path in leaves(yaml.safe_load(helm_page.VALUES.read_text()), ""):
        if not path.startswith(free_form):
            assert f"| `{path}` |" in page, path
