#!/usr/bin/env bash
# Makes the secrets deploy/compose.yaml mounts, as files in deploy/secrets/ (not in git; the folder
# is its owner's only, and the files in it readable by anyone: each is bind-mounted alone into
# containers that run as uid 10001, nobody on the host, so the folder is what keeps the host's
# other users out): a new admission-token key pair, the ops token, the webhook secret, the
# payment API key and PostgreSQL's password with the database URL that carries it. A file that
# exists is kept, so running it again changes nothing.
#
#   deploy/compose-secrets.sh
#
# The key pair comes from `floodgate-gateway keygen`, run from the image (build it first:
# `docker build -t floodgate:local .`) unless FLOODGATE_KEYGEN names another way to run it.
# SECRETS_DIR puts the files elsewhere.
set -euo pipefail
cd "$(dirname "$0")"
SECRETS_DIR=${SECRETS_DIR:-secrets}
KEYGEN=${FLOODGATE_KEYGEN:-docker run --rm floodgate:local floodgate-gateway keygen}
umask 077
mkdir -p "$SECRETS_DIR"
chmod 700 "$SECRETS_DIR"

random() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
# Writes $2 to $SECRETS_DIR/$1 unless that file exists.
keep_or_write() {
  if [ ! -s "$SECRETS_DIR/$1" ]; then printf '%s' "$2" >"$SECRETS_DIR/$1"; fi
}

if [ ! -s "$SECRETS_DIR/token_signing_key" ] || [ ! -s "$SECRETS_DIR/token.env" ]; then
  # shellcheck disable=SC2086
  pair=$($KEYGEN --kid "compose-$(date +%Y%m%d)")
  grep '^FLOODGATE_TOKEN_SIGNING_KEY=' <<<"$pair" | cut -d= -f2- | tr -d '\n' \
    >"$SECRETS_DIR/token_signing_key"
  grep -E '^FLOODGATE_TOKEN_(KEY_ID|PUBLIC_KEYS)=' <<<"$pair" >"$SECRETS_DIR/token.env"
fi
keep_or_write ops_token "ops_$(random)"
keep_or_write audit_key "audit_$(random)"
keep_or_write reservation_key "rk_$(random)"
keep_or_write edge_key "ek_$(random)"
keep_or_write webhook_secret "whsec_$(random)"
keep_or_write payment_api_key "pk_sandbox_$(random)"
keep_or_write postgres_password "$(random)"
# Plaintext on compose's own network, said out loud (sslmode=disable): a URL that names a server
# across a network and no sslmode is refused, since PostgreSQL's default could be stripped.
keep_or_write database_url \
  "postgres://postgres:$(cat "$SECRETS_DIR/postgres_password")@postgres:5432/floodgate?sslmode=disable"
chmod 644 "$SECRETS_DIR"/*
echo "secrets in $(cd "$SECRETS_DIR" && pwd)"
