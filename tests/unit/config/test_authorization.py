"""``authorization`` in the server file and its policy file: grants read, every problem naming file, key and
value."""

from __future__ import annotations

from pathlib import Path

import pytest

from waggle.config.kinds import Effect, GroupSource, Privilege
from waggle.config.loader import ConfigError, load


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def loaded(tmp_path: Path, server: str) -> object:
    fed = write(tmp_path, "fed.yml", "primary-meta-store:\n  name: p\n  remote-meta-store-uris: thrift://h:1\n")
    return load(write(tmp_path, "server.yml", server), fed)


def problems(tmp_path: Path, server: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        loaded(tmp_path, server)
    return caught.value.problems


def test_no_block_means_no_grants(tmp_path):
    assert loaded(tmp_path, "port: 1\n").server.authorization is None  # type: ignore[attr-defined]


def test_rules_and_their_defaults(tmp_path):
    policy = write(tmp_path, "policy.yml", "rules:\n- name: ops\n  groups: [Ops]\n  databases: ['ops_*']\n"
                                           "  privileges: [update, ALTER]\n")
    config = loaded(tmp_path, f"""
authorization:
  default: allow
  policy-file: {policy}
  groups: {{file: /etc/group, ttl: 5m}}
  rules:
  - users: [Alice]
    databases: [Sales]
    privileges: all
    effect: deny
""").server.authorization  # type: ignore[attr-defined]
    assert config.default is Effect.ALLOW and not config.trust_set_ugi
    first, second = config.rules
    assert first.name.endswith("server.yml: authorization.rules[0]")
    assert (first.users, first.databases, first.tables, first.effect) == (("alice",), ("sales",), ("*",), Effect.DENY)
    assert first.privileges == frozenset(Privilege)
    assert second.name.endswith("policy.yml: rules[0] 'ops'") and second.groups == ("ops",)
    assert second.privileges == {Privilege.UPDATE, Privilege.ALTER}
    assert config.groups.source is GroupSource.FILE and config.groups.ttl_seconds == 300
    assert config.policy_file == policy


def test_every_problem_names_file_key_and_value(tmp_path):
    found = problems(tmp_path, """
authorization:
  default: maybe
  rules:
  - users: [a]
    privileges: [select, sudo]
  - databases: [x]
    privileges: [select]
  - users: [b]
  groups: {source: ldap}
  ranger: {url: ftp://x}
""")
    text = "\n".join(found)
    assert "key 'authorization.default': invalid value 'maybe'" in text
    assert "key 'authorization.rules[0].privileges[1]': invalid value 'sudo'" in text
    assert "rule 'authorization.rules[1]' names no user and no group" in text
    assert "key 'authorization.rules[2].privileges' is required" in text
    assert "key 'authorization.groups.ldap' is required with groups.source: ldap" in text
    assert "key 'authorization.ranger.url': invalid value 'ftp://x'" in text
    assert all("server.yml" in p for p in found)


def test_a_policy_file_that_cannot_be_read_is_named(tmp_path):
    assert any("nope.yml: cannot read the policy file" in p
               for p in problems(tmp_path, "authorization:\n  policy-file: nope.yml\n"))
    bad = write(tmp_path, "bad.yml", "rules:\n- users: [a]\n  privileges: [fly]\nextra: 1\n")
    found = problems(tmp_path, f"authorization:\n  policy-file: {bad}\n")
    assert any(p.startswith(f"{bad}: key 'rules[0].privileges[0]': invalid value 'fly'") for p in found)
    assert any("key 'extra' is not known in a policy file" in p for p in found)


def test_ldap_needs_a_url_a_base_and_a_filter_naming_the_user(tmp_path):
    found = problems(tmp_path, "authorization:\n  groups:\n    ldap: {url: 'x://y', group-filter: '(cn=a)'}\n")
    text = "\n".join(found)
    assert "groups.ldap.url': invalid value 'x://y'" in text
    assert "groups.ldap.base' is required" in text
    assert "names neither {user} nor {dn}" in text


def test_trust_set_ugi_is_warned_about_and_unknown_keys_named(tmp_path):
    config = loaded(tmp_path, "authorization:\n  trust-set-ugi: true\n  colour: red\n  rules:\n"
                              "  - users: ['*']\n    privileges: [select]\n    colur: x\n")
    warnings = "\n".join(str(w) for w in config.warnings)  # type: ignore[attr-defined]
    assert "authorization.trust-set-ugi" in warnings and "anyone can name any user" in warnings
    assert "authorization.colour" in warnings and "authorization.rules[0].colur" in warnings
