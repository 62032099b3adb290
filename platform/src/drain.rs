//! How every service stops: told to (SIGTERM, Ctrl-C), it turns unready at once and goes on
//! serving for its drain delay, so the edge, the load balancer and kube-proxy stop sending it
//! work before anything is refused or reset; then it shuts down (its listeners stop accepting,
//! what is in flight finishes, background work ends).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Cancels `draining` when `signal` is cancelled and `shutdown` `delay` later; `meanwhile` says
/// in the log what the service does while it drains. `/readyz` fails from the first moment (`readiness::Check::draining`).
pub fn drain_on(
    signal: CancellationToken,
    draining: CancellationToken,
    shutdown: CancellationToken,
    delay: Duration,
    meanwhile: &'static str,
) {
    tokio::spawn(async move {
        tokio::select! {
            () = signal.cancelled() => {}
            // Shut down by other means (a test, a fatal error): nothing to drain.
            () = shutdown.cancelled() => return,
        }
        draining.cancel();
        tracing::info!(
            delay_ms = delay.as_millis() as u64,
            "draining: unready; {meanwhile}"
        );
        tokio::time::sleep(delay).await;
        shutdown.cancel();
    });
}
