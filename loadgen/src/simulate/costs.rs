//! The unit costs the model runs on, calibrated from one recorded run ([`Recorded`]): CPU per
//! join, per message, per waiting client, per request, per event; Redis time per script; memory
//! per connection.

use anyhow::{anyhow, Context as _};
use serde::Serialize;

pub use super::recorded::{recorded, Recorded, DEFAULT_RUN, OTHER_RUN};

/// The unit costs the model runs on, each from one phase of a recorded run.
#[derive(Clone, Debug, Serialize)]
pub struct Costs {
    /// The run they come from.
    pub run: String,
    /// The gateways' CPU per join and its leave (the burst).
    pub gateway_join_us: f64,
    /// The sale's slot's Redis CPU per join (the burst: joins go in batches).
    pub slot_join_us: f64,
    /// The gateways' CPU per message of a change sent to everyone (the fan-out).
    pub gateway_message_us: f64,
    pub gateway_bytes_per_connection: f64,
    /// A waiting client's cost a second to the gateways, at the front of the line and behind a
    /// million others (waiting by push: heartbeats and the places that cross the grid).
    pub gateway_wait_front_us_per_client_s: f64,
    pub gateway_wait_behind_us_per_client_s: f64,
    /// The sale's slot's Redis CPU a second while people wait: the leader's tick and the
    /// gateways' reads, whatever the line's length (a waiting client costs Redis nothing of its
    /// own: the gateways work out places themselves).
    pub slot_us_per_s: f64,
    /// The booking service's CPU per reservation request (claim, script, broker ack, ack, 201).
    pub booking_request_us: f64,
    /// Redis time of a reservation's three scripts (by `INFO commandstats`, shared out as
    /// `redis-benchmark` times each): spending the token on the sale's slot, the pool's
    /// `reserve` on its primary (every pool tried), its `ack` there (every hold).
    pub claim_script_us: f64,
    pub reserve_script_us: f64,
    pub ack_script_us: f64,
    /// The broker's, the consumer's and PostgreSQL's CPU per event.
    pub broker_event_us: f64,
    pub consumer_event_us: f64,
    pub postgres_event_us: f64,
    /// A reservation's latency with nothing queued: the broker's round trip, mostly (p50).
    pub reservation_base_ms: f64,
    /// On the benchmark's machine, where everything shares its cores: the cores the gateways
    /// got while joins came (the queue's opening) and the reservations a second the booking
    /// endpoint answered end to end.
    pub bench_gateway_cores: f64,
    pub bench_booking_per_second: f64,
    /// The cores the gateways got while one change went out to everyone (the fan-out).
    pub bench_fanout_cores: f64,
}

impl Costs {
    /// The unit costs of one recorded run, each checked to be a positive number.
    pub fn calibrate(r: &Recorded) -> anyhow::Result<Self> {
        let costs = Self::read(r)?;
        costs.check()?;
        Ok(costs)
    }

    /// Every cost a positive number: a figure the run did not record (a zero, a missing field)
    /// would make a plan of nothing.
    fn check(&self) -> anyhow::Result<()> {
        let named = [
            ("gateway CPU per join", self.gateway_join_us),
            ("Redis CPU per join", self.slot_join_us),
            ("gateway CPU per message", self.gateway_message_us),
            ("memory per connection", self.gateway_bytes_per_connection),
            (
                "a waiting client at the front",
                self.gateway_wait_front_us_per_client_s,
            ),
            (
                "a waiting client behind",
                self.gateway_wait_behind_us_per_client_s,
            ),
            ("the leader's tick", self.slot_us_per_s),
            ("booking CPU per request", self.booking_request_us),
            ("the claim script", self.claim_script_us),
            ("the reserve script", self.reserve_script_us),
            ("the ack script", self.ack_script_us),
            ("the broker per event", self.broker_event_us),
            ("the consumer per event", self.consumer_event_us),
            ("PostgreSQL per event", self.postgres_event_us),
            ("a reservation's latency", self.reservation_base_ms),
            ("the benchmark's gateway cores", self.bench_gateway_cores),
            (
                "the benchmark's booking rate",
                self.bench_booking_per_second,
            ),
            ("the benchmark's fan-out cores", self.bench_fanout_cores),
        ];
        match named.iter().find(|(_, v)| !(v.is_finite() && *v > 0.0)) {
            Some((name, v)) => Err(anyhow!(
                "the run {} gives {name} as {v}: not a cost",
                self.run
            )),
            None => Ok(()),
        }
    }

