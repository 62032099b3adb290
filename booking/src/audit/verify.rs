//! `audit verify`: every row of the trail against the chain, oldest first, each with the key in
//! force at its position ([`super::keys`]). The walk is pure ([`Walk`]), fed one row at a time
//! from a stream, so a long trail is checked in bounded memory and every rule has a unit test.

use serde_json::Value;
use sqlx::PgPool;

use super::head::Legacy;
use super::keys::{AuditKeys, ROTATE};
use super::row::{Row, BEFORE_CHAIN};

/// What [`verify`] found.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Rows checked against the chain.
    pub chained: u64,
    /// Rows written before the chain existed (not checked).
    pub before_chain: u64,
    /// Each row that does not follow, and why.
    pub broken: Vec<(i64, String)>,
    /// The newest row's id and MAC, to compare with the head anchored outside the database.
    pub last: Option<(i64, String)>,
    /// The key in force at the head (`None` before any row names one).
    pub in_force: Option<String>,
    /// Each rotation: its row, and the keys it handed over from and to.
    pub rotations: Vec<(i64, String, String)>,
}

impl Verdict {
    /// The head is under a key that `keys.current` has replaced: a rotation not yet made, or a
    /// chain cut back and continued with a retired key.
    pub fn head_behind(&self, keys: &AuditKeys) -> Option<&str> {
        self.in_force
            .as_deref()
            .filter(|id| *id != keys.current.id())
    }

    /// Intact: no row broken and the head under the current key.
    pub fn intact(&self, keys: &AuditKeys) -> bool {
        self.broken.is_empty() && self.head_behind(keys).is_none()
    }
}

/// The walk along the chain.
pub struct Walk<'k> {
    keys: &'k AuditKeys,
    legacy: Option<Legacy>,
    previous: String,
    /// Whether a row has named its key: from then on every row must.
    named: bool,
    pub verdict: Verdict,
}

impl<'k> Walk<'k> {
    pub fn new(keys: &'k AuditKeys) -> Self {
        Self {
            keys,
            legacy: Some(Legacy::default()),
            previous: String::new(),
            named: false,
            verdict: Verdict::default(),
        }
    }

    /// Takes the next row, its stored MAC `mac`.
    pub fn row(&mut self, row: &Row, mac: Option<&str>) {
        let broken = &mut self.verdict.broken;
        match (mac, self.legacy.as_mut()) {
            (Some(BEFORE_CHAIN), Some(legacy)) => {
                legacy.add(row);
                self.verdict.before_chain += 1;
            }
            (Some(BEFORE_CHAIN), None) => broken.push((
                row.id,
                "is marked as written before the chain, inside it: re-marked by hand".into(),
            )),
            (None, _) => broken.push((
                row.id,
                "carries no MAC: written by an older release during an upgrade, or by hand".into(),
            )),
            (Some(stored), _) => {
                if let Some(legacy) = self.legacy.take() {
                    self.previous = legacy.genesis();
                }
                self.verdict.chained += 1;
                if let Err(why) = self.check(row, stored) {
                    self.verdict.broken.push((row.id, why));
                }
                self.previous = stored.to_owned();
                self.verdict.last = Some((row.id, stored.to_owned()));
            }
        }
    }

    /// Checks a chained row: made with the key in force at its position, or, for a rotation,
    /// handed over from it.
    fn check(&mut self, row: &Row, stored: &str) -> Result<(), String> {
        let Some(id) = row.key_id.as_deref() else {
            if self.named {
                return Err("names no key, after rows that do: inserted or edited by hand".into());
            }
            // Chained before rows named their keys: any key given may have made it, and the one
            // that did is in force after it. So a chain stripped of its names and made again
            // with a retired key ends under that key, which is not intact.
            let made = self
                .keys
                .all()
                .find(|k| row.mac(k, &self.previous) == stored)
                .ok_or_else(mismatch)?;
            self.verdict.in_force = Some(made.id().to_owned());
            return Ok(());
        };
        // The first named row may follow unnamed rows made with another key (the release that
        // named keys came with a new one): the key it names is in force from it on, and the
        // head must still end under the current key.
        let first_named = !self.named;
        self.named = true;
        let key = self.keys.by_id(id).ok_or_else(|| {
            format!(
                "is made with key {id}, which verify was not given (FLOODGATE_AUDIT_KEY or \
                 FLOODGATE_AUDIT_PREVIOUS_KEYS)"
            )
        })?;
        if row.mac(key, &self.previous) != stored {
            return Err(mismatch());
        }
        if row.action == ROTATE {
            return self.rotation(row, id);
        }
        match &self.verdict.in_force {
            Some(in_force) if in_force != id && !first_named => Err(format!(
                "is made with key {id}, but key {in_force} was in force at its position: a \
                 retired key signs nothing new"
            )),
            _ => {
                self.verdict.in_force = Some(id.to_owned());
                Ok(())
            }
        }
    }

    /// A rotation row (its MAC already checked under the key it names, `to`): it hands over from
    /// the key in force, with that key's handover.
    fn rotation(&mut self, row: &Row, to: &str) -> Result<(), String> {
        let field = |name: &str| row.detail.get(name).and_then(Value::as_str);
        let (Some(from), Some(named), Some(handover)) =
            (field("from"), field("to"), field("handover"))
        else {
            return Err("is a rotation without its from, to and handover".into());
        };
        if named != to {
            return Err(format!("rotates to key {named} but is made with key {to}"));
        }
        if let Some(in_force) = &self.verdict.in_force {
            if in_force != from {
                return Err(format!(
                    "rotates from key {from}, but key {in_force} was in force at its position"
                ));
            }
        }
        let old = self.keys.by_id(from).ok_or_else(|| {
            format!(
                "rotates from key {from}, which verify was not given: its handover is unchecked"
            )
        })?;
        if old.handover(&self.previous, to) != handover {
            return Err(format!(
                "rotates from key {from} without that key's handover: not made by its holder"
            ));
        }
        self.verdict.in_force = Some(to.to_owned());
        self.verdict
            .rotations
            .push((row.id, from.to_owned(), to.to_owned()));
        Ok(())
    }
}

fn mismatch() -> String {
    "does not match its MAC: it was edited, a row before it was deleted or edited, or the key \
     is not the one the trail was written with"
        .into()
}

/// Checks every row of the trail against the chain, oldest first.
pub async fn verify(db: &PgPool, keys: &AuditKeys) -> Result<Verdict, sqlx::Error> {
    use futures::TryStreamExt as _;
    let mut walk = Walk::new(keys);
    let mut stream = sqlx::query(
        "select id, at, sale, action, actor, phase, intent, before, after, detail, key_id, mac
         from ops_audit order by id",
    )
    .fetch(db);
    while let Some(record) = stream.try_next().await? {
        use sqlx::{FromRow as _, Row as _};
        let row = Row::from_row(&record)?;
        let mac: Option<String> = record.try_get("mac")?;
        walk.row(&row, mac.as_deref());
    }
    Ok(walk.verdict)
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
