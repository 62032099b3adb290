//! Secrets as the services take them: never empty or short, compared in constant time, and URLs
//! that may carry credentials made safe to print.

use floodgate_protocol::same_secret;
use secrecy::{ExposeSecret, SecretString};

/// The shortest shared secret accepted (the ops token, the webhook secret, the payment
/// provider's API key): 32 characters, e.g. 24 random bytes in base64 or 16 in hex twice over,
/// comfortably past what can be guessed online. `head -c 24 /dev/urandom | base64` makes one.
pub const MIN_SECRET_LEN: usize = 32;

/// Checks the secret configured as `setting` (its environment variable's name, which the error
/// names so an operator knows what to fix): present, not blank, and at least
/// [`MIN_SECRET_LEN`] characters.
pub fn check_secret(setting: &str, secret: &SecretString) -> Result<(), String> {
    let value = secret.expose_secret();
    if value.trim().is_empty() {
        return Err(format!(
            "{setting} is empty; set it to a secret of at least {MIN_SECRET_LEN} characters"
        ));
    }
    if value.chars().count() < MIN_SECRET_LEN {
        return Err(format!(
            "{setting} is too short; a secret needs at least {MIN_SECRET_LEN} characters"
        ));
    }
    Ok(())
}

/// A secret of a setting that takes several at once, separated by commas (a token being rotated:
/// the new one and the old one are both good until every client has the new one), with the name
/// it is known by: the operator's (`name:secret` in the list)
/// or, for a bare secret, `sha256:` and the first 8 hex digits of its SHA-256, which say which
/// secret it was without saying anything usable about it. What an audit record keeps.
pub struct NamedSecret {
    pub name: String,
    pub secret: SecretString,
}

/// The secrets of such a setting, each with its name; each must pass [`check_secret`].
pub fn named_secret_list(
    setting: &str,
    secrets: &SecretString,
) -> Result<Vec<NamedSecret>, String> {
    let named = |entry: &str| -> (Option<String>, String) {
        match entry.split_once(':') {
            Some((name, secret))
                if !name.is_empty()
                    && name.len() <= 32
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) =>
            {
                (Some(name.to_owned()), secret.to_owned())
            }
            _ => (None, entry.to_owned()),
        }
    };
    let mut list = Vec::new();
    for entry in secrets.expose_secret().split(',').map(str::trim) {
        let (name, secret) = named(entry);
        let secret = SecretString::from(secret);
        check_secret(setting, &secret)?;
        let name = name.unwrap_or_else(|| {
            use sha2::Digest as _;
            let digest = sha2::Sha256::digest(secret.expose_secret().as_bytes());
            format!("sha256:{}", &hex::encode(digest)[..8])
        });
        list.push(NamedSecret { name, secret });
    }
    Ok(list)
}

/// Which of `accepted` `presented` is, if any. Every one is compared, each in constant time, so
/// the time taken does not say which one matched or how much of it.
pub fn which_secret<'a>(presented: &[u8], accepted: &'a [NamedSecret]) -> Option<&'a NamedSecret> {
    accepted.iter().fold(None, |found, candidate| {
        let matched = same_secret(presented, candidate.secret.expose_secret().as_bytes());
        if matched && found.is_none() {
            Some(candidate)
        } else {
            found
        }
    })
}

/// `url` with any password (after the user name in its user info, or as a `password=` query
/// parameter) replaced by `***`, for logs and errors.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest = scheme_end + 3;
        let authority_end = out[rest..]
            .find(['/', '?', '#'])
            .map_or(out.len(), |i| rest + i);
        if let Some(at) = out[rest..authority_end].rfind('@') {
            // `user:password@`: the user name stays, it helps whoever reads the log.
            if let Some((user, _)) = out[rest..rest + at].split_once(':') {
                let redacted = format!("{user}:***");
                out.replace_range(rest..rest + at, &redacted);
            }
        }
    }
    if let Some(query_start) = out.find('?') {
        let (base, query) = out.split_at(query_start + 1);
        let query = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _))
                    if [
                        "password",
                        "passwd",
                        "pass",
                        "sslpassword",
                        "token",
                        "secret",
                    ]
                    .contains(&key.to_ascii_lowercase().as_str()) =>
                {
                    format!("{key}=***")
                }
                _ => pair.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("&");
        out = format!("{base}{query}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_secret_is_known_by_its_name_or_a_short_hash_and_found_by_its_value() {
        let (a, b) = ("a".repeat(40), "b".repeat(40));
        let list = named_secret_list("T", &SecretString::from(format!("alice:{a}, {b}"))).unwrap();
        assert_eq!(list[0].name, "alice");
        assert!(list[1].name.starts_with("sha256:") && list[1].name.len() == 15);
        assert!(
            !list[1].name.contains(&b[..8]),
            "the name is not the secret"
        );
        assert_eq!(
            which_secret(a.as_bytes(), &list).map(|s| s.name.as_str()),
            Some("alice")
        );
        assert_eq!(
            which_secret(b.as_bytes(), &list).map(|s| s.name.as_str()),
            Some(list[1].name.as_str())
        );
        assert!(which_secret(b"alice", &list).is_none());
        // A name only counts as one when it looks like one; the secret is still checked.
        assert!(named_secret_list("T", &SecretString::from("alice:short".to_owned())).is_err());
    }

    #[test]
    fn secrets_must_be_long_enough() {
        let long = SecretString::from("x".repeat(MIN_SECRET_LEN));
        assert!(check_secret("S", &long).is_ok());
        let err = check_secret("FLOODGATE_OPS_TOKEN", &SecretString::from("")).unwrap_err();
        assert!(
            err.contains("FLOODGATE_OPS_TOKEN") && err.contains("empty"),
            "{err}"
        );
        assert!(check_secret("S", &SecretString::from(" ".repeat(40))).is_err());
        assert!(check_secret("S", &SecretString::from("short")).is_err());
    }

    #[test]
    fn passwords_in_urls_are_redacted() {
        assert_eq!(
            redact_url(
                "postgres://floodgate:hunter2@db.internal:5432/floodgate?sslmode=verify-full"
            ),
            "postgres://floodgate:***@db.internal:5432/floodgate?sslmode=verify-full"
        );
        assert_eq!(
            redact_url("redis://:hunter2@127.0.0.1:6379"),
            "redis://:***@127.0.0.1:6379"
        );
        assert_eq!(
            redact_url("postgres://u@h/db?password=hunter2&application_name=x"),
            "postgres://u@h/db?password=***&application_name=x"
        );
        assert_eq!(
            redact_url("postgres://postgres@127.0.0.1:5432/floodgate"),
            "postgres://postgres@127.0.0.1:5432/floodgate",
            "no password, nothing to hide"
        );
        assert_eq!(redact_url("127.0.0.1:9092"), "127.0.0.1:9092");
    }
}
