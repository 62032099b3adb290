//! The admission autopilot as the sale's leader runs it: once a second, while the sale's
//! autopilot is on and admission is running, it reads every service's health summary, merges
//! them (`floodgate_platform::autopilot::merge`), lets the autopilot step, and writes the step
//! in one fenced script (`lua/autopilot.lua`) that applies only while the settings are the ones
//! it read: the rate it chose, what it decided and why (the console's), and a notable change
//! for the audit trail, which the booking service writes (this gateway has no database).
//!
//! One leader steps (the lease's fence), so gateways never fight over the rate; a new leader
//! goes on from the rate as it stands, with the last step's memory (a recent cut still settles)
//! while that rate is still the one the last step left. An operator's hand wins at once: a rate
//! set by hand turns the autopilot off in the same change, and the script then refuses the
//! leader's write.

use floodgate_platform::autopilot::{self, Audited, Autopilot, Decision, Settings, Step};
use floodgate_platform::keys::SaleKeys;
use floodgate_platform::runtime::RedisConn;

use super::view::RoomView;
use crate::scripts::pilot::{self, Piloted};

/// How often the autopilot steps: its settings' pace (settle, stale) is counted in these.
const EVERY_MS: i64 = 1_000;
/// How long a step stays for the console after the last write: a leader gone quiet shows.
const KEEP_MS: u64 = 30_000;

/// The autopilot of a sale this gateway leads.
pub(super) struct Pilot {
    /// The settings as the meta holds them: the script's condition.
    raw: String,
    /// `None` if the settings do not read (a newer release's): the rate is left alone.
    autopilot: Option<Autopilot>,
    stale_ms: i64,
    /// The rate as the meta holds it, as far as this pilot knows (taken over, or written by it):
    /// the script's other condition. A view with another rate means someone else set it.
    rate: f64,
    next_ms: i64,
    /// The rate last written to the audit trail (or taken over): a change is audited once it is
    /// notable against this, never one row a step.
    audited: f64,
}

impl Pilot {
    /// The pilot for the settings `raw` holds, taking over at `rate`, with the last leader's
    /// memory if the rate is still the one its last step left.
    fn new(raw: &str, rate: f64, now_ms: i64, last: Option<&Step>) -> Self {
        let settings: Option<Settings> = serde_json::from_str(raw).ok();
        if settings.is_none() {
            tracing::warn!(
                raw,
                "the sale's autopilot settings do not read; the rate is left alone"
            );
        }
        let memory = last
            .filter(|step| written(step.decision.rate()) == rate)
            .map(|step| step.memory)
            .unwrap_or_default();
        Self {
            raw: raw.to_owned(),
            stale_ms: settings.as_ref().map_or(0, |s| s.stale_ms),
            autopilot: settings.map(|s| Autopilot::resume(s, rate, memory)),
            rate,
            next_ms: now_ms,
            audited: rate,
        }
    }
}

/// Steps `pilot` (made or dropped to match the view's settings) if a second has passed, as
/// gateway `leader` of `sale` with fencing token `fence`. `view.rate` follows a rate written.
pub(super) async fn steer(
    pilot: &mut Option<Pilot>,
    (sale, leader): (&str, &str),
    conn: &mut RedisConn,
    keys: &SaleKeys,
    view: &mut RoomView,
    (fence, now_ms): (&str, i64),
) -> redis::RedisResult<()> {
    let Some(raw) = view.autopilot.as_deref() else {
        *pilot = None;
        return Ok(());
    };
    if pilot
        .as_ref()
        .is_none_or(|p| p.raw != raw || p.rate != view.rate)
    {
        // On, new settings, a rate someone else set, or a new leader: a fresh start from the
        // rate as it stands (the settings' bounds apply at once), remembering the last step's
        // cut if that rate is still its.
        let last = pilot::last_step(conn, keys).await?;
        *pilot = Some(Pilot::new(raw, view.rate, now_ms, last.as_ref()));
    }
    let Some(p) = pilot.as_mut() else {
        return Ok(());
    };
    let Some(autopilot) = p.autopilot.as_mut() else {
        return Ok(());
    };
    if now_ms < p.next_ms {
        return Ok(());
    }
    p.next_ms = now_ms + EVERY_MS;
    let summaries = pilot::health(conn, keys).await?;
    let health = autopilot::merge(&summaries, now_ms, p.stale_ms);
    let decision = autopilot.step(now_ms, health.as_ref());
    let to = written(decision.rate());
    let rate = (to != p.rate).then_some(to);
    let step = Step {
        at_ms: now_ms,
        leader: leader.to_owned(),
        decision,
        health,
        memory: autopilot.memory(),
    };
    let audited = autopilot::notable(p.audited, to).then(|| Audited {
        id: format!("{fence}@{now_ms}"),
        from: p.audited,
        to,
        step: step.clone(),
    });
    let json = serde_json::to_string(&step).expect("a step serialises");
    let audit = audited
        .as_ref()
        .map(|a| serde_json::to_string(a).expect("an audit entry serialises"));
    let call = pilot::Step {
        settings: &p.raw,
        from: p.rate,
        rate,
        json: &json,
        keep_ms: KEEP_MS,
        audit: audit.as_deref(),
    };
    match pilot::apply(conn, keys, fence, call).await? {
        Piloted::Applied => {
            if audited.is_some() {
                p.audited = to;
            }
            if rate.is_some() {
                p.rate = to;
                view.rate = to;
                tell(sale, &decision);
            }
        }
        // Turned off, changed or overridden meanwhile, or the lease moved on: the next tick's
        // view says which, and a fresh pilot starts if it is still on here.
        Piloted::Superseded | Piloted::NotLeader => *pilot = None,
    }
    Ok(())
}

/// A rate as it is written: to a thousandth of an admission a second, the rate's smallest step.
fn written(rate: f64) -> f64 {
    (rate * 1_000.0).round() / 1_000.0
}

/// A change of rate in the log and the metrics.
fn tell(sale: &str, decision: &Decision) {
    let action = match decision {
        Decision::Cut { .. } => "cut",
        Decision::Raised { .. } => "raised",
        Decision::Held { .. } => "bounded",
    };
    tracing::info!(sale, ?decision, "the autopilot moved the admission rate");
    metrics::counter!("floodgate_autopilot_changes_total", "sale" => sale.to_owned(), "action" => action)
        .increment(1);
}
