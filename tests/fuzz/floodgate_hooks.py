"""Schemathesis hooks that let the fuzzing reach Floodgate's handlers, not just their 401s.

Loaded by tests/tests/it/openapi.rs (SCHEMATHESIS_HOOKS=floodgate_hooks), which starts the real
booking binary with a sale open and hands these hooks, through the environment:

  FLOODGATE_FUZZ_BOOKING         the public API's base URL (to make reservations to read and pay)
  FLOODGATE_FUZZ_SALE, _POOL     the live sale and one of its pools
  FLOODGATE_FUZZ_TOKENS          a file of admission tokens for the sale, one per line, each
                                 good for one reservation
  FLOODGATE_FUZZ_IDENTITY        a buyer's identity token the service trusts
  FLOODGATE_FUZZ_OPS_TOKEN       an ops token
  FLOODGATE_FUZZ_WEBHOOK_SECRET  the webhook secret, to sign the provider's deliveries
  FLOODGATE_FUZZ_TICKET          a ticket the sale's draw placed (for its proof)
  FLOODGATE_FUZZ_RESUME          that ticket's resume token (for where its place stands)
  FLOODGATE_FUZZ_LOG             where to append one JSON line per call (method, path, status)

Most cases get the real thing (the live sale, a fresh token, a reservation's own secret, a
correct signature); some keep what Schemathesis generated or lose their credentials, so every
operation also meets its refusals. The choices are seeded: a run can be repeated.
"""

import hashlib
import hmac
import json
import os
import random
import threading
import time
import uuid

import requests
import schemathesis
from schemathesis.core.parameters import ParameterLocation

ENV = os.environ
SALE = ENV["FLOODGATE_FUZZ_SALE"]
POOL = ENV["FLOODGATE_FUZZ_POOL"]
BOOKING = ENV["FLOODGATE_FUZZ_BOOKING"]
IDENTITY = ENV["FLOODGATE_FUZZ_IDENTITY"]
OPS_TOKEN = ENV["FLOODGATE_FUZZ_OPS_TOKEN"]
RESUME = ENV["FLOODGATE_FUZZ_RESUME"]
WEBHOOK_SECRET = ENV["FLOODGATE_FUZZ_WEBHOOK_SECRET"].encode()
with open(ENV["FLOODGATE_FUZZ_TOKENS"]) as tokens_file:
    TOKENS = tokens_file.read().split()

LOCK = threading.Lock()
RNG = random.Random(17)
LOG = open(ENV["FLOODGATE_FUZZ_LOG"], "a", buffering=1)
# Reservations made for the routes that read one: (id, secret).
KNOWN = []


def chance(p):
    with LOCK:
        return RNG.random() < p


CASES = {}


def nth_case(method, path):
    """How many cases of this operation came before this one."""
    with LOCK:
        n = CASES.get((method, path), 0)
        CASES[(method, path)] = n + 1
        return n


def next_token():
    """A token never used before, while they last; then the last one again (spent: a 403)."""
    with LOCK:
        return TOKENS.pop() if len(TOKENS) > 1 else TOKENS[0]


def fresh_reservation():
    """A new held reservation of one seat: (id, secret), or None if none could be made."""
    answer = requests.post(
        f"{BOOKING}/v1/sales/{SALE}/reservations",
        json={"pool": POOL, "seats": 1},
        headers={"Authorization": f"Bearer {next_token()}", "Idempotency-Key": str(uuid.uuid4())},
        timeout=10,
    )
    if answer.status_code != 201:
        return None
    body = answer.json()
    with LOCK:
        KNOWN.append((body["reservation_id"], body["secret"]))
    return body["reservation_id"], body["secret"]


def some_reservation():
    with LOCK:
        known = list(KNOWN)
    if known and chance(0.5):
        return known[RNG.randrange(len(known))]
    return fresh_reservation()


