"""The "sequences covered" section of docs/guides/clients.md, generated from the sequence table.

``python -m tests.clients.page`` prints it; tests/clients/test_sequence_table.py fails when the page does not hold
it as printed.
"""

from __future__ import annotations

from tests.clients.sequences import covered

TITLES = {"trino": "Trino", "hive-3.1": "Hive 3.1 clients", "hive-4": "Hive 4 clients",
          "spark-3.5": "Spark 3.5 (its built-in Hive 2.3.10 client)"}


def markdown() -> str:
    rows = covered()
    parts = []
    for client, title in TITLES.items():
        lines = [f"### {title}", "", "| Sequence | Calls, in order of first use | Derived from |", "|---|---|---|"]
        for r in rows:
            if r.client == client:
                calls = ", ".join(f"`{m}`" for m in r.methods)
                lines.append(f"| `{r.name}` | {calls} | {r.source.replace('|', '/')} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


if __name__ == "__main__":  # pragma: no cover
    print(markdown())
