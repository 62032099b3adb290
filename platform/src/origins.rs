//! Which web pages may use the waiting room and the booking API from a browser: the `Origin` a
//! browser puts on every WebSocket handshake and on every request a page's script makes with a
//! method other than GET.
//!
//! A WebSocket is not held back by CORS: any site could open the waiting room from its visitors'
//! browsers and spend their addresses, their CPUs (the proof of work) and the line's places on
//! its own behalf. So a request whose `Origin` is present and not allowed is refused (403
//! `origin_forbidden`) before a ticket is taken or a reservation tried. A request with no
//! `Origin` is let through: apps, the load generator and server-side clients send none, and
//! a browser never leaves it off where it matters.
//!
//! What is allowed (`FLOODGATE_ALLOWED_ORIGINS`): unset, the service's own origin only, an
//! `Origin` naming the host the request was sent to (its `Host` header, which the shipped edge
//! passes through); a comma-separated list, exactly those origins (what a deployment should set:
//! the site's public origin, so a name that merely resolves to the service is not trusted); `*`,
//! any page at all (an operator's deliberate choice, for a public embeddable widget).

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue};
use floodgate_protocol::api::code;

use crate::http::ApiError;

/// The setting, for every service with a public listener a browser reaches.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct OriginArgs {
    /// The origins whose pages may open the waiting room and book (`https://tickets.example.com`,
    /// comma-separated), or `*` for any. Unset: only the service's own origin (an `Origin` that
    /// names the request's `Host`). A request with no `Origin` (an app) is always let through.
    #[arg(long, env = "FLOODGATE_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,
}

/// Which origins are allowed, as configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllowedOrigins {
    /// An `Origin` naming the request's own `Host`.
    SameHost,
    /// Exactly these (normalised: lowercase, no default port, no trailing slash).
    Listed(Vec<String>),
    Any,
}

impl AllowedOrigins {
    /// Reads the setting; an entry that is not an origin is an error that names it.
    pub fn from_args(args: &OriginArgs) -> std::io::Result<Self> {
        let entries: Vec<&str> = args
            .allowed_origins
            .iter()
            .map(|o| o.trim())
            .filter(|o| !o.is_empty())
            .collect();
        if entries.is_empty() {
            return Ok(Self::SameHost);
        }
        if entries == ["*"] {
            return Ok(Self::Any);
        }
        entries
            .into_iter()
            .map(|o| {
                normalise(o).ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!(
                            "FLOODGATE_ALLOWED_ORIGINS: {o:?} is not an origin like \
                             https://tickets.example.com (or * alone, for any)"
                        ),
                    )
                })
            })
            .collect::<std::io::Result<_>>()
            .map(Self::Listed)
    }

    /// Whether a request with these headers may go on.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return Ok(());
        };
        if self.allows(origin, headers.get(header::HOST)) {
            return Ok(());
        }
        metrics::counter!("floodgate_origins_refused_total").increment(1);
        Err(ApiError::new(
            code::ORIGIN_FORBIDDEN,
            "this page's origin may not use this service; open the sale from its own site".into(),
        ))
    }

    fn allows(&self, origin: &HeaderValue, host: Option<&HeaderValue>) -> bool {
        let Some(origin) = origin.to_str().ok().and_then(normalise) else {
            // `null` (a sandboxed frame, a file), or not an origin at all.
            return false;
        };
        match self {
            Self::Any => true,
            Self::Listed(allowed) => allowed.contains(&origin),
            Self::SameHost => {
                let (scheme, authority) = origin.split_once("://").unwrap_or_default();
                let Some(host) = host.and_then(|h| h.to_str().ok()) else {
                    return false;
                };
                let host = host.trim().to_ascii_lowercase();
                let host = strip_default_port(&host, scheme == "https");
                match split_port(host) {
                    (_, Some(_)) => host == authority,
                    // An edge that passes on the host name alone (nginx's `$host`) leaves the
                    // port out: the name is all there is to compare.
                    (name, None) => split_port(authority).0 == name,
                }
            }
        }
    }
}

