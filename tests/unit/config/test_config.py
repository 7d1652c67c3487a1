"""Waggle Dance's YAML, read as its users write it; every problem names file, key and value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from waggle.config.loader import ConfigError, load
from waggle.config.member_settings import METASTORE_SETTINGS
from waggle.config.model import AccessControlType, DatabaseResolution, ProtocolKind, TransportKind, WireFormat
from waggle.config.settings import SERVER_SETTINGS

ROOT = Path(__file__).resolve().parents[3]

# Waggle Dance's README example federation, with URIs of our own.
WD_README_FEDERATION = """
primary-meta-store:
  access-control-type: READ_AND_WRITE_AND_CREATE_ON_DATABASE_WHITELIST
  name: primary
  remote-meta-store-uris: thrift://127.0.0.1:9083
  writable-database-white-list:
  - my_writable_db1
  - my_writable_db2
  - user_db_.*
federated-meta-stores:
- remote-meta-store-uris: thrift://127.0.0.2:9083
  access-control-type: READ_ONLY
  metastore-tunnel:
    route: ec2-user@bastion-host -> hadoop@emr-master
    private-keys: /home/user/.ssh/bastion-key-pair.pem,/home/user/.ssh/emr-key-pair.pem
    known-hosts: /home/user/.ssh/known_hosts
  name: secondary
  mapped-databases:
  - prod_db1
  - prod_db2
  - dev_group_1.*
  mapped-tables:
  - database: prod_db1
    mapped-tables:
    - tbl1
    - tbl_.*
  database-name-mapping:
    prod_db1: prod_db1_alias
  latency: 500
  configuration-properties:
    hive.metastore.kerberos.principal: hive/clustername@HADOOP.COM
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def minimal_federation(tmp_path: Path, extra: str = "") -> str:
    return write(tmp_path, "fed.yml",
                 f"primary-meta-store:\n  name: p\n  remote-meta-store-uris: thrift://h:1\n{extra}")


def test_waggle_dance_readme_example_loads(tmp_path):
    cfg = load(None, write(tmp_path, "fed.yml", WD_README_FEDERATION))
    fed = cfg.federation
    assert fed.primary.access_control_type is AccessControlType.READ_AND_WRITE_AND_CREATE_ON_DATABASE_WHITELIST
    assert fed.primary.database_prefix == ""
    sec = fed.federated[0]
    assert sec.database_prefix == "secondary_"
    assert sec.latency_ms == 500
    assert sec.tunnel is not None and sec.tunnel.route == (("ec2-user", "bastion-host"), ("hadoop", "emr-master"))
    assert sec.tunnel.strict_host_key_checking is True and sec.tunnel.port == 22
    assert sec.mapped_tables is not None and sec.mapped_tables[0].database == "prod_db1"
    assert dict(sec.database_name_mapping) == {"prod_db1": "prod_db1_alias"}
    assert sec.configuration_properties["hive.metastore.kerberos.principal"] == "hive/clustername@HADOOP.COM"
    assert cfg.warnings == ()


def test_kebab_camel_snake_and_dotted_keys_are_the_same_setting(tmp_path):
    fed = minimal_federation(tmp_path)
    for text in [
        "database-resolution: PREFIXED\nquery-functions-across-all-metastores: false\nendpoint:\n  port: 18001\n",
        "databaseResolution: PREFIXED\nqueryFunctionsAcrossAllMetastores: false\nendpoint.port: 18001\n",
        "database_resolution: PREFIXED\nquery_functions_across_all_metastores: false\nendpoint.port: 18001\n",
    ]:
        cfg = load(write(tmp_path, "server.yml", text), fed)
        assert cfg.server.database_resolution is DatabaseResolution.PREFIXED
        assert cfg.server.query_functions_across_all_metastores is False
        assert cfg.server.endpoint_port == 18001


def test_free_form_maps_keep_their_keys(tmp_path):
    fed = minimal_federation(tmp_path, "  databaseNameMapping:\n    Sales_DB: SalesAlias\n")
    server = write(tmp_path, "s.yml",
                   "configuration-properties:\n  hive.metastore.thrift.framed.transport.enabled: true\n"
                   "  hive.metastore.server.max.threads: 50\n")
    cfg = load(server, fed)
    assert cfg.server.wire.transport is TransportKind.FRAMED
    assert cfg.server.max_connections == 50
    assert cfg.server.configuration_properties["hive.metastore.server.max.threads"] == "50"
    assert dict(cfg.federation.primary.database_name_mapping) == {"sales_db": "salesalias"}


