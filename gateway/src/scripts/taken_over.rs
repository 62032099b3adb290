//! One live session per place across the fleet. When a place is taken back with its resume
//! token (`lua/resume.lua`), the session it was taken from is closed (4409), on whichever
//! gateway holds it: the resuming gateway adds that session's id to its gateway's list
//! (`gw:<id>:taken`, in the sale's slot), and every gateway takes its own list in its tick's
//! read ([`super::room::read_tick`]) and tells those sessions. Before, a place's sockets
//! multiplied: a tab left open, a half-open socket after a lost network, or a stranger holding
//! one place's sessions on every gateway of the fleet, each kept until it idled out.
//!
//! A ticket's first session is not recorded as its holder (only a resume records one: a
//! record per join would cost the sale's slot a hash entry for each of millions of people), so
//! a place has at most its first session and its newest. A list holds the newest [`KEPT`]
//! entries and goes [`KEEP`] after its last: a gateway gone for good leaves nothing behind. A
//! push that fails leaves the older session to idle out, as before: the place is already the
//! new session's.

use std::time::Duration;

use super::SaleScope;

/// Entries a gateway takes from its list in one tick: 10,000 a second at the default tick.
pub const PER_TICK: usize = 1_000;
/// The newest entries a list keeps.
const KEPT: isize = 10_000;
/// How long a list outlives its last entry.
const KEEP: Duration = Duration::from_secs(60);

/// Tells the gateway of session `previous` (`<gateway>/<n>`, as resume.lua answered it) to
/// close it.
pub async fn tell(scope: &SaleScope, previous: &str) {
    let Some((gateway, _)) = previous.rsplit_once('/') else {
        return;
    };
    let key = scope.keys.gateway_taken_over(gateway);
    let pushed: redis::RedisResult<()> = redis::pipe()
        .rpush(&key, previous)
        .ignore()
        .ltrim(&key, -KEPT, -1)
        .ignore()
        .pexpire(&key, KEEP.as_millis() as i64)
        .ignore()
        .query_async(&mut scope.redis.clone())
        .await;
    if let Err(e) = pushed {
        tracing::warn!(error = %e, previous, "the session a place was taken from could not be told");
    }
}

/// The numbers of gateway `instance`'s sessions among `taken` (session ids read from its list).
pub fn numbers_of(instance: &str, taken: &[String]) -> Vec<u64> {
    taken
        .iter()
        .filter_map(|id| {
            let (gateway, number) = id.rsplit_once('/')?;
            (gateway == instance).then(|| number.parse().ok())?
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_gateways_well_formed_sessions_are_taken() {
        let taken = [
            "gw-a/7",
            "gw-b/8",
            "gw-a/x",
            "gw-a",
            "a/b/gw-a/9",
            "gw-a/12",
        ]
        .map(String::from);
        assert_eq!(numbers_of("gw-a", &taken), vec![7, 12]);
        assert_eq!(numbers_of("a/b/gw-a", &taken), vec![9]);
    }
}
