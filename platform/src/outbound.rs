//! How every HTTP client of Floodgate's is made: the booking service's calls to the payment
//! provider, the provider stand-in's webhooks, the gateways' booking route, the fetch of the
//! sign-in's keys, the load generator's crowds.

use std::time::Duration;

/// How long a pooled connection may sit idle before the client drops it: under every Floodgate
/// listener's idle cut (a kept-alive connection that starts no request within the header
/// timeout, 10 s by default, is closed: [`crate::listener`]). A client that kept it longer
/// (reqwest's default is 90 s) would now and then write a request into a connection at the very
/// moment the server closes it, and get "error sending request" for a request nobody refused.
pub const POOL_IDLE: Duration = Duration::from_secs(5);

/// A client builder with what every client of Floodgate's needs ([`POOL_IDLE`]); each adds its
/// own timeout, roots and redirects.
pub fn client() -> reqwest::ClientBuilder {
    reqwest::Client::builder().pool_idle_timeout(POOL_IDLE)
}

#[cfg(test)]
mod tests {
    use super::POOL_IDLE;
    use crate::listener::ListenerArgs;

    #[test]
    fn pooled_connections_are_dropped_before_a_listener_closes_them() {
        let header_timeout = ListenerArgs::default().header_timeout;
        assert!(
            POOL_IDLE * 3 / 2 <= header_timeout,
            "pooled {POOL_IDLE:?}, closed after {header_timeout:?}: too close to race"
        );
    }
}