def test_defaults_match_waggle_dance(tmp_path):
    cfg = load(None, minimal_federation(tmp_path))
    s = cfg.server
    assert (s.port, s.database_resolution, s.endpoint_port) == (48869, DatabaseResolution.MANUAL, 18000)
    assert s.wire.transport is TransportKind.BUFFERED and s.wire.protocol is ProtocolKind.BINARY
    assert s.graceful_stop_seconds == 60 and s.status_polling_delay_seconds == 300
    assert cfg.federation.primary.access_control_type is AccessControlType.READ_ONLY


def test_unimplemented_and_unknown_keys_warn_but_load(tmp_path):
    server = write(tmp_path, "s.yml", "graphite:\n  host: g\n  port: 2003\nprotocl: compact\n")
    cfg = load(server, minimal_federation(tmp_path, "  glue-config:\n    glue-account-id: '1'\n"))
    text = "\n".join(cfg.warnings)
    assert "'graphite' is not implemented" in text
    assert "'primary-meta-store.glue-config' is not implemented" in text
    assert "unknown server key 'protocl'" in text


def test_nested_keys_warn_by_their_full_name(tmp_path):
    server = write(tmp_path, "s.yml", "logging:\n  level: debug\n  config: log4j2.xml\n  levle: x\n"
                                      "endpoint:\n  port: 18001\n")
    cfg = load(server, minimal_federation(tmp_path, ""))
    text = "\n".join(cfg.warnings)
    assert cfg.server.log_level == "debug" and cfg.server.endpoint_port == 18001
    assert "'logging.config' is not implemented" in text
    assert "unknown server key 'logging.levle' is ignored (did you mean 'logging.level'?)" in text
    assert "key 'logging.level'" not in text and "endpoint" not in text


@pytest.mark.parametrize(("server", "extra", "pattern"), [
    ("port: abc\n", "", r"s\.yml: key 'port': invalid value 'abc': expected an integer between 0 and 65535$"),
    ("port: 70000\n", "", r"key 'port': invalid value 70000"),
    ("database-resolution: SOMETIMES\n", "", r"key 'database-resolution': invalid value 'SOMETIMES': expected one of"),
    ("", "  access-control-type: READ_WRITE\n", r"fed\.yml: key 'primary-meta-store\.access-control-type'"),
    ("", "  mapped-databases: ['(unclosed']\n", r"key 'primary-meta-store\.mapped-databases\[0\]'"),
    ("", "  latency: -5\n", r"key 'primary-meta-store\.latency': invalid value -5"),
])
def test_bad_values_name_file_key_and_value(tmp_path, server, extra, pattern):
    with pytest.raises(ConfigError) as err:
        load(write(tmp_path, "s.yml", server), minimal_federation(tmp_path, extra))
    assert re.search(pattern, str(err.value)), str(err.value)


def test_bad_uri_and_missing_keys(tmp_path):
    fed = write(tmp_path, "fed.yml", "primary-meta-store:\n  remote-meta-store-uris: http://x\n"
                                     "federated-meta-stores:\n- name: a\n")
    with pytest.raises(ConfigError) as err:
        load(None, fed)
    msg = str(err.value)
    assert "key 'primary-meta-store.name' is required" in msg
    assert "'http://x' is not a thrift://host:port URI" in msg
    assert "key 'federated-meta-stores[0].remote-meta-store-uris' is required" in msg


def test_create_access_types_are_primary_only(tmp_path):
    fed = write(tmp_path, "fed.yml", "primary-meta-store:\n  name: p\n  remote-meta-store-uris: thrift://h:1\n"
                "federated-meta-stores:\n- name: f\n  remote-meta-store-uris: thrift://h:2\n"
                "  access-control-type: READ_AND_WRITE_AND_CREATE\n")
    with pytest.raises(ConfigError, match="allowed on the primary metastore only"):
        load(None, fed)


