//! Every error code a Floodgate endpoint answers with, declared once with the one HTTP status it
//! is answered with and what it means: services build their refusals from these
//! ([`super::Refusal`]), the OpenAPI documents' refusal lists and docs/protocol.md's table of
//! codes are made from them. A code, once published, is never renamed (clients branch on it).

/// One code: its name on the wire, its status, what it means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Code {
    pub name: &'static str,
    pub status: u16,
    pub meaning: &'static str,
}

/// Declares each code as a `&str` constant (what services and clients compare) and its entry
/// in [`ALL`].
macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $wire:literal, $status:literal, $meaning:literal;)+) => {
        $($(#[$doc])* pub const $name: &str = $wire;)+

        /// Every code, in the order of the table in docs/protocol.md.
        pub const ALL: &[Code] = &[$(Code { name: $name, status: $status, meaning: $meaning }),+];
    };
}

codes! {
    // Requests.
    BAD_BODY = "bad_body", 400, "the body is not what the endpoint takes";
    BAD_JSON = "bad_json", 400, "the body is not JSON";
    BAD_NONCE = "bad_nonce", 400, "the draw nonce is not 16 to 64 lowercase hex characters";
    BAD_PAGE = "bad_page", 400, "a page of the draw's record outside the record";
    /// A query parameter the endpoint does not take (docs/openapi/ lists each one's).
    UNKNOWN_PARAMETER = "unknown_parameter", 400, "a query parameter the endpoint does not take";
    BAD_TICKET = "bad_ticket", 400, "a ticket number that is not one";
    BODY_TOO_LARGE = "body_too_large", 413, "the body is larger than the endpoint takes";
    INVALID_AUTOPILOT = "invalid_autopilot", 422, "autopilot settings that cannot be used: a missing or out-of-range bound, a floor above its ceiling, a target or pace out of range, or settings sent to turn it off";
    INVALID_CAP = "invalid_cap", 422, "an active cap outside its bounds";
    INVALID_DIFFICULTY = "invalid_difficulty", 422, "a proof-of-work difficulty outside its bounds";
    INVALID_EVENT = "invalid_event", 422, "a webhook event the service cannot read";
    INVALID_POOL = "invalid_pool", 422, "`pool` is missing or not a string";
    INVALID_RATE = "invalid_rate", 422, "an admission rate outside its bounds";
    INVALID_REQUEST = "invalid_request", 422, "the body is not a JSON object, or has a field the endpoint does not take";
    INVALID_SEATS = "invalid_seats", 422, "`seats` is missing, zero, or more than the token allows";
    SALE_MISSING = "sale_missing", 400, "no `sale` query parameter";
    /// RFC 6455 4.1 and HTTP/1.1 (RFC 9112 3.2) require `Host`.
    HOST_MISSING = "host_missing", 400, "a WebSocket handshake without exactly one `Host` header";
    WEBSOCKET_REQUIRED = "websocket_required", 426, "not a WebSocket handshake the gateway can serve: a plain HTTP request, another WebSocket version, or subprotocols offered without `floodgate` (the message says which)";
    METHOD_NOT_ALLOWED = "method_not_allowed", 405, "the path does not take this method";
    NOT_FOUND = "not_found", 404, "no such path";
    IDEMPOTENCY_KEY_INVALID = "idempotency_key_invalid", 400, "the `Idempotency-Key` is not 1 to 128 visible ASCII characters";
    IDEMPOTENCY_KEY_MISSING = "idempotency_key_missing", 400, "no `Idempotency-Key` header";
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused", 422, "the `Idempotency-Key` came before with another body";
    // Credentials.
    TOKEN_MISSING = "token_missing", 401, "no admission token";
    TOKEN_MALFORMED = "token_malformed", 401, "the admission token is not one";
    TOKEN_INVALID = "token_invalid", 401, "the admission token's signature is wrong, or its key unknown";
    TOKEN_EXPIRED = "token_expired", 401, "the admission token has expired";
    TOKEN_WRONG_SALE = "token_wrong_sale", 403, "the admission token is for another sale";
    TOKEN_SPENT = "token_spent", 409, "the admission token made a reservation under another `Idempotency-Key`";
    RESUME_INVALID = "resume_invalid", 401, "the resume token is malformed, altered or forged";
    RESUME_OTHER_SALE = "resume_other_sale", 400, "the resume token is for another sale";
    RESUME_OTHER_BUYER = "resume_other_buyer", 403, "the resume token's place is another buyer's";
    RESUME_IN_URL = "resume_in_url", 400, "a resume token in the URL: it never travels there";
    RESUME_REQUIRED = "resume_required", 401, "no resume token where one is needed";
    DRAW_RATE_LIMITED = "draw_rate_limited", 429, "this address asks for the draw's record faster than allowed, or takes more than its tenth of the gateway's reads";
    DRAW_BUSY = "draw_busy", 503, "the gateway reads the draw's record as fast as it may";
    PLACE_RATE_LIMITED = "place_rate_limited", 429, "this address, or this place, is asked about faster than allowed";
    PLACE_BUSY = "place_busy", 503, "the gateway reads places' standing as fast as it may (counted in floodgate_requests_limited_total; `/place` then answers from memory, `unconfirmed`, and never sends it)";
    CHALLENGE_RATE_LIMITED = "challenge_rate_limited", 429, "this address asks for the puzzles of sales not open on the gateway faster than allowed";
    SALE_LOOKUP_RATE_LIMITED = "sale_lookup_rate_limited", 429, "this address asks about sales not open on the gateway (a made-up id, say) faster than allowed";
    BOOKING_RATE_LIMITED = "booking_rate_limited", 429, "this address makes booking requests faster than allowed";
    RESERVATION_RATE_LIMITED = "reservation_rate_limited", 429, "this pass tries reservations faster than allowed: retry with the same key after `Retry-After`";
    HOLDER_RATE_LIMITED = "holder_rate_limited", 429, "this reservation's holder reads it or starts paying, or this signed-in buyer lists their reservations, faster than allowed";
    WEBHOOK_RATE_LIMITED = "webhook_rate_limited", 429, "this address sends deliveries with bad signatures faster than allowed";
    OPS_TOKEN_MISSING = "ops_token_missing", 401, "no ops token";
    OPS_TOKEN_INVALID = "ops_token_invalid", 401, "the ops token is not one of the accepted ones";
    SIGNATURE_MISSING = "signature_missing", 400, "no webhook signature header";
    SIGNATURE_MALFORMED = "signature_malformed", 400, "the webhook signature header cannot be read";
    SIGNATURE_INVALID = "signature_invalid", 401, "the webhook signature does not match the body";
    TIMESTAMP_OUTSIDE_TOLERANCE = "timestamp_outside_tolerance", 400, "the webhook's signed time is too far from now";
    SECRET_MISSING = "secret_missing", 401, "no reservation secret";
    // Who is buying (the identity token from the operator's sign-in) and the bot check.
    IDENTITY_REQUIRED = "identity_required", 401, "the sale is for signed-in buyers and no identity token came";
    IDENTITY_MALFORMED = "identity_malformed", 401, "the identity token is not a JWT";
    IDENTITY_ALGORITHM = "identity_algorithm", 401, "the identity token's algorithm is not accepted";
    IDENTITY_UNKNOWN_KEY = "identity_unknown_key", 401, "the identity token's key is not the issuer's";
    IDENTITY_INVALID = "identity_invalid", 401, "the identity token's signature is wrong";
    IDENTITY_EXPIRED = "identity_expired", 401, "the identity token has expired";
    IDENTITY_NOT_YET_VALID = "identity_not_yet_valid", 401, "the identity token is not valid yet";
    IDENTITY_WRONG_ISSUER = "identity_wrong_issuer", 401, "the identity token is from another issuer";
    IDENTITY_WRONG_AUDIENCE = "identity_wrong_audience", 401, "the identity token is for another audience";
    IDENTITY_NO_SUBJECT = "identity_no_subject", 401, "the identity token names no subject";
    IDENTITY_UNAVAILABLE = "identity_unavailable", 503, "the issuer's keys cannot be fetched";
    /// docs/runbook.md, "Origins": `FLOODGATE_ALLOWED_ORIGINS`.
    ORIGIN_FORBIDDEN = "origin_forbidden", 403, "a browser page of another site: its `Origin` is not one allowed to use this service";
    BUYER_MISMATCH = "buyer_mismatch", 403, "the admission token names another buyer than the identity";
    BUYER_LIMIT = "buyer_limit", 409, "the buyer's seats would pass the sale's limit";
    CHALLENGE_REQUIRED = "challenge_required", 403, "the sale's bot check was not answered";
    CHALLENGE_FAILED = "challenge_failed", 403, "the bot check's answer is wrong";
    CHALLENGE_EXPIRED = "challenge_expired", 403, "the bot check's puzzle is too old, or easier than the sale now asks";
    CHALLENGE_REUSED = "challenge_reused", 403, "this answer to the bot check was used already";
    CHALLENGE_UNAVAILABLE = "challenge_unavailable", 503, "the bot check cannot be made now";
    // What the request named.
    UNKNOWN_SALE = "unknown_sale", 404, "no such sale is armed, or its id is not an id";
    UNKNOWN_POOL = "unknown_pool", 404, "no such pool in the sale";
    UNKNOWN_RESERVATION = "unknown_reservation", 404, "no such reservation, or the secret does not match it";
    UNKNOWN_TICKET = "unknown_ticket", 404, "the sale never issued this ticket";
    TICKET_EXPIRED = "ticket_expired", 410, "the ticket's holder was gone longer than the grace";
    NOT_IN_PREQUEUE = "not_in_prequeue", 404, "the ticket was taken after the opening: it has no draw nonce";
    SOLD_OUT = "sold_out", 409, "fewer seats left than asked";
    /// The sale was ended by its operator (`floodgate-booking sale end`): nothing more is sold.
    SALE_ENDED = "sale_ended", 409, "the sale has ended";
    NOT_PAYABLE = "not_payable", 409, "the reservation is not held (paid, expired, released)";
    RESERVATION_ENDED = "reservation_ended", 409, "the hold ended before it could be confirmed";
    RESERVATION_LATE = "reservation_late", 503, "the attempt reached the pool after its deadline: retry with the same key";
    /// Refused, but another attempt with the same key may still take seats: retry with it.
    RESERVATION_UNSETTLED = "reservation_unsettled", 503, "another attempt of the key may still take seats: retry with it";
    // Limits and dependencies.
    GATEWAY_DRAINING = "gateway_draining", 503, "the gateway is stopping and takes no one new";
    GATEWAY_FULL = "gateway_full", 503, "the gateway holds as many sessions as it may";
    RESUME_BUSY = "resume_busy", 503, "the gateway takes places back (a script in the sale's slot each) as fast as it may; retry after the delay, or another gateway";
    JOIN_RATE_LIMITED = "join_rate_limited", 429, "this address, or this person, joins faster than allowed";
    TOO_MANY_CONNECTIONS = "too_many_connections", 429, "this address holds the most anonymous sessions allowed";
    REDIS_UNAVAILABLE = "redis_unavailable", 503, "Redis is unreachable: nothing was decided";
    BROKER_UNAVAILABLE = "broker_unavailable", 503, "the broker is down: nothing was kept";
    /// A reservation's writes were not on a Redis replica in time (docs/runbook.md).
    REPLICA_UNAVAILABLE = "replica_unavailable", 503, "the writes were not on a Redis replica in time: retry with the same key";
    CATALOG_UNAVAILABLE = "catalog_unavailable", 503, "PostgreSQL is unreachable";
    BOOKING_UNAVAILABLE = "booking_unavailable", 503, "the booking service does not answer the gateway";
    POOL_UNAVAILABLE = "pool_unavailable", 503, "the pool's Redis state is missing or lost writes: refused until rebuilt";
    SALE_UNAVAILABLE = "sale_unavailable", 503, "the catalog has the sale but Redis lost it: refused until re-armed";
    DRAW_UNAVAILABLE = "draw_unavailable", 503, "the draw's record cannot be read now";
    PAYMENT_PROVIDER_UNAVAILABLE = "payment_provider_unavailable", 503, "the payment provider does not answer";
    INTERNAL = "internal", 500, "an unexpected error (logged; nothing about it is sent)";
}

/// Every refusal of a buyer's identity token (the check is the same wherever one is taken).
pub const IDENTITY: &[&str] = &[
    IDENTITY_REQUIRED,
    IDENTITY_MALFORMED,
    IDENTITY_ALGORITHM,
    IDENTITY_UNKNOWN_KEY,
    IDENTITY_INVALID,
    IDENTITY_EXPIRED,
    IDENTITY_NOT_YET_VALID,
    IDENTITY_WRONG_ISSUER,
    IDENTITY_WRONG_AUDIENCE,
    IDENTITY_NO_SUBJECT,
    IDENTITY_UNAVAILABLE,
];

/// The status `code` is answered with (500 for a code that is not one of [`ALL`]: a bug).
pub fn status_of(code: &str) -> u16 {
    ALL.iter()
        .find(|c| c.name == code)
        .map_or(500, |c| c.status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_snake_case_unique_and_a_refusal_status() {
        let mut names: Vec<&str> = ALL.iter().map(|c| c.name).collect();
        for code in ALL {
            assert!(
                code.name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{code:?}"
            );
            assert!((400..600).contains(&code.status), "{code:?}");
            assert!(!code.meaning.is_empty(), "{code:?}");
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len(), "a code is declared twice");
        assert_eq!(status_of(SOLD_OUT), 409);
        assert_eq!(status_of("no_such_code"), 500);
    }
}
