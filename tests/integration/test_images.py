"""waggle's two container images, built from the Dockerfile and run from their own files (tests/support/images.py).

The images are built as the Kubernetes page tells a machine without Docker Hub to build them
(``scripts/build-images.sh --debian-base``): podman, on a Python base made from Debian's packages once per machine,
reusing podman's layer cache (about 5 minutes the first time, seconds after). Each is then run as its user, with a
read-only root and a writable ``/tmp``: the proxy checks and serves the example configuration pointed at the
session's metastores, the sync mirrors and copies a table between two of them (the copy on Spark's JVM from the
image), and both hold their C codecs and their bytecode. A broken Dockerfile fails with the build's last lines.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import ROOT
from tests.support.images import (
    BUILD_COMMAND,
    BUILD_SECONDS,
    PROXY_IMAGE,
    SYNC_IMAGE,
    Bind,
    BuildFailed,
    ImageRoot,
    build,
    require_image_tools,
    rss_kib,
)
from waggle.local.client import hms_client
from waggle.local.jvm import free_port
from waggle.local.seed import ensure_database, ensure_partitioned_table, ensure_table

#: the first test waits for the first build, on a machine busy with the other worker's tests: more than the
#: suite's 10 minutes a test
pytestmark = [pytest.mark.integration, pytest.mark.images, pytest.mark.timeout(BUILD_SECONDS + 300)]
HERE = Path(__file__).resolve().parent
CHECK = Bind(HERE / "image_check.py", "/check/image_check.py")
#: what a process of waggle serve from the proxy image may hold at rest, the REST port off (measured about 70 MB,
#: as docs/operations/workers.md says; 113 MB while the REST door's code was loaded whether its port was on or not)
RSS_LIMIT_MIB = 100


@pytest.fixture(scope="module")
def images() -> str:
    """Both images, built as the docs print the command: the build's output."""
    require_image_tools()
    return build()


def _config(tmp_path: Path, primary: Any, analytics: Any) -> tuple[Path, int, int]:
    """The example files of conf/, pointed at the session's metastores and at free ports: (their folder, the
    Thrift port, the HTTP port)."""
    port, http = free_port(), free_port()
    conf = tmp_path / "etc-waggle"
    conf.mkdir()
    edits = {"waggle-server.yml": [(r"(?m)^port: 48869\b", f"port: {port}"),
                                   (r"(?m)^  port: 18000\b", f"  port: {http}")],
             "waggle-federation.yml": [
                 (r"thrift://primary-metastore:9083", primary.uri),
                 (r"thrift://analytics-metastore-1:9083,thrift://analytics-metastore-2:9083", analytics.uri)]}
    for name, changes in edits.items():
        text = (ROOT / "conf" / name).read_text()
        for pattern, value in changes:
            text, n = re.subn(pattern, value, text)
            assert n == 1, f"the example file conf/{name} changed: {pattern} is not there once"
        (conf / name).write_text(text)
    return conf, port, http


def _wait_ready(proc: subprocess.Popen[bytes], http: int, log: Path, deadline: float = 60) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        assert proc.poll() is None, f"waggle serve from the image exited {proc.returncode}:\n{log.read_text()}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/readyz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    pytest.fail(f"/readyz of waggle serve from the image not ready in {deadline:.0f} s:\n{log.read_text()}")


def test_the_proxy_image_checks_then_serves_the_example_files(images: str, primary: Any, analytics: Any,
                                                             federation_data: Any, tmp_path: Path) -> None:
    conf, port, http = _config(tmp_path, primary, analytics)
    files = Bind(conf, "/etc/waggle")
    with ImageRoot(PROXY_IMAGE) as image:
        assert image.config.user == "10001:10001" and image.config.entrypoint == ["waggle"]
        assert not [k for k in image.config.env if k.startswith("PIP_")], "the build's pip settings leaked"
        check = image.run(["waggle", "check", "--strict", "--server-config", "/etc/waggle/waggle-server.yml",
                           "--federation-config", "/etc/waggle/waggle-federation.yml"], binds=(files,))
        assert check.returncode == 0, check.stdout + check.stderr

        log = tmp_path / "serve.log"
        proc = image.start(binds=(files,), log=log)  # the image's own command: waggle serve on /etc/waggle
        try:
            _wait_ready(proc, http, log)
            with hms_client("127.0.0.1", port, timeout=30) as c:
                databases = c.get_all_databases()
                web = c.get_database("web")  # the example's mapped database of analytics
            assert "default" in databases and "web" in databases, databases
            assert web.name == "web"
            time.sleep(2)  # at rest
            rss = rss_kib(proc.pid)
            print(f"waggle serve from {PROXY_IMAGE} at rest: {len(rss)} processes, RSS KiB {sorted(rss.values())}")
            assert len(rss) >= 2, rss  # the supervisor and its workers (WAGGLE_WORKERS=auto)
            assert max(rss.values()) < RSS_LIMIT_MIB * 1024, rss
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=90)
        assert code == 0, log.read_text()
        assert "Traceback" not in log.read_text()


@pytest.mark.parametrize("image, imports", [(PROXY_IMAGE, ["waggle.app", "waggle.cli", "waggle.tunnel.forward"]),
                                            (SYNC_IMAGE, ["waggle.cli", "waggle.sync.runner", "pyspark.sql"])])
def test_the_images_hold_their_codecs_and_bytecode(images: str, image: str, imports: list[str]) -> None:
    with ImageRoot(image) as root:
        run = root.run(["python", CHECK.inside, *imports], binds=(CHECK,))
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout.splitlines()[-1])
    assert {name: report[name] for name in ("fastbinary", "gssapi", *imports)} == dict.fromkeys(
        ("fastbinary", "gssapi", *imports), "ok"), report
    assert report["modules"] > 500, report  # waggle's own and what the imports loaded
    assert report["without_bytecode"] == [], f"{image} compiles these at every start: {report['without_bytecode']}"


