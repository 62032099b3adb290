//! The one way a test waits for something: a probe polled until it answers.

use super::*;

/// What a poll's probe answers: `true`, or `Some(value)`, once the wait is over.
pub trait Probe {
    type Value;
    fn ready(self) -> Option<Self::Value>;
}

impl Probe for bool {
    type Value = ();
    fn ready(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Probe for Option<T> {
    type Value = T;
    fn ready(self) -> Option<T> {
        self
    }
}

/// The one way a test waits for something: polls `probe` every 50 ms until it answers `true`
/// or `Some(value)` (that value), and panics with `what` after `timeout`.
pub async fn eventually<P: Probe>(
    what: &str,
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> P,
) -> P::Value {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await.ready() {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl TestApp {
    /// The first reading of `sale`'s health (booking::health, as an instance wrote it to Redis)
    /// that `ready` accepts, waited for up to 10 s.
    pub async fn health_when(
        &self,
        sale: &str,
        ready: impl Fn(&floodgate_platform::autopilot::Health) -> bool,
    ) -> floodgate_platform::autopilot::Health {
        let (keys, ready) = (self.keys.sale(sale), &ready);
        eventually(
            "the sale's health is written",
            Duration::from_secs(10),
            || {
                let (mut conn, keys) = (self.redis.clone(), keys.clone());
                async move {
                    floodgate_platform::state::health::read(&mut conn, &keys)
                        .await
                        .unwrap()
                        .into_iter()
                        .map(|(_, h)| h)
                        .find(|h| ready(h))
                }
            },
        )
        .await
    }
}
