//! The settings an operator changes live, as `HSET` commands on the sale's meta (and, for the
//! opening, each pool's config, which the pools' scripts read).

use redis::Cmd;

use crate::keys::{PoolKeys, SaleKeys};

/// Sets the sale's bot check and/or its proof of work's difficulty.
pub fn challenge(
    keys: &SaleKeys,
    challenge: Option<floodgate_protocol::settings::ChallengeRule>,
    difficulty: Option<u8>,
) -> Option<Cmd> {
    set_meta(
        keys,
        [
            ("challenge", challenge.map(|c| c.as_str().to_owned())),
            ("pow_difficulty", difficulty.map(|d| d.to_string())),
        ],
    )
}

/// Sets the admission rate and/or the active cap, and with them (in the same `HSET`, so no
/// autopilot step can come between) the autopilot's settings when it is turned on.
pub fn rate_and_cap(
    keys: &SaleKeys,
    rate: Option<f64>,
    cap: Option<u32>,
    autopilot: Option<&crate::autopilot::Settings>,
) -> Option<Cmd> {
    set_meta(
        keys,
        [
            ("rate", rate.map(|r| r.to_string())),
            ("active_cap", cap.map(|c| c.to_string())),
            (
                "autopilot",
                autopilot.map(|s| serde_json::to_string(s).expect("settings serialise")),
            ),
        ],
    )
}

/// Turns the sale's admission autopilot off. Turning it off first, then setting a rate by hand,
/// is how an operator overrides it: from the moment the field is gone, the leader's step
/// (`lua/autopilot.lua`) writes nothing (and it writes nothing either once the rate is not the
/// one it started from).
pub fn autopilot_off(keys: &SaleKeys) -> Cmd {
    let mut cmd = redis::cmd("HDEL");
    cmd.arg(keys.meta()).arg("autopilot");
    cmd
}

/// One `HSET` of the sale's meta for the fields given a value, or `None` if none is.
fn set_meta<const N: usize>(keys: &SaleKeys, fields: [(&str, Option<String>); N]) -> Option<Cmd> {
    let fields: Vec<(&str, String)> = fields
        .into_iter()
        .filter_map(|(name, value)| value.map(|v| (name, v)))
        .collect();
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

/// Marks the sale over (`floodgate-booking sale end`): a token's first claim is refused from now
/// on (claim_token.lua), and the waiting room tells everyone still in line it is sold out. The
/// first end's time is kept.
pub fn sale_ended(keys: &SaleKeys, at_ms: i64) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.hset_nx(keys.meta(), "ended_at_ms", at_ms)
        .ignore()
        .hset(keys.meta(), "sold_out", 1)
        .ignore();
    pipe
}
