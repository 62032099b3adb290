//! The model against the machines: calibrated on one recorded benchmark run, it replays another
//! run's scenarios (`deploy/bench.sh`'s burst, its 100,000 sessions in line, its whole rush) on
//! that run's machine and predicts its figures. Runs of the same benchmark differ by 30 to 40 %
//! on these shared machines (BENCHMARKS.md), so a prediction within [`BOUND`] of what the other
//! run recorded is as close as a second run would have come.

use std::time::Duration;

use anyhow::Context as _;
use floodgate_booking::catalog::SaleFile;
use serde::Serialize;

use super::costs::{Costs, Recorded};
use super::model::{Model, Outcome, LIMIT};
use super::scenario::{Crowd, Fleet, Sale};

/// The largest relative error a prediction may have: the spread of runs on these machines.
pub const BOUND: f64 = 0.4;

/// The benchmark's sale (`deploy/sales/bench.toml`), as its rush runs it.
const BENCH_SALE: &str = include_str!("../../../deploy/sales/bench.toml");
/// The rush's people ask for 1 or 2 seats (`floodgate-loadgen sale --seats`, its default).
const BENCH_SEATS: u32 = 2;
/// From the 201 to paid through the sandbox provider (start the payment, the checkout, the
/// webhook): a few round trips on loopback.
const BENCH_PAY_MS: f64 = 50.0;

/// What a prediction tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The model's dynamics: the figure comes out of playing the scenario.
    Model,
    /// A unit cost carried from one run to the other (a formula, not the dynamics): how far
    /// runs differ, which bounds what any prediction can do.
    UnitCost,
}

/// One predicted figure beside the one recorded.
#[derive(Clone, Debug, Serialize)]
pub struct Prediction {
    pub kind: Kind,
    pub scenario: &'static str,
    pub figure: &'static str,
    pub predicted: f64,
    pub recorded: f64,
}

impl std::fmt::Display for Prediction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} / {}: predicted {:.2}, recorded {:.2} ({:.0} %)",
            self.scenario,
            self.figure,
            self.predicted,
            self.recorded,
            self.error() * 100.0
        )
    }
}

impl Prediction {
    /// |predicted - recorded| / recorded.
    pub fn error(&self) -> f64 {
        (self.predicted - self.recorded).abs() / self.recorded.abs().max(f64::MIN_POSITIVE)
    }
}

/// The benchmark machine as a fleet: the gateways' share of its cores, the booking endpoint's
/// measured rate, one Redis.
fn bench_fleet(costs: &Costs) -> Fleet {
    Fleet {
        gateway_cores: costs.bench_gateway_cores,
        booking_per_second: costs.bench_booking_per_second,
        pool_primaries: 1,
    }
}

/// People who all join before the opening, `opens_in_s` after the first, over `spread_s`.
fn early_crowd(people: u64, opens_in_s: f64, spread_s: f64) -> Crowd {
    Crowd {
        people,
        prequeue: 1.0,
        prequeue_from_s: opens_in_s,
        prequeue_spread_s: spread_s,
        spike_s: 0.0,
        patience_s: None,
        think_ms: 0.0,
        pay_ratio: 0.7,
        pay_ms: BENCH_PAY_MS,
        seats: BENCH_SEATS,
        autopilot: None,
        seed: 7,
    }
}

/// Calibrated on `calibration`, the model's predictions of `target`'s figures.
pub fn predict(calibration: &Recorded, target: &Recorded) -> anyhow::Result<Vec<Prediction>> {
    let costs = Costs::calibrate(calibration)?;
    let bench = Bench {
        sale: Sale::from_file(&SaleFile::parse(BENCH_SALE)?)?,
        fleet: bench_fleet(&costs),
        costs,
    };
    let mut out = Vec::new();
    bench.burst(target, &mut out)?;
    bench.queue(target, &mut out)?;
    bench.rush(target, &mut out)?;
    Ok(out)
}

/// The benchmark's machine, sale and costs.
struct Bench {
    costs: Costs,
    sale: Sale,
    fleet: Fleet,
}

fn add(
    out: &mut Vec<Prediction>,
    kind: Kind,
    scenario: &'static str,
    figure: &'static str,
    predicted: f64,
    recorded: f64,
) {
    out.push(Prediction {
        kind,
        scenario,
        figure,
        predicted,
        recorded,
    });
}

impl Bench {
    fn run(&self, crowd: &Crowd, limit: Duration) -> Outcome {
        Model::new(&self.costs, &self.sale, &self.fleet, crowd).run(limit)
    }

    /// `burst`: joins spread over a second, before the opening: when all are ticketed, and the
    /// gateways' CPU for them.
    fn burst(&self, target: &Recorded, out: &mut Vec<Prediction>) -> anyhow::Result<()> {
        let burst = target
            .burst
            .as_ref()
            .context("the target run has no burst")?;
        let joins = target
            .phases
            .get("burst")
            .and_then(|p| p.cpu.get("gateway"))
            .context("the target run has no burst phase")?;
        let tickets = self.run(
            &early_crowd(burst.clients, 60.0, burst.within_ms / 1e3),
            Duration::ZERO,
        );
        add(
            out,
            Kind::Model,
            "burst",
            "all ticketed after (s)",
            tickets.all_ticketed_s,
            burst.seconds_until_all_ticketed,
        );
        add(
            out,
            Kind::UnitCost,
            "burst",
            "gateway CPU (s)",
            cpu(&tickets, |s| s.gateway_us),
            *joins,
        );
        Ok(())
    }

