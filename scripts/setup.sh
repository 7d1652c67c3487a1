#!/usr/bin/env bash
# Set up waggle in ./.venv, step by step: one line per step says what it sets up and how long it takes the
# first time. What the tools print (pip, apt, javac, npm) goes to .venv/setup.log, shown only when a step fails.
# Safe to run again: finished steps are skipped, so a second run takes seconds.
#
#   scripts/setup.sh          what the demo needs (scripts/demo.sh runs this): waggle, pyspark, pyiceberg and hmsclient,
#                             the notification listener's jar and the metastore template
#   scripts/setup.sh --test   that and the test toolchain (scripts/test.sh runs this): the Debian packages the
#                             tests use (with root or sudo), the test packages, Spark 3.5 with Iceberg, Mermaid
#   scripts/setup.sh --docs   only what the docs site needs (scripts/docs.sh runs this): mkdocs, Material for
#                             MkDocs and Mermaid
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

LOG=.venv/setup.log

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

# note TEXT: what a step says instead of "done in N s" (it was already done, or skipped and why)
note() { echo "$*" >"$NOTE"; }

# step TITLE EXPECTED FUNCTION [ARGS...]: one line, "TITLE (first time EXPECTED) ... done in N s"; the function's
# output goes to the log, and when it fails the end of the log is shown, naming it, and the set-up stops.
step() {
  local title=$1 expected=$2 start=$SECONDS status; shift 2
  printf '  %s (first time %s) ... ' "$title" "$expected"
  printf '\n== %s: %s\n' "$title" "$*" >>"$LOG"
  : >"$NOTE"
  set +e
  (set -e; "$@") >>"$LOG" 2>&1 </dev/null
  status=$?
  set -e
  if [ "$status" -ne 0 ]; then
    echo "failed"
    { echo "error: $title failed (exit $status). The end of $LOG:"; tail -n 40 "$LOG" | sed 's/^/  | /'
      echo "The whole output is in $LOG."; } >&2
    exit 1
  fi
  if [ -s "$NOTE" ]; then cat "$NOTE"; else echo "done in $((SECONDS - start)) s"; fi
}

apt_install() {
  # Debian packages the tests use: the Thrift compiler (generated-code check), OpenSSH (tunnel tests),
  # jarjar (relocates Jackson for Iceberg's Spark runtime, scripts/iceberg_spark.sh), HttpCore 5 (relocated
  # for Iceberg's REST client, tests/support/iceberg_spark.py) and MIT Kerberos (a real
  # KDC for the Kerberos tests; libkrb5-dev builds python-gssapi where no wheel fits) and Chromium with its
  # driver (the docs site's headless browser test), and OpenLDAP's slapd with its tools (a real directory for the
  # LDAP groups tests, tests/support/ldap.py), and podman with debootstrap (the image tests build the Dockerfile
  # on a Python base made from Debian's packages, scripts/build-images.sh --debian-base).
  local missing=()
  command -v thrift >/dev/null || missing+=(thrift-compiler)
  [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
  [ -f /usr/share/java/jarjar.jar ] || missing+=(libjarjar-java)
  [ -f /usr/share/java/httpcore5.jar ] || missing+=(libhttpcore5-java)
  [ -x /usr/sbin/krb5kdc ] || missing+=(krb5-kdc)
  [ -x /usr/sbin/kadmin.local ] || missing+=(krb5-admin-server)
  command -v kinit >/dev/null || missing+=(krb5-user)
  command -v krb5-config >/dev/null || missing+=(libkrb5-dev)
  command -v chromium >/dev/null || missing+=(chromium)
  command -v chromedriver >/dev/null || missing+=(chromium-driver)
  [ -x /usr/sbin/slapd ] || missing+=(slapd)
  command -v ldapmodify >/dev/null || missing+=(ldap-utils)
  command -v podman >/dev/null || missing+=(podman)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  if [ ${#missing[@]} -eq 0 ]; then note "already installed"; return 0; fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo="sudo"; else
      note "skipped: not root and no sudo; install ${missing[*]} yourself"; return 0
    fi
  fi
  if ! command -v apt-get >/dev/null; then
    note "skipped: no apt-get; install ${missing[*]} yourself"; return 0
  fi
  echo "installing ${missing[*]}"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
}

make_venv() {
  if [ -x .venv/bin/python ]; then note "already there"; return 0; fi
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
}

# The packages a mode installs, keyed by pyproject.toml and this script: a finished install is not done again
# until either changes (the test extra holds the demo's and the docs' packages).
stamp() { echo ".venv/.installed-$1"; }
key() { cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1; }
installed() {
  local mode
  for mode in "$@"; do
    if [ -f "$(stamp "$mode")" ] && [ "$(cat "$(stamp "$mode")")" = "$(key)" ]; then return 0; fi
  done
  return 1
}

install_packages() {
  case $MODE in
    demo)
      if installed demo test; then note "already installed"; return 0; fi
      .venv/bin/python -m pip install -q -e ".[iceberg,clients]" ;;
    test)
      if installed test; then note "already installed"; return 0; fi
      .venv/bin/python -m pip install -q -e ".[test]"
      # Hive 3.1 generated client code, used as a test client; it pins an old thrift, so no deps.
      .venv/bin/python -m pip install -q --no-deps "hive-metastore-client>=1.0.9" ;;
    docs)
      # the docs extra's own requirements, without waggle and its dependencies (pyspark alone is 300 MB): the
      # site is built from docs/ and needs none of them
      if installed docs test; then note "already installed"; return 0; fi
      extra_requirements docs >.venv/docs-requirements.txt
      .venv/bin/python -m pip install -q -r .venv/docs-requirements.txt ;;
  esac
  key >"$(stamp "$MODE")"
}

