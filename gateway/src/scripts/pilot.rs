//! The admission autopilot's Redis side (`lua/autopilot.lua`): what the sale's leader reads
//! (every service's health summary) and the one fenced, conditional write of its step.

use floodgate_platform::autopilot::{Health, Step as Kept};
use floodgate_platform::keys::SaleKeys;
use floodgate_platform::runtime::RedisConn;
use floodgate_platform::script::{FromReply, LuaScript as _};
use floodgate_platform::state;
use redis::RedisResult;

/// What `autopilot.lua` did with a step.
#[derive(Debug, PartialEq, Eq)]
pub enum Piloted {
    /// The rate (if it changed), the step and any audit entry are written.
    Applied,
    /// The settings are no longer those the step was made with (an operator turned the
    /// autopilot off, set a rate by hand, or changed its settings): nothing changed.
    Superseded,
    /// The caller's fencing token is not the lease's: nothing changed.
    NotLeader,
}

floodgate_platform::lua_script! {
    /// `lua/autopilot.lua`: the autopilot's step, fenced and conditional on its settings.
    pub(super) struct Pilot<'a> {
        file: "autopilot.lua",
        helpers: None,
        reply: Piloted,
        keys {
            meta: "sale meta hash",
            leader: "leader key",
            step: "the autopilot's last step",
            audit: "the autopilot's audit stream",
        }
        args {
            fence: &'a str = "the caller's fencing token",
            settings: &'a str = "the autopilot settings the step was made with",
            from: String = "the admission rate the step started from",
            rate: String = "the new admission rate",
            step_json: &'a str = "the step (JSON)",
            keep_ms: u64 = "how long the step is kept (ms)",
            audit_entry: &'a str = "the audit entry (JSON; '' when the change is not notable)",
        }
    }
}

/// One step to write: the settings and the rate it started from (its conditions), the new rate
/// (`None` to leave it), the step's JSON, how long it is kept, and the audit entry's JSON if the
/// change is notable.
pub struct Step<'a> {
    pub settings: &'a str,
    pub from: f64,
    pub rate: Option<f64>,
    pub json: &'a str,
    pub keep_ms: u64,
    pub audit: Option<&'a str>,
}

/// Writes the leader's step with fencing token `fence` (`lua/autopilot.lua`).
pub async fn apply(
    conn: &mut RedisConn,
    keys: &SaleKeys,
    fence: &str,
    step: Step<'_>,
) -> RedisResult<Piloted> {
    Ok(Pilot {
        meta: keys.meta(),
        leader: keys.leader(),
        step: keys.autopilot(),
        audit: keys.autopilot_audit(),
        fence,
        settings: step.settings,
        from: step.from.to_string(),
        rate: step.rate.map(|r| r.to_string()).unwrap_or_default(),
        step_json: step.json,
        keep_ms: step.keep_ms,
        audit_entry: step.audit.unwrap_or_default(),
    }
    .run(conn)
    .await?)
}

/// The last step kept for the sale (`None`: none in the last 30 s, or one that does not read).
pub async fn last_step(conn: &mut RedisConn, keys: &SaleKeys) -> RedisResult<Option<Kept>> {
    let json: Option<String> = redis::cmd("GET")
        .arg(keys.autopilot())
        .query_async(conn)
        .await?;
    Ok(json.and_then(|j| serde_json::from_str(&j).ok()))
}

/// Every service's health summary for the sale (the instance that wrote each is not needed).
pub async fn health(conn: &mut RedisConn, keys: &SaleKeys) -> RedisResult<Vec<Health>> {
    Ok(state::health::read(conn, keys)
        .await?
        .into_iter()
        .map(|(_, health)| health)
        .collect())
}

impl FromReply for Piloted {
    fn from_reply(value: redis::Value) -> Result<Self, String> {
        match i64::from_reply(value)? {
            1 => Ok(Self::Applied),
            0 => Ok(Self::Superseded),
            -1 => Ok(Self::NotLeader),
            n => Err(n.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reply_has_its_meaning_and_anything_else_is_an_error() {
        let read = |n: i64| Piloted::from_reply(redis::Value::Int(n));
        assert_eq!(read(1), Ok(Piloted::Applied));
        assert_eq!(read(0), Ok(Piloted::Superseded));
        assert_eq!(read(-1), Ok(Piloted::NotLeader));
        assert!(read(2).is_err());
    }
}
