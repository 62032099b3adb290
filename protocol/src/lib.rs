//! Floodgate's wire: every type that crosses a process boundary between a client and the
//! services, or between the services through Kafka, and the checks a client can make itself.
//!
//! This crate has no runtime: no async executor, no Redis, Kafka, PostgreSQL or HTTP server.
//! It is what `floodgate-client` builds on, so an outside client links nothing it does not use;
//! the services share their runtime through `floodgate-platform`, which builds on this crate.
//!
//! # Layout
//! - [`api`]: the public HTTP bodies (reservations, payments, the room's figures and draw), the
//!   JSON error body of every endpoint and every error code.
//! - [`challenge`]: the bot check at the door (the verifier interface, the built-in proof of work).
//! - [`events`]: the versioned event envelope written to Kafka and its payloads.
//! - [`freshness`]: how stale a waiting client's shown position may be, and how often it hears.
//! - [`identity`]: where a client carries its identity token, the buyer id, why a token is refused.
//! - [`ids`]: validation of sale and pool identifiers (they end up inside Redis keys and URLs).
//! - [`lottery`]: the verifiable pre-queue draw (keyed Feistel permutation, commitment).
//! - [`payments`]: the payment provider's API as Floodgate speaks it, and its signed webhooks.
//! - [`reservation`]: a reservation's state in the Redis, API and PostgreSQL vocabularies.
//! - [`resume`]: resume tokens, a client's claim to its ticket across reconnects.
//! - [`settings`]: the bounds of a sale's live settings, checked at every entry point.
//! - [`token`]: admission token claims, Ed25519 signing with a key id, verification.
//! - [`ws`]: WebSocket messages in both directions and the close codes.
//!
//! Changing anything here is a protocol change: bump the relevant version
//! ([`events::SCHEMA_VERSION`], [`ws::PROTOCOL_VERSION`]) and keep readers tolerant of the old one.

pub mod api;
pub mod challenge;
pub mod events;
pub mod freshness;
pub mod identity;
pub mod ids;
pub mod lottery;
pub mod payments;
pub mod reservation;
pub mod resume;
pub mod settings;
pub mod token;
pub mod ws;

use subtle::ConstantTimeEq;

/// Milliseconds since the Unix epoch, the one time unit used on every wire and in Redis.
pub type UnixMillis = i64;

/// Current wall-clock time in Unix milliseconds.
pub fn now_millis() -> UnixMillis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Whether a presented secret (a MAC, a reservation secret, a shared key) equals the expected
/// one, in time that does not depend on where they differ: a comparison that stops at the first
/// different byte tells a stranger, by its timing, how much of a guess was right.
pub fn same_secret(presented: &[u8], expected: &[u8]) -> bool {
    presented.ct_eq(expected).into()
}

/// What separates a credential the services issued from the edge's seal on it
/// (`<credential>~<seal>`, made by `floodgate_platform::clients::seal`).
pub const SEAL_SEPARATOR: char = '~';
/// A seal's length: 16 bytes of MD5 in unpadded base64url.
pub const SEAL_LEN: usize = 22;

/// The credential in what a client presented (a pass, a resume token, a reservation's secret),
/// without the edge's seal, whether the seal is right or not: it is the edge's filter, never a
/// proof, and every check here is of the credential itself. A `~` followed by anything but a
/// whole seal is left as it is.
pub fn unsealed(presented: &str) -> &str {
    match presented.rsplit_once(SEAL_SEPARATOR) {
        Some((credential, seal))
            if seal.len() == SEAL_LEN
                && seal
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
        {
            credential
        }
        _ => presented,
    }
}

#[cfg(test)]
mod tests {
    use super::same_secret;

    #[test]
    fn secrets_compare_equal_only_when_every_byte_and_the_length_match() {
        assert!(same_secret(b"secret", b"secret"));
        assert!(!same_secret(b"secret", b"secreT"));
        assert!(!same_secret(b"secret", b"secret2"));
        assert!(!same_secret(b"", b"secret"));
    }
}
