"""What a reload keeps, opens and closes, decided from two configurations alone."""

from __future__ import annotations

from pathlib import Path

from waggle.config.loader import load
from waggle.config.model import WaggleConfig
from waggle.metastores import plan_reload

TUNNEL = ("  metastore-tunnel:\n    route: ec2-user@bastion -> hadoop@10.0.0.7\n    private-keys: /keys/id\n"
          "    known-hosts: /keys/known_hosts\n")


def config(tmp_path: Path, federated: str, server: str = "", name: str = "a") -> WaggleConfig:
    server_file, fed_file = tmp_path / f"server-{name}.yml", tmp_path / f"fed-{name}.yml"
    server_file.write_text(server)
    fed_file.write_text("primary-meta-store:\n  name: primary\n  remote-meta-store-uris: thrift://p:9083\n"
                        "federated-meta-stores:\n" + federated)
    return load(str(server_file), str(fed_file))


def member(name: str, uri: str = "thrift://m:9083", extra: str = "") -> str:
    return f"- name: {name}\n  remote-meta-store-uris: {uri}\n{extra}"


def test_routing_changes_keep_every_pool(tmp_path):
    old = config(tmp_path, member("x", extra="  database-prefix: x_\n"))
    new = config(tmp_path, member("x", extra="  database-prefix: other_\n  access-control-type: "
                                           "READ_AND_WRITE_ON_DATABASE_WHITELIST\n  mapped-databases: [a]\n"), name="b")
    plan = plan_reload(old, new)
    assert plan.keep_pools == ("primary", "x") and not plan.open_pools and not plan.close_pools
    assert not plan.restart_required


def test_added_removed_and_reconnected_members(tmp_path):
    old = config(tmp_path, member("gone") + member("moved", "thrift://old:9083") + member("same"))
    new = config(tmp_path, member("moved", "thrift://new:9083") + member("same") + member("added"), name="b")
    plan = plan_reload(old, new)
    assert plan.keep_pools == ("primary", "same")
    assert plan.open_pools == ("moved", "added")
    assert plan.close_pools == ("gone", "moved")


def test_a_tunnel_outlives_a_pool_change_but_not_its_own(tmp_path):
    old = config(tmp_path, member("t", extra=TUNNEL) + member("u", extra=TUNNEL))
    new = config(tmp_path, member("t", extra=TUNNEL + "  read-timeout: 5000\n")
                 + member("u", extra=TUNNEL.replace("hadoop@", "root@")), name="b")
    plan = plan_reload(old, new)
    assert "t" in plan.open_pools and "t" in plan.keep_tunnels  # the same SSH route: the tunnel stays
    assert plan.open_tunnels == ("u",) and plan.close_tunnels == ("u",)


def test_limits_keep_pools_and_listener_keys_wait_for_a_restart(tmp_path):
    old = config(tmp_path, member("x"))
    new = config(tmp_path, member("x"), "port: 9999\nlimits:\n  max-calls-per-metastore: 3\n", name="b")
    plan = plan_reload(old, new)
    assert plan.keep_pools == ("primary", "x") and not plan.open_pools  # a limit is resized in place
    assert plan.restart_required == ("port",)
    assert plan.describe()["restart_required"] == ["port"]

