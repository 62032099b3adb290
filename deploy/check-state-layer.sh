#!/usr/bin/env bash
# Fails when service code handles the Redis state by hand outside the layers that own it:
# platform's state layer (platform/src/state/, keys.rs, lua.rs), the booking gatekeeper
# (booking/src/gatekeeper/) and the gateway's script module (gateway/src/scripts/). It looks for
#   - a hash or stream field name handed to Redis or looked up in what it answered
#     (.hget(k, "fare_minor"), .arg("rate"), fields.get("state"), &["capacity", ...]),
#   - a script or pipeline reply read by index (reply[0], replies.get(1), rest[2], ...),
#   - a key string ("{s:...}", "...:meta", "...:rsv:..."): keys are built by platform::keys only.
# Test code may read raw keys: the tests crate and each file's #[cfg(test)] module (last in
# the file, by this codebase's convention) are not looked at.
#
# Usage: deploy/check-state-layer.sh [root]   (root: a checkout; the default is this one)
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"

owners='^(platform/src/(state|keys|lua)(\.rs|/)|booking/src/gatekeeper/|gateway/src/scripts/)'
fields='opens_at_ms|rate|token_ttl_ms|max_seats|active_cap|stock_factor|paused|sold_out|pools'
fields+='|lottery_commitment|lottery_secret|prequeue_chain|prequeue_size|prequeue_digest'
fields+='|prequeue_closed_at_ms|unspent|admitted_total|dead_total|capacity|hold_ttl_ms'
fields+='|fare_minor|currency|armed|expires_ms|at_ms|durable|pending_payment_id|exp'
fields+='|identity|challenge|pow_difficulty|buyer_seats|buyer|joining|joining_until|grace_secs'
fields+='|autopilot|stock_hold_ms'
suffixes='meta|seq|frontier|leader|tok|epoch|prequeue|prequeue_batches|gone|holders|dead'
suffixes+='|deaths|admits|batches|tokens|gateways|gw|cfg|avail|held|sold|holds|expiries|rsv'
suffixes+='|outbox|relay|owners|health|autopilot|autopilot_audit|away|away_admitted|taken'
patterns=(
  "field name|(\\.(arg|hget|hset|hmget|hincr|hdel|hexists|hset_multiple)\\(|\\bget\\(|\\[)[^;]*\"($fields)\""
  "reply index|\\b(reply|replies|rest|values|answer)(\\[[0-9]+\\]|\\.get\\([0-9]+\\))"
  "key string|\"[^\"]*(\\{\\{?[sp]:|:($suffixes)(:|\"))"
)

found=0
while IFS= read -r file; do
  [[ "$file" =~ $owners ]] && continue
  # Only the code before the file's test module.
  code="$(awk '/^#\[cfg\(test\)\]/ { exit } { printf "%d:%s\n", NR, $0 }' "$file")"
  for entry in "${patterns[@]}"; do
    what="${entry%%|*}"
    regex="${entry#*|}"
    while IFS= read -r hit; do
      [[ -z "$hit" ]] && continue
      # Comments explain the state; they do not handle it.
      line="${hit#*:}"
      [[ "$line" =~ ^[[:space:]]*// ]] && continue
      echo "$file:${hit%%:*}: $what outside the state layer: ${line#"${line%%[![:space:]]*}"}"
      found=1
    done < <(grep -E -- "$regex" <<<"$code" || true)
  done
done < <(find booking/src gateway/src consumer/src loadgen/src protocol/src platform/src sandbox/src client/src -name '*.rs' | sort)

if ((found)); then
  echo "The Redis state is read and written through platform::state, platform::keys, the" >&2
  echo "gatekeeper (booking/src/gatekeeper/) and the gateway's scripts (gateway/src/scripts/)." >&2
  exit 1
fi
echo "state layer: no hash field, reply index or key string outside its owners"
