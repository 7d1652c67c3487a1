"""Kerberos, token and TLS settings: Hive's keys and Waggle Dance's, and errors that name file, key and value."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from waggle.config.hive_values import duration_ms
from waggle.config.loader import ConfigError, load


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def fed(tmp_path: Path, extra: str = "") -> str:
    return write(tmp_path, "fed.yml", f"primary-meta-store:\n  name: p\n  remote-meta-store-uris: thrift://h:1\n{extra}")


def problems(server: str, federation: str) -> str:
    with pytest.raises(ConfigError) as err:
        load(server, federation)
    return str(err.value)


SASL = "configuration-properties:\n  hive.metastore.sasl.enabled: true\n"


def test_hive_keys_and_waggle_dance_keys_give_the_same_front_door(tmp_path):
    hive = write(tmp_path, "hive.yml", SASL + "  hive.metastore.kerberos.principal: hive/_HOST@EX.COM\n"
                                              "  hive.metastore.kerberos.keytab.file: /k/w.keytab\n"
                                              "  hadoop.rpc.protection: privacy,integrity\n"
                                              "  hive.cluster.delegation.token.renew-interval: 3600s\n"
                                              "kerberos:\n  trusted-realms: A.COM, B.COM\n")
    kerberos = load(hive, fed(tmp_path)).server.security.kerberos
    assert kerberos is not None
    assert kerberos.principal == f"hive/{socket.getfqdn().lower()}@EX.COM" and kerberos.keytab == "/k/w.keytab"
    assert kerberos.qops == ("auth-conf", "auth-int") and kerberos.trusted_realms == ("A.COM", "B.COM")
    assert (kerberos.token_renew_interval_ms, kerberos.token_max_lifetime_ms) == (3_600_000, 7 * 86_400_000)
    wd = write(tmp_path, "wd.yml", SASL + "  hive.server2.authentication.kerberos.principal: hive/h.ex.com@EX.COM\n"
                                          "  hive.server2.authentication.kerberos.keytab: /k/wd.keytab\n")
    kerberos = load(wd, fed(tmp_path)).server.security.kerberos
    assert kerberos is not None and (kerberos.principal, kerberos.keytab) == ("hive/h.ex.com@EX.COM", "/k/wd.keytab")
    assert load(wd, fed(tmp_path)).server.security.answers_tokens


def test_sasl_without_principal_or_keytab_or_with_bad_values_names_the_key(tmp_path):
    server = write(tmp_path, "s.yml", SASL + "  hadoop.rpc.protection: secret\n"
                                             "  hive.cluster.delegation.token.max-lifetime: forever\n")
    text = problems(server, fed(tmp_path))
    assert f"{server}: key 'configuration-properties.hive.metastore.kerberos.principal' is required when " \
           "hive.metastore.sasl.enabled is true" in text
    assert "key 'configuration-properties.hive.metastore.kerberos.keytab.file' is required" in text
    assert "key 'configuration-properties.hadoop.rpc.protection': invalid value 'secret': 'secret' is not a " \
           "protection level" in text
    assert "key 'configuration-properties.hive.cluster.delegation.token.max-lifetime': invalid value 'forever'" \
        in text
    server = write(tmp_path, "s2.yml", SASL + "  hive.metastore.kerberos.principal: hive/host\n"
                                              "  hive.metastore.kerberos.keytab.file: /k\n")
    assert "invalid value 'hive/host': expected a principal with a realm" in problems(server, fed(tmp_path))


def test_kerberized_metastores_need_a_principal_and_waggles_identity(tmp_path):
    member = ("  impersonation-enabled: true\n  configuration-properties:\n"
              "    hive.metastore.sasl.enabled: {sasl}\n{principal}")
    text = problems(None, fed(tmp_path, member.format(sasl="false", principal="")))  # type: ignore[arg-type]
    assert "key 'primary-meta-store.impersonation-enabled': invalid value True: needs Kerberos" in text
    text = problems(None, fed(tmp_path, member.format(sasl="true", principal="")))  # type: ignore[arg-type]
    assert "key 'primary-meta-store.configuration-properties.hive.metastore.kerberos.principal' is required" in text
    text = problems(None, fed(tmp_path, member.format(  # type: ignore[arg-type]
        sasl="true", principal="    hive.metastore.kerberos.principal: hive/_HOST@EX.COM\n")))
    assert "metastore 'p' uses Kerberos (hive.metastore.sasl.enabled), so the server file needs waggle's own " \
           "principal and keytab" in text
    identity = write(tmp_path, "s.yml", "configuration-properties:\n"
                                        "  hive.metastore.kerberos.principal: waggle/h@EX.COM\n"
                                        "  hive.metastore.kerberos.keytab.file: /k\n")
    config = load(identity, fed(tmp_path, member.format(
        sasl="true", principal="    hive.metastore.kerberos.principal: hive/_HOST@EX.COM\n")))
    security = config.federation.primary.security
    assert security.kerberos and security.impersonation and security.principal == "hive/_HOST@EX.COM"
    assert config.server.security.kerberos is not None and not config.server.security.answers_tokens


def test_tls_keys_on_both_sides(tmp_path):
    server = write(tmp_path, "s.yml", "configuration-properties:\n  hive.metastore.use.SSL: true\n")
    text = problems(server, fed(tmp_path))
    assert "key 'tls.certificate-file' is required for TLS on the Thrift port" in text
    server = write(tmp_path, "s2.yml", "tls:\n  client-ca-file: /ca.pem\n")
    assert "key 'tls.client-ca-file': invalid value '/ca.pem': needs tls.certificate-file" in problems(
        server, fed(tmp_path))
    server = write(tmp_path, "s3.yml", "tls:\n  certificate-file: /c.pem\n  key-file: /k.pem\n")
    member = fed(tmp_path, "  configuration-properties:\n    hive.metastore.use.SSL: true\n"
                           "  tls:\n    ca-file: /ca.pem\n    check-hostname: false\n")
    config = load(server, member)
    assert config.server.security.tls is not None and config.server.security.tls.certificate_file == "/c.pem"
    client = config.federation.primary.security.tls
    assert client is not None and (client.ca_file, client.check_hostname) == ("/ca.pem", False)
    assert "needs both tls.certificate-file and tls.key-file" in problems(None, fed(
        tmp_path, "  tls:\n    enabled: true\n    certificate-file: /c.pem\n"))  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "ms"), [("86400000", 86_400_000), ("600s", 600_000), ("1d", 86_400_000),
                                          ("2h", 7_200_000), ("5min", 300_000)])
def test_token_durations_read_as_hive_writes_them(text, ms):
    assert duration_ms(text) == ms
