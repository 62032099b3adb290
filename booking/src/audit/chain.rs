//! The audit trail's chain: every row of `ops_audit` carries an HMAC-SHA256 of its own fields and
//! of the MAC of the row before it, keyed with `FLOODGATE_AUDIT_KEY`, which PostgreSQL never
//! holds. Whoever can write to the database but does not hold the key cannot edit a row, delete
//! one from the middle, or insert one, without [`super::verify`] naming the first row that no longer
//! follows. Rows are appended one at a time under a transaction-scoped advisory lock, so the
//! chain has one order across every booking service and admin command.
//!
//! The chain starts from a digest of the rows written before it existed (marked `before-chain`
//! by the migration), so those rows cannot be edited, nor chained rows re-marked as theirs,
//! without the first chained row failing. A row with no MAC (written by an older release during
//! an upgrade, or by hand) is reported and skipped: the chain runs from MAC to MAC.
//!
//! Each row names the key that made it, and only the key in force at the chain's head appends
//! ([`super::keys`]): a rotation is a row of its own ([`rotate`]), and a retired key signs
//! nothing new. [`super::verify`] checks each row with the key in force at its position.
//!
//! Deleting the newest rows leaves a shorter chain that still verifies: each append logs its
//! row id and MAC (`audit row appended`), so the logs, kept elsewhere, say where the chain ended
//! (the runbook says how to anchor it outside the database).

use serde_json::Value;
use sqlx::PgPool;

use super::head::head;
pub use super::keys::{AuditKey, AuditKeys};
use super::row::Row;

/// The advisory lock the appenders take turns under (any constant of this application's own).
const CHAIN_LOCK: i64 = 0x466c_6f6f_6441_7564; // "FloodAud"

/// Why a row could not be appended.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// The chain's key in force is not one this process holds: it was retired by a rotation
    /// (this process's key is old), or it is newer than this process's keys.
    #[error(
        "the audit trail's key in force is {in_force}, and this process holds {held}: a retired \
         key signs nothing new (give it the key in force as FLOODGATE_AUDIT_KEY)"
    )]
    KeyNotHeld { in_force: String, held: String },
}

/// How an action ended, or that it is about to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Written before the change is made.
    Intent,
    /// The change was made.
    Done,
    /// Nothing was changed, and the operator was told why.
    Refused,
    /// The change failed part-way or not at all; its detail says what was seen.
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Intent => "intent",
            Phase::Done => "done",
            Phase::Refused => "refused",
            Phase::Failed => "failed",
        }
    }
}

/// What a row to append says; its id, time and MAC are given on the way in.
pub struct Entry<'a> {
    pub sale: &'a str,
    pub action: &'a str,
    pub actor: &'a str,
    pub phase: Phase,
    pub intent: Option<i64>,
    pub before: &'a Value,
    pub after: &'a Value,
    pub detail: &'a Value,
}

/// Appends `entry` to the chain; its row id.
pub async fn append(db: &PgPool, keys: &AuditKeys, entry: Entry<'_>) -> Result<i64, AppendError> {
    let mut tx = db.begin().await?;
    lock(&mut tx).await?;
    let written = write(&mut tx, keys, &entry).await?;
    tx.commit().await?;
    Ok(logged(written, &entry))
}

/// Appends `entry` unless a row of its sale already carries `change` as its detail's `change`
/// (under the chain's lock, so two writers of the same queue write it once): the row id, or
/// `None` if it was written before. `entry.detail` must carry it as `change`.
pub async fn append_once(
    db: &PgPool,
    keys: &AuditKeys,
    entry: Entry<'_>,
    change: &str,
) -> Result<Option<i64>, AppendError> {
    let mut tx = db.begin().await?;
    lock(&mut tx).await?;
    let seen: bool = sqlx::query_scalar(
        "select exists (select 1 from ops_audit where sale = $1 and detail->>'change' = $2)",
    )
    .bind(entry.sale)
    .bind(change)
    .fetch_one(&mut *tx)
    .await?;
    if seen {
        return Ok(None);
    }
    let written = write(&mut tx, keys, &entry).await?;
    tx.commit().await?;
    Ok(Some(logged(written, &entry)))
}

pub(super) async fn lock(tx: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query("select pg_advisory_xact_lock($1)")
        .bind(CHAIN_LOCK)
        .execute(tx)
        .await
        .map(|_| ())
}

/// Logs a committed row with its MAC: the logs, kept elsewhere, say where the chain ended.
pub(super) fn logged((id, mac): (i64, String), entry: &Entry<'_>) -> i64 {
    tracing::info!(audit_row = id, mac = %mac, action = entry.action, phase = entry.phase.as_str(),
        "audit row appended");
    id
}

/// Writes `entry` as the chain's next row with the key in force, the lock held; its row id
/// and MAC.
async fn write(
    tx: &mut sqlx::PgConnection,
    keys: &AuditKeys,
    entry: &Entry<'_>,
) -> Result<(i64, String), AppendError> {
    let (previous, named) = head(&mut *tx, keys).await?;
    let key = in_force(keys, named.as_deref())?;
    Ok(insert(tx, key, &previous, entry).await?)
}

/// The key to append with after a head under `named` (`head`): that key (no chain yet, or an
/// unnamed head no key given made: the current key).
pub(super) fn in_force<'k>(
    keys: &'k AuditKeys,
    named: Option<&str>,
) -> Result<&'k AuditKey, AppendError> {
    match named {
        None => Ok(&keys.current),
        Some(id) => keys.by_id(id).ok_or_else(|| AppendError::KeyNotHeld {
            in_force: id.to_owned(),
            held: keys.ids(),
        }),
    }
}

/// Inserts `entry` after the row whose MAC is `previous`, made and named with `key`.
pub(super) async fn insert(
    tx: &mut sqlx::PgConnection,
    key: &AuditKey,
    previous: &str,
    entry: &Entry<'_>,
) -> Result<(i64, String), sqlx::Error> {
    // Taken under the lock, so ids rise in the chain's order.
    let id: i64 = sqlx::query_scalar("select nextval(pg_get_serial_sequence('ops_audit', 'id'))")
        .fetch_one(&mut *tx)
        .await?;
    let now = time::OffsetDateTime::now_utc();
    let at = now
        .replace_nanosecond(now.nanosecond() / 1_000 * 1_000)
        .expect("whole microseconds are a valid time");
    let row = Row {
        id,
        at,
        sale: entry.sale.to_owned(),
        action: entry.action.to_owned(),
        actor: entry.actor.to_owned(),
        phase: entry.phase.as_str().to_owned(),
        intent: entry.intent,
        before: entry.before.clone(),
        after: entry.after.clone(),
        detail: entry.detail.clone(),
        key_id: Some(key.id().to_owned()),
    };
    let mac = row.mac(key, previous);
    sqlx::query(
        "insert into ops_audit
           (id, at, sale, action, actor, phase, intent, before, after, detail, mac, key_id)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )
    .bind(row.id)
    .bind(row.at)
    .bind(&row.sale)
    .bind(&row.action)
    .bind(&row.actor)
    .bind(&row.phase)
    .bind(row.intent)
    .bind(&row.before)
    .bind(&row.after)
    .bind(&row.detail)
    .bind(&mac)
    .bind(&row.key_id)
    .execute(&mut *tx)
    .await?;
    Ok((id, mac))
}
