//! The audit trail's chain: every row of `ops_audit` carries an HMAC-SHA256 of its own fields and
//! of the MAC of the row before it, keyed with `FLOODGATE_AUDIT_KEY`, which PostgreSQL never
//! holds. Whoever can write to the database but does not hold the key cannot edit a row, delete
//! one from the middle, or insert one, without [`verify`] naming the first row that no longer
//! follows. Rows are appended one at a time under a transaction-scoped advisory lock, so the
//! chain has one order across every booking service and admin command.
//!
//! The chain starts from a digest of the rows written before it existed (marked `before-chain`
//! by the migration), so those rows cannot be edited, nor chained rows re-marked as theirs,
//! without the first chained row failing. A row with no MAC (written by an older release during
//! an upgrade, or by hand) is reported and skipped: the chain runs from MAC to MAC.
//!
//! Deleting the newest rows leaves a shorter chain that still verifies: each append logs its
//! row id and MAC (`audit row appended`), so the logs, kept elsewhere, say where the chain ended.

use hmac::{Hmac, Mac as _};
use secrecy::{ExposeSecret as _, SecretString};
use serde_json::Value;
use sha2::Sha256;
use sqlx::PgPool;

/// The advisory lock the appenders take turns under (any constant of this application's own).
const CHAIN_LOCK: i64 = 0x466c_6f6f_6441_7564; // "FloodAud"
/// What the first chained row follows: this, and the digest of the rows before the chain.
const GENESIS: &str = "genesis";
/// What rows written before the chain existed carry instead of a MAC (the migration marks them).
pub const BEFORE_CHAIN: &str = "before-chain";

/// The key the chain is made with, checked to be a real secret.
#[derive(Clone)]
pub struct AuditKey(SecretString);

impl AuditKey {
    /// `secret`, if it is a usable key (at least 32 characters, not a placeholder).
    pub fn new(secret: &SecretString) -> Result<Self, String> {
        floodgate_platform::secrets::check_secret("FLOODGATE_AUDIT_KEY", secret)?;
        Ok(Self(secret.clone()))
    }

    fn mac(&self, previous: &str, row: &Row) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(self.0.expose_secret().as_bytes())
            .expect("HMAC takes a key of any length");
        mac.update(previous.as_bytes());
        mac.update(b"\n");
        mac.update(row.canonical().as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }
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

/// One row of the trail, as it is chained.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Row {
    pub id: i64,
    pub at: time::OffsetDateTime,
    pub sale: String,
    pub action: String,
    pub actor: String,
    pub phase: String,
    pub intent: Option<i64>,
    pub before: Value,
    pub after: Value,
    pub detail: Value,
}

impl Row {
    /// Every field, in a form that reads back the same from PostgreSQL: JSON with sorted keys
    /// (jsonb reorders them), the time in whole microseconds (PostgreSQL's precision).
    fn canonical(&self) -> String {
        let micros = self.at.unix_timestamp_nanos() / 1_000;
        let fields = Value::Array(vec![
            self.id.into(),
            Value::String(micros.to_string()),
            Value::String(self.sale.clone()),
            Value::String(self.action.clone()),
            Value::String(self.actor.clone()),
            Value::String(self.phase.clone()),
            self.intent.map_or(Value::Null, Value::from),
            sorted(&self.before),
            sorted(&self.after),
            sorted(&self.detail),
        ]);
        fields.to_string()
    }
}

