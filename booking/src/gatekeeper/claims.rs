//! What `claim_token.lua` (the sale-wide step of a reservation) answers, as a Rust type.

use floodgate_platform::script::{FromReply, FromStrings};
use floodgate_protocol::UnixMillis;

use super::ReserveError;

/// What `claim_token.lua` said.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    Claimed,
    Retry,
}

/// A claim, with the deadline of this attempt (Unix ms, Redis' clock).
#[derive(Debug, PartialEq, Eq)]
pub struct Claimed {
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
pub enum Released {
    /// Given back: the pass is not spent.
    Yes,
    /// Kept: only attempts stamped after the refused one may still take seats (they settle the
    /// claim with their own answer), or the claim is another key's.
    KeptForLater,
    /// Kept: an attempt stamped before the refused one may still take seats.
    KeptForEarlier,
}

/// `1`, `0` or `-1`.
impl FromReply for Released {
    fn from_reply(value: redis::Value) -> Result<Self, String> {
        match i64::from_reply(value)? {
            1 => Ok(Self::Yes),
            0 => Ok(Self::KeptForLater),
            -1 => Ok(Self::KeptForEarlier),
            other => Err(other.to_string()),
        }
    }
}

/// What `claim_token.lua` answered: a claim, or why the token cannot be claimed.
#[derive(Debug)]
pub enum Claiming {
    Claimed(Claimed),
    Refused(ReserveError),
}

/// `{"claimed" | "retry", deadline, buyer limit, stamp}`, or a refusal's word.
impl FromStrings for Claiming {
    fn from_strings(reply: &[String]) -> Option<Self> {
        let claim = match reply.first()?.as_str() {
            "claimed" => Claim::Claimed,
            "retry" => Claim::Retry,
            "spent" => return Some(Self::Refused(ReserveError::TokenSpent)),
            "mismatch" => return Some(Self::Refused(ReserveError::KeyReused)),
            "unknown_sale" => return Some(Self::Refused(ReserveError::UnknownSale)),
            "unknown_pool" => return Some(Self::Refused(ReserveError::UnknownPool)),
            "ended" => return Some(Self::Refused(ReserveError::SaleEnded)),
            _ => return None,
        };
        Some(Self::Claimed(Claimed {
            claim,
            deadline_ms: reply.get(1)?.parse().ok()?,
            // 0: the sale sets no limit.
            buyer_limit: Some(reply.get(2)?.parse::<u32>().ok()?).filter(|l| *l > 0),
            attempt: reply.get(3)?.parse().ok()?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::super::strings;
    use super::*;

    #[test]
    fn release_replies_parse() {
        let released = |n: i64| Released::from_reply(redis::Value::Int(n));
        assert_eq!(released(1).unwrap(), Released::Yes);
        assert_eq!(released(0).unwrap(), Released::KeptForLater);
        assert_eq!(released(-1).unwrap(), Released::KeptForEarlier);
        assert!(released(2).is_err());
    }

    fn claim(reply: &[&str]) -> Option<Result<Claimed, ReserveError>> {
        Claiming::from_strings(&strings(reply)).map(|claiming| match claiming {
            Claiming::Claimed(claimed) => Ok(claimed),
            Claiming::Refused(e) => Err(e),
        })
    }

    #[test]
    fn claim_replies_parse() {
        assert_eq!(
            claim(&["claimed", "123", "0", "120"]).unwrap().unwrap(),
            Claimed {
                claim: Claim::Claimed,
                deadline_ms: 123,
                buyer_limit: None,
                attempt: 120,
            }
        );
        assert_eq!(
            claim(&["retry", "9", "4", "7"])
                .unwrap()
                .unwrap()
                .buyer_limit,
            Some(4)
        );
        assert_eq!(
            claim(&["retry", "9", "0", "8"]).unwrap().unwrap().claim,
            Claim::Retry
        );
        assert!(matches!(
            claim(&["spent"]).unwrap(),
            Err(ReserveError::TokenSpent)
        ));
        assert!(matches!(
            claim(&["mismatch"]).unwrap(),
            Err(ReserveError::KeyReused)
        ));
        assert!(matches!(
            claim(&["unknown_sale"]).unwrap(),
            Err(ReserveError::UnknownSale)
        ));
        assert!(matches!(
            claim(&["unknown_pool"]).unwrap(),
            Err(ReserveError::UnknownPool)
        ));
        assert!(matches!(
            claim(&["ended"]).unwrap(),
            Err(ReserveError::SaleEnded)
        ));
        assert!(claim(&["?"]).is_none());
        for junk in [
            vec!["claimed"],
            vec!["retry", "9", "0"],
            vec!["claimed", "9", "0", "x"],
        ] {
            assert!(
                Claiming::from_strings(&strings(&junk)).is_none(),
                "{junk:?}"
            );
        }
    }
}
