//! What the page is given of the gateway's settings, checked at start: each origin, the sign-in's
//! issuer and client id, made of characters that need no escaping inside the page's markup.

/// An origin as the page compares them (`scheme://host[:port]`, lowercase, no path): only
/// characters an origin can have, so it is safe inside the page's markup.
pub(super) fn check_origin(setting: &str, origin: &str) -> std::io::Result<String> {
    floodgate_platform::origins::normalise(origin).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{setting}: {origin:?} is not an origin like https://pay.example.com"),
        )
    })
}

/// The sign-in's issuer as the page is given it, exactly as configured (the page checks the
/// provider's discovery document names this very issuer): an https URL, or plain http to this
/// machine's loopback (a local provider), of characters that need no escaping inside the markup.
pub(super) fn check_issuer(url: &str) -> std::io::Result<String> {
    let url = url.trim();
    let loopback_http = url.starts_with("http://")
        && reqwest::Url::parse(url).is_ok_and(|u| floodgate_platform::identity::on_loopback(&u));
    let valid = (url.starts_with("https://") || loopback_http)
        && url.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(b, b'.' | b'-' | b':' | b'/' | b'_' | b'~' | b'[' | b']')
        });
    if valid {
        Ok(url.to_owned())
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "FLOODGATE_IDENTITY_ISSUER: {url:?} is not an issuer URL the page can sign in at, \
                 like https://login.example.com (plain http only on this machine's loopback)"
            ),
        ))
    }
}

/// The page's client id as the page is given it: characters that need no escaping.
pub(super) fn check_client_id(id: &str) -> std::io::Result<String> {
    let valid = !id.is_empty()
        && id.len() <= 255
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'~' | b':'));
    if valid {
        Ok(id.to_owned())
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "FLOODGATE_IDENTITY_AUDIENCE (the page's client id) is 1 to 255 letters, digits and \
             . - _ ~ :",
        ))
    }
}

/// `scheme://host[:port]` of a URL.
pub(super) fn origin_of(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let end = url[after_scheme..]
        .find('/')
        .map_or(url.len(), |i| after_scheme + i);
    &url[..end]
}
