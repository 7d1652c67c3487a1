"""Client sequences, replayed call for call through waggle and directly, reply by reply.

Every sequence of tests/clients/sequences.py (Trino, Hive 3.1, Hive 4, Spark 3.5; each cites the client class and
method it was derived from) runs on three targets:

* ``primary``: through waggle on the primary (database ``d``) against the primary directly;
* ``member``: through waggle on the prefixed member (``an_d``) against the member directly (``d``);
* ``link``: through waggle on a link (``cs_link_x`` to the member's ``d``) against the member directly. Links are
  read-only: the reads before the first write are compared, the first write must get the documented refusal
  (a MetaException), and a stock DROP DATABASE ... CASCADE sequence of a Hive client drops the link alone.

Writes run directly in one database and through waggle in a sibling database of the same metastore, seeded alike;
replies are compared after the databases' names are made ``{db}``. The "direct" side of a Hive 3.1 or Hive 4
sequence is the STUB Hive 3.1 / 4 metastore around the same real Hive 2.3 metastore (tests/support/hive_stubs.py);
where Hive 2.3 lacks a Hive 4 call, the direct side sends the Hive 2.3 call it stands for (``Step.equivalent``), so
the comparison checks waggle's bridge against the metastore's own answer.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.clients.conftest import ClientsFederation, drop_database, make_link, seed_database, unique
from tests.clients.replay import Outcome, Run, Side, compare, run_sequence
from tests.clients.sequences import Names, Sequence, Step, all_sequences
from tests.support.clients import hive2_client

pytestmark = pytest.mark.integration
TARGETS = ("primary", "member", "link")
COMPARED: dict[str, int] = {}  # sequence id -> replies compared (read by the report at the end of a session)


def sides(fed: ClientsFederation, seq: Sequence, target: str, direct_db: str, waggle_db: str
          ) -> tuple[Side, Side]:
    where = "primary" if target == "primary" else "member"
    sent = {"primary": waggle_db, "member": f"an_{waggle_db}", "link": fed.link}[target]
    direct = Side("direct", fed.direct_port(seq.release, where), Names(direct_db, seq.catalog), (direct_db,),
                  direct=True)
    own = tuple(sorted({sent, waggle_db}, key=len, reverse=True))
    through = Side(target, fed.waggle.port, Names(sent, seq.catalog), own)
    return direct, through


def _link_view(value: Any) -> Any:
    """A linked database as a reader sees it, without what the link adds (its description and parameters)."""
    if isinstance(value, dict):
        out = {k: _link_view(v) for k, v in value.items()}
        db = out.get("Database")
        if isinstance(db, dict):
            db = dict(db)
            db["parameters"] = {k: v for k, v in (db.get("parameters") or {}).items()
                                if not str(k).startswith("waggle.remote.")}
            if "description" in db:
                db["description"] = str(db["description"]).split(" [waggle link")[0]
            out["Database"] = db
        return out
    if isinstance(value, list):
        return [_link_view(v) for v in value]
    return value


def _nosuch(outcome: Outcome) -> bool:
    return outcome.value == ("error", "NoSuchObjectException") or (
        isinstance(outcome.value, list) and all(v == ("error", "NoSuchObjectException") for v in outcome.value))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("seq", all_sequences(), ids=lambda s: f"{s.client}:{s.name}")
def test_client_sequence(clients_fed: ClientsFederation, seq: Sequence, target: str) -> None:
    """One client's sequence (``seq.source`` names the class and method) through waggle equals the same
    sequence sent directly, reply for reply."""
    fed = clients_fed
    if target == "link":
        _on_link(fed, seq)
        return
    where = "primary" if target == "primary" else "member"
    store = fed.stores[where]
    if not seq.writes:
        direct, through = sides(fed, seq, target, fed.read_db, fed.read_db)
        COMPARED[f"{seq.client}:{seq.name}:{target}"] = compare(run_sequence(seq, direct),
                                                               run_sequence(seq, through))
        return
    base = unique("cs_w")
    direct_db, waggle_db = f"{base}_d", f"{base}_w"
    for db in (direct_db, waggle_db):
        seed_database(store.port, store.warehouse, db)
    try:
        direct, through = sides(fed, seq, target, direct_db, waggle_db)
        COMPARED[f"{seq.client}:{seq.name}:{target}"] = compare(run_sequence(seq, direct),
                                                               run_sequence(seq, through))
    finally:
        for db in (direct_db, waggle_db):
            drop_database(store.port, db)


def _on_link(fed: ClientsFederation, seq: Sequence) -> None:
    link = fed.link
    if seq.drops_database:
        link = unique("cs_link")
        make_link(fed.waggle.port, link, fed.read_db)
        fed = dataclasses.replace(fed, link=link)
    direct, through = sides(fed, seq, "link", fed.read_db, fed.read_db)
    through = dataclasses.replace(through, own=(link, fed.read_db))
    member = fed.stores["member"]
    with hive2_client(member.port) as c:
        before = sorted(c.get_all_tables(fed.read_db))

    def gives_up(step: Step, outcome: Outcome) -> bool:
        if outcome.error is None or not step.write:
            return False
        return not (seq.drops_database and _nosuch(outcome))

    ran = run_sequence(seq, through, stop=gives_up)
    first_write = next((i for i, s in enumerate(seq.steps) if s.write), len(seq.steps))
    reads = dataclasses.replace(seq, steps=seq.steps[:first_write])
    expected = run_sequence(reads, direct)
    got = Run(through, [dataclasses.replace(o, value=_link_view(o.value)) for o in ran.outcomes[:first_write]])
    compared = compare(expected, got)
    for step, outcome in zip(seq.steps[first_write:], ran.outcomes[first_write:], strict=False):
        if not step.write:
            continue
        if seq.drops_database and step.method.startswith("drop_database"):
            assert outcome.error is None, f"dropping the link {link} failed: {outcome.error!r}"
            continue
        if seq.drops_database and _nosuch(outcome):
            continue  # the client's own cascade: a read-only link's tables are skipped as absent
        first = outcome.value[0] if isinstance(outcome.value, list) else outcome.value
        assert first == ("error", "MetaException"), f"{step.method} on a link: {outcome.value}"
        assert "read-only" in str(outcome.error), str(outcome.error)
        break  # the client gives up
    with hive2_client(member.port) as c:
        assert sorted(c.get_all_tables(fed.read_db)) == before, "a write through a read-only link reached it"
    COMPARED[f"{seq.client}:{seq.name}:link"] = compared + 1