/// An origin as compared: `scheme://host[:port]`, lowercase, http or https, the scheme's default
/// port and any trailing slash left off; `None` if it is not one.
pub fn normalise(origin: &str) -> Option<String> {
    let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    let (scheme, authority) = origin.split_once("://")?;
    let valid = matches!(scheme, "http" | "https")
        && !authority.is_empty()
        && authority
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    valid.then(|| {
        format!(
            "{scheme}://{}",
            strip_default_port(authority, scheme == "https")
        )
    })
}

/// An authority's host and port (`[::1]:8080` is `[::1]` and `8080`).
fn split_port(authority: &str) -> (&str, Option<&str>) {
    match authority.rsplit_once(':') {
        Some((host, port))
            if !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && (!host.contains(':') || host.ends_with(']')) =>
        {
            (host, Some(port))
        }
        _ => (authority, None),
    }
}

fn strip_default_port(authority: &str, https: bool) -> &str {
    let default = if https { ":443" } else { ":80" };
    authority.strip_suffix(default).unwrap_or(authority)
}

/// The `Origin` check as an extractor: a handler that takes it refuses a foreign page before it
/// does anything else. The state gives the allowed origins.
pub struct SameSite;

impl<S> FromRequestParts<S> for SameSite
where
    S: Send + Sync,
    std::sync::Arc<AllowedOrigins>: axum::extract::FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let allowed: std::sync::Arc<AllowedOrigins> = axum::extract::FromRef::from_ref(state);
        allowed.check(&parts.headers).map(|()| SameSite)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(origin: Option<&str>, host: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        }
        headers
    }

    fn allowed(setting: &[&str]) -> AllowedOrigins {
        AllowedOrigins::from_args(&OriginArgs {
            allowed_origins: setting.iter().map(|s| s.to_string()).collect(),
        })
        .unwrap()
    }

    #[test]
    fn by_default_only_the_services_own_origin_is_allowed() {
        let own = allowed(&[]);
        assert_eq!(own, AllowedOrigins::SameHost);
        for (origin, host) in [
            ("http://127.0.0.1:8080", "127.0.0.1:8080"),
            ("https://Tickets.Example.com", "tickets.example.com"),
            ("https://tickets.example.com:443", "tickets.example.com"),
            ("https://tickets.example.com", "tickets.example.com:443"),
            // Behind an edge that passes the host name alone.
            ("https://127.0.0.1:8443", "127.0.0.1"),
            ("http://[::1]:8080", "[::1]:8080"),
        ] {
            assert!(
                own.check(&headers(Some(origin), host)).is_ok(),
                "{origin} on {host}"
            );
        }
        for (origin, host) in [
            ("https://evil.example", "tickets.example.com"),
            ("http://127.0.0.1:8081", "127.0.0.1:8080"),
            ("http://[::1]:8081", "[::1]:8080"),
            ("https://evil.example:8443", "127.0.0.1"),
            ("null", "tickets.example.com"),
            ("tickets.example.com", "tickets.example.com"),
        ] {
            let refused = own.check(&headers(Some(origin), host)).unwrap_err();
            assert_eq!(refused.code(), code::ORIGIN_FORBIDDEN, "{origin} on {host}");
        }
        assert!(
            own.check(&headers(None, "anything")).is_ok(),
            "an app sends no Origin"
        );
    }

    #[test]
    fn a_list_allows_exactly_its_origins_and_a_star_any() {
        let listed = allowed(&[
            "https://tickets.example.com/",
            " https://m.example.com:8443",
        ]);
        assert!(listed
            .check(&headers(Some("https://tickets.example.com"), "gw.internal"))
            .is_ok());
        assert!(listed
            .check(&headers(Some("https://m.example.com:8443"), "gw.internal"))
            .is_ok());
        // A listed deployment no longer trusts its Host: a name that resolves to it is not
        // the site.
        assert!(listed
            .check(&headers(Some("https://gw.internal"), "gw.internal"))
            .is_err());
        assert!(listed
            .check(&headers(Some("http://tickets.example.com"), "x"))
            .is_err());
        assert!(allowed(&["*"])
            .check(&headers(Some("https://anyone.example"), "x"))
            .is_ok());
        let bad = AllowedOrigins::from_args(&OriginArgs {
            allowed_origins: vec!["tickets.example.com".into()],
        });
        assert!(bad.unwrap_err().to_string().contains("tickets.example.com"));
    }
}
