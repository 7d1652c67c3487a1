#!/usr/bin/env bash
# Build waggle's two container images from the Dockerfile, with Docker or podman:
#
#   scripts/build-images.sh                  waggle:dev (the proxy) and waggle-sync:dev, on the official Python image
#   scripts/build-images.sh --debian-base    the same on a Python base made here from Debian's packages, for a
#                                            machine that cannot pull from Docker Hub (podman and debootstrap)
#
# Options: --debian-base; --base IMAGE (any Debian bookworm image with python, python3-venv and the Python headers);
# --tag TAG (default dev); --file DOCKERFILE (default ./Dockerfile); --target proxy|sync|all (default all).
# With podman, the machine's PIP_* variables reach pip in the build (never the image), so a pip behind a proxy with
# a CA of its own works there too. On failure the build's last lines are printed and the exit status is the build's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

#: the Debian base's name, made once per machine by --debian-base and kept by podman
DEBIAN_BASE=localhost/waggle-python-base:3.11-bookworm
base="" tag=dev file=Dockerfile target=all debian=0
while [ $# -gt 0 ]; do
  case $1 in
    --debian-base) debian=1 ;;
    --base) base=$2; shift ;;
    --tag) tag=$2; shift ;;
    --file) file=$2; shift ;;
    --target) target=$2; shift ;;
    *) echo "usage: scripts/build-images.sh [--debian-base | --base IMAGE] [--tag TAG] [--file DOCKERFILE]" \
            "[--target proxy|sync|all]" >&2; exit 2 ;;
  esac
  shift
done

if command -v podman >/dev/null; then tool=podman
elif docker info >/dev/null 2>&1; then tool=docker
else echo "error: neither podman nor a running Docker engine is here" >&2; exit 1
fi

make_debian_base() {
  # debootstrap's minimal Debian with Python 3.11, its venv module and headers (python-gssapi compiles against
  # them), imported as an image. About a minute, once: podman keeps it.
  if [ "$tool" != podman ]; then echo "error: --debian-base needs podman (podman import)" >&2; exit 1; fi
  if podman image exists "$DEBIAN_BASE"; then return 0; fi
  command -v debootstrap >/dev/null || { echo "error: --debian-base needs debootstrap" >&2; exit 1; }
  local root status
  root=$(mktemp -d)
  echo "making $DEBIAN_BASE with debootstrap (about a minute, once)"
  set +e
  debootstrap --variant=minbase --include=python3,python3-venv,python3-dev,ca-certificates bookworm "$root" \
    http://deb.debian.org/debian >"$root.log" 2>&1
  status=$?
  set -e
  if [ "$status" -ne 0 ]; then
    echo "error: debootstrap failed (exit $status); its last lines:" >&2; tail -n 30 "$root.log" >&2
    rm -rf "$root" "$root.log"; exit "$status"
  fi
  ln -sf python3 "$root/usr/bin/python"  # as the official image: `python` is Python 3
  tar -C "$root" -c . | podman import --quiet --change 'CMD ["python3"]' - "$DEBIAN_BASE" >/dev/null
  rm -rf "$root" "$root.log"
}

if [ "$debian" = 1 ]; then make_debian_base; base=$DEBIAN_BASE; fi

args=(build --file "$file" --network host)
[ -z "$base" ] || args+=(--build-arg "PYTHON_IMAGE=$base")
if [ "$tool" = podman ]; then
  # buildah's chroot isolation runs the build's steps where no container runtime can start one (a container, a
  # sandbox) and builds the same image.
  args+=(--isolation chroot)
  # The machine's PIP_* variables reach pip as a pip.conf mounted for the build's steps only (podman's --env would
  # write them into the image), PIP_CERT's bundle beside it, not over the image's own certificates: a pip behind a
  # proxy with a CA of its own works in the build too. Docker's build takes neither: there, pip reaches PyPI as
  # the engine's network allows.
  pipconf=$(mktemp)
  trap 'rm -f "$pipconf"' EXIT
  echo "[global]" >"$pipconf"
  for name in $(env | grep -o '^PIP_[A-Z_]*' || true); do
    value=${!name} key=$(echo "${name#PIP_}" | tr 'A-Z_' 'a-z-')
    if [ "$key" = cert ] && [ -f "$value" ]; then
      args+=(--volume "$(realpath "$value"):/run/waggle-build-ca.pem:ro")
      value=/run/waggle-build-ca.pem
    fi
    echo "$key = $value" >>"$pipconf"
  done
  args+=(--volume "$pipconf:/etc/pip.conf:ro")
fi

build() {  # TARGET NAME
  local log status start=$SECONDS
  log=$(mktemp)
  echo "building $2:$tag (target $1) with $tool"
  set +e
  "$tool" "${args[@]}" --target "$1" --tag "$2:$tag" . >"$log" 2>&1
  status=$?
  set -e
  if [ "$status" -ne 0 ]; then
    echo "error: building $2:$tag failed (exit $status); the build's last lines:" >&2
    tail -n 40 "$log" >&2; rm -f "$log"; exit "$status"
  fi
  rm -f "$log"
  echo "built $2:$tag in $((SECONDS - start)) s"
}

case $target in
  proxy) build proxy waggle ;;
  sync) build sync waggle-sync ;;
  all) build proxy waggle; build sync waggle-sync ;;
  *) echo "error: --target is proxy, sync or all, not '$target'" >&2; exit 2 ;;
esac
