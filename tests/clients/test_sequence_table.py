"""The sequence table itself (tests/clients/sequences.py): every sequence cites its client's class and method,
names methods waggle's method table knows, and can be listed for the generated "sequences covered" page."""

from __future__ import annotations

from tests.clients.sequences import CLIENTS, all_sequences, covered
from waggle.hms.methods import METHODS


def test_every_sequence_cites_its_source_and_names_known_methods() -> None:
    assert set(CLIENTS) == {"trino", "hive-3.1", "hive-4", "spark-3.5"}
    seen = set()
    for seq in all_sequences():
        assert (seq.client, seq.name) not in seen
        seen.add((seq.client, seq.name))
        assert "#" in seq.source, f"{seq.client}:{seq.name} cites no Class#method"
        labels = [s.label for s in seq.steps]
        assert len(labels) == len(set(labels)), seq.name
        for step in seq.steps:
            for method in (step.method, *(x[0] for x in (step.fallback, step.equivalent) if x)):
                assert method in METHODS, f"{seq.client}:{seq.name}: {method}"


def test_covered_lists_each_sequence_with_its_methods() -> None:
    rows = covered()
    assert len(rows) == len(all_sequences())
    trino_ctas = next(r for r in rows if (r.client, r.name) == ("trino", "ctas_partitioned"))
    assert trino_ctas.methods[:3] == ("get_database", "get_table_req", "get_table")
    assert "add_partitions" in trino_ctas.methods and "ThriftHiveMetastore#addPartitions" in trino_ctas.source


def test_the_clients_guide_lists_the_sequences_covered() -> None:
    from tests.clients.page import markdown
    from tests.support.env import ROOT

    page = (ROOT / "docs" / "guides" / "clients.md").read_text()
    assert markdown() in page, "regenerate it: python -m tests.clients.page"
