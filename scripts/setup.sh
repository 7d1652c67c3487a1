#!/usr/bin/env bash
# Install everything waggle needs into ./.venv (and, with root or sudo, the Debian packages its tests use).
# Sourced by scripts/demo.sh and scripts/test.sh; safe to run again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

need_python() {
  for py in python3.11 python3 python; do
    if command -v "$py" >/dev/null && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
      echo "$py"; return 0
    fi
  done
  echo "error: Python 3.11 or newer is required" >&2; return 1
}

need_java() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then return 0; fi
  if command -v java >/dev/null; then return 0; fi
  echo "error: Java 17 is required (the local metastores are Hive's own Java code)" >&2; return 1
}

apt_install() {
  # Debian packages the tests use: the Thrift compiler (generated-code check), OpenSSH (tunnel tests),
  # jarjar (relocates Jackson for Iceberg's Spark runtime, scripts/iceberg_spark.sh) and MIT Kerberos (a real
  # KDC for the Kerberos tests; libkrb5-dev builds python-gssapi where no wheel fits) and Chromium with its
  # driver (the docs site's headless browser test).
  local missing=()
  command -v thrift >/dev/null || missing+=(thrift-compiler)
  [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
  [ -f /usr/share/java/jarjar.jar ] || missing+=(libjarjar-java)
  [ -x /usr/sbin/krb5kdc ] || missing+=(krb5-kdc)
  [ -x /usr/sbin/kadmin.local ] || missing+=(krb5-admin-server)
  command -v kinit >/dev/null || missing+=(krb5-user)
  command -v krb5-config >/dev/null || missing+=(libkrb5-dev)
  command -v chromium >/dev/null || missing+=(chromium)
  command -v chromedriver >/dev/null || missing+=(chromium-driver)
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo="sudo"; else
      echo "warning: cannot install ${missing[*]} (not root, no sudo)" >&2; return 0
    fi
  fi
  if command -v apt-get >/dev/null; then
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "warning: no apt-get; install ${missing[*]} yourself" >&2
  fi
}

fetch_mermaid() {
  # Mermaid's browser bundle, for the docs site's diagrams: mkdocs-material loads it from unpkg.com unless the page
  # already has it (mkdocs.yml's extra_javascript), and browsers here and in CI cannot reach the internet. Taken
  # from the npm registry, the major release mkdocs-material asks unpkg for, into docs/javascripts/ (git-ignored
  # there: never committed).
  local dest=docs/javascripts/mermaid.min.js tmp
  [ -f "$dest" ] && return 0
  if ! command -v npm >/dev/null; then
    echo "warning: no npm: the docs site will load Mermaid from unpkg.com" >&2; return 0
  fi
  tmp=$(mktemp -d)
  if (cd "$tmp" && npm pack --silent mermaid@11 >/dev/null) \
      && tar -xzf "$tmp"/mermaid-*.tgz -C "$tmp" package/dist/mermaid.min.js; then
    mv "$tmp/package/dist/mermaid.min.js" "$dest"
  else
    echo "warning: could not fetch mermaid from the npm registry: the docs site will load it from unpkg.com" >&2
  fi
  rm -rf "$tmp"
}

PY=$(need_python)
need_java
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
if [ "${1:-}" = "--test" ]; then
  apt_install
  .venv/bin/python -m pip install -q -e ".[test]"
  # Hive 3.1 generated client code, used as a test client; it pins an old thrift, so no deps.
  .venv/bin/python -m pip install -q --no-deps "hive-metastore-client>=1.0.9"
  # Spark 3.5 with Apache Iceberg's runtime, in its own venv, for the Iceberg tests.
  bash scripts/iceberg_spark.sh "$PY"
  fetch_mermaid
else
  .venv/bin/python -m pip install -q -e ".[iceberg]"
fi
# waggle's notification log listener, compiled against pyspark's Hive jars: local metastores write events with it.
.venv/bin/python -m waggle.local.listener >/dev/null
# Bytecode for waggle's own modules, written even where PYTHONDONTWRITEBYTECODE is set: without it every
# waggle process compiles the 4 MB of generated Thrift code at start (about 1 s, and 125 MB more memory).
.venv/bin/python -m compileall -q -j 0 waggle >/dev/null
