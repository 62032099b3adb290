//! `audit rotate`: the chain handed over from the key in force to the current one, in a row of
//! its own (docs/runbook.md, "The audit trail").

use sqlx::PgPool;

use super::chain::{in_force, insert, lock, logged, AppendError, Entry, Phase};
use super::head::head;
use super::keys::AuditKeys;

/// What [`rotate`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Rotation {
    /// The current key was in force already: nothing written.
    AlreadyInForce,
    /// The rotation row `row` hands the chain over from key `from` to the current key.
    Rotated { row: i64, from: String },
}

/// Hands the chain over to `keys.current`: a rotation row, made with the current key, naming the
/// key in force and carrying its handover, which needs that key (one of `keys.previous`). From
/// it on, rows are made with the current key only.
pub async fn rotate(db: &PgPool, keys: &AuditKeys, actor: &str) -> Result<Rotation, AppendError> {
    let mut tx = db.begin().await?;
    lock(&mut tx).await?;
    let (previous, named) = head(&mut tx, keys).await?;
    let old = in_force(keys, named.as_deref())?;
    if old.id() == keys.current.id() {
        return Ok(Rotation::AlreadyInForce);
    }
    let to = keys.current.id();
    let detail = serde_json::json!({
        "from": old.id(),
        "to": to,
        "handover": old.handover(&previous, to),
    });
    let entry = Entry {
        sale: super::keys::NO_SALE,
        action: super::keys::ROTATE,
        actor,
        phase: Phase::Done,
        intent: None,
        before: &serde_json::json!({ "key": old.id() }),
        after: &serde_json::json!({ "key": to }),
        detail: &detail,
    };
    let written = insert(&mut tx, &keys.current, &previous, &entry).await?;
    tx.commit().await?;
    let from = old.id().to_owned();
    Ok(Rotation::Rotated {
        row: logged(written, &entry),
        from,
    })
}
