#!/usr/bin/env bash
# Runs every Floodgate test against the real services, starting (and if need be installing) them
# first. This is the README's test command and exactly what CI runs.
#
#   deploy/test.sh                 formatting, the code's shape, lints, then every test
#   deploy/test.sh -- <filter>     extra arguments after -- go to `cargo nextest run`
set -euo pipefail
cd "$(dirname "$0")/.."

FLOODGATE_HOME=${FLOODGATE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/floodgate}
CLUSTER_SCENARIOS='test(/walking_skeleton::|two_thousand_concurrent_attempts|random_interleavings_keep_every_invariant|two_gateways_show_consistent_positions|killing_the_leader_hands_over|a_wiped_pool_is_refused_until_rebuilt|an_injected_drift_is_reported/)'

# One target directory outside the clone, reused by later runs and by the demo: a cold build
# takes minutes on 2 cores, a warm one seconds.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$FLOODGATE_HOME/target}
# The server `#[sqlx::test]` creates a fresh database on for every test.
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
# Tests that stop a broker start a private Tansu from the binary the stack script installed.
export FLOODGATE_TANSU=${FLOODGATE_TANSU:-$FLOODGATE_HOME/tansu-0.6.0/bin/tansu}

# A broker or Redis Cluster this run starts is stopped when it ends; one that was already running
# is left alone.
CLEANUP=()
if ! (exec 3<>/dev/tcp/127.0.0.1/9092) 2>/dev/null; then
  CLEANUP+=("deploy/stack.sh down >/dev/null")
fi
if ! (exec 3<>/dev/tcp/127.0.0.1/7001) 2>/dev/null; then
  CLEANUP+=("deploy/stack.sh cluster-down >/dev/null")
fi
# The Docker engine of the container tests, likewise.
if ! DOCKER_HOST="unix://$FLOODGATE_HOME/docker/docker.sock" /usr/bin/docker version >/dev/null 2>&1; then
  CLEANUP+=("deploy/image.sh down")
fi
cleanup() { for step in "${CLEANUP[@]}"; do eval "$step"; done; }
trap cleanup EXIT
deploy/stack.sh up
# The private Redis Cluster (three primaries, three replicas on 127.0.0.1:7001-7006): the
# cluster tests use it in the first pass, and the named scenarios run on it in the second.
export FLOODGATE_TEST_CLUSTER
FLOODGATE_TEST_CLUSTER=$(deploy/stack.sh cluster-up | tail -1)

# Databases that multi-threaded tests created in earlier runs (`fresh_db`).
psql -h 127.0.0.1 -U postgres -d postgres -Atqc \
  "select 'drop database \"' || datname || '\";' from pg_database where datname like 'floodgate_test_%'" |
  psql -h 127.0.0.1 -U postgres -d postgres -q >/dev/null

echo "[test] cargo fmt --check"
cargo fmt --all -- --check
echo "[test] the Redis state layer, file sizes"
deploy/check-state-layer.sh
deploy/check-file-sizes.sh
echo "[test] the Dockerfile, the compose file, the Kubernetes manifests"
deploy/check-deploy.sh
echo "[test] cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
# nextest runs every test in its own process (no shared global state between tests) and ends
# with one summary line. This machine kind ships it; elsewhere it is installed once.
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "[test] installing cargo-nextest"
  cargo install cargo-nextest --locked
fi
# The outage tests start the real service binaries as separate processes.
echo "[test] cargo build --bins"
cargo build --workspace --bins --locked
# The images the container tests run (tests/tests/it/containers.rs): made from Debian's
# packages and these binaries, on the project's own Docker engine (host networking only).
echo "[test] the images"
# (An assignment, so that a failed build stops the run here.)
image_env=$(deploy/image.sh build)
eval "$(sed 's/^/export /' <<<"$image_env")"
export FLOODGATE_TEST_IMAGE=floodgate:ci FLOODGATE_TEST_EDGE_IMAGE=floodgate-edge:ci
echo "[test] cargo nextest run"
if [ "${1:-}" = "--" ]; then shift; fi
cargo nextest run --workspace --locked --no-fail-fast "$@"

# The scenarios that matter for distribution, again with every service (and the tests' own
# reads) on the Redis Cluster: one sale through all five layers, 2,000 attempts on 500 seats,
# the property test of interleavings, fairness across two gateways, the leader's failover,
# rebuild and reconcile. Skipped when the run was asked for particular tests.
if [ "$#" -eq 0 ]; then
  echo "[test] the named scenarios on the Redis Cluster"
  FLOODGATE_TEST_REDIS_CLUSTER=$FLOODGATE_TEST_CLUSTER cargo nextest run --workspace --locked \
    --no-fail-fast -E "$CLUSTER_SCENARIOS"
fi
