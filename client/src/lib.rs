//! Floodgate's client, behaving as docs/protocol.md tells a client to: it joins the waiting
//! room, keeps its place across dropped connections and drains with the resume token and the
//! prescribed back-off, obeys the close codes, and talks to the booking API with the public
//! types (`floodgate_protocol::api`). The load generator's people and the tests are this
//! client; the browser page is its JavaScript twin.
//!
//! # Layout
//! - [`room`]: one connection to the waiting room ([`room::join`], [`room::Heard`]) and a whole
//!   wait in line across reconnections ([`room::wait_in_line`]).
//! - [`dial`]: reaching a gateway (the resume token in a header, never the URL), the upgrade.
//! - [`booking`]: reservations and payments ([`BookingClient`]).
//! - [`door`]: what a sale asks of a joining client (sign-in, the bot check) and the answers.
//! - [`backoff`]: how long to wait before reconnecting or retrying.
//! - [`close`]: the close codes as an enum ([`CloseCode`]), with what to do after each.
//! - [`claims`]: reading an admission token's claims (unverified: the booking API verifies).

pub mod backoff;
pub mod booking;
pub mod close;
pub mod dial;
pub mod door;
pub mod room;

pub use booking::{BookingClient, Failure};
pub use close::{CloseCode, Then};

use base64::Engine as _;
use floodgate_protocol::token::AdmissionClaims;

/// An admission token's claims, read without checking its signature (the booking API checks
/// it): what a client needs to know of its own admission (the seats it may take, when it ends).
pub fn claims(token: &str) -> Option<AdmissionClaims> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_claims_are_read_from_the_payload() {
        let claims_json =
            r#"{"sale":"s","ticket":7,"jti":"j","max_seats":2,"iat_ms":1,"exp_ms":9}"#;
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims_json);
        let claims = claims(&format!("h.{payload}.sig")).expect("readable");
        assert_eq!((claims.ticket, claims.max_seats, claims.exp_ms), (7, 2, 9));
        assert!(super::claims("not a token").is_none());
    }

    #[test]
    fn the_resume_token_never_goes_in_the_url() {
        let dial = room::Dial {
            gateway: "127.0.0.1:8080".parse().unwrap(),
            sale: "s1",
            resume: Some("r2.7..mac.s1"),
            from: None,
            headers: &[],
            challenge: None,
        };
        assert_eq!(dial.url(), "ws://127.0.0.1:8080/ws?sale=s1");
    }
}
