//! How long a client waits before trying again (docs/protocol.md 1.5 and 3): a crowd that
//! retries at once comes back as one wave, so every wait is spread at random.

use std::time::Duration;

use rand::Rng;

/// The longest wait between two reconnections.
pub const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(30);

/// The wait before reconnection number `attempt` (from 0). After a drain (close 1012) the
/// gateway is going away on purpose: reconnect at once, spread over up to 2 s. Otherwise
/// 0.5 s x 2^attempt, at most [`MAX_RECONNECT_DELAY`], times a random 0.5 to 1.
pub fn reconnect_delay(attempt: u32, drained: bool, rng: &mut impl Rng) -> Duration {
    if drained {
        return Duration::from_millis(rng.gen_range(0..=2_000));
    }
    let exponential = 0.5 * 2f64.powi(attempt.min(16) as i32);
    let jitter = rng.gen_range(0.5..=1.0);
    Duration::from_secs_f64(exponential.min(MAX_RECONNECT_DELAY.as_secs_f64()) * jitter)
}

/// The wait before retrying a 503 with the same `Idempotency-Key`: the answer's `Retry-After`
/// (1 s if it has none), never more than 5 s, so an admitted client's token outlives the retries.
pub fn retry_after(header: Option<u64>) -> Duration {
    Duration::from_secs(header.unwrap_or(1).clamp(1, 5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnections_back_off_exponentially_with_jitter_up_to_the_cap() {
        let mut rng = rand::thread_rng();
        for _ in 0..200 {
            let first = reconnect_delay(0, false, &mut rng);
            assert!((250..=500).contains(&first.as_millis()), "{first:?}");
            let third = reconnect_delay(2, false, &mut rng);
            assert!((1_000..=2_000).contains(&third.as_millis()), "{third:?}");
            let late = reconnect_delay(40, false, &mut rng);
            assert!(late >= MAX_RECONNECT_DELAY / 2 && late <= MAX_RECONNECT_DELAY);
            let drained = reconnect_delay(5, true, &mut rng);
            assert!(
                drained <= Duration::from_secs(2),
                "a drain is reconnected at once"
            );
        }
    }

    #[test]
    fn a_503_is_retried_after_its_retry_after_within_bounds() {
        assert_eq!(retry_after(None), Duration::from_secs(1));
        assert_eq!(retry_after(Some(3)), Duration::from_secs(3));
        assert_eq!(retry_after(Some(0)), Duration::from_secs(1));
        assert_eq!(retry_after(Some(3_600)), Duration::from_secs(5));
    }
}
