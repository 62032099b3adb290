#!/usr/bin/env bash
# Builds Floodgate's images on a machine that reaches no container registry, with its own Docker
# engine (Debian's docker.io, installed if missing), and stops that engine again.
#
#   deploy/image.sh build   the engine up, then three images:
#                             floodgate-base:bookworm  Debian 12 minbase from debootstrap
#                             floodgate:ci             ./Dockerfile on that base, with the
#                                                      binaries built on this host
#                             floodgate-edge:ci        deploy/nginx/Dockerfile (Debian's nginx)
#                           and prints the settings a client needs (DOCKER_HOST=...)
#   deploy/image.sh env     those settings, for an engine already up
#   deploy/image.sh down    stops the engine this script started, and every container in it
#
# The engine runs privately: its own socket, data and state under $FLOODGATE_HOME/docker, with
# no bridge network and no iptables rules, so containers can only use the host's network
# (`--network host`) and everything stays on loopback. Its images are kept between runs; a
# rebuild after a change copies only the new binaries in.
#
# The binaries come from $CARGO_TARGET_DIR/$FLOODGATE_IMAGE_PROFILE (default `debug`, what
# `deploy/test.sh` builds; `release` for an image to ship), built beforehand with
# `cargo build --bins`, and are stripped of debug information on the way in.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FLOODGATE_HOME=${FLOODGATE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/floodgate}
CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$FLOODGATE_HOME/target}
PROFILE=${FLOODGATE_IMAGE_PROFILE:-debug}
ENGINE="$FLOODGATE_HOME/docker"
# Short: unix socket paths have a length limit, and containerd's live under the exec root. One
# per engine folder, so that two homes (a cold CI run beside a session's) never share one.
EXEC_ROOT=/run/floodgate-docker-$(printf '%s' "$ENGINE" | cksum | cut -d' ' -f1)
SOCKET="$ENGINE/docker.sock"
# Debian's client, whose BuildKit is built in (a newer client elsewhere on PATH may want the
# buildx plugin, which nothing here can fetch).
DOCKER=/usr/bin/docker
RELEASE=bookworm
MIRROR=${FLOODGATE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
BINARIES="floodgate-gateway floodgate-booking floodgate-consumer floodgate-loadgen floodgate-sandbox"

say() { printf '\033[1m[image]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[31m[image] %s\033[0m\n' "$*" >&2; exit 1; }
docker() { DOCKER_HOST="unix://$SOCKET" DOCKER_BUILDKIT=1 "$DOCKER" "$@"; }

engine_up() {
  if [ ! -x /usr/sbin/dockerd ] || [ ! -x "$DOCKER" ] || ! command -v debootstrap >/dev/null; then
    say "installing docker.io and debootstrap (Debian's)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      docker.io debootstrap >/dev/null
  fi
  if docker version >/dev/null 2>&1; then return; fi
  mkdir -p "$ENGINE"
  say "starting dockerd (host networking only) on $SOCKET"
  # setsid: the engine outlives this script and is stopped by `down`, not by a terminal's signal.
  setsid /usr/sbin/dockerd --host "unix://$SOCKET" --data-root "$ENGINE/root" \
    --exec-root "$EXEC_ROOT" --pidfile "$ENGINE/dockerd.pid" \
    --bridge none --iptables=false --ip6tables=false --ip-masq=false --userland-proxy=false \
    >"$ENGINE/dockerd.log" 2>&1 </dev/null &
  for _ in $(seq 1 300); do
    docker version >/dev/null 2>&1 && return
    sleep 0.1
  done
  die "dockerd did not start; see $ENGINE/dockerd.log"
}

engine_down() {
  [ -f "$ENGINE/dockerd.pid" ] || return 0
  local pid
  pid=$(cat "$ENGINE/dockerd.pid")
  if kill -0 "$pid" 2>/dev/null; then
    # Containers first (each gets its stop signal and grace), then the engine.
    local running
    running=$(docker ps -q 2>/dev/null || true)
    # shellcheck disable=SC2086
    [ -z "$running" ] || docker stop -t 5 $running >/dev/null 2>&1 || true
    kill -TERM "$pid"
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -f "$ENGINE/dockerd.pid"
  say "dockerd stopped"
}

# Debian minbase by debootstrap, kept as a tarball so a new engine imports it in seconds.
base_image() {
  if docker image inspect floodgate-base:$RELEASE >/dev/null 2>&1; then return; fi
  local tarball="$FLOODGATE_HOME/images/$RELEASE-minbase.tar"
  if [ ! -s "$tarball" ]; then
    say "debootstrap $RELEASE (minbase) from $MIRROR"
    local rootfs
    rootfs=$(mktemp -d)
    debootstrap --variant=minbase "$RELEASE" "$rootfs" "$MIRROR" >"$ENGINE/debootstrap.log" 2>&1 ||
      die "debootstrap failed; see $ENGINE/debootstrap.log"
    # Security fixes too, for what the images install on top.
    printf 'deb %s %s main\ndeb %s %s-updates main\ndeb http://deb.debian.org/debian-security %s-security main\n' \
      "$MIRROR" "$RELEASE" "$MIRROR" "$RELEASE" "$RELEASE" >"$rootfs/etc/apt/sources.list"
    # As in Debian's own container images: a package's install never starts its service.
    printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
    chmod 755 "$rootfs/usr/sbin/policy-rc.d"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    mkdir -p "$(dirname "$tarball")"
    tar -C "$rootfs" --numeric-owner -cf "$tarball.part" .
    mv "$tarball.part" "$tarball"
    rm -rf "$rootfs"
  fi
  say "importing floodgate-base:$RELEASE"
  docker import "$tarball" "floodgate-base:$RELEASE" >/dev/null
}

# The build context of the `prebuilt` payload: bin/ and static/ (the page, with the module
# deploy/stack.sh put beside it; never the sale data or node_modules).
payload() {
  local context=$1 dir="$CARGO_TARGET_DIR/$PROFILE"
  mkdir -p "$context/bin" "$context/static"
  for binary in $BINARIES; do
    [ -x "$dir/$binary" ] || die "$dir/$binary is missing: cargo build --bins first"
    strip --strip-debug -o "$context/bin/$binary" "$dir/$binary"
  done
  [ -f "$ROOT/static/oauth4webapi.js" ] || die "static/oauth4webapi.js is missing: deploy/stack.sh up"
  tar -C "$ROOT/static" --exclude=./node_modules --exclude=./data --exclude='./package*.json' \
    -cf - . | tar -C "$context/static" -xf -
}

build() {
  engine_up
  base_image
  local context
  context=$(mktemp -d)
  trap 'rm -rf "$context"' RETURN
  payload "$context"
  say "building floodgate:ci from the $PROFILE binaries"
  # --network host: the build's apt-get reaches Debian's mirror the way the host does.
  docker build --quiet --network host -f "$ROOT/Dockerfile" --build-arg BASE=floodgate-base:$RELEASE \
    --build-arg PAYLOAD=prebuilt -t floodgate:ci "$context" >/dev/null
  say "building floodgate-edge:ci"
  docker build --quiet --network host --build-arg BASE=floodgate-base:$RELEASE \
    -t floodgate-edge:ci "$ROOT/deploy/nginx" >/dev/null
  docker image prune -f >/dev/null
  local size
  size=$(docker image inspect floodgate:ci --format '{{.Size}}')
  say "floodgate:ci is $((size / 1000000)) MB; floodgate-edge:ci is $(($(docker image inspect floodgate-edge:ci --format '{{.Size}}') / 1000000)) MB"
  print_env
}

print_env() {
  echo "DOCKER_HOST=unix://$SOCKET"
  echo "FLOODGATE_DOCKER=$DOCKER"
}

case "${1:-}" in
  build) build ;;
  env) print_env ;;
  down) engine_down ;;
  *) die "usage: deploy/image.sh build|env|down" ;;
esac
