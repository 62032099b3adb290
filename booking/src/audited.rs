//! The admin commands in the audit trail: each command that changes something records its intent
//! before it starts and its outcome when it ends (done, refused with the reasons it printed, or
//! failed with the error), under the operator's name (`FLOODGATE_OPERATOR`) and chained with
//! `FLOODGATE_AUDIT_KEY` like the ops API's rows; and `audit verify`.

use anyhow::Context as _;
use floodgate_booking::audit::{self, AuditKeys, Phase};
use serde_json::{json, Value};

use crate::cli::AuditArgs;

/// The longest operator name recorded.
const MAX_OPERATOR: usize = 64;

impl AuditArgs {
    fn keys(&self) -> anyhow::Result<AuditKeys> {
        let secret = self.audit_key.as_ref().context(
            "FLOODGATE_AUDIT_KEY is required: this command changes the sale, and every change is \
             recorded in the audit trail, chained with the booking services' key",
        )?;
        AuditKeys::parse(secret, self.previous_keys.as_ref()).map_err(anyhow::Error::msg)
    }

    fn operator(&self) -> anyhow::Result<String> {
        let name = match &self.operator {
            Some(name) => name.trim().to_owned(),
            None => format!(
                "cli:{}",
                std::env::var("USER").unwrap_or_else(|_| "unknown".into())
            ),
        };
        anyhow::ensure!(
            !name.is_empty()
                && name.chars().count() <= MAX_OPERATOR
                && !name.chars().any(char::is_control),
            "FLOODGATE_OPERATOR is a name of 1 to 64 printable characters"
        );
        Ok(name)
    }
}

/// How an admin command ended: the outcome to record and the lines it said.
pub(crate) struct Ended {
    pub(crate) phase: Phase,
    pub(crate) said: Vec<String>,
}

impl Ended {
    pub(crate) fn done(said: Vec<String>) -> Self {
        Self {
            phase: Phase::Done,
            said,
        }
    }

    pub(crate) fn refused(said: Vec<String>) -> Self {
        Self {
            phase: Phase::Refused,
            said,
        }
    }
}

/// Runs `work`, the command `action` on `sale` (asked with `detail`), between its intent and its
/// outcome in the audit trail. Nothing runs if the intent cannot be recorded.
pub(crate) async fn run<F>(
    db: &sqlx::PgPool,
    args: &AuditArgs,
    (sale, action): (&str, &str),
    detail: Value,
    work: F,
) -> anyhow::Result<Ended>
where
    F: std::future::Future<Output = anyhow::Result<Ended>>,
{
    let keys = args.keys()?;
    let operator = args.operator()?;
    let intent = audit::intend(db, &keys, (sale, action, &operator), json!({}), &detail)
        .await
        .context("recording the command in the audit trail (nothing was done)")?;
    let ended = work.await;
    let (phase, seen) = match &ended {
        Ok(ended) => (ended.phase, json!({ "asked": detail, "said": ended.said })),
        Err(e) => (
            Phase::Failed,
            json!({ "asked": detail, "error": format!("{e:#}") }),
        ),
    };
    intent
        .finish(db, &keys, phase, &json!({}), &seen)
        .await
        .context("recording the command's outcome in the audit trail (its intent is there)")?;
    ended
}

/// `audit verify`: every row against the chain; exits 2 naming each that does not follow, or if
/// the head is under a key the current one replaced.
pub(crate) async fn verify(db: &sqlx::PgPool, args: &AuditArgs) -> anyhow::Result<()> {
    let keys = args.keys()?;
    let verdict = audit::verify::verify(db, &keys)
        .await
        .context("reading the audit trail")?;
    let last = verdict.last.as_ref().map_or_else(
        || "no chained row yet".to_owned(),
        |(id, mac)| format!("newest row {id}, MAC {mac}"),
    );
    for (row, from, to) in &verdict.rotations {
        println!("row {row} rotated the key from {from} to {to}");
    }
    if let Some(head) = &verdict.in_force {
        println!("key in force at the head: {head}");
    }
    if verdict.intact(&keys) {
        println!(
            "audit trail intact: {} rows chained ({} written before the chain); {last}",
            verdict.chained, verdict.before_chain
        );
        println!("compare the newest row with the head anchored outside the database (docs/runbook.md, \"The audit trail\"): rows deleted from the end leave no gap");
        return Ok(());
    }
    println!(
        "audit trail broken: {} of {} rows do not follow the chain; {last}",
        verdict.broken.len(),
        verdict.chained
    );
    for (id, why) in &verdict.broken {
        println!("  row {id} {why}");
    }
    if let Some(behind) = verdict.head_behind(&keys) {
        println!(
            "  the head is under key {behind}, which FLOODGATE_AUDIT_KEY ({}) replaced: finish \
             the rotation (`floodgate-booking audit rotate`), or the chain was cut back and \
             continued with a retired key (compare with the anchored head)",
            keys.current.id()
        );
    }
    std::process::exit(2);
}

/// `audit rotate`: hands the chain over to the current key.
pub(crate) async fn rotate(db: &sqlx::PgPool, args: &AuditArgs) -> anyhow::Result<()> {
    let keys = args.keys()?;
    let operator = args.operator()?;
    match audit::rotate::rotate(db, &keys, &operator)
        .await
        .context("rotating the audit trail's key")?
    {
        audit::rotate::Rotation::AlreadyInForce => println!(
            "key {} is in force already: nothing written",
            keys.current.id()
        ),
        audit::rotate::Rotation::Rotated { row, from } => println!(
            "row {row} hands the audit trail over from key {from} to key {}: from now on only \
             it appends; keep key {from} among FLOODGATE_AUDIT_PREVIOUS_KEYS for `audit verify`",
            keys.current.id()
        ),
    }
    Ok(())
}
