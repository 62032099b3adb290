//! The bounds of a sale's live settings, checked at every entry point (the sale file, the
//! catalog, arming, the ops API) and relied on by the admission controller, which reads them
//! from Redis every tick.
//!
//! Each bound says where it comes from: a value outside it is not a preference, it is a value the
//! system cannot honour (a rate the controller cannot pace by, a claim that would expire before
//! its token).

use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Admissions per second a sale may be set to. Below one admission in about 17 minutes the
/// rate is a pause (use pause, which says so); the governor's period for a rate under about
/// 5e-20 does not even fit a `Duration`. A million a second is beyond any booking backend.
pub const ADMISSION_RATE: RangeInclusive<f64> = 0.001..=1_000_000.0;

/// Seconds an admission token lives: at most an hour, because every live token counts as an
/// active admitted user under the cap and its claim must be kept for as long as it can be
/// presented. (A real sale gives people a minute or two to pick a class; rehearsals go lower.)
pub const TOKEN_TTL_SECS: RangeInclusive<u32> = 1..=3_600;

/// How far a token's expiry may be from the booking service's clock and still be accepted (the
/// claim of a token lives this much past the token's own expiry).
pub const CLOCK_SKEW_MS: i64 = 5 * 60 * 1000;

/// Proof-of-work difficulties (leading zero bits) a sale may ask for. 0 would be no check; past
/// 32, a phone would need minutes. Each bit doubles the expected work: 16 is about 65,000
/// hashes (a tenth of a second in a browser), 22 about four million (several seconds).
pub const POW_DIFFICULTY: RangeInclusive<u8> = 1..=32;
/// The difficulty a sale gets unless its file says otherwise.
pub const DEFAULT_POW_DIFFICULTY: u8 = 16;

/// Most admitted users with an unspent token or a live hold at once, per sale.
pub const ACTIVE_CAP: RangeInclusive<u64> = 1..=10_000_000;

/// Most seats one buyer may hold or have bought in one sale, when the sale sets a limit.
pub const SEATS_PER_BUYER: RangeInclusive<u32> = 1..=1_000;

/// Seconds a sale may keep a departed client's place (its grace) when it sets its own: at least
/// a few reconnect attempts' back-off, at most an hour (a mobile app suspended in the
/// background, whose place counts as live in everyone's position meanwhile).
pub const GRACE_SECS: RangeInclusive<u32> = 5..=3_600;

/// Who may come into a sale's waiting room, and what they must show: set per sale in its file,
/// armed into the sale's meta, read by every gateway each tick (the challenge can be changed live
/// through the ops API, during an attack).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Door {
    /// Whether a join must present a buyer's identity token.
    pub identity: IdentityRule,
    /// The bot check a join must pass.
    pub challenge: ChallengeRule,
    /// Leading zero bits of the proof of work, when the challenge is `pow`.
    pub pow_difficulty: u8,
    /// Most seats one buyer may hold or have bought in the sale (`None`: no limit beyond one
    /// reservation per place in line).
    pub max_seats_per_buyer: Option<u32>,
    /// How long a departed client keeps its place, in seconds (`None`: the gateways'
    /// `FLOODGATE_GRACE_MS`). A sale whose buyers wait on phones sets it longer.
    #[serde(default)]
    pub grace_secs: Option<u32>,
}

impl Door {
    /// The grace of this sale's departed clients: its own, else the gateway's `default`.
    pub fn grace(&self, default: std::time::Duration) -> std::time::Duration {
        self.grace_secs
            .map_or(default, |s| std::time::Duration::from_secs(u64::from(s)))
    }
}

impl Default for Door {
    fn default() -> Self {
        Self {
            identity: IdentityRule::Optional,
            challenge: ChallengeRule::None,
            pow_difficulty: DEFAULT_POW_DIFFICULTY,
            max_seats_per_buyer: None,
            grace_secs: None,
        }
    }
}

/// Whether a sale requires a signed-in buyer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum IdentityRule {
    /// Anyone may join; a join that presents an identity is a buyer (one place per buyer).
    #[default]
    Optional,
    /// Only a signed-in buyer may join.
    Required,
}

/// The bot check a sale asks for at the door.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChallengeRule {
    #[default]
    None,
    /// The built-in proof of work (`challenge::ProofOfWork`).
    Pow,
}

impl IdentityRule {
    pub fn as_str(self) -> &'static str {
        match self {
            IdentityRule::Optional => "optional",
            IdentityRule::Required => "required",
        }
    }

    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "optional" => Ok(IdentityRule::Optional),
            "required" => Ok(IdentityRule::Required),
            other => Err(format!("identity is optional or required, not {other:?}")),
        }
    }
}

