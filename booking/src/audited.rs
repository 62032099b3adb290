//! The admin commands in the audit trail: each command that changes something records its intent
//! before it starts and its outcome when it ends (done, refused with the reasons it printed, or
//! failed with the error), under the operator's name (`FLOODGATE_OPERATOR`) and chained with
//! `FLOODGATE_AUDIT_KEY` like the ops API's rows; and `audit verify`.

use anyhow::Context as _;
use floodgate_booking::audit::{self, chain, AuditKey, Phase};
use serde_json::{json, Value};

use crate::cli::AuditArgs;

/// The longest operator name recorded.
const MAX_OPERATOR: usize = 64;

impl AuditArgs {
    fn key(&self) -> anyhow::Result<AuditKey> {
        let secret = self.audit_key.as_ref().context(
            "FLOODGATE_AUDIT_KEY is required: this command changes the sale, and every change is \
             recorded in the audit trail, chained with the booking services' key",
        )?;
        AuditKey::new(secret).map_err(anyhow::Error::msg)
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
    let key = args.key()?;
    let operator = args.operator()?;
    let intent = audit::intend(db, &key, (sale, action, &operator), json!({}), &detail)
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
        .finish(db, &key, phase, &json!({}), &seen)
        .await
        .context("recording the command's outcome in the audit trail (its intent is there)")?;
    ended
}

/// `audit verify`: every row against the chain; exits 2 naming each that does not follow.
pub(crate) async fn verify(db: &sqlx::PgPool, args: &AuditArgs) -> anyhow::Result<()> {
    use secrecy::ExposeSecret as _;
    let mut keys = vec![args.key()?];
    if let Some(previous) = &args.previous_keys {
        for key in previous
            .expose_secret()
            .split(',')
            .filter(|k| !k.trim().is_empty())
        {
            let key = AuditKey::new(&secrecy::SecretString::from(key.trim().to_owned()))
                .map_err(|e| anyhow::anyhow!("FLOODGATE_AUDIT_PREVIOUS_KEYS: {e}"))?;
            keys.push(key);
        }
    }
    let verdict = chain::verify(db, &keys)
        .await
        .context("reading the audit trail")?;
    let last = verdict.last.as_ref().map_or_else(
        || "no chained row yet".to_owned(),
        |(id, mac)| format!("newest row {id}, MAC {mac}"),
    );
    if verdict.broken.is_empty() {
        println!(
            "audit trail intact: {} rows chained ({} written before the chain); {last}",
            verdict.chained, verdict.before_chain
        );
        println!("compare the newest row with the last `audit row appended` in the logs: rows deleted from the end leave no gap");
        return Ok(());
    }
    println!(
        "audit trail broken: {} of {} rows do not follow the chain",
        verdict.broken.len(),
        verdict.chained
    );
    for (id, why) in &verdict.broken {
        println!("  row {id} {why}");
    }
    std::process::exit(2);
}