    /// `queue`: 100,000 sessions opened, held, then one change sent to all of them.
    fn queue(&self, target: &Recorded, out: &mut Vec<Prediction>) -> anyhow::Result<()> {
        let queue = target
            .queue
            .as_ref()
            .context("the target run has no queue")?;
        let c = &self.costs;
        let opening = self.run(&early_crowd(queue.sessions, 600.0, 0.0), Duration::ZERO);
        add(
            out,
            Kind::UnitCost,
            "queue",
            "seconds to open the sessions",
            opening.all_ticketed_s,
            queue.seconds_to_open,
        );
        let sessions = queue.sessions as f64;
        add(
            out,
            Kind::UnitCost,
            "queue",
            "gateway memory for the sessions (MB)",
            sessions * c.gateway_bytes_per_connection / 1e6,
            sessions * queue.bytes_per_connection / 1e6,
        );
        // The change itself is each client's first message: the last client has it once the
        // gateways have sent one to everyone (the line's moves after it come later).
        let fan_out_s = sessions * c.gateway_message_us / 1e6 / c.bench_fanout_cores;
        add(
            out,
            Kind::UnitCost,
            "queue",
            "one change reaching everyone, max (s)",
            fan_out_s,
            queue.fan_out_ms.max / 1e3,
        );
        Ok(())
    }

    /// `sale`: the whole rush of people who all join before the opening.
    fn rush(&self, target: &Recorded, out: &mut Vec<Prediction>) -> anyhow::Result<()> {
        let rush = target.sale.as_ref().context("the target run has no sale")?;
        let phase = target
            .phases
            .get("sale")
            .context("the target run has no sale phase")?;
        let mut crowd = early_crowd(rush.clients, rush.seconds_until_opening, 0.0);
        crowd.think_ms = rush.think_ms;
        crowd.pay_ratio = rush.pay_ratio;
        let run = self.run(&crowd, LIMIT);
        let role = |r: &str| phase.cpu.get(r).copied().unwrap_or(0.0);
        let (a, b) = (&run.join_to_admission_ms, &rush.join_to_admission_ms);
        add(
            out,
            Kind::Model,
            "sale",
            "everyone finished after (s)",
            run.everyone_finished_s,
            rush.seconds_until_everyone_finished,
        );
        add(
            out,
            Kind::Model,
            "sale",
            "join to admission p50 (s)",
            a.p50 / 1e3,
            b.p50 / 1e3,
        );
        add(
            out,
            Kind::Model,
            "sale",
            "join to admission p99 (s)",
            a.p99 / 1e3,
            b.p99 / 1e3,
        );
        add(
            out,
            Kind::Model,
            "sale",
            "paid",
            run.paid as f64,
            rush.paid as f64,
        );
        add(
            out,
            Kind::Model,
            "sale",
            "walked away",
            run.walked_away as f64,
            rush.walked_away as f64,
        );
        add(
            out,
            Kind::Model,
            "sale",
            "sold out while waiting",
            run.sold_out_while_waiting as f64,
            rush.sold_out_while_waiting as f64,
        );
        add(
            out,
            Kind::Model,
            "sale",
            "gateway CPU (s)",
            cpu(&run, |s| s.gateway_us),
            role("gateway"),
        );
        add(
            out,
            Kind::Model,
            "sale",
            "Redis CPU (s)",
            cpu(&run, |s| s.slot_us + s.pools_us),
            role("redis"),
        );
        Ok(())
    }
}

/// A resource's CPU seconds over the whole run.
fn cpu(run: &Outcome, f: fn(&super::model::Second) -> f64) -> f64 {
    run.seconds.iter().map(f).sum::<f64>() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::capacity::Runs;

    fn within_bound(calibration: &Recorded, target: &Recorded) {
        let predictions = predict(calibration, target).unwrap();
        // Every figure on stderr: a failure shows the whole picture.
        for p in &predictions {
            eprintln!("{p}");
        }
        let off: Vec<String> = predictions
            .iter()
            .filter(|p| p.error() > BOUND)
            .map(ToString::to_string)
            .collect();
        assert!(
            off.is_empty(),
            "calibrated on {}, predicting {}:\n{}",
            calibration.run,
            target.run,
            off.join("\n")
        );
        assert!(predictions.len() >= 12, "every scenario is predicted");
    }

    #[test]
    fn calibrated_on_one_run_the_model_predicts_the_other() {
        let runs = Runs::committed().unwrap();
        within_bound(&runs.a, &runs.b);
    }

    #[test]
    fn and_the_other_way_round() {
        let runs = Runs::committed().unwrap();
        within_bound(&runs.b, &runs.a);
    }
}
