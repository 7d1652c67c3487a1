"""A process's lifecycle and readiness, and the metastores' side of a reload, from plain configurations (no
metastore is reached: nothing here calls one)."""

from __future__ import annotations

from pathlib import Path

from waggle.config.loader import load
from waggle.config.model import WaggleConfig
from waggle.lifecycle import Lifecycle
from waggle.metastores import Metastores, plan_reload
from waggle.upstream.handshake import UpstreamCredentials


def config(tmp_path: Path, federated: str, name: str = "a", primary: str = "primary") -> WaggleConfig:
    server_file, fed_file = tmp_path / f"server-{name}.yml", tmp_path / f"fed-{name}.yml"
    server_file.write_text("")
    fed_file.write_text(f"primary-meta-store:\n  name: {primary}\n  remote-meta-store-uris: thrift://p:9083\n"
                        "federated-meta-stores:\n" + federated)
    return load(str(server_file), str(fed_file))


def member(name: str, uri: str = "thrift://m:9083") -> str:
    return f"- name: {name}\n  remote-meta-store-uris: {uri}\n"


def test_readiness_follows_the_primary_and_fails_once_stopping(tmp_path: Path) -> None:
    cfg = config(tmp_path, member("x"))
    metastores = Metastores(cfg, UpstreamCredentials(None))
    try:
        primary = ["primary"]
        lifecycle = Lifecycle(metastores.health, lambda: primary[0])
        assert lifecycle.ready() == (True, "ok")
        metastores.health.status["primary"].up = False
        metastores.health.status["primary"].reason = "connection refused"
        ready, reason = lifecycle.ready()
        assert not ready and reason.startswith("metastore 'primary' is unavailable since ")
        assert reason.endswith(": connection refused")
        primary[0] = "x"  # a reload made another member the primary
        assert lifecycle.ready() == (True, "ok")
        assert (lifecycle.serving, lifecycle.stopping, lifecycle.draining) == (True, False, False)
        assert lifecycle.stop() is True
        assert lifecycle.stop() is False  # a second SIGTERM: the first one's schedule stands
        assert lifecycle.ready() == (False, "stopping")
        assert not lifecycle.draining
        lifecycle.drain()
        assert lifecycle.draining
    finally:
        metastores.close({})


def test_a_reload_keeps_unchanged_pools_and_opens_changed_ones(tmp_path: Path) -> None:
    old = config(tmp_path, member("same") + member("moved", "thrift://old:9083") + member("gone"))
    new = config(tmp_path, member("same") + member("moved", "thrift://new:9083") + member("added"), name="b")
    metastores = Metastores(old, UpstreamCredentials(None))
    running = metastores.pools(old)
    plan = plan_reload(old, new)
    staged = metastores.stage(new, plan)
    assert sorted(staged.opened_pools) == ["added", "moved"]
    pools = metastores.swap(staged, running)
    try:
        assert sorted(pools) == ["added", "moved", "primary", "same"]
        assert pools["same"] is running["same"] and pools["primary"] is running["primary"]
        assert pools["moved"] is staged.opened_pools["moved"] is not running["moved"]
        assert [str(u) for u in pools["moved"].config.uris] == ["thrift://new:9083"]
        assert sorted(metastores.health.status) == ["added", "moved", "primary", "same"]
    finally:
        metastores.close(pools)
