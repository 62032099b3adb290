//! The plan as the operator reads it (a few lines) and applies it (a kustomize patch).

use super::plan::{Plan, SafeRate};

impl Plan {
    /// "gateways / booking / consumers / primaries".
    pub fn fleet(&self) -> String {
        format!(
            "{} / {} / {} / {}",
            self.gateways, self.booking, self.consumers, self.primaries
        )
    }

    /// The plan, for a terminal.
    pub fn describe(&self, sale: &str) -> String {
        let o = &self.outcome;
        let p = &self.peaks;
        let mut out = format!(
            "Plan for {sale}: {} people for {} seats\n\n",
            self.people, self.seats
        );
        out += &format!(
            "  gateways           {:>6}   (peak {:.1} cores, {:.2} GB for {} connections)\n",
            self.gateways, p.gateway_cores, p.gateway_memory_gb, p.connections
        );
        out += &format!(
            "  edges              {:>6}   (two sockets each for {} people)\n",
            self.edges, self.people
        );
        out += &format!(
            "  booking            {:>6}   (peak {:.2} cores, {} requests a second)\n",
            self.booking, p.booking_cores, p.requests_per_second
        );
        out += &format!(
            "  consumers          {:>6}   (peak {:.2} cores, {} events a second; the broker {:.2} cores)\n",
            self.consumers, p.consumer_cores, p.events_per_second, p.broker_cores
        );
        out += &format!(
            "  Redis primaries    {:>6}   (each with a replica; the sale's slot {:.0} % of its core at the peak, the busiest pool primary {:.1} %, the pools on all {:.1} %)\n",
            self.primaries,
            p.slot_redis * 100.0,
            p.pool_redis * 100.0,
            p.pools_redis_total * 100.0
        );
        out += &format!(
            "  admission rate     {}\n\n",
            self.safe_rate.describe(self.sale_rate)
        );
        out += &format!(
            "  join to ticket p50 / p99 / max {:.2} / {:.2} / {:.2} s; sold out {}; everyone answered after {:.1} s\n",
            o.join_to_ticket_ms.p50 / 1e3,
            o.join_to_ticket_ms.p99 / 1e3,
            o.join_to_ticket_ms.max / 1e3,
            self.sold_out(),
            o.everyone_finished_s
        );
        out += &format!(
            "  wait from ticket to an answer (of those answered) p50 / p99: {:.1} / {:.1} s; join to admission p50 / p99: {:.1} / {:.1} s\n",
            o.wait_ms.p50 / 1e3,
            o.wait_ms.p99 / 1e3,
            o.join_to_admission_ms.p50 / 1e3,
            o.join_to_admission_ms.p99 / 1e3
        );
        out += &format!(
            "  paid {}, walked away {}, nothing left when admitted {}, told sold out while waiting {}, left the line {}, 503s {}\n",
            o.paid,
            o.walked_away,
            o.nothing_left_when_admitted,
            o.sold_out_while_waiting,
            o.left_the_line,
            o.refused_503
        );
        for note in &self.notes {
            out += &format!("\n  note: {note}");
        }
        out
    }

    /// When it sold out, and over how many draws of the crowd it did between when.
    pub fn sold_out(&self) -> String {
        let Some(at) = self.outcome.sold_out_s else {
            return "never".into();
        };
        let draws = &self.sold_out_draws_s;
        match (draws.first(), draws.last()) {
            (Some(first), Some(last)) => format!(
                "{at:.0} s after the opening ({first:.0} to {last:.0} s over {} draws of the crowd)",
                draws.len()
            ),
            _ => format!("{at:.0} s after the opening"),
        }
    }

    /// A kustomize patch (strategic merge) pre-scaling the fleet: the gateways' and the edges'
    /// autoscalers' floors, and the booking and consumer replicas (they have no autoscaler), each
    /// raised to the plan and never below what the overlay sets ([`Plan::floors`]). Applied
    /// before `opens_at`, taken out after the sale.
    pub fn patch(&self) -> String {
        let f = &self.floors;
        let gateways = self.gateways.max(f.gateways_min);
        let edges = self.edges.max(f.edges_min);
        format!(
            "# Pre-scale for a sale of {people} people and {seats} seats (floodgate-loadgen simulate).\n\
             # Add it to the overlay's patchesStrategicMerge after scale.yaml, before opens_at; remove it\n\
             # after the sale. It raises what the overlay sets and never lowers it.\n\
             apiVersion: autoscaling/v2\n\
             kind: HorizontalPodAutoscaler\n\
             metadata:\n  name: floodgate-gateway\n\
             spec:\n  minReplicas: {gateways}\n  maxReplicas: {max}\n\
             ---\n\
             apiVersion: autoscaling/v2\n\
             kind: HorizontalPodAutoscaler\n\
             metadata:\n  name: floodgate-cdn\n\
             spec:\n  minReplicas: {edges}\n  maxReplicas: {edges_max}\n\
             ---\n\
             apiVersion: apps/v1\n\
             kind: Deployment\n\
             metadata:\n  name: floodgate-booking\n\
             spec:\n  replicas: {booking}\n\
             ---\n\
             apiVersion: apps/v1\n\
             kind: Deployment\n\
             metadata:\n  name: floodgate-consumer\n\
             spec:\n  replicas: {consumers}\n",
            people = self.people,
            seats = self.seats,
            // Room above the floor for the autoscaler (a rush larger than planned).
            max = gateways.saturating_mul(2).max(f.gateways_max),
            edges_max = edges.saturating_mul(2).max(f.edges_max),
            booking = self.booking.max(f.booking),
            consumers = self.consumers.max(f.consumers),
        )
    }
}

impl SafeRate {
    /// The rate as the operator reads it, beside the sale's own.
    pub fn describe(&self, sale_rate: f64) -> String {
        match *self {
            SafeRate::Found { rate } => format!(
                "{rate:.0}/s at most makes no 503 (faster made 503s; the sale's own: {sale_rate}/s)"
            ),
            SafeRate::AtLeast { rate } => format!(
                "any rate up to {rate:.0}/s made no 503 (the booking fleet's capacity: the stock and the cap bound admission, not the rate; the sale's own: {sale_rate}/s)"
            ),
            SafeRate::NotFound { slowest } => format!(
                "none found: even {slowest}/s made 503s (the sale's own: {sale_rate}/s)"
            ),
        }
    }
}
