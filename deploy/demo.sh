#!/usr/bin/env bash
# Runs the whole Floodgate stack on this machine with a demo sale, and prints where to look.
# This is the README's run command. Ctrl-C stops the three services (Redis, PostgreSQL and the
# Tansu broker keep running; `deploy/stack.sh down` stops the broker).
#
# Settings (environment): OPENS_IN (seconds until the demo sale opens, default 60),
# FLOODGATE_GATEWAY_LISTEN (127.0.0.1:8080), FLOODGATE_BOOKING_LISTEN (127.0.0.1:8081).
set -euo pipefail
cd "$(dirname "$0")/.."

FLOODGATE_HOME=${FLOODGATE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/floodgate}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$FLOODGATE_HOME/target}
export FLOODGATE_DATABASE_URL=${FLOODGATE_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/floodgate}
export FLOODGATE_GATEWAY_LISTEN=${FLOODGATE_GATEWAY_LISTEN:-127.0.0.1:8080}
export FLOODGATE_GATEWAY_ADMIN_LISTEN=${FLOODGATE_GATEWAY_ADMIN_LISTEN:-127.0.0.1:9080}
# One host, no load balancer to take the gateway out of rotation first: stop at once.
export FLOODGATE_DRAIN_DELAY_MS=${FLOODGATE_DRAIN_DELAY_MS:-0}
export FLOODGATE_BOOKING_LISTEN=${FLOODGATE_BOOKING_LISTEN:-127.0.0.1:8081}
export FLOODGATE_SANDBOX_LISTEN=${FLOODGATE_SANDBOX_LISTEN:-127.0.0.1:8082}
export FLOODGATE_SANDBOX_PUBLIC_URL=${FLOODGATE_SANDBOX_PUBLIC_URL:-http://$FLOODGATE_SANDBOX_LISTEN}
export FLOODGATE_SANDBOX_WEBHOOK_URL=${FLOODGATE_SANDBOX_WEBHOOK_URL:-http://$FLOODGATE_BOOKING_LISTEN/v1/payments/webhook}
# The demo pays through the sandbox provider, asked for by name: no money moves.
export FLOODGATE_PAYMENT_SANDBOX=true
export FLOODGATE_PAYMENT_PROVIDER_URL=${FLOODGATE_PAYMENT_PROVIDER_URL:-http://$FLOODGATE_SANDBOX_LISTEN}
# A stable id per consumer instance lets a restarted consumer take its partitions straight back.
export FLOODGATE_CONSUMER_INSTANCE_ID=${FLOODGATE_CONSUMER_INSTANCE_ID:-demo-consumer-1}
export FLOODGATE_STATIC_DIR=${FLOODGATE_STATIC_DIR:-$PWD/static}
# No CDN here: the gateway passes the page's booking requests to the booking service, so the
# page talks to its own origin only, and it sends payers to the sandbox's checkout alone.
export FLOODGATE_BOOKING_URL=${FLOODGATE_BOOKING_URL:-http://$FLOODGATE_BOOKING_LISTEN}
export FLOODGATE_CHECKOUT_ORIGINS=${FLOODGATE_CHECKOUT_ORIGINS:-$FLOODGATE_SANDBOX_PUBLIC_URL}
# Signed-in buyers: the sandbox also plays the operator's sign-in (test mode, no password), and
# the gateway and the booking service check its identity tokens against its published keys,
# exactly as they would a real OpenID Connect provider's.
export FLOODGATE_SANDBOX_SIGNIN=true
export FLOODGATE_SANDBOX_SIGNIN_RETURN_ORIGINS=${FLOODGATE_SANDBOX_SIGNIN_RETURN_ORIGINS:-http://$FLOODGATE_GATEWAY_LISTEN}
export FLOODGATE_IDENTITY_ISSUER=${FLOODGATE_IDENTITY_ISSUER:-$FLOODGATE_SANDBOX_PUBLIC_URL}
export FLOODGATE_IDENTITY_AUDIENCE=${FLOODGATE_IDENTITY_AUDIENCE:-floodgate-demo}
export FLOODGATE_IDENTITY_JWKS_URL=${FLOODGATE_IDENTITY_JWKS_URL:-$FLOODGATE_SANDBOX_PUBLIC_URL/.well-known/jwks.json}
OPENS_IN=${OPENS_IN:-60}
LOGS="$FLOODGATE_HOME/logs"
mkdir -p "$LOGS"

say() { printf '\033[1m[demo]\033[0m %s\n' "$*"; }

deploy/stack.sh up

say "building the services (the first build takes a few minutes)"
cargo build --locked -q -p floodgate-gateway -p floodgate-booking -p floodgate-consumer \
  -p floodgate-sandbox
BIN="$CARGO_TARGET_DIR/debug"
# The topics, as Floodgate makes them (six partitions each, as the stack has always had them).
FLOODGATE_TOPIC_PARTITIONS=6 FLOODGATE_DLQ_PARTITIONS=6 "$BIN/floodgate-booking" topics ensure

# One token key pair per machine, kept between runs: gateways sign with the private half,
# the booking service verifies with the public half.
KEYS="$FLOODGATE_HOME/demo-keys.env"
if [ ! -f "$KEYS" ]; then
  "$BIN/floodgate-gateway" keygen --kid "demo-$(date +%Y%m%d)" >"$KEYS"
  chmod 600 "$KEYS"
fi
if ! grep -q '^FLOODGATE_OPS_TOKEN=' "$KEYS"; then
  # The ops API's bearer token.
  echo "FLOODGATE_OPS_TOKEN=ops_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" >>"$KEYS"
fi
if ! grep -q '^FLOODGATE_AUDIT_KEY=' "$KEYS"; then
  # The key the audit trail's rows are chained with (kept outside PostgreSQL).
  echo "FLOODGATE_AUDIT_KEY=audit_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" >>"$KEYS"
fi
if ! grep -q '^FLOODGATE_RESERVATION_KEY=' "$KEYS"; then
  # The key each reservation's secret is made with (the same on every booking service).
  echo "FLOODGATE_RESERVATION_KEY=rk_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" >>"$KEYS"
fi
if ! grep -q '^FLOODGATE_EDGE_KEY=' "$KEYS"; then
  # The key the services seal what they issue with, for an edge in front (docs/runbook.md,
  # "The edge's seal"); letters, digits, _ and - only.
  echo "FLOODGATE_EDGE_KEY=ek_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" >>"$KEYS"
fi
if ! grep -q '^FLOODGATE_WEBHOOK_SECRET=' "$KEYS"; then
  # The secret the (sandbox) payment provider signs its webhooks with.
  echo "FLOODGATE_WEBHOOK_SECRET=whsec_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" >>"$KEYS"
fi
if ! grep -q '^FLOODGATE_PAYMENT_API_KEY=' "$KEYS"; then
  # The key the booking service presents to the (sandbox) payment provider's API.
  echo "FLOODGATE_PAYMENT_API_KEY=pk_sandbox_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" >>"$KEYS"
fi
set -a
# shellcheck disable=SC1090
. "$KEYS"
set +a

"$BIN/floodgate-booking" migrate
SALE="tatkal-demo-$(date +%Y%m%d-%H%M%S)"
"$BIN/floodgate-booking" sale create deploy/sales/demo.toml --id "$SALE" --opens-in-secs "$OPENS_IN" --arm
"$BIN/floodgate-booking" sale publish "$SALE" --out "$FLOODGATE_STATIC_DIR"

PIDS=()
cleanup() {
  trap - INT TERM EXIT
  say "stopping services"
  kill "${PIDS[@]}" 2>/dev/null || true
  wait "${PIDS[@]}" 2>/dev/null || true
}
trap cleanup INT TERM EXIT

# The sandbox first: the other services fetch its sign-in's keys when they start. It reads its
# secrets under names of its own, given here the values the booking service uses.
FLOODGATE_SANDBOX_WEBHOOK_SECRET=$FLOODGATE_WEBHOOK_SECRET FLOODGATE_SANDBOX_API_KEY=$FLOODGATE_PAYMENT_API_KEY \
  "$BIN/floodgate-sandbox" >"$LOGS/sandbox.log" 2>&1 & PIDS+=($!)
for _ in $(seq 1 100); do
  curl -fsS "$FLOODGATE_IDENTITY_JWKS_URL" >/dev/null 2>&1 && break
  sleep 0.1
done
"$BIN/floodgate-consumer" >"$LOGS/consumer.log" 2>&1 & PIDS+=($!)
"$BIN/floodgate-booking" serve >"$LOGS/booking.log" 2>&1 & PIDS+=($!)
"$BIN/floodgate-gateway" serve >"$LOGS/gateway.log" 2>&1 & PIDS+=($!)

for addr in "$FLOODGATE_GATEWAY_LISTEN" "$FLOODGATE_BOOKING_LISTEN"; do
  for _ in $(seq 1 100); do
    curl -fsS "http://$addr/healthz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fsS "http://$addr/healthz" >/dev/null || { say "a service did not start; see $LOGS"; exit 1; }
done

cat <<TXT

  Floodgate is running. The demo sale $SALE opens in $OPENS_IN seconds.

  Waiting room (open in a browser; sign in with any name at the sandbox's sign-in, test mode;
  several browsers, or private windows, are several buyers; tabs of one browser share a place):
      http://$FLOODGATE_GATEWAY_LISTEN/?sale=$SALE
  The sale's live figures:
      http://$FLOODGATE_GATEWAY_LISTEN/v1/sales/$SALE
  Booking API:
      POST http://$FLOODGATE_BOOKING_LISTEN/v1/sales/$SALE/reservations
  Sandbox payment provider (its checkout pages open from the waiting-room page):
      http://$FLOODGATE_SANDBOX_LISTEN
  Bookings as they land in PostgreSQL:
      psql postgres://postgres@127.0.0.1:5432/floodgate -c "select reservation_id, pool_id, seats, status from bookings where sale_id = '$SALE'"
  Ops console (live charts and controls; the ops token is FLOODGATE_OPS_TOKEN in $KEYS):
      http://127.0.0.1:9081/admin/console?sale=$SALE
  Ops API:
      curl -H "Authorization: Bearer \$FLOODGATE_OPS_TOKEN" http://127.0.0.1:9081/admin/v1/sales/$SALE
  Metrics (Prometheus, on the admin listeners, never public):
      http://$FLOODGATE_GATEWAY_ADMIN_LISTEN/metrics  http://127.0.0.1:9081/metrics  http://127.0.0.1:9102/metrics
  Logs:
      $LOGS/{gateway,booking,sandbox,consumer}.log

  Ctrl-C stops the services.
TXT

wait -n "${PIDS[@]}"
say "a service exited; see $LOGS"
