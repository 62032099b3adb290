//! Sale and pool identifiers.
//!
//! Both are embedded in Redis keys (inside a `{hash tag}`), in Kafka keys and in URLs, so they are
//! restricted to a small, unambiguous alphabet: ASCII letters, digits, `-`, `_` and `.`, 1 to 64
//! characters. Braces and colons are excluded on purpose: a `}` in an id would end the hash tag
//! early and could put two sales' keys in one slot, or one sale's keys in two.

use thiserror::Error;

/// The longest id accepted; long enough for `12951-2026-12-01-3A-GN`-style pool names.
pub const MAX_ID_LEN: usize = 64;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum IdError {
    #[error("{kind} id must not be empty")]
    Empty { kind: &'static str },
    #[error("{kind} id is longer than {MAX_ID_LEN} characters")]
    TooLong { kind: &'static str },
    #[error("{kind} id may only contain ASCII letters, digits, '-', '_' and '.'")]
    BadChar { kind: &'static str },
}

fn check(kind: &'static str, id: &str) -> Result<(), IdError> {
    if id.is_empty() {
        return Err(IdError::Empty { kind });
    }
    if id.len() > MAX_ID_LEN {
        return Err(IdError::TooLong { kind });
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(IdError::BadChar { kind });
    }
    Ok(())
}

/// Checks a sale id such as `tatkal-2026-12-01`.
pub fn check_sale_id(id: &str) -> Result<(), IdError> {
    check("sale", id)
}

/// Checks a pool id such as `12951-2026-12-01-3A-GN`.
pub fn check_pool_id(id: &str) -> Result<(), IdError> {
    check("pool", id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_ids() {
        assert_eq!(check_sale_id("tatkal-2026-12-01"), Ok(()));
        assert_eq!(check_pool_id("12951_2026.12.01-3A"), Ok(()));
    }

    #[test]
    fn refuses_ids_that_could_break_a_hash_tag() {
        assert!(matches!(check_sale_id("a}b"), Err(IdError::BadChar { .. })));
        assert!(matches!(check_pool_id("a:b"), Err(IdError::BadChar { .. })));
        assert!(matches!(check_pool_id(""), Err(IdError::Empty { .. })));
        assert!(matches!(
            check_pool_id(&"x".repeat(65)),
            Err(IdError::TooLong { .. })
        ));
    }
}
