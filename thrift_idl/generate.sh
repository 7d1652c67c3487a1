#!/usr/bin/env bash
# Regenerate the Python bindings for the metastore IDL in this directory.
#
#   thrift_idl/generate.sh           rewrite waggle/hms/gen/ from the IDL
#   thrift_idl/generate.sh --check   fail if waggle/hms/gen/ is out of date
#
# Needs Debian's thrift compiler 0.17.x (apt-get install thrift-compiler).
# Only waggle/hms/gen/{__init__.py,fb303,hive_metastore} are touched.
set -euo pipefail

REQUIRED_SERIES="0.17"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
gen_dir="$root/waggle/hms/gen"
packages=(fb303 hive_metastore)
init_doc='"""Generated from thrift_idl/ by thrift_idl/generate.sh; do not edit by hand."""'

die() {
  echo "generate.sh: $*" >&2
  exit 1
}

usage() {
  echo "usage: $0 [--check]" >&2
  exit 2
}

mode=write
case "${1:-}" in
  "") ;;
  --check) mode=check ;;
  -h | --help) usage ;;
  *) usage ;;
esac
[[ $# -le 1 ]] || usage

if ! command -v thrift >/dev/null 2>&1; then
  die "the 'thrift' compiler is not on PATH; install ${REQUIRED_SERIES}.x (Debian: apt-get install thrift-compiler)"
fi
version_line="$(thrift --version 2>&1 || true)"
version="$(sed -n 's/^Thrift version \([0-9][0-9.]*\).*/\1/p' <<<"$version_line")"
if [[ -z "$version" ]]; then
  die "could not read the thrift version from: $version_line"
fi
if [[ "$version" != "$REQUIRED_SERIES" && "$version" != "$REQUIRED_SERIES".* ]]; then
  die "thrift $version found, but ${REQUIRED_SERIES}.x is required (the committed code is generated with it)"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Build the complete expected gen/ tree in $work/tree.
mkdir -p "$work/raw" "$work/tree"
thrift -strict -r --gen py:slots -out "$work/raw" "$here/hive_metastore.thrift" 2>"$work/thrift.log" || {
  cat "$work/thrift.log" >&2
  die "thrift failed"
}
printf '%s\n' "$init_doc" >"$work/tree/__init__.py"
for pkg in "${packages[@]}"; do
  src="$work/raw/waggle/hms/gen/$pkg"
  [[ -d "$src" ]] || die "thrift did not produce waggle/hms/gen/$pkg (check the py namespaces)"
  cp -R "$src" "$work/tree/$pkg"
done

if [[ "$mode" == check ]]; then
  if ! diff -r -x __pycache__ -x '*.pyc' "$work/tree" "$gen_dir" >"$work/diff.txt" 2>&1; then
    echo "generate.sh --check: waggle/hms/gen/ does not match thrift_idl/ (run thrift_idl/generate.sh)" >&2
    diff -rq -x __pycache__ -x '*.pyc' "$work/tree" "$gen_dir" | sed "s|$work/tree|<regenerated>|g; s|$root/||g" >&2 || true
    exit 1
  fi
  echo "generate.sh --check: waggle/hms/gen/ is up to date"
  exit 0
fi

mkdir -p "$gen_dir"
for pkg in "${packages[@]}"; do
  rm -rf "${gen_dir:?}/$pkg"
  cp -R "$work/tree/$pkg" "$gen_dir/$pkg"
done
cp "$work/tree/__init__.py" "$gen_dir/__init__.py"
echo "generate.sh: wrote ${packages[*]} into ${gen_dir#"$root"/}"
