"""``iceberg-rest.*`` of the server file: the port, TLS, token lifetime, purge, and clients whose secrets are read
from files; every problem names the file, the key and the value, and never the secret."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from waggle.config.check import rest_secrets
from waggle.config.loader import ConfigError, load

SECRET = "a-long-enough-secret-0123"


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _fed(tmp_path: Path) -> str:
    return _write(tmp_path, "fed.yml", "primary-meta-store:\n  name: p\n  remote-meta-store-uris: thrift://h:1\n")


def _secret(tmp_path: Path, name: str = "client.secret", text: str = SECRET + "\n") -> str:
    return _write(tmp_path, name, text)


def _problems(tmp_path: Path, server: str) -> tuple[str, tuple[str, ...]]:
    path = _write(tmp_path, "server.yml", server)
    with pytest.raises(ConfigError) as err:
        load(path, _fed(tmp_path))
    return str(err.value), tuple(str(w) for w in err.value.warnings)


def test_off_unless_a_port_is_given(tmp_path):
    rest = load(_write(tmp_path, "s.yml", "port: 9083\n"), _fed(tmp_path)).server.iceberg_rest
    assert rest.port is None and rest.clients == () and rest.tls is None
    assert rest.allow_purge is False and rest.token_lifetime_seconds == 3600


def test_every_key_is_read(tmp_path):
    secret = _secret(tmp_path)
    other = _secret(tmp_path, "other.secret", f"  {SECRET}-other  \n")
    server = _write(tmp_path, "s.yml",
                    f"iceberg-rest:\n  port: 8181\n  tls:\n    certificate-file: /c.pem\n    key-file: /k.pem\n"
                    f"  token-lifetime: 2h\n  allow-purge: true\n  clients:\n"
                    f"  - id: spark-etl\n    secret-file: {secret}\n    user: etl\n"
                    f"  - id: bi\n    secret-file: {other}\n"
                    f"delegation-tokens:\n  signing-key-file: /keys\n")
    config = load(server, _fed(tmp_path))
    rest = config.server.iceberg_rest
    assert rest.port == 8181 and rest.allow_purge is True and rest.token_lifetime_seconds == 7200
    assert rest.tls is not None and (rest.tls.certificate_file, rest.tls.key_file) == ("/c.pem", "/k.pem")
    assert [(c.id, c.user, c.secret_file) for c in rest.clients] == [
        ("spark-etl", "etl", secret), ("bi", "bi", other)]  # user: the id
    assert rest_secrets(config) == {"spark-etl": SECRET.encode(), "bi": f"{SECRET}-other".encode()}
    assert rest.signing_key_file == "/keys"
    assert SECRET not in repr(rest) and SECRET not in repr(config)


def _secret_problems(tmp_path: Path, server: str) -> str:
    config = load(_write(tmp_path, "server.yml", server), _fed(tmp_path))
    with pytest.raises(ConfigError) as err:
        rest_secrets(config)
    return str(err.value)


def test_a_short_secret_is_refused_naming_file_key_and_value_not_the_secret(tmp_path):
    short = _secret(tmp_path, "short.secret", "tooshort\n")
    text = _secret_problems(tmp_path, f"iceberg-rest:\n  port: 8181\n  clients:\n  - id: a\n    secret-file: {short}\n")
    assert f"{tmp_path / 'server.yml'}: key 'iceberg-rest.clients[0].secret-file': invalid value '{short}'" in text
    assert "shorter than 16 characters" in text
    assert "tooshort" not in text.replace(short, "")


def test_an_unreadable_secret_file_is_refused_naming_it(tmp_path):
    missing = str(tmp_path / "missing.secret")
    directory = str(tmp_path)
    text = _secret_problems(tmp_path, f"iceberg-rest:\n  port: 8181\n  clients:\n  - id: a\n"
                                      f"    secret-file: {missing}\n  - id: b\n    secret-file: {directory}\n")
    assert f"key 'iceberg-rest.clients[0].secret-file': invalid value '{missing}': cannot read it: No such file" \
        in text
    assert f"key 'iceberg-rest.clients[1].secret-file': invalid value '{directory}': cannot read it" in text


def test_clients_need_an_id_and_a_secret_file_and_ids_are_distinct(tmp_path):
    secret = _secret(tmp_path)
    text, _ = _problems(tmp_path, f"iceberg-rest:\n  port: 8181\n  clients:\n  - id: a\n    secret-file: {secret}\n"
                                  f"  - id: a\n    secret-file: {secret}\n  - secret-file: {secret}\n  - id: c\n"
                                  "  - just-a-name\n")
    assert "key 'iceberg-rest.clients[1].id': invalid value 'a': another client has this id" in text
    assert "key 'iceberg-rest.clients[2].id' is required" in text
    assert "key 'iceberg-rest.clients[3].secret-file' is required" in text
    assert "key 'iceberg-rest.clients[4]': invalid value 'just-a-name': expected a client" in text
    text, _ = _problems(tmp_path, "iceberg-rest:\n  port: 8181\n  clients: spark-etl\n")
    assert "key 'iceberg-rest.clients': invalid value 'spark-etl': expected a list of clients" in text


def test_bad_values_name_the_key(tmp_path):
    text, _ = _problems(tmp_path, "iceberg-rest:\n  port: 70000\n  token-lifetime: forever\n  allow-purge: maybe\n")
    assert "key 'iceberg-rest.port': invalid value 70000" in text
    assert "key 'iceberg-rest.token-lifetime': invalid value 'forever'" in text
    assert "key 'iceberg-rest.allow-purge': invalid value 'maybe'" in text


def test_tls_needs_both_files(tmp_path):
    text, _ = _problems(tmp_path, "iceberg-rest:\n  port: 8181\n  tls:\n    certificate-file: /c.pem\n")
    assert "key 'iceberg-rest.tls.key-file' is required with iceberg-rest.tls.certificate-file" in text
    text, _ = _problems(tmp_path, "iceberg-rest:\n  port: 8181\n  tls:\n    key-file: /k.pem\n")
    assert "key 'iceberg-rest.tls.certificate-file' is required with iceberg-rest.tls.key-file" in text


def test_an_unknown_client_key_is_warned_by_its_path(tmp_path):
    secret = _secret(tmp_path)
    config = load(_write(tmp_path, "s.yml", f"iceberg-rest:\n  port: 8181\n  clients:\n  - id: a\n"
                                            f"    secret-file: {secret}\n    colour: red\n    usr: x\n"
                                            "delegation-tokens:\n  signing-key-file: /keys\n"), _fed(tmp_path))
    warnings = [str(w) for w in config.warnings]
    assert any("iceberg-rest client key 'iceberg-rest.clients[0].colour' is ignored" in w for w in warnings), warnings
    assert any("'iceberg-rest.clients[0].usr'" in w for w in warnings), warnings
    assert [c.id for c in config.server.iceberg_rest.clients] == ["a"]
    with pytest.raises(ConfigError, match=r"iceberg-rest\.clients\[0\]\.colour"):
        load(str(tmp_path / "s.yml"), _fed(tmp_path), strict=True)


def test_an_open_port_is_warned(tmp_path):
    config = load(_write(tmp_path, "s.yml", "iceberg-rest:\n  port: 8181\n"), _fed(tmp_path))
    assert any("'iceberg-rest.port'" in str(w) and "open to anyone" in str(w) for w in config.warnings), \
        config.warnings
    secret = _secret(tmp_path)
    closed = load(_write(tmp_path, "s.yml", f"iceberg-rest:\n  port: 8181\n  clients:\n  - id: a\n"
                                            f"    secret-file: {secret}\n"
                                            "delegation-tokens:\n  signing-key-file: /keys\n"), _fed(tmp_path))
    assert not [w for w in closed.warnings if "open to anyone" in str(w)], closed.warnings


def test_a_token_is_needed_once_clients_or_kerberos_are_configured() -> None:
    """The port is open only where the Thrift port is: no REST clients and no Kerberos."""
    from types import SimpleNamespace

    from waggle.rest.door import needs_token

    def config(clients: tuple[object, ...], kerberos: object | None) -> Any:
        return SimpleNamespace(server=SimpleNamespace(iceberg_rest=SimpleNamespace(clients=clients),
                                                      security=SimpleNamespace(kerberos=kerberos)))

    assert not needs_token(config((), None))
    assert needs_token(config(("a client",), None))
    assert needs_token(config((), "kerberos"))
