//! The settings an operator changes live, as `HSET` commands on the sale's meta (and, for the
//! opening, each pool's config, which the pools' scripts read).

use redis::Cmd;

use crate::keys::{PoolKeys, SaleKeys};

/// Sets the sale's bot check and/or its proof of work's difficulty.
pub fn challenge(
    keys: &SaleKeys,
    challenge: Option<crate::settings::ChallengeRule>,
    difficulty: Option<u8>,
) -> Option<Cmd> {
    let mut fields: Vec<(&str, String)> = Vec::new();
    if let Some(challenge) = challenge {
        fields.push(("challenge", challenge.as_str().to_owned()));
    }
    if let Some(difficulty) = difficulty {
        fields.push(("pow_difficulty", difficulty.to_string()));
    }
    if fields.is_empty() {
        return None;
    }
    let mut cmd = redis::cmd("HSET");
    cmd.arg(keys.meta()).arg(fields);
    Some(cmd)
}

/// Sets the admission rate and/or the active cap.
pub fn rate_and_cap(keys: &SaleKeys, rate: Option<f64>, cap: Option<u32>) -> Option<Cmd> {
    let mut fields: Vec<(&str, String)> = Vec::new();
    if let Some(rate) = rate {
        fields.push(("rate", rate.to_string()));
    }
    if let Some(cap) = cap {
        fields.push(("active_cap", cap.to_string()));
    }
    if fields.is_empty() {
        return None;
    }
    let mut cmd = redis::cmd("HSET");
    cmd.arg(keys.meta()).arg(fields);
    Some(cmd)
}

/// Pauses or resumes admission.
pub fn paused(keys: &SaleKeys, paused: bool) -> Cmd {
    let mut cmd = redis::cmd("HSET");
    cmd.arg(keys.meta())
        .arg("paused")
        .arg(if paused { "1" } else { "0" });
    cmd
}

/// Moves the sale's opening.
pub fn sale_opens_at(keys: &SaleKeys, opens_at_ms: i64) -> Cmd {
    let mut cmd = redis::cmd("HSET");
    cmd.arg(keys.meta()).arg("opens_at_ms").arg(opens_at_ms);
    cmd
}

/// Moves a pool's armed opening (re-arming is refused from then on).
pub fn pool_opens_at(keys: &PoolKeys, opens_at_ms: i64) -> Cmd {
    let mut cmd = redis::cmd("HSET");
    cmd.arg(keys.config()).arg("opens_at_ms").arg(opens_at_ms);
    cmd
}

/// Marks the sale sold out: nothing available and no hold that could return.
pub fn sold_out(keys: &SaleKeys) -> Cmd {
    let mut cmd = redis::cmd("HSET");
    cmd.arg(keys.meta()).arg("sold_out").arg(1);
    cmd
}