/// `value` with every object's keys in order, whatever order they came in (serde_json keeps
/// insertion order in this build, utoipa turns on `preserve_order`; jsonb keeps its own).
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for key in keys {
                out.insert(key.clone(), sorted(&map[key]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
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
pub async fn append(db: &PgPool, key: &AuditKey, entry: Entry<'_>) -> Result<i64, sqlx::Error> {
    let mut tx = db.begin().await?;
    lock(&mut tx).await?;
    let written = write(&mut tx, key, &entry).await?;
    tx.commit().await?;
    Ok(logged(written, &entry))
}

/// Appends `entry` unless a row of its sale already carries `change` as its detail's `change`
/// (under the chain's lock, so two writers of the same queue write it once): the row id, or
/// `None` if it was written before. `entry.detail` must carry it as `change`.
pub async fn append_once(
    db: &PgPool,
    key: &AuditKey,
    entry: Entry<'_>,
    change: &str,
) -> Result<Option<i64>, sqlx::Error> {
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
    let written = write(&mut tx, key, &entry).await?;
    tx.commit().await?;
    Ok(Some(logged(written, &entry)))
}

async fn lock(tx: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query("select pg_advisory_xact_lock($1)")
        .bind(CHAIN_LOCK)
        .execute(tx)
        .await
        .map(|_| ())
}

/// Logs a committed row with its MAC: the logs, kept elsewhere, say where the chain ended.
fn logged((id, mac): (i64, String), entry: &Entry<'_>) -> i64 {
    tracing::info!(audit_row = id, mac = %mac, action = entry.action, phase = entry.phase.as_str(),
        "audit row appended");
    id
}

/// Writes `entry` as the chain's next row, the lock held; its row id and MAC.
async fn write(
    tx: &mut sqlx::PgConnection,
    key: &AuditKey,
    entry: &Entry<'_>,
) -> Result<(i64, String), sqlx::Error> {
    let previous: Option<String> = sqlx::query_scalar(
        "select mac from ops_audit where mac is not null and mac <> $1 order by id desc limit 1",
    )
    .bind(BEFORE_CHAIN)
    .fetch_optional(&mut *tx)
    .await?;
    let previous = match previous {
        Some(mac) => mac,
        None => genesis(&mut *tx).await?,
    };
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
    };
    let mac = key.mac(&previous, &row);
    sqlx::query(
        "insert into ops_audit (id, at, sale, action, actor, phase, intent, before, after, detail, mac)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
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
    .execute(&mut *tx)
    .await?;
    Ok((id, mac))
}

/// The first chained row's predecessor: [`GENESIS`] and a digest of every row written before the
/// chain, in order.
async fn genesis(tx: &mut sqlx::PgConnection) -> Result<String, sqlx::Error> {
    use futures::TryStreamExt as _;
    let mut legacy = Legacy::default();
    let mut rows = sqlx::query_as::<_, Row>(
        "select id, at, sale, action, actor, phase, intent, before, after, detail
         from ops_audit where mac = $1 order by id",
    )
    .bind(BEFORE_CHAIN)
    .fetch(tx);
    while let Some(row) = rows.try_next().await? {
        legacy.add(&row);
    }
    Ok(legacy.genesis())
}

/// A running digest of the rows written before the chain.
#[derive(Default)]
struct Legacy {
    digest: sha2::Sha256,
    rows: u64,
}

impl Legacy {
    fn add(&mut self, row: &Row) {
        use sha2::Digest as _;
        self.digest.update(row.canonical().as_bytes());
        self.digest.update(b"\n");
        self.rows += 1;
    }

    fn genesis(self) -> String {
        use sha2::Digest as _;
        format!(
            "{GENESIS}:{}:{}",
            self.rows,
            hex::encode(self.digest.finalize())
        )
    }
}

/// What [`verify`] found.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Rows checked against the chain.
    pub chained: u64,
    /// Rows written before the chain existed (not checked).
    pub before_chain: u64,
    /// Each row that does not follow, and why.
    pub broken: Vec<(i64, &'static str)>,
    /// The newest row's id and MAC, to compare with the last one logged.
    pub last: Option<(i64, String)>,
}

/// Checks every row of the trail against the chain, oldest first. A row may have been made with
/// any of `keys` (the current one and those it replaced).
pub async fn verify(db: &PgPool, keys: &[AuditKey]) -> Result<Verdict, sqlx::Error> {
    use futures::TryStreamExt as _;
    let mut verdict = Verdict::default();
    let mut legacy = Some(Legacy::default());
    let mut previous = String::new();
    // Rows are read as they come, so a long trail is checked in bounded memory.
    let mut stream = sqlx::query(
        "select id, at, sale, action, actor, phase, intent, before, after, detail, mac
         from ops_audit order by id",
    )
    .fetch(db);
    while let Some(record) = stream.try_next().await? {
        use sqlx::{FromRow as _, Row as _};
        let row = Row::from_row(&record)?;
        let mac: Option<String> = record.try_get("mac")?;
        match (mac.as_deref(), legacy.as_mut()) {
            (Some(BEFORE_CHAIN), Some(legacy)) => {
                legacy.add(&row);
                verdict.before_chain += 1;
            }
            (Some(BEFORE_CHAIN), None) => verdict.broken.push((
                row.id,
                "is marked as written before the chain, inside it: re-marked by hand",
            )),
            (None, _) => verdict.broken.push((
                row.id,
                "carries no MAC: written by an older release during an upgrade, or by hand",
            )),
            (Some(stored), _) => {
                if let Some(legacy) = legacy.take() {
                    previous = legacy.genesis();
                }
                verdict.chained += 1;
                if !keys.iter().any(|key| key.mac(&previous, &row) == stored) {
                    verdict.broken.push((
                        row.id,
                        "does not match its MAC: it was edited, a row before it was deleted or \
                         edited, or the key is not the one the trail was written with",
                    ));
                }
                previous = stored.to_owned();
                verdict.last = Some((row.id, stored.to_owned()));
            }
        }
    }
    Ok(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Row {
        Row {
            id: 7,
            at: time::OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap(),
            sale: "s".into(),
            action: "pause".into(),
            actor: "alice".into(),
            phase: "done".into(),
            intent: Some(6),
            before: serde_json::json!({ "paused": false, "admission_rate": 5.0 }),
            after: serde_json::json!({ "admission_rate": 5.0, "paused": true }),
            detail: serde_json::json!({}),
        }
    }

    #[test]
    fn every_field_and_the_row_before_are_in_the_mac() {
        let key = AuditKey::new(&SecretString::from("k".repeat(32) + "x1")).unwrap();
        let mac = key.mac("previous", &row());
        assert_eq!(mac, key.mac("previous", &row()));
        assert_ne!(mac, key.mac("another", &row()));
        let mut edited = row();
        edited.actor = "mallory".into();
        assert_ne!(mac, key.mac("previous", &edited));
        let mut edited = row();
        edited.after["paused"] = false.into();
        assert_ne!(mac, key.mac("previous", &edited));
        let other = AuditKey::new(&SecretString::from("o".repeat(32) + "y2")).unwrap();
        assert_ne!(mac, other.mac("previous", &row()));
    }

    #[test]
    fn key_order_does_not_change_the_mac() {
        let key = AuditKey::new(&SecretString::from("k".repeat(32) + "x1")).unwrap();
        let mut reordered = row();
        reordered.before = serde_json::json!({ "admission_rate": 5.0, "paused": false });
        assert_eq!(key.mac("p", &row()), key.mac("p", &reordered));
    }
}
