"""What ``waggle check`` finds in the grants (``authorization``) beyond their keys: the files they name, read as
the server will read them, and, with ``--connect``, rules whose database patterns match no database of the
federation now."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from waggle.config.grants_model import Authorization
from waggle.config.kinds import GroupSource
from waggle.grants.groups import parse_groups_file
from waggle.grants.patterns import compile_globs
from waggle.grants.ranger import RangerPolicyError, RangerSource


def file_problems(grants: Authorization, where: str) -> list[str]:
    """The files the grants name that cannot be read as the server reads them (``where``: the server file)."""
    problems = []
    groups = grants.groups
    if groups.source is GroupSource.FILE and groups.file:
        problems += _read(groups.file, where, "authorization.groups.file", parse_groups_file)
    ldap = groups.ldap
    if groups.source is GroupSource.LDAP and ldap is not None:
        for key, path in (("bind-password-file", ldap.bind_password_file), ("ca-file", ldap.ca_file)):
            if path:
                problems += _read(path, where, f"authorization.groups.ldap.{key}", None)
    ranger = grants.ranger
    if ranger is not None and ranger.policy_file and not ranger.url:
        def ranger_policies(text: str) -> object:
            return RangerSource.from_document(json.loads(text), ranger.service, ranger.policy_file or "")

        problems += _read(ranger.policy_file, where, "authorization.ranger.policy-file", ranger_policies)
    if ranger is not None and ranger.ca_file:
        problems += _read(ranger.ca_file, where, "authorization.ranger.ca-file", None)
    return problems


def _read(path: str, where: str, key: str, parse: object) -> list[str]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        return [f"{where}: key '{key}': invalid value {path!r}: cannot read it: {exc.strerror or exc}"]
    if callable(parse):
        try:
            parse(text)
        except (ValueError, RangerPolicyError) as exc:
            return [f"{where}: key '{key}': {path}: {exc}"]
    return []


def unmatched(grants: Authorization, databases: Iterable[str]) -> list[str]:
    """A warning for each rule whose database patterns match none of ``databases`` (waggle's names, as the
    federation shows them now)."""
    names = [d.lower() for d in databases]
    out = []
    for rule in grants.rules:
        for pattern in rule.databases:
            compiled = compile_globs([pattern])
            if compiled is not None and not any(compiled.fullmatch(n) for n in names):
                out.append(f"{rule.name}: database pattern '{pattern}' matches no database of the federation now")
    return out