class SignWebhook(requests.auth.AuthBase):
    """Signs the body exactly as it goes on the wire, as the provider does."""

    def __call__(self, request):
        body = request.body or b""
        if isinstance(body, str):
            body = body.encode()
        stamp = int(time.time())
        mac = hmac.new(WEBHOOK_SECRET, f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
        request.headers["Floodgate-Signature"] = f"t={stamp},v1={mac}"
        return request


def left_out(case):
    """The header this case leaves out on purpose (lowercased), or None.

    The coverage phase sends each required header's absence, credentials included, to check it
    is refused: such a case must go out without it.
    """
    data = getattr(getattr(case.meta, "phase", None), "data", None)
    scenario = getattr(data, "scenario", None)
    location = getattr(data, "parameter_location", None)
    if getattr(scenario, "value", None) == "missing_parameter" and getattr(location, "value", None) == "header":
        return (data.parameter or "").lower()
    return None


def withheld(case, name):
    """Whether the case goes without header `name` on purpose: the coverage phase's missing
    header, or a negative case whose headers are what is wrong and that lacks it."""
    if left_out(case) == name.lower():
        return True
    negative_headers = case.meta is not None and case.meta.is_negative_at(ParameterLocation.HEADER)
    present = any(key.lower() == name.lower() for key in (case.headers or {}))
    return negative_headers and not present


def set_header(case, name, value):
    if withheld(case, name):
        return
    case.headers = dict(case.headers or {})
    case.headers[name] = value


def bearer(case, token):
    set_header(case, "Authorization", f"Bearer {token}")


@schemathesis.hook
def before_call(context, case, kwargs):
    path, method = case.operation.path, case.operation.method.upper()
    params = case.path_parameters
    # Most cases name the live sale; every sixth of each operation keeps the generated one, so
    # each operation meets its unknown-sale refusal however the run's other choices fall.
    live_sale = nth_case(method, path) % 6 != 5
    if params is not None and "sale" in params and live_sale:
        params["sale"] = SALE
    # The gateway's join names its sale in the query.
    if isinstance(case.query, dict) and "sale" in case.query and live_sale:
        case.query["sale"] = SALE
    if path.endswith("/draw/proof") and isinstance(case.query, dict) and chance(0.5):
        case.query["ticket"] = int(ENV["FLOODGATE_FUZZ_TICKET"])

    if path.startswith("/admin/"):
        if chance(0.9):
            bearer(case, OPS_TOKEN)
    elif path == "/v1/sales/{sale}/reservations" and method == "POST":
        if chance(0.9):
            bearer(case, next_token())
        if isinstance(case.body, dict) and chance(0.4):
            case.body = {"pool": POOL, "seats": 1}
    elif path == "/v1/sales/{sale}/reservations" and method == "GET":
        if chance(0.85):
            set_header(case, "Floodgate-Identity", IDENTITY)
    elif path.startswith("/v1/sales/{sale}/reservations/{id}"):
        made = (fresh_reservation() if method == "POST" else some_reservation()) if chance(0.8) else None
        if made is not None:
            params["sale"] = SALE
            params["id"] = made[0]
            if chance(0.9):
                bearer(case, made[1])
    elif path == "/v1/sales/{sale}/place":
        if chance(0.85):
            set_header(case, "Floodgate-Resume", RESUME)
    elif path == "/data/sales/{file}":
        # The live sale's catalog, the list of sales, or the generated name (an unknown sale).
        if live_sale and params is not None:
            params["file"] = f"{SALE}.json" if chance(0.7) else "index.json"
    elif path == "/v1/payments/webhook":
        if chance(0.85) and not withheld(case, "Floodgate-Signature"):
            kwargs["auth"] = SignWebhook()


@schemathesis.hook
def after_call(context, case, response):
    # Only the operation's own method counts (the unsupported-method check sends others).
    if response.request.method.upper() != case.operation.method.upper():
        return
    LOG.write(
        json.dumps(
            {
                "method": case.operation.method.upper(),
                "path": case.operation.path,
                "status": response.status_code,
            }
        )
        + "\n"
    )