    fn read(r: &Recorded) -> anyhow::Result<Self> {
        let queue = r.queue.as_ref().context("the run has no queue scenario")?;
        let booking = r
            .booking
            .as_ref()
            .context("the run has no raw booking scenario")?;
        let fanout = r.phase("queue-fanout")?;
        let opening = r.phase("queue-opening")?;
        let booked = r.phase("raw-booking-50")?;
        // A waiting client's CPU a second: the phase's CPU over its clients and its seconds.
        let per_client_s = |phase: &str, role: &str| -> anyhow::Result<f64> {
            Ok(r.per(phase, role, "clients")? / r.phase(phase)?.seconds.max(1e-9))
        };
        let scripts = r.count(booked, "evalsha_usec")? / r.count(booked, "reservations")?;
        let alone = |script: &str| r.per(&format!("raw-script-{script}"), "redis", "requests");
        let (claim, reserve, ack) = (alone("claim_token")?, alone("reserve")?, alone("ack")?);
        let share = scripts / (claim + reserve + ack).max(1e-9);
        let waiting = r.phase("poll-push-behind")?;
        Ok(Self {
            run: r.run.clone(),
            gateway_join_us: r.per("burst", "gateway", "joins")?,
            slot_join_us: r.per("burst", "redis", "joins")?,
            gateway_message_us: r.per("queue-fanout", "gateway", "messages")?,
            gateway_bytes_per_connection: queue.bytes_per_connection,
            gateway_wait_front_us_per_client_s: per_client_s("poll-push", "gateway")?,
            gateway_wait_behind_us_per_client_s: per_client_s("poll-push-behind", "gateway")?,
            slot_us_per_s: r.cpu(waiting, "poll-push-behind", "redis")? * 1e6
                / waiting.seconds.max(1e-9),
            booking_request_us: r.per("raw-booking-50", "booking", "reservations")?,
            claim_script_us: claim * share,
            reserve_script_us: reserve * share,
            ack_script_us: ack * share,
            broker_event_us: r.per("raw-booking-50", "broker", "reservations")?,
            consumer_event_us: r.per("raw-consume-50", "consumer", "events")?,
            postgres_event_us: r.per("raw-consume-50", "postgres", "events")?,
            reservation_base_ms: booking.latency_ms.p50,
            bench_gateway_cores: r.cpu(opening, "queue-opening", "gateway")?
                / opening.seconds.max(1e-9),
            bench_booking_per_second: booking.reservations_per_second,
            bench_fanout_cores: r.cpu(fanout, "queue-fanout", "gateway")?
                / fanout.seconds.max(1e-9),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_without_a_phase_or_a_role_the_costs_need_is_refused_by_name() {
        let mut run: Recorded = serde_json::from_str(DEFAULT_RUN).unwrap();
        assert!(Costs::calibrate(&run).is_ok());
        run.phases.remove("poll-push-behind");
        let refused = Costs::calibrate(&run).unwrap_err().to_string();
        assert!(refused.contains("poll-push-behind"), "{refused}");
        let mut run: Recorded = serde_json::from_str(DEFAULT_RUN).unwrap();
        run.phases.get_mut("burst").unwrap().cpu.remove("gateway");
        let refused = Costs::calibrate(&run).unwrap_err().to_string();
        assert!(
            refused.contains("burst") && refused.contains("gateway"),
            "{refused}"
        );
        let mut run: Recorded = serde_json::from_str(DEFAULT_RUN).unwrap();
        run.phases
            .get_mut("burst")
            .unwrap()
            .counts
            .insert("joins".into(), 0.0);
        assert!(Costs::calibrate(&run).is_err());
    }

    #[test]
    fn a_results_folder_without_phases_is_refused() {
        let dir = std::env::temp_dir().join(format!("simulate-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let refused = Recorded::from_results(&dir).unwrap_err().to_string();
        assert!(refused.contains("no benchmark phases"), "{refused}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
