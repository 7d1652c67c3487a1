"""The tunnel's configuration: Waggle Dance's ``metastore-tunnel`` keys, what the helper is given, and what
``waggle check`` says about the key and known_hosts files (real files, no SSH server)."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
from pathlib import Path

import paramiko
import pytest

from waggle.config.loader import ConfigError, load
from waggle.tunnel.keys import check_files
from waggle.tunnel.spec import Hop, TunnelSpec, spec_for


def federation(tmp_path: Path, tunnel: str) -> str:
    path = tmp_path / "fed.yml"
    path.write_text("primary-meta-store:\n  name: p\n  remote-meta-store-uris: thrift://h:1\n"
                    "federated-meta-stores:\n- name: far\n"
                    "  remote-meta-store-uris: thrift://meta-a:9083,thrift://meta-b:9084\n"
                    "  metastore-tunnel:\n" + "".join(f"    {line}\n" for line in tunnel.splitlines()))
    return str(path)


def tunnel_spec(tmp_path: Path, tunnel: str) -> TunnelSpec:
    member = load(None, federation(tmp_path, tunnel)).federation.members[1]
    return spec_for(member)


def test_waggle_dance_keys_become_the_helpers_spec(tmp_path: Path) -> None:
    spec = tunnel_spec(tmp_path, "route: ec2-user@bastion -> emr-master\nprivate-keys: /k/a.pem, ~/b.pem\n"
                                 "known-hosts: /k/known_hosts\nport: 2222\nlocalhost: 127.0.0.1\ntimeout: 5000\n"
                                 "strict-host-key-checking: no")
    assert spec.hops == (Hop("ec2-user", "bastion", 2222), Hop(getpass.getuser(), "emr-master", 2222))
    assert spec.private_keys == ("/k/a.pem", os.path.expanduser("~/b.pem"))
    assert spec.known_hosts == "/k/known_hosts" and spec.strict is False
    assert spec.targets == (("meta-a", 9083), ("meta-b", 9084)) and spec.bind == "127.0.0.1"
    assert spec.timeout == 5.0 and spec.hop_label(1) == f"hop 2 ({getpass.getuser()}@emr-master:2222)"
    assert TunnelSpec.from_json(spec.to_json()) == spec


def test_defaults(tmp_path: Path) -> None:
    spec = tunnel_spec(tmp_path, "route: bastion\nprivate-keys: /k/a.pem")
    assert spec.hops == (Hop(getpass.getuser(), "bastion", 22),)
    assert spec.known_hosts == os.path.expanduser("~/.ssh/known_hosts")
    assert spec.strict is True and spec.timeout_ms == 60000 and spec.bind == "localhost"


@pytest.mark.parametrize(("value", "strict"), [("yes", True), ("no", False), ("true", True), ("false", False),
                                               ("'yes'", True), ("'no'", False), ("YES", True)])
def test_strict_host_key_checking_as_string_or_yaml_boolean(tmp_path: Path, value: str, strict: bool) -> None:
    spec = tunnel_spec(tmp_path, f"route: a@b\nprivate-keys: /k\nstrict-host-key-checking: {value}")
    assert spec.strict is strict


@pytest.mark.parametrize(("tunnel", "message"), [
    ("route: a@b -> c@@d\nprivate-keys: /k", "key 'federated-meta-stores[0].metastore-tunnel.route': invalid value "
                                             "'a@b -> c@@d': hop 'c@@d' is not [user@]host"),
    ("route: a@b ->\nprivate-keys: /k", "hop '' is not [user@]host"),
    ("private-keys: /k", "key 'federated-meta-stores[0].metastore-tunnel.route' is required"),
    ("route: a@b", "key 'federated-meta-stores[0].metastore-tunnel.private-keys' is required"),
    ("route: a@b\nprivate-keys: /k\nstrict-host-key-checking: maybe", "strict-host-key-checking': invalid value "
                                                                        "'maybe': expected yes or no"),
    ("route: a@b\nprivate-keys: /k\nport: 0", "metastore-tunnel.port': invalid value 0"),
])
def test_bad_tunnel_keys_name_file_key_and_value(tmp_path: Path, tunnel: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(None, federation(tmp_path, tunnel))
    assert message in str(err.value) and "fed.yml" in str(err.value), str(err.value)


def test_hosts_off_port_22_are_looked_up_as_openssh_writes_them() -> None:
    assert Hop("u", "bastion", 22).known_hosts_name == "bastion"
    assert Hop("u", "127.0.0.2", 2222).known_hosts_name == "[127.0.0.2]:2222"


# -- waggle check: the files --------------------------------------------------------------------------------------
@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    key = paramiko.RSAKey.generate(1024)
    good = tmp_path / "id_rsa"
    key.write_private_key_file(str(good))
    locked = tmp_path / "id_locked"
    key.write_private_key_file(str(locked), password="s3cret-passphrase")
    garbage = tmp_path / "not_a_key"
    garbage.write_text("hello\n")
    host = paramiko.RSAKey.generate(1024)
    known = tmp_path / "known_hosts"
    known.write_text(f"[bastion]:2222 ssh-rsa {host.get_base64()}\n")
    return {"good": good, "locked": locked, "garbage": garbage, "known": known, "missing": tmp_path / "nope"}


def spec_with(files: dict[str, Path], keys: tuple[str, ...], known: str = "known", strict: bool = True,
              hops: tuple[str, ...] = ("bastion",)) -> TunnelSpec:
    return TunnelSpec("far", tuple(Hop("u", h, 2222) for h in hops), tuple(str(files[k]) for k in keys),
                      str(files[known]), strict, 1000, (("meta", 9083),), "localhost")


def test_check_accepts_readable_keys_and_a_known_hosts_with_every_hop(files: dict[str, Path]) -> None:
    assert check_files(spec_with(files, ("good",))) == []


def test_check_names_each_bad_key_file(files: dict[str, Path]) -> None:
    problems = check_files(spec_with(files, ("good", "missing", "locked", "garbage")))
    assert len(problems) == 3, problems
    assert f"metastore 'far': metastore-tunnel.private-keys: '{files['missing']}' cannot be read" in problems[0]
    assert f"'{files['locked']}' is protected by a passphrase" in problems[1]
    assert f"'{files['garbage']}' is not a private key" in problems[2]
    assert not any("s3cret" in p for p in problems)


def test_check_known_hosts(files: dict[str, Path]) -> None:
    missing = check_files(spec_with(files, ("good",), known="missing"))
    assert len(missing) == 1 and f"known-hosts: '{files['missing']}' cannot be read" in missing[0]
    assert check_files(spec_with(files, ("good",), known="missing", strict=False)) == []
    unknown = check_files(spec_with(files, ("good",), hops=("bastion", "inner")))
    assert len(unknown) == 1 and "has no key for hop 2 (u@inner:2222), written '[inner]:2222'" in unknown[0]


def test_a_corrupt_key_file_is_reported_without_its_content(tmp_path: Path) -> None:
    key = paramiko.RSAKey.generate(1024)
    path = tmp_path / "id_corrupt"
    key.write_private_key_file(str(path))
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:3] + lines[5:]) + "\n")  # two lines of the body missing
    spec = TunnelSpec("far", (Hop("u", "h", 22),), (str(path),), str(tmp_path / "kh"), False, 1000, (("m", 1),), "")
    problems = check_files(spec)
    assert len(problems) == 1 and f"'{path}' is not a private key" in problems[0], problems
    for line in lines[1:-1]:
        assert line[:20] not in problems[0]


def test_the_proxy_never_imports_paramiko() -> None:
    """paramiko runs in the tunnel helper process only: the proxy's modules, tunnels included, do not load it."""
    code = ("import sys\nfrom gevent import monkey\nmonkey.patch_all()\n"
            "import waggle.app, waggle.runtime, waggle.upstream.tunnel, waggle.tunnel.spec\n"
            "print('paramiko' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