impl ChallengeRule {
    pub fn as_str(self) -> &'static str {
        match self {
            ChallengeRule::None => "none",
            ChallengeRule::Pow => "pow",
        }
    }

    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(ChallengeRule::None),
            "pow" => Ok(ChallengeRule::Pow),
            other => Err(format!("challenge is none or pow, not {other:?}")),
        }
    }
}

/// Whether `seats` is a usable per-buyer limit.
pub fn check_seats_per_buyer(seats: i64) -> Result<u32, String> {
    u32::try_from(seats)
        .ok()
        .filter(|s| SEATS_PER_BUYER.contains(s))
        .ok_or_else(|| {
            format!(
                "max_seats_per_buyer must be a whole number from {} to {}",
                SEATS_PER_BUYER.start(),
                SEATS_PER_BUYER.end()
            )
        })
}

/// Whether `secs` is a grace a sale may set.
pub fn check_grace_secs(secs: i64) -> Result<u32, String> {
    u32::try_from(secs)
        .ok()
        .filter(|s| GRACE_SECS.contains(s))
        .ok_or_else(|| {
            format!(
                "grace_secs must be a whole number of seconds from {} to {}",
                GRACE_SECS.start(),
                GRACE_SECS.end()
            )
        })
}

/// Whether `rate` is an admission rate the controller can pace by.
pub fn check_admission_rate(rate: f64) -> Result<f64, String> {
    if rate.is_finite() && ADMISSION_RATE.contains(&rate) {
        Ok(rate)
    } else {
        Err(format!(
            "admission_rate must be a number of admissions per second from {} to {} (pause the \
             sale to stop admission)",
            ADMISSION_RATE.start(),
            ADMISSION_RATE.end()
        ))
    }
}

/// Whether `secs` is a token lifetime the claim record can cover.
pub fn check_token_ttl_secs(secs: u32) -> Result<u32, String> {
    if TOKEN_TTL_SECS.contains(&secs) {
        Ok(secs)
    } else {
        Err(format!(
            "token_ttl_secs must be from {} to {} seconds",
            TOKEN_TTL_SECS.start(),
            TOKEN_TTL_SECS.end()
        ))
    }
}

/// Whether `secs` is how long a pass may count against the stock, for passes of `token_ttl_secs`:
/// at least a second, and no longer than the pass lives.
pub fn check_stock_hold_secs(secs: u32, token_ttl_secs: u32) -> Result<u32, String> {
    if (1..=token_ttl_secs).contains(&secs) {
        Ok(secs)
    } else {
        Err(format!(
            "stock_hold_secs must be from 1 to the pass's life (token_ttl_secs, {token_ttl_secs})"
        ))
    }
}

/// Whether `cap` is a usable cap on active admitted users.
pub fn check_active_cap(cap: u64) -> Result<u64, String> {
    if ACTIVE_CAP.contains(&cap) {
        Ok(cap)
    } else {
        Err(format!(
            "active_cap must be a whole number from {} to {}",
            ACTIVE_CAP.start(),
            ACTIVE_CAP.end()
        ))
    }
}

/// The rate the controller paces by when Redis holds `stored`: the stored value within
/// [`ADMISSION_RATE`], or `None` (admit nobody) for something that is not a positive number.
/// A value written by hand or by an older release never stops the controller.
pub fn pacing_rate(stored: f64) -> Option<f64> {
    if stored.is_nan() || stored <= 0.0 {
        return None;
    }
    Some(stored.clamp(*ADMISSION_RATE.start(), *ADMISSION_RATE.end()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_outside_the_range_are_refused_and_never_paced_by() {
        assert!(check_admission_rate(1e-20).is_err());
        assert!(check_admission_rate(f64::NAN).is_err());
        assert!(check_admission_rate(f64::INFINITY).is_err());
        assert!(check_admission_rate(0.0).is_err());
        assert!(check_admission_rate(2e6).is_err());
        assert_eq!(check_admission_rate(0.001), Ok(0.001));
        assert_eq!(pacing_rate(1e-20), Some(0.001));
        assert_eq!(pacing_rate(f64::INFINITY), Some(1_000_000.0));
        assert_eq!(pacing_rate(-1.0), None);
        assert_eq!(pacing_rate(f64::NAN), None);
        assert_eq!(pacing_rate(5.0), Some(5.0));
    }

    #[test]
    fn token_lifetimes_and_caps_have_bounds() {
        assert!(check_token_ttl_secs(0).is_err());
        assert!(check_token_ttl_secs(86_400).is_err());
        assert_eq!(check_token_ttl_secs(120), Ok(120));
        assert!(check_active_cap(0).is_err());
        assert_eq!(check_active_cap(500), Ok(500));
    }
}
