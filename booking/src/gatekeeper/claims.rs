//! What `claim_token.lua` (the sale-wide step of a reservation) answers, as a Rust type.

use floodgate_protocol::UnixMillis;

use super::ReserveError;

/// What `claim_token.lua` said.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Claim {
    Claimed,
    Retry,
}

/// A claim, with the deadline of this attempt (Unix ms, Redis' clock).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Claimed {
    pub(super) claim: Claim,
    pub(super) deadline_ms: UnixMillis,
    /// The attempt's stamp: it names the attempt, and orders it after every earlier attempt of
    /// its key (`claim_token.lua`).
    pub(super) attempt: i64,
    /// The sale's per-buyer seat limit, if it sets one.
    pub(super) buyer_limit: Option<u32>,
}

/// What `release_claim.lua` did with a refused attempt's claim.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Released {
    /// Given back: the pass is not spent.
    Yes,
    /// Kept: only attempts stamped after the refused one may still take seats (they settle the
    /// claim with their own answer), or the claim is another key's.
    KeptForLater,
    /// Kept: an attempt stamped before the refused one may still take seats.
    KeptForEarlier,
}

impl Released {
    pub(super) fn parse(reply: i64) -> redis::RedisResult<Self> {
        match reply {
            1 => Ok(Self::Yes),
            0 => Ok(Self::KeptForLater),
            -1 => Ok(Self::KeptForEarlier),
            other => Err(redis::RedisError::from((
                redis::ErrorKind::TypeError,
                "unexpected release_claim reply",
                other.to_string(),
            ))),
        }
    }
}

impl Claim {
    pub(super) fn parse(reply: &[String]) -> Result<Claimed, ReserveError> {
        let claim = match reply.first().map(String::as_str) {
            Some("claimed") => Claim::Claimed,
            Some("retry") => Claim::Retry,
            Some("spent") => return Err(ReserveError::TokenSpent),
            Some("mismatch") => return Err(ReserveError::KeyReused),
            Some("unknown_sale") => return Err(ReserveError::UnknownSale),
            Some("unknown_pool") => return Err(ReserveError::UnknownPool),
            Some("ended") => return Err(ReserveError::SaleEnded),
            _ => return Err(ReserveError::Protocol(format!("claim_token: {reply:?}"))),
        };
        let deadline_ms = reply
            .get(1)
            .and_then(|d| d.parse().ok())
            .ok_or_else(|| ReserveError::Protocol(format!("claim_token: {reply:?}")))?;
        let buyer_limit = reply
            .get(2)
            .and_then(|l| l.parse::<u32>().ok())
            .filter(|l| *l > 0);
        let attempt = reply
            .get(3)
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| ReserveError::Protocol(format!("claim_token: {reply:?}")))?;
        Ok(Claimed {
            claim,
            deadline_ms,
            buyer_limit,
            attempt,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::strings;
    use super::*;

    #[test]
    fn release_replies_parse() {
        assert_eq!(Released::parse(1).unwrap(), Released::Yes);
        assert_eq!(Released::parse(0).unwrap(), Released::KeptForLater);
        assert_eq!(Released::parse(-1).unwrap(), Released::KeptForEarlier);
        assert!(Released::parse(2).is_err());
    }

    #[test]
    fn claim_replies_parse() {
        assert_eq!(
            Claim::parse(&strings(&["claimed", "123", "0", "120"])).unwrap(),
            Claimed {
                claim: Claim::Claimed,
                deadline_ms: 123,
                buyer_limit: None,
                attempt: 120,
            }
        );
        assert_eq!(
            Claim::parse(&strings(&["retry", "9", "4", "7"]))
                .unwrap()
                .buyer_limit,
            Some(4)
        );
        assert_eq!(
            Claim::parse(&strings(&["retry", "9", "0", "8"]))
                .unwrap()
                .claim,
            Claim::Retry
        );
        assert!(matches!(
            Claim::parse(&strings(&["spent"])),
            Err(ReserveError::TokenSpent)
        ));
        assert!(matches!(
            Claim::parse(&strings(&["mismatch"])),
            Err(ReserveError::KeyReused)
        ));
        assert!(matches!(
            Claim::parse(&strings(&["unknown_sale"])),
            Err(ReserveError::UnknownSale)
        ));
        assert!(matches!(
            Claim::parse(&strings(&["unknown_pool"])),
            Err(ReserveError::UnknownPool)
        ));
        assert!(matches!(
            Claim::parse(&strings(&["ended"])),
            Err(ReserveError::SaleEnded)
        ));
        assert!(matches!(
            Claim::parse(&strings(&["?"])),
            Err(ReserveError::Protocol(_))
        ));
        for junk in [
            vec!["claimed"],
            vec!["retry", "9", "0"],
            vec!["claimed", "9", "0", "x"],
        ] {
            assert!(
                matches!(
                    Claim::parse(&strings(&junk)),
                    Err(ReserveError::Protocol(_))
                ),
                "{junk:?}"
            );
        }
    }
}
