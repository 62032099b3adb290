//! The sale's rate of joins as the room reads it each tick, which the proof of work's
//! difficulty follows (crate::door).

use std::time::Duration;

/// The sale's rate of joins, from the ticket sequence as each tick reads it: tickets handed out
/// over the last [`JOIN_WINDOW`], by every gateway (the sequence is sale-wide), per second; and
/// the lowest such rate over the window before, which answers are checked against, so a puzzle
/// handed out a few seconds ago at the difficulty of the time is still good.
#[derive(Default)]
pub(super) struct JoinRate {
    seen: std::collections::VecDeque<(tokio::time::Instant, u64)>,
    rates: std::collections::VecDeque<(tokio::time::Instant, f64)>,
}

/// How far back the join rate looks: long enough to smooth a tick's jitter, short enough that
/// the proof of work follows a flood up and back down within seconds.
const JOIN_WINDOW: Duration = Duration::from_secs(5);

impl JoinRate {
    /// The rate now and the lowest of the window, after a tick that read `issued`.
    pub(super) fn observe(&mut self, now: tokio::time::Instant, issued: u64) -> (f64, f64) {
        within_window(&mut self.seen, now, issued);
        let (first_at, first) = self.seen[0];
        let span = now.duration_since(first_at).as_secs_f64();
        // Too short a span says nothing yet (a room that has just started).
        let rate = if span < 0.5 {
            0.0
        } else {
            issued.saturating_sub(first) as f64 / span
        };
        within_window(&mut self.rates, now, rate);
        let lowest = self.rates.iter().map(|(_, r)| *r).fold(rate, f64::min);
        (rate, lowest)
    }
}

/// Adds `value` seen `now` to `seen`, dropping what is older than [`JOIN_WINDOW`].
fn within_window<T>(
    seen: &mut std::collections::VecDeque<(tokio::time::Instant, T)>,
    now: tokio::time::Instant,
    value: T,
) {
    while seen
        .front()
        .is_some_and(|(at, _)| now.duration_since(*at) > JOIN_WINDOW)
    {
        seen.pop_front();
    }
    seen.push_back((now, value));
}
