//! Where the pass-through properties come from: environment variables named after librdkafka's
//! properties, and `name=value` files as Kafka's own tools take them.

use std::ffi::OsString;

use super::{ConfigError, Role};

/// The librdkafka property an environment suffix names: lower case, `_` for `.`, and `__` for a
/// literal `_` (`SSL_ENDPOINT_IDENTIFICATION_ALGORITHM` is `ssl.endpoint.identification.algorithm`,
/// `SSL__KEY` would be `ssl_key`).
pub fn property_name(suffix: &str) -> String {
    suffix
        .to_ascii_lowercase()
        .split("__")
        .map(|part| part.replace('_', "."))
        .collect::<Vec<_>>()
        .join("_")
}

/// The pass-through properties in `env` for `role`, the every-client ones first so that a
/// role's own wins.
pub(super) fn from_env(
    env: impl IntoIterator<Item = (OsString, OsString)>,
    role: Role,
) -> Result<Vec<(String, String)>, ConfigError> {
    let role_prefix = match role {
        Role::Producer => Some("FLOODGATE_KAFKA_PRODUCER_"),
        Role::Consumer => Some("FLOODGATE_KAFKA_CONSUMER_"),
        Role::Admin => None,
    };
    let (mut common, mut own) = (Vec::new(), Vec::new());
    for (key, value) in env {
        let Some(key) = key.to_str() else { continue };
        let (list, suffix) = if let Some(s) = key.strip_prefix("FLOODGATE_KAFKA_CLIENT_") {
            (&mut common, s)
        } else if let Some(s) = role_prefix.and_then(|p| key.strip_prefix(p)) {
            (&mut own, s)
        } else {
            continue;
        };
        let value = value
            .into_string()
            .map_err(|_| ConfigError(format!("{key} is not valid UTF-8")))?;
        if suffix.is_empty() {
            return Err(ConfigError(format!("{key} names no property")));
        }
        list.push((property_name(suffix), value));
    }
    // The environment's order is arbitrary; sorted, the result does not depend on it.
    common.sort();
    own.sort();
    common.extend(own);
    Ok(common)
}

/// `name=value` lines; blank lines and `#` comments skipped; the value is everything after the
/// first `=`, trimmed.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut props = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line
            .split_once('=')
            .ok_or_else(|| format!("line {}: expected name=value", n + 1))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(format!("line {}: no property name", n + 1));
        }
        props.push((name.to_owned(), value.trim().to_owned()));
    }
    Ok(props)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_names_map_to_dotted_properties() {
        assert_eq!(property_name("LINGER_MS"), "linger.ms");
        assert_eq!(
            property_name("SSL_ENDPOINT_IDENTIFICATION_ALGORITHM"),
            "ssl.endpoint.identification.algorithm"
        );
        assert_eq!(property_name("SSL__KEY"), "ssl_key");
        assert_eq!(
            property_name("QUEUE_BUFFERING_MAX__X_MS"),
            "queue.buffering.max_x.ms"
        );
    }
}
