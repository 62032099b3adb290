//! What the provider and the sign-in stand-in share over HTTP.

use axum::http::{header, HeaderMap};
use secrecy::{ExposeSecret as _, SecretString};

/// Whether the request presents `key` as `Authorization: Bearer <key>` (the scheme
/// case-insensitive), compared in constant time. Nothing presented never matches.
pub(crate) fn holds_key(headers: &HeaderMap, key: &SecretString) -> bool {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map_or("", |(_, credential)| credential.trim());
    !presented.is_empty()
        && floodgate_protocol::same_secret(presented.as_bytes(), key.expose_secret().as_bytes())
}

/// `text` safe inside an HTML element or a quoted attribute.
pub(crate) fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_key_itself_as_a_bearer_credential_is_taken() {
        let key = SecretString::from("k".repeat(40));
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            headers
        };
        assert!(holds_key(
            &with(&format!("Bearer {}", "k".repeat(40))),
            &key
        ));
        assert!(holds_key(
            &with(&format!("bearer {}", "k".repeat(40))),
            &key
        ));
        assert!(!holds_key(
            &with(&format!("Basic {}", "k".repeat(40))),
            &key
        ));
        assert!(!holds_key(
            &with(&format!("Bearer {}", "k".repeat(39))),
            &key
        ));
        assert!(!holds_key(&with("Bearer "), &key));
        assert!(!holds_key(&HeaderMap::new(), &key));
    }
}
