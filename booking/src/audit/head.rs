//! Where the audit chain stands: the MAC its next row follows (the genesis, a digest of the rows
//! written before the chain, until the first) and the key in force at its head, which appends
//! and rotations go on from ([`super::chain`], [`super::rotate`]).

use super::keys::AuditKeys;
use super::row::{Row, BEFORE_CHAIN};

/// What the first chained row follows: this, and the digest of the rows before the chain.
const GENESIS: &str = "genesis";

/// The MAC the next row follows (the genesis before the first), and the key in force there: the
/// one the newest row names, or, for a row chained before rows named their keys, the one of
/// `keys` that made it (`None` when none did, or there is no chain yet).
pub(super) async fn head(
    tx: &mut sqlx::PgConnection,
    keys: &AuditKeys,
) -> Result<(String, Option<String>), sqlx::Error> {
    let newest: Option<(String, Option<String>)> = sqlx::query_as(
        "select mac, key_id from ops_audit where mac is not null and mac <> $1
         order by id desc limit 1",
    )
    .bind(BEFORE_CHAIN)
    .fetch_optional(&mut *tx)
    .await?;
    match newest {
        None => Ok((genesis(&mut *tx).await?, None)),
        Some((mac, Some(named))) => Ok((mac, Some(named))),
        Some((mac, None)) => {
            let made = unnamed_head_key(&mut *tx, keys, &mac).await?;
            Ok((mac, made))
        }
    }
}

/// Which of `keys` made the newest chained row, one of an older release that named no key (its
/// MAC is `mac`): so that appends and rotations go on from the key really in force, as `audit
/// verify` reads it, not from whichever key this process holds as current.
async fn unnamed_head_key(
    tx: &mut sqlx::PgConnection,
    keys: &AuditKeys,
    mac: &str,
) -> Result<Option<String>, sqlx::Error> {
    let chained = "from ops_audit where mac is not null and mac <> $1 order by id desc";
    let Some(row) = sqlx::query_as::<_, Row>(&format!(
        "select id, at, sale, action, actor, phase, intent, before, after, detail, key_id
         {chained} limit 1"
    ))
    .bind(BEFORE_CHAIN)
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(None);
    };
    let before: Option<String> =
        sqlx::query_scalar(&format!("select mac {chained} offset 1 limit 1"))
            .bind(BEFORE_CHAIN)
            .fetch_optional(&mut *tx)
            .await?;
    let before = match before {
        Some(mac) => mac,
        None => genesis(&mut *tx).await?,
    };
    Ok(keys
        .all()
        .find(|key| row.mac(key, &before) == mac)
        .map(|key| key.id().to_owned()))
}

/// The first chained row's predecessor: [`GENESIS`] and a digest of every row written before the
/// chain, in order.
async fn genesis(tx: &mut sqlx::PgConnection) -> Result<String, sqlx::Error> {
    use futures::TryStreamExt as _;
    let mut legacy = Legacy::default();
    let mut rows = sqlx::query_as::<_, Row>(
        "select id, at, sale, action, actor, phase, intent, before, after, detail, key_id
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
pub struct Legacy {
    digest: sha2::Sha256,
    rows: u64,
}

impl Legacy {
    pub fn add(&mut self, row: &Row) {
        use sha2::Digest as _;
        self.digest.update(row.canonical().as_bytes());
        self.digest.update(b"\n");
        self.rows += 1;
    }

    /// The MAC the chain's first row follows.
    pub fn genesis(self) -> String {
        use sha2::Digest as _;
        format!(
            "{GENESIS}:{}:{}",
            self.rows,
            hex::encode(self.digest.finalize())
        )
    }
}