@pytest.fixture
def sync_source(analytics: Any) -> Iterator[str]:
    """A database of the analytics metastore with a table and a partitioned table with files."""
    db = f"img_{uuid.uuid4().hex[:6]}"
    wh = f"file://{analytics.warehouse}/{db}.db"
    with hms_client("127.0.0.1", analytics.port, timeout=120) as c:
        ensure_database(c, db, wh)
        ensure_table(c, db, "people", f"{wh}/people", [("id", "int"), ("name", "string")], rows=["1,ann", "2,bob"])
        ensure_partitioned_table(c, db, "daily", f"{wh}/daily", 3, data=True)
    yield db


def test_the_sync_image_mirrors_and_copies(images: str, primary: Any, analytics: Any, sync_source: str,
                                          tmp_path: Path) -> None:
    db = sync_source
    conf = tmp_path / "etc-waggle"
    conf.mkdir()
    (conf / "waggle-federation.yml").write_text(
        f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {primary.uri}\n"
        f"federated-meta-stores:\n- name: analytics\n  remote-meta-store-uris: {analytics.uri}\n")
    copies = tmp_path / "copies"
    copies.mkdir(mode=0o777)
    copies.chmod(0o777)  # written by the image's user
    binds = (Bind(conf, "/etc/waggle"), Bind(Path(analytics.warehouse), str(analytics.warehouse)),
             Bind(copies, str(copies), writable=True))
    sync = ["waggle", "sync", "--federation-config", "/etc/waggle/waggle-federation.yml", "--source", "analytics",
            "--no-progress"]
    with ImageRoot(SYNC_IMAGE) as image:
        assert image.config.env.get("JAVA_HOME") == "/usr/lib/jvm/java-17"
        mirror = image.run([*sync, "--tables", f"{db}.people", "--target-database", f"{db}_m"], binds=binds)
        assert mirror.returncode == 0, mirror.stdout + mirror.stderr
        # a copy of the partitioned table: its files copied by Spark on the image's own Java and PySpark
        copy = image.run([*sync, "--tables", f"{db}.daily", "--target-database", f"{db}_c", "--mode", "copy",
                          "--location-root", f"file://{copies}", "--master", "local[1]"], binds=binds, timeout=300,
                         env={"JDK_JAVA_OPTIONS": os.environ.get("JDK_JAVA_OPTIONS", "")})  # as every JVM of the suite
        assert copy.returncode == 0, copy.stdout + copy.stderr
    with hms_client("127.0.0.1", primary.port, timeout=60) as c:
        people = c.get_table(f"{db}_m", "people")
        daily = c.get_table(f"{db}_c", "daily")
        parts = c.get_partitions(f"{db}_c", "daily", -1)
    assert people.parameters["waggle.sync.mode"] == "mirror"
    assert people.sd.location.endswith(f"/{db}.db/people")
    assert daily.parameters["waggle.sync.mode"] == "copy" and str(copies) in daily.sd.location
    assert len(parts) == 3 and all(str(copies) in p.sd.location for p in parts)
    copied = [f for f in copies.rglob("*") if f.is_file() and not f.name.startswith((".", "_"))]
    assert len(copied) >= 3, copied


# -- a broken Dockerfile fails the build, with its last lines ------------------------------------------------------
def _broken(tmp_path: Path, old: str, new: str) -> str:
    text = (ROOT / "Dockerfile").read_text()
    assert text.count(old) == 1, old
    path = tmp_path / "Dockerfile.broken"
    path.write_text(text.replace(old, new))
    return str(path)


@pytest.mark.parametrize("old, new, says", [
    ("libgssapi-krb5-2 \\", "libgssapi-krb5-2 waggle-no-such-package \\",
     "Unable to locate package waggle-no-such-package"),
    ("COPY waggle ./waggle", "COPY wagle ./waggle", "no such file or directory"),
], ids=["a-missing-package", "a-wrong-path"])
def test_a_broken_dockerfile_fails_with_the_builds_last_lines(images: str, tmp_path: Path, old: str, new: str,
                                                             says: str) -> None:
    with pytest.raises(BuildFailed) as failed:
        build("--debian-base", "--tag", "broken", "--target", "proxy", "--file", _broken(tmp_path, old, new))
    assert says in str(failed.value) and "the build's last lines" in str(failed.value), failed.value


def test_a_stage_that_forgets_the_bytecode_is_found(images: str, tmp_path: Path) -> None:
    """A proxy image whose venv stage drops the bytecode builds, and the bytecode check names what each start
    would compile."""
    dockerfile = _broken(tmp_path, "RUN /opt/waggle/bin/pip uninstall --yes pyspark py4j \\",
                         "RUN /opt/waggle/bin/pip uninstall --yes pyspark py4j \\\n"
                         "    && find /opt/waggle -name __pycache__ -prune -exec rm -rf {} + \\")
    build("--debian-base", "--tag", "no-bytecode", "--target", "proxy", "--file", dockerfile)
    with ImageRoot("localhost/waggle:no-bytecode") as root:
        run = root.run(["python", CHECK.inside, "waggle.app"], binds=(CHECK,))
    report = json.loads(run.stdout.splitlines()[-1])
    assert any(s.endswith("/waggle/hms/gen/hive_metastore/ThriftHiveMetastore.py")
               for s in report["without_bytecode"]), report


def test_the_kubernetes_page_prints_the_command_the_tests_run() -> None:
    page = (ROOT / "docs" / "operations" / "kubernetes.md").read_text()
    assert f"```console\n{' '.join(BUILD_COMMAND)}\n```" in page
