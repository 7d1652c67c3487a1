# waggle's container images: two targets from one Dockerfile.
#
#   docker build -t waggle .                    the proxy: `waggle serve` and `waggle check` (the last stage)
#   docker build -t waggle-sync --target sync . the sync: `waggle sync`, the same venv plus a Java 17 runtime
#
# Without Docker Hub: scripts/build-images.sh --debian-base (podman, on a Python base made from Debian's packages;
# the suite builds and runs both images that way, tests/integration/test_images.py).
#
# Why two: `waggle sync` runs PySpark, and PySpark starts a JVM. The proxy never does, so its image carries
# no JVM and no PySpark (several hundred MB less to pull and to patch). Both run as the non-root user waggle
# (10001:10001), read their configuration from files mounted under /etc/waggle/ (SSH keys under
# /etc/waggle/ssh/), and work with a read-only root filesystem: only /tmp must be writable (an emptyDir in
# Kubernetes).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# -- builder: the project and its dependencies in a venv at /opt/waggle (the same path in the final images) --
FROM ${PYTHON_IMAGE} AS builder
# A C compiler for dependencies without a wheel here (thrift's C codec is required, python-gssapi builds against
# MIT Kerberos); build stage only, unpinned.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev libkrb5-dev \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/waggle
WORKDIR /src
COPY pyproject.toml README.md ./
COPY waggle ./waggle
# thrift's C codec (fastbinary) is imported by the proxy: fail the build here rather than at start.
# --compile: bytecode is built here, because the images run with PYTHONDONTWRITEBYTECODE on a read-only
# filesystem. Without it each start compiles the 4 MB of generated Thrift code: 1 s, and 125 MB more memory.
RUN /opt/waggle/bin/pip install --no-cache-dir --compile . \
    && /opt/waggle/bin/python -c "from thrift.protocol import fastbinary" \
    && /opt/waggle/bin/python -c "import gssapi" \
    && /opt/waggle/bin/waggle --version

# -- the proxy's venv: the same, without PySpark and py4j, which only `waggle sync` imports --
FROM builder AS proxy-venv
RUN /opt/waggle/bin/pip uninstall --yes pyspark py4j \
    && /opt/waggle/bin/python -c "import waggle.app, waggle.cli, waggle.tunnel.forward" \
    && /opt/waggle/bin/waggle --version

# -- what both images share: the user, the environment --
FROM ${PYTHON_IMAGE} AS runtime
# MIT Kerberos' GSSAPI library (Kerberos and delegation tokens on either side); unpinned for security updates.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgssapi-krb5-2 \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 waggle \
    && useradd --system --no-log-init --uid 10001 --gid 10001 --create-home --home-dir /home/waggle \
       --shell /usr/sbin/nologin waggle \
    && mkdir -p /etc/waggle/ssh
ENV PATH="/opt/waggle/bin:${PATH}" \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# -- sync: `waggle sync` (PySpark) with a headless Java 17 runtime --
FROM runtime AS sync
# Unpinned: Debian's security updates replace openjdk's exact version, so a version pin would soon stop building.
# hadolint ignore=DL3008
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/* \
    && ln -s "java-17-openjdk-$(dpkg --print-architecture)" /usr/lib/jvm/java-17 \
    && /usr/lib/jvm/java-17/bin/java -version
COPY --from=builder /opt/waggle /opt/waggle
# Spark writes its scratch files, and Java and Ivy their caches, under HOME and /tmp: the only writable place.
ENV JAVA_HOME=/usr/lib/jvm/java-17 \
    HOME=/tmp \
    SPARK_LOCAL_DIRS=/tmp
WORKDIR /tmp
USER 10001:10001
ENTRYPOINT ["waggle"]
CMD ["sync", "--config", "/etc/waggle/sync/sync.yml", "--no-progress"]

# -- proxy (the default target): `waggle serve`, no JVM --
FROM runtime AS proxy
COPY --from=proxy-venv /opt/waggle /opt/waggle
# one serving process per CPU the container may use (its cgroup's limit); `workers` or --workers overrides
ENV WAGGLE_WORKERS=auto
USER 10001:10001
# Thrift (hive.metastore.uris) and HTTP (/healthz, /readyz, /metrics)
EXPOSE 48869 18000
# slim has no curl: python's urllib, against the default endpoint.port
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:18000/healthz', timeout=4)"]
ENTRYPOINT ["waggle"]
CMD ["serve", "--server-config", "/etc/waggle/waggle-server.yml", \
     "--federation-config", "/etc/waggle/waggle-federation.yml"]
