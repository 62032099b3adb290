# Shared set-up of the bench scripts that run release services against a private Redis Cluster
# (deploy/bench-joins.sh, deploy/bench-replicas.sh); sourced, not run. Set BENCH_NAME first.
# Leaves behind: FLOODGATE_HOME, CARGO_TARGET_DIR, PG, DB (a fresh database name), RESULTS (this
# run's folder), BIN (the release binaries, built), say(), and in the environment the database
# URL, a fresh Redis key prefix, RUST_LOG and a token key pair.
FLOODGATE_HOME=${FLOODGATE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/floodgate}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$FLOODGATE_HOME/target}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
DB="floodgate_bench_$RANDOM$RANDOM"
RESULTS="$FLOODGATE_HOME/bench/$BENCH_NAME-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$RESULTS"
say() { printf '\033[1m[bench]\033[0m %s\n' "$*" >&2; }

# The same packages as deploy/bench.sh builds: another set unifies features differently and
# rebuilds half the tree each time one script follows the other.
cargo build --release --locked -q -p floodgate-gateway -p floodgate-booking -p floodgate-consumer \
  -p floodgate-loadgen -p floodgate-sandbox
BIN=$CARGO_TARGET_DIR/release
export FLOODGATE_DATABASE_URL="$PG/$DB" FLOODGATE_REDIS_PREFIX="bench$RANDOM:"
export RUST_LOG=${BENCH_LOG:-warn}
set -a
# shellcheck disable=SC1090
source <("$BIN/floodgate-gateway" keygen --kid bench | grep -v '^#')
set +a
# The audit trail's chain key: the admin commands (sale create --arm) record themselves.
FLOODGATE_AUDIT_KEY="audit_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export FLOODGATE_AUDIT_KEY
