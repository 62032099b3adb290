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

/// The separator between a reservation id's pool and its unique part. Not in the id alphabet,
/// so the split is unambiguous.
const RESERVATION_SEP: char = '~';

/// A reservation id names its pool (`<pool>~<32 hex digits>`), so any booking instance finds the
/// reservation's keys in O(1), in the pool's slot, without a cross-slot index.
pub fn reservation_id(pool: &str, unique: &str) -> String {
    format!("{pool}{RESERVATION_SEP}{unique}")
}

/// The pool of a well-formed reservation id, or `None`.
pub fn reservation_pool(id: &str) -> Option<&str> {
    let (pool, unique) = id.rsplit_once(RESERVATION_SEP)?;
    let unique_ok = unique.len() == 32 && unique.bytes().all(|b| b.is_ascii_hexdigit());
    (unique_ok && check_pool_id(pool).is_ok()).then_some(pool)
}

#[cfg(test)]
mod reservation_id_tests {
    use super::*;

    #[test]
    fn reservation_ids_name_their_pool() {
        let id = reservation_id("12951-3A", &"a".repeat(32));
        assert_eq!(reservation_pool(&id), Some("12951-3A"));
        assert_eq!(reservation_pool("nope"), None);
        assert_eq!(reservation_pool("p~short"), None);
        assert_eq!(reservation_pool(&format!("p}}~{}", "a".repeat(32))), None);
    }
}