extra_requirements() {  # EXTRA: that extra's requirements in pyproject.toml, one a line
  .venv/bin/python - "$1" <<'PYEOF'
import sys, tomllib
with open("pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["optional-dependencies"][sys.argv[1]]))
PYEOF
}

compile_bytecode() {
  # Bytecode for waggle's own modules, written even where PYTHONDONTWRITEBYTECODE is set: without it every
  # waggle process compiles the 4 MB of generated Thrift code at start (about 1 s, and 125 MB more memory).
  .venv/bin/python -m compileall -q -j 0 waggle
}

build_listener() {
  # waggle's notification log listener, compiled against pyspark's Hive jars: local metastores write events with
  # it. Kept in waggle's cache (python -m waggle.local.listener prints where).
  .venv/bin/python -m waggle.local.listener
}

prepare_template() {
  # The Derby database every local metastore starts from a copy of, with Hive's transaction and lock tables
  # (docs/development.md); kept in waggle's cache. Without it the first metastore start prepares it.
  .venv/bin/python -c 'from waggle.local.metastore import prepare_template; print(prepare_template())'
}

iceberg_spark() {
  if [ -f .venv-iceberg-spark/iceberg-jars/READY ]; then note "already there"; return 0; fi
  bash scripts/iceberg_spark.sh "$PY"
  [ -f .venv-iceberg-spark/iceberg-jars/READY ] || note "skipped: the Spark Iceberg tests cannot run (see $LOG)"
}

fetch_mermaid() {
  # Mermaid's browser bundle, for the docs site's diagrams: mkdocs-material loads it from unpkg.com unless the page
  # already has it (mkdocs.yml's extra_javascript), and browsers here and in CI cannot reach the internet. Taken
  # from the npm registry, the major release mkdocs-material asks unpkg for, into docs/javascripts/ (git-ignored
  # there: never committed).
  local dest=docs/javascripts/mermaid.min.js tmp
  if [ -f "$dest" ]; then note "already there"; return 0; fi
  if ! command -v npm >/dev/null; then
    note "skipped: no npm, so the docs site loads Mermaid from unpkg.com"; return 0
  fi
  tmp=$(mktemp -d)
  if (cd "$tmp" && npm pack --silent mermaid@11) \
      && tar -xzf "$tmp"/mermaid-*.tgz -C "$tmp" package/dist/mermaid.min.js; then
    mkdir -p "$(dirname "$dest")"
    mv "$tmp/package/dist/mermaid.min.js" "$dest"
  else
    note "skipped: could not fetch it from the npm registry, so the docs site loads Mermaid from unpkg.com"
  fi
  rm -rf "$tmp"
}

case "${1:-}" in
  "") MODE=demo; what="the demo"; first="about 2 minutes" ;;
  --test) MODE=test; what="the tests"; first="about 3 minutes" ;;
  --docs) MODE=docs; what="the docs site"; first="about 40 s" ;;
  *) echo "usage: scripts/setup.sh [--test | --docs]" >&2; exit 2 ;;
esac
PY=$(need_python)
[ "$MODE" = docs ] || need_java
mkdir -p .venv
: >"$LOG"
NOTE=$(mktemp)
trap 'rm -f "$NOTE"' EXIT

echo "Setting up $what in .venv: $first the first time, seconds after that (the tools' output: $LOG)"
if [ "$MODE" = test ]; then
  step "Debian packages: thrift, sshd, a Kerberos KDC, OpenLDAP, jarjar, HttpCore 5, Chromium, podman" "about 2 min" apt_install
fi
step "Python environment .venv" "about 15 s" make_venv
case $MODE in
  demo) step "waggle, pyspark, pyiceberg and hmsclient" "about 80 s" install_packages ;;
  test) step "waggle, pyspark, pyiceberg and the test tools" "about 2 min" install_packages ;;
  docs) step "mkdocs and Material for MkDocs" "about 15 s" install_packages ;;
esac
if [ "$MODE" = test ]; then
  step "Spark 3.5 with Iceberg's runtime (.venv-iceberg-spark)" "about 30 s" iceberg_spark
fi
if [ "$MODE" != demo ]; then
  step "Mermaid, for the docs' diagrams (docs/javascripts/)" "about 5 s" fetch_mermaid
fi
if [ "$MODE" != docs ]; then
  step "waggle's bytecode" "about 5 s" compile_bytecode
  step "notification listener jar (javac)" "about 5 s" build_listener
  step "metastore template (Hive's Derby schema)" "about 10 s" prepare_template
fi

[ "$MODE" = docs ] || cache=$(.venv/bin/python -c 'from waggle.local.jvm import cache_dir; print(cache_dir())')
case $MODE in
  demo) echo "Ready for the demo: .venv has waggle, pyspark, pyiceberg and hmsclient; the listener jar and the metastore" \
          "template are in $cache." ;;
  test) echo "Ready for the tests: .venv has waggle and the test tools, .venv-iceberg-spark has Spark 3.5 with" \
          "Iceberg; the listener jar and the metastore template are in $cache." ;;
  docs) echo "Ready for the docs: .venv has mkdocs and Material for MkDocs." ;;
esac