def test_duplicate_names_and_prefixes_are_errors(tmp_path):
    fed = write(tmp_path, "fed.yml", "primary-meta-store:\n  name: p\n  remote-meta-store-uris: thrift://h:1\n"
                "federated-meta-stores:\n- name: f\n  remote-meta-store-uris: thrift://h:2\n"
                "- name: f\n  remote-meta-store-uris: thrift://h:3\n"
                "- name: g\n  remote-meta-store-uris: thrift://h:4\n  database-prefix: F_\n")
    with pytest.raises(ConfigError) as err:
        load(None, fed)
    assert "duplicate metastore name" in str(err.value)
    assert "same prefix as metastore 'f'" in str(err.value)


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read federation config"):
        load(None, str(tmp_path / "missing.yml"))
    with pytest.raises(ConfigError, match="not valid YAML"):
        load(None, write(tmp_path, "bad.yml", "primary-meta-store: [unclosed\n"))
    with pytest.raises(ConfigError, match="is given twice"):
        load(write(tmp_path, "s.yml", "endpoint:\n  port: 1\nendpoint.port: 2\n"), minimal_federation(tmp_path))


def test_read_timeout_follows_hive_socket_timeout(tmp_path):
    cfg = load(None, minimal_federation(
        tmp_path, "  configuration-properties:\n    hive.metastore.client.socket.timeout: 90s\n"))
    assert cfg.federation.primary.read_timeout_ms == 90000
    cfg = load(None, minimal_federation(tmp_path, "  read-timeout: 5000\n  configuration-properties:\n"
                                                  "    hive.metastore.client.socket.timeout: 90s\n"))
    assert cfg.federation.primary.read_timeout_ms == 5000  # the key itself wins over the Hive property
    fed = minimal_federation(tmp_path, "  configuration-properties:\n    hive.metastore.client.socket.timeout: soon\n")
    with pytest.raises(ConfigError) as err:
        load(None, fed)
    assert str(err.value) == (f"{fed}: key 'primary-meta-store.configuration-properties.hive.metastore.client.socket"
                              ".timeout': invalid value 'soon': expected a duration such as 600s")


def test_a_metastore_wire_format_follows_hive_properties(tmp_path):
    cfg = load(None, minimal_federation(tmp_path, "  configuration-properties:\n"
                                                  "    hive.metastore.thrift.framed.transport.enabled: TRUE\n"
                                                  "    hive.metastore.thrift.compact.protocol.enabled: 'yes'\n"))
    assert cfg.federation.primary.wire == WireFormat(TransportKind.FRAMED, ProtocolKind.BINARY)  # Hive: only "true"


def test_every_regex_that_does_not_compile_is_named_by_its_index(tmp_path):
    fed = minimal_federation(tmp_path, "  writable-database-white-list: ['ok', '(', 'a[']\n"
                                       "  mapped-tables:\n  - database: db\n    mapped-tables: 'x, y)'\n")
    with pytest.raises(ConfigError) as err:
        load(None, fed)
    text = str(err.value)
    assert len(err.value.problems) == 3, text
    assert (f"{fed}: key 'primary-meta-store.writable-database-white-list[1]': invalid value '(': not a regular "
            "expression: ") in text
    assert "key 'primary-meta-store.writable-database-white-list[2]': invalid value 'a['" in text
    assert "key 'primary-meta-store.mapped-tables[0].mapped-tables[1]': invalid value 'y)'" in text


def test_configs_are_immutable(tmp_path):
    cfg = load(None, minimal_federation(tmp_path))
    with pytest.raises(AttributeError):
        cfg.server.port = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        cfg.federation.primary.database_name_mapping["x"] = "y"  # type: ignore[index]


def test_the_configuration_reference_documents_every_setting():
    page = (ROOT / "docs" / "reference" / "configuration.md").read_text()
    for setting in SERVER_SETTINGS + METASTORE_SETTINGS:
        assert f"`{setting.key}`" in page, f"docs/reference/configuration.md does not document {setting.key}"


def test_example_configs_in_conf_pass(tmp_path):
    import yaml

    server = ROOT / "conf" / "waggle-server.yml"
    examples = sorted((ROOT / "conf").glob("*federation*.yml"))
    assert examples, "no example federation file in conf/"
    for fed in examples:
        cfg = load(str(server), str(fed))
        written = yaml.safe_load(fed.read_text())
        assert cfg.federation.primary.name == written["primary-meta-store"]["name"], fed
        assert [m.name for m in cfg.federation.federated] == \
            [m["name"] for m in written.get("federated-meta-stores") or []], fed
        assert cfg.server.port == yaml.safe_load(server.read_text())["port"]
        assert cfg.warnings == (), f"{fed}: {cfg.warnings}"
