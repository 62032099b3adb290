//! A sale's live figures as operators see them (the ops API's `GET`, the console, and the
//! before and after of every audited change): the sale's settings and counters from Redis, put
//! together in one read.

use floodgate_platform::autopilot::{Settings, Step};
use serde::Serialize;

use crate::error::ApiError;
use crate::gatekeeper::LATELY_MS;
use crate::AppState;

/// A sale's live figures as the ops API and the console show them (docs/protocol.md, "Ops API").
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct OpsFigures {
    pub sale: String,
    pub opens_at_ms: i64,
    pub open: bool,
    pub paused: bool,
    pub sold_out: bool,
    /// Admissions per second, as set.
    pub admission_rate: f64,
    /// Live admissions per second over the last ten seconds.
    pub measured_rate: f64,
    pub active_cap: u64,
    pub stock_factor: f64,
    /// Who may come in and what they must show; the challenge and its difficulty can be changed
    /// here during an attack.
    pub door: floodgate_protocol::settings::Door,
    pub tickets_issued: u64,
    pub frontier: u64,
    /// Tickets not yet admitted whose holders are connected or within their grace.
    pub waiting: u64,
    /// Clients connected now, over every gateway.
    pub live: u64,
    pub in_grace: u64,
    /// Live tickets admitted, and dead tickets skipped.
    pub admitted: u64,
    pub skipped: u64,
    /// As DESIGN.md defines it: unspent admission tokens plus live holds (what the cap counts).
    pub active: u64,
    /// Admission tokens neither spent, expired nor past the sale's `stock_hold_secs`, whose
    /// people are there: a token let in while its place was away counts from its person's return.
    pub unspent_tokens: u64,
    pub pools: Vec<OpsPool>,
    pub autopilot: OpsAutopilot,
}

/// The admission autopilot (docs/runbook.md, "The autopilot"): whether it moves the rate, with
/// what settings, and what the sale's leader last decided and why.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct OpsAutopilot {
    pub enabled: bool,
    /// The settings ops set (`null` while off).
    pub settings: Option<Settings>,
    /// The leader's last step (`null` if none in the last 30 s): kept after the autopilot is
    /// turned off, until it expires, so the console shows what it did last.
    pub last_step: Option<Step>,
}

/// One pool's counts (`null` where its state is missing).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct OpsPool {
    pub pool: String,
    pub capacity: Option<i64>,
    pub available: Option<i64>,
    pub held: Option<i64>,
    pub sold: Option<i64>,
    pub holds: u64,
}

pub async fn read(state: &AppState, sale: &str) -> Result<OpsFigures, ApiError> {
    let f = state
        .gatekeeper
        .sale_figures(sale)
        .await?
        .ok_or_else(ApiError::unknown_sale)?;
    let holds: u64 = f.pools.iter().map(|(_, c)| c.holds).sum();
    let meta = &f.meta;
    Ok(OpsFigures {
        sale: sale.to_owned(),
        opens_at_ms: meta.opens_at_ms,
        open: f.now_ms >= meta.opens_at_ms,
        paused: meta.paused,
        sold_out: meta.sold_out,
        admission_rate: meta.rate,
        measured_rate: f.admitted_lately as f64 * 1000.0 / LATELY_MS as f64,
        active_cap: meta.active_cap,
        stock_factor: meta.stock_factor,
        door: meta.door,
        tickets_issued: f.issued,
        frontier: f.frontier,
        waiting: f
            .issued
            .saturating_sub(f.frontier)
            .saturating_sub(f.dead_ahead),
        live: f.live,
        in_grace: f.in_grace,
        admitted: meta.admitted_total,
        skipped: meta.dead_total,
        active: meta.unspent + holds,
        unspent_tokens: meta.unspent,
        pools: f
            .pools
            .into_iter()
            .map(|(pool, c)| OpsPool {
                pool,
                capacity: c.capacity,
                available: c.available,
                held: c.held,
                sold: c.sold,
                holds: c.holds,
            })
            .collect(),
        autopilot: OpsAutopilot {
            enabled: meta.autopilot.is_some(),
            settings: meta.autopilot_settings(),
            last_step: f.autopilot_step,
        },
    })
}
