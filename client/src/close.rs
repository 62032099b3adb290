//! The close codes a gateway ends a session with (docs/asyncapi.yaml `x-close-codes`), as an
//! enum a client can match on, each with what the protocol tells a client to do next.

use floodgate_protocol::ws::close;

/// A WebSocket close code from a gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CloseCode {
    /// 1000: admitted; the token was delivered.
    Normal,
    /// 1001: the gateway went away for another reason.
    GoingAway,
    /// 1002: the client broke RFC 6455 itself (a client bug).
    ProtocolError,
    /// 1007: a text frame that was not UTF-8 (a client bug).
    InvalidData,
    /// 1008: more frames than a connection may send (a client bug).
    PolicyViolation,
    /// 1009: a frame over 1024 bytes (a client bug).
    MessageTooBig,
    /// 1011: an unexpected server error.
    InternalError,
    /// 1012: the gateway is draining; the close reason is the resume token.
    ServiceRestart,
    /// 4400: not JSON, binary, or an unknown type (a client bug).
    BadMessage,
    /// 4404: the sale is not armed.
    UnknownSale,
    /// 4408: nothing arrived from the client for the idle timeout.
    IdleTimeout,
    /// 4409: a newer session took this place back with its resume token; it goes on there.
    TakenOver,
    /// 4410: sold out, this ticket's admission expired unused, or (reason `place taken by its
    /// signed-in buyer`) a buyer signed in elsewhere made this buyerless place theirs.
    SaleOver,
    /// 4503: a dependency is down.
    Unavailable,
    /// A code the protocol does not name (a proxy's 1006, a newer gateway's).
    Other(u16),
}

/// What a client does after a close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// Book with the admission token it was given.
    Book,
    /// Reconnect with the resume token after the back-off.
    Reconnect,
    /// Reconnect with the resume token (the close reason) after a random 0 to 2 s.
    ReconnectSoon,
    /// Stop: this ticket is over (do not reconnect with it).
    Stop,
    /// The place goes on in another session: do not reconnect unless the person asks to have
    /// it here again (which closes the other one).
    Elsewhere,
    /// The client sent something wrong: fix the client (reconnecting repeats it).
    FixClient,
}

const NAMED: [(u16, CloseCode); 14] = [
    (close::NORMAL, CloseCode::Normal),
    (close::GOING_AWAY, CloseCode::GoingAway),
    (close::PROTOCOL_ERROR, CloseCode::ProtocolError),
    (close::INVALID_DATA, CloseCode::InvalidData),
    (close::POLICY_VIOLATION, CloseCode::PolicyViolation),
    (close::MESSAGE_TOO_BIG, CloseCode::MessageTooBig),
    (close::INTERNAL_ERROR, CloseCode::InternalError),
    (close::SERVICE_RESTART, CloseCode::ServiceRestart),
    (close::BAD_MESSAGE, CloseCode::BadMessage),
    (close::UNKNOWN_SALE, CloseCode::UnknownSale),
    (close::IDLE_TIMEOUT, CloseCode::IdleTimeout),
    (close::TAKEN_OVER, CloseCode::TakenOver),
    (close::SALE_OVER, CloseCode::SaleOver),
    (close::UNAVAILABLE, CloseCode::Unavailable),
];

impl CloseCode {
    pub fn from_u16(code: u16) -> Self {
        NAMED
            .iter()
            .find(|(c, _)| *c == code)
            .map_or(CloseCode::Other(code), |(_, named)| *named)
    }

    pub fn code(self) -> u16 {
        match self {
            CloseCode::Other(code) => code,
            named => NAMED
                .iter()
                .find(|(_, n)| *n == named)
                .map(|(c, _)| *c)
                .expect("every named code is in NAMED"),
        }
    }

    /// What docs/protocol.md 1.4 tells a client to do after this close.
    pub fn then(self) -> Then {
        match self {
            CloseCode::Normal => Then::Book,
            CloseCode::ServiceRestart => Then::ReconnectSoon,
            CloseCode::UnknownSale | CloseCode::SaleOver => Then::Stop,
            CloseCode::TakenOver => Then::Elsewhere,
            CloseCode::ProtocolError
            | CloseCode::InvalidData
            | CloseCode::PolicyViolation
            | CloseCode::MessageTooBig
            | CloseCode::BadMessage => Then::FixClient,
            CloseCode::GoingAway
            | CloseCode::InternalError
            | CloseCode::IdleTimeout
            | CloseCode::Unavailable
            | CloseCode::Other(_) => Then::Reconnect,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_code_goes_both_ways_and_an_unknown_one_is_other() {
        for (code, named) in NAMED {
            assert_eq!(CloseCode::from_u16(code), named);
            assert_eq!(named.code(), code);
            assert_ne!(named, CloseCode::Other(code));
        }
        assert_eq!(CloseCode::from_u16(1006), CloseCode::Other(1006));
        assert_eq!(CloseCode::Other(1006).code(), 1006);
    }

    #[test]
    fn each_close_says_what_to_do() {
        assert_eq!(CloseCode::from_u16(1000).then(), Then::Book);
        assert_eq!(CloseCode::from_u16(1012).then(), Then::ReconnectSoon);
        assert_eq!(CloseCode::from_u16(4410).then(), Then::Stop);
        assert_eq!(CloseCode::from_u16(4409).then(), Then::Elsewhere);
        assert_eq!(CloseCode::from_u16(4400).then(), Then::FixClient);
        assert_eq!(CloseCode::from_u16(1006).then(), Then::Reconnect);
    }
}
