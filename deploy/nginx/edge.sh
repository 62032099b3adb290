#!/bin/sh
# Starts the edge: deploy/nginx/cdn.conf with its placeholders filled in from the environment,
# nginx in the foreground. A missing setting stops it, naming the setting.
#
#   FLOODGATE_EDGE_GATEWAYS  the gateways, host:port, comma-separated (required)
#   FLOODGATE_EDGE_BOOKING   the booking instances, host:port, comma-separated (required)
#   FLOODGATE_EDGE_LISTEN    what nginx listens on (default 8000: every address, port 8000)
#   FLOODGATE_EDGE_METRICS_LISTEN  where it serves its metrics, /metrics (default 9113)
#   FLOODGATE_EDGE_REDIRECT_LISTEN where plain http:// arrives, answered with a redirect to
#                            https:// (default 8001)
#   FLOODGATE_EDGE_REAL_IP_FROM  a CDN's or L7 load balancer's ranges in front of the edge,
#                            comma-separated CIDRs: the edge takes the client's address from the
#                            X-Forwarded-For they write, and counts every limit by it (nginx's
#                            realip module). Unset: the address each connection comes from
#   FLOODGATE_EDGE_WORKERS   nginx workers (default: one per core the container sees; each sets
#                            aside ~55 MB for its connections, so name a number under a memory
#                            limit)
#   FLOODGATE_EDGE_PREFIX    nginx's own writable directory (default /var/cache/floodgate-cdn)
#   FLOODGATE_EDGE_KEY       the key the services seal the credentials they issue with, the same
#                            as theirs (or FLOODGATE_EDGE_KEY_FILE, a file holding it): a sealed
#                            credential is not counted against its address's ceiling, and the
#                            services take the client's address it forwards from it wherever it
#                            runs (its word, below). Unset: a random one, so no credential is
#                            taken as sealed and only FLOODGATE_TRUSTED_PROXIES vouches for it (a
#                            warning says so)
set -eu
: "${FLOODGATE_EDGE_GATEWAYS:?FLOODGATE_EDGE_GATEWAYS is not set: name the gateways, host:port, comma-separated}"
: "${FLOODGATE_EDGE_BOOKING:?FLOODGATE_EDGE_BOOKING is not set: name the booking instances, host:port, comma-separated}"
listen=${FLOODGATE_EDGE_LISTEN:-8000}
metrics=${FLOODGATE_EDGE_METRICS_LISTEN:-9113}
redirect=${FLOODGATE_EDGE_REDIRECT_LISTEN:-8001}
prefix=${FLOODGATE_EDGE_PREFIX:-/var/cache/floodgate-cdn}
workers=${FLOODGATE_EDGE_WORKERS:-auto}
template=${FLOODGATE_EDGE_TEMPLATE:-/etc/floodgate/cdn.conf}

# `a:1,b:2` as nginx upstream lines: `server a:1; server b:2;`, each never marked down
# (`max_fails=0`) when the second argument says `always`, as for the gateways: a gateway's 503
# (a Redis slot it cannot reach just now, or draining, or full) is tried on the next (cdn.conf's
# /ws) and is that request's answer only, but nginx's passive check counts it as a failure, and a
# few of one sale's 503s would take every gateway out of rotation for ten seconds, and with them
# every sale (tests/tests/it/failover/readiness.rs). A gateway that is gone is passed over all
# the same: at once when its port refuses, within proxy_connect_timeout (3 s) when nothing
# answers. For the booking instances, a list that names an entry more than once (one Service
# tried again) is never marked down either; distinct instances keep nginx's passive check.
servers() {
  list=$(printf '%s' "$1" | tr ',' '\n' | sed -e 's/^ *//' -e 's/ *$//' -e '/^$/d')
  fails=
  if [ "${2:-}" = always ] || [ -n "$(printf '%s\n' "$list" | sort | uniq -d)" ]; then fails=' max_fails=0'; fi
  printf '%s\n' "$list" | sed "s/.*/server &$fails;/" | tr '\n' ' '
}

if [ -n "${FLOODGATE_EDGE_KEY_FILE:-}" ]; then
  [ -z "${FLOODGATE_EDGE_KEY:-}" ] || { echo "edge.sh: set FLOODGATE_EDGE_KEY or FLOODGATE_EDGE_KEY_FILE, not both" >&2; exit 1; }
  FLOODGATE_EDGE_KEY=$(tr -d '\n' <"$FLOODGATE_EDGE_KEY_FILE")
fi
edge_key=${FLOODGATE_EDGE_KEY:-}
if [ -z "$edge_key" ]; then
  echo "edge.sh: FLOODGATE_EDGE_KEY is not set: every credential counts against its address's ceiling (docs/runbook.md, \"The edge's seal\")" >&2
  edge_key=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
fi
# The services take the same rule (platform/src/clients/seal.rs): it goes into nginx's
# configuration as it is.
case $edge_key in
  *[!A-Za-z0-9_-]*) echo "edge.sh: FLOODGATE_EDGE_KEY may hold only letters, digits, _ and -" >&2; exit 1 ;;
