//! `floodgate-sandbox`: the stand-ins a demo and the tests need for what an operator brings
//! from outside, in their own binary so none of it ships inside a service.
//!
//! - the sandbox payment provider. It behaves like a real provider: the booking service creates
//!   a payment (`POST /v1/payments`, idempotent by `Idempotency-Key`) and sends the payer to its
//!   checkout; the payer completes it there; some time later the sandbox posts a signed webhook
//!   to the booking service, retrying until it gets a 2xx.
//! - with `--signin`, also the operator's sign-in stand-in (OpenID Connect's code flow, a JWKS,
//!   identity tokens on request). It checks no password.
//!
//! Never run a real sale with either: no money moves, and anyone may sign in as anyone.
//!
//! # Layout
//! - [`pay`]: the payment provider's API, its checkout page and its webhook deliveries.
//! - [`signin`]: the sign-in stand-in.
//! - `web`: what both share over HTTP (the API key's check, text made safe for a page).

pub mod pay;
pub mod signin;
mod web;

use secrecy::SecretString;

pub use pay::Sandbox;

#[derive(Clone, Debug, clap::Args)]
pub struct SandboxConfig {
    /// Address the sandbox provider listens on.
    #[arg(
        long,
        env = "FLOODGATE_SANDBOX_LISTEN",
        default_value = "127.0.0.1:8082"
    )]
    pub listen: String,
    /// This provider's address as payers' browsers reach it (for checkout URLs).
    #[arg(
        long,
        env = "FLOODGATE_SANDBOX_PUBLIC_URL",
        default_value = "http://127.0.0.1:8082"
    )]
    pub public_url: String,
    /// Where webhooks are delivered (the booking service).
    #[arg(
        long,
        env = "FLOODGATE_SANDBOX_WEBHOOK_URL",
        default_value = "http://127.0.0.1:8081/v1/payments/webhook"
    )]
    pub webhook_url: String,
    /// The secret webhooks are signed with (the same value as the booking service's
    /// FLOODGATE_WEBHOOK_SECRET). A name of its own: a host that holds the production
    /// provider's secrets never hands them to the stand-in by accident.
    // Empty when unset, so the refusal names the variable (validate), not a flag.
    #[arg(
        long,
        env = "FLOODGATE_SANDBOX_WEBHOOK_SECRET",
        hide_env_values = true,
        default_value = "",
        hide_default_value = true
    )]
    pub webhook_secret: SecretString,
    /// The key callers of its API must present (the same value as the booking service's
    /// FLOODGATE_PAYMENT_API_KEY), as a real provider's API wants one.
    #[arg(
        long,
        env = "FLOODGATE_SANDBOX_API_KEY",
        hide_env_values = true,
        default_value = "",
        hide_default_value = true
    )]
    pub api_key: SecretString,
    #[command(flatten)]
    pub signin: signin::SignInConfig,
}

impl SandboxConfig {
    /// Refuses empty or short secrets, as the booking service does.
    pub fn validate(&self) -> Result<(), String> {
        use floodgate_platform::secrets::check_secret;
        check_secret("FLOODGATE_SANDBOX_WEBHOOK_SECRET", &self.webhook_secret)?;
        check_secret("FLOODGATE_SANDBOX_API_KEY", &self.api_key)
    }
}

/// Most connections the sandbox holds at once: a provider's, not an internal listener's. In a
/// rush every payer's browser connects to the provider at once; a small cap would make the
/// stand-in, not Floodgate, what turns the benchmarks' honest payers away.
const PROVIDER_CONNECTIONS: usize = 8_192;

/// The sandbox's listener limits: the shared defaults, with a provider's connection cap.
pub fn listener_limits() -> floodgate_platform::listener::Limits {
    floodgate_platform::listener::ListenerArgs::default().limits(PROVIDER_CONNECTIONS)
}