esac
[ "${#edge_key}" -ge 32 ] || { echo "edge.sh: FLOODGATE_EDGE_KEY is too short; it needs at least 32 characters" >&2; exit 1; }

# The edge's word (cdn.conf's X-Floodgate-Edge): with it the services take this edge's
# X-Forwarded-For whatever its address, as platform/src/clients/seal.rs computes it from the
# same key. A random key (above) makes a word no service takes.
edge_word=$(printf 'floodgate-edge:%s' "$edge_key" | sha256sum | cut -d' ' -f1)

# What goes into nginx's configuration as it is: an address and port (an IPv6 one in brackets),
# and for the public listener the words of nginx's `listen` that follow it (`proxy_protocol`).
for setting in "FLOODGATE_EDGE_LISTEN=$listen" "FLOODGATE_EDGE_METRICS_LISTEN=$metrics" "FLOODGATE_EDGE_REDIRECT_LISTEN=$redirect"; do
  case ${setting#*=} in
    *[!A-Za-z0-9.:\[\]_\ -]*) echo "edge.sh: ${setting%%=*} may hold only an address and port (and listen's own words)" >&2; exit 1 ;;
  esac
done
# The origins are host:port lists; the prefix is a path.
for setting in "FLOODGATE_EDGE_GATEWAYS=$FLOODGATE_EDGE_GATEWAYS" "FLOODGATE_EDGE_BOOKING=$FLOODGATE_EDGE_BOOKING"; do
  case ${setting#*=} in
    *[!A-Za-z0-9.:\[\],_\ -]*) echo "edge.sh: ${setting%%=*} may hold only host:port entries, comma-separated" >&2; exit 1 ;;
  esac
done
real_ip_from=$(printf '%s' "${FLOODGATE_EDGE_REAL_IP_FROM:-}" | tr ' ' ',')
case $real_ip_from in
  *[!0-9A-Fa-f.:/,]*) echo "edge.sh: FLOODGATE_EDGE_REAL_IP_FROM may hold only CIDR ranges, comma-separated" >&2; exit 1 ;;
esac
# Behind the PROXY protocol (FLOODGATE_EDGE_LISTEN's `proxy_protocol`), the address is its header.
real_ip_header=X-Forwarded-For
case $listen in *proxy_protocol*) real_ip_header=proxy_protocol ;; esac
# Behind the PROXY protocol every connection comes from the load balancer: without its ranges,
# every client would be counted as its few addresses, and refused as one.
if [ "$real_ip_header" = proxy_protocol ] && [ -z "$(printf '%s' "$real_ip_from" | tr -d ',')" ]; then
  echo "edge.sh: FLOODGATE_EDGE_LISTEN speaks the PROXY protocol: name the load balancer's ranges in FLOODGATE_EDGE_REAL_IP_FROM" >&2
  exit 1
fi
real_ip=
if [ -n "$(printf '%s' "$real_ip_from" | tr -d ',')" ]; then
  real_ip="$(printf '%s' "$real_ip_from" | tr ',' '\n' | sed -e 's/^ *//' -e 's/ *$//' -e '/^$/d' |
    sed 's/.*/set_real_ip_from &;/' | tr '\n' ' ')real_ip_header $real_ip_header; real_ip_recursive on;"
fi
case $prefix in
  *[!A-Za-z0-9./_-]*) echo "edge.sh: FLOODGATE_EDGE_PREFIX may hold only a path of letters, digits, ., /, _ and -" >&2; exit 1 ;;
esac
# The metrics are counted by Debian's Lua module for nginx (cdn.conf loads it): without it,
# say so rather than leave nginx's own complaint.
[ -f /usr/lib/nginx/modules/ngx_http_lua_module.so ] || { echo "edge.sh: nginx's Lua module is missing: install libnginx-mod-http-lua (the edge's image has it)" >&2; exit 1; }

mkdir -p "$prefix"
# The configuration holds the key: readable by this user only (nginx's master reads it).
(umask 077 && sed -e "s|__LISTEN__|$listen|" \
  -e "s|__METRICS__|$metrics|" \
  -e "s|__REDIRECT__|$redirect|" \
  -e "s|__GATEWAYS__|$(servers "$FLOODGATE_EDGE_GATEWAYS" always)|" \
  -e "s|__BOOKING__|$(servers "$FLOODGATE_EDGE_BOOKING")|" \
  -e "s|__PREFIX__|$prefix|g" \
  -e "s|__EDGE_KEY__|$edge_key|g" \
  -e "s|__EDGE_WORD__|$edge_word|g" \
  -e "s|__REAL_IP__|$real_ip|" \
  -e "s|^worker_processes auto;|worker_processes $workers;|" \
  -e "s|^error_log .*|error_log stderr warn;|" \
  "$template" >"$prefix/nginx.conf")
# The pages' origin socket of a run that did not end cleanly (a kill, an OOM) would stop nginx
# from listening on it again.
rm -f "$prefix/pages.sock"
# Its errors go to the container's log (stderr), start-up messages too (-e): not to files.
exec nginx -e stderr -c "$prefix/nginx.conf"
