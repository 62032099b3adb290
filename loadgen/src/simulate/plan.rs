//! The operator's plan: the fleet that runs a sale for a crowd, the Redis layout, the admission
//! rate that sells out without a 503, and the kustomize patch that pre-scales the fleet before
//! `opens_at` (the gateways' autoscaler owns their count: the patch raises its `minReplicas`).

use serde::Serialize;

use super::costs::Costs;
use super::model::{Model, Outcome, Second, LIMIT};
use super::scenario::{Crowd, Fleet, Sale};

/// What one instance is: its cores (the CPU request), the connections a gateway may hold and the
/// waiting people an edge Pod passes on.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub cores: f64,
    pub connections_per_gateway: u64,
    pub clients_per_edge: u64,
}

/// What the overlay the patch goes into already sets (its `scale.yaml`): the patch raises these,
/// never lowers them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Floors {
    pub gateways_min: u32,
    pub gateways_max: u32,
    pub edges_min: u32,
    pub edges_max: u32,
    pub booking: u32,
    pub consumers: u32,
}

/// The fastest admission rate found to make no 503 on the planned fleet.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "found", rename_all = "snake_case")]
pub enum SafeRate {
    /// Faster rates made 503s; this one made none.
    Found { rate: f64 },
    /// Not even the booking fleet's own capacity made one: the stock and the cap bound
    /// admission, not the rate.
    AtLeast { rate: f64 },
    /// Even the slowest rate tried made 503s.
    NotFound { slowest: f64 },
}

/// The share of its cores an instance is sized to use at the peak: the gateways' autoscaler's
/// target utilisation (deploy/k8s/base/gateway.yaml), so a pre-scaled fleet is not scaled down
/// at once, and a spare for a lost instance.
pub const HEADROOM: f64 = 0.6;
/// Redis primaries: the sale's slot on one, the pools spread over all (the stack's cluster of
/// three primaries, each with a replica, at least).
const MIN_PRIMARIES: u32 = 3;
/// The rate search runs on at most this many people: the backend sees only those admitted, and
/// admission is bounded by the stock and the cap long before the line runs out.
const SEARCH_CROWD: u64 = 200_000;
/// The slowest rate the search tries (admissions a second).
const SLOWEST: f64 = 1.0;
/// Sizing runs at most: each makes the fleet larger, so a few settle it.
const SIZINGS: usize = 12;
/// Draws of the crowd the sell-out time is given over.
pub const DRAWS: u64 = 5;

/// The busiest second of each resource.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Peaks {
    pub connections: u64,
    pub gateway_cores: f64,
    pub gateway_memory_gb: f64,
    /// Busy share of one core: the sale's slot's primary, the busiest pool primary, and the
    /// pools' Redis time over all primaries together.
    pub slot_redis: f64,
    pub pool_redis: f64,
    pub pools_redis_total: f64,
    pub booking_cores: f64,
    pub broker_cores: f64,
    pub consumer_cores: f64,
    pub postgres_cores: f64,
    pub requests_per_second: u64,
    pub events_per_second: u64,
}

/// The plan for one sale and crowd.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    pub people: u64,
    pub seats: u64,
    pub gateways: u32,
    /// Edge Pods: one holds a socket to the client and one to a gateway for each waiting
    /// person, so they are counted by the people, as the gateways are by their connections.
    pub edges: u32,
    pub booking: u32,
    pub consumers: u32,
    pub primaries: u32,
    /// The fastest admission rate found to make no 503, and the sale's own.
    pub safe_rate: SafeRate,
    pub sale_rate: f64,
    /// What the overlay already sets (the patch never lowers it).
    pub floors: Floors,
    /// The sale as the model played it on this fleet, at the sale's own rate.
    pub outcome: Outcome,
    /// When it sold out (s after the opening) in each of [`DRAWS`] draws of the crowd, sorted:
    /// the last seats wait for the holds of those who walk away, so one draw can sell out a
    /// hold's lifetime later than another.
    pub sold_out_draws_s: Vec<f64>,
    pub peaks: Peaks,
    /// What the operator should know (a bottleneck no replica count removes, a rate too fast).
    pub notes: Vec<String>,
}

/// The busiest second of each resource in a run, on a fleet of `primaries` pool primaries.
pub fn peaks(seconds: &[Second], costs: &Costs) -> Peaks {
    let max = |f: &dyn Fn(&Second) -> f64| seconds.iter().map(f).fold(0.0, f64::max);
    Peaks {
        connections: seconds.iter().map(|s| s.connections).max().unwrap_or(0),
        gateway_cores: max(&|s| s.gateway_us / 1e6),
        gateway_memory_gb: max(&|s| s.connections as f64) * costs.gateway_bytes_per_connection
            / 1e9,
        slot_redis: max(&|s| s.slot_us / 1e6),
        pool_redis: max(&|s| s.primary_us.iter().copied().fold(0.0, f64::max) / 1e6),
        pools_redis_total: max(&|s| s.pools_us / 1e6),
        booking_cores: max(&|s| s.booking_us / 1e6),
        broker_cores: max(&|s| s.broker_us / 1e6),
        consumer_cores: max(&|s| s.consumer_us / 1e6),
        postgres_cores: max(&|s| s.postgres_us / 1e6),
        requests_per_second: seconds.iter().map(|s| s.requests).max().unwrap_or(0),
        events_per_second: seconds.iter().map(|s| s.events).max().unwrap_or(0),
    }
}

fn at_least(need: f64, each: f64, floor: u32) -> u32 {
    ((need / each).ceil() as u32).max(floor)
}

/// Sizes the fleet for `crowd` at `sale`: gateways for the connections and for the busiest
/// second's CPU, booking and consumers for theirs (two of each at least, to lose one), then the
/// rate that sells out without a 503 on that fleet.
pub fn plan(costs: &Costs, sale: &Sale, crowd: &Crowd, shape: &Shape, floors: Floors) -> Plan {
    let each = shape.cores * HEADROOM;
    // A first fleet for the connections; the sizing below adds what the busiest second's CPU
    // needs (joins held back by too few gateways saturate them, and the next run has more).
    let mut gateways = at_least(crowd.people as f64, shape.connections_per_gateway as f64, 2);
    let mut booking = 2;
    let size = |gateways, booking| {
        let fleet = Fleet::of(costs, gateways, booking, MIN_PRIMARIES, shape.cores);
        Model::new(costs, sale, &fleet, crowd).run(LIMIT)
    };
    let mut run = size(gateways, booking);
    // The busiest second grows with the fleet (joins come faster): size again until it holds.
    for _ in 1..SIZINGS {
        let p = peaks(&run.seconds, costs);
        let (g, b) = (
            at_least(p.gateway_cores, each, 2),
            at_least(p.booking_cores, each, 2),
        );
        if g <= gateways && b <= booking {
            break;
        }
        gateways = gateways.max(g);
        booking = booking.max(b);
        run = size(gateways, booking);
    }
    let peaks = peaks(&run.seconds, costs);
    // The consumers' own CPU: PostgreSQL's is PostgreSQL's, whatever their number.
    let consumers = at_least(peaks.consumer_cores, each, 2);
    // Enough primaries for the pools' Redis time together; a hot pool is a note, not more
    // primaries (its slot lives on one whatever their number).
    let primaries = MIN_PRIMARIES.max(at_least(peaks.pools_redis_total, HEADROOM, 1));
    let fleet = Fleet::of(costs, gateways, booking, primaries, shape.cores);
    let safe_rate = safe_rate(costs, sale, crowd, &fleet);
    let sold_out_draws_s = sold_out_draws(costs, sale, crowd, &fleet);
    let notes = notes(sale, &run, &peaks);
    Plan {
        people: crowd.people,
        seats: sale.seats(),
        gateways,
        edges: at_least(crowd.people as f64, shape.clients_per_edge as f64, 2),
        booking,
        consumers,
        primaries,
        safe_rate,
        sale_rate: sale.admission_rate,
        floors,
        outcome: run,
        sold_out_draws_s,
        peaks,
        notes,
    }
}

/// When the sale sold out in each of [`DRAWS`] draws of the crowd, sorted.
fn sold_out_draws(costs: &Costs, sale: &Sale, crowd: &Crowd, fleet: &Fleet) -> Vec<f64> {
    let mut sold_out_draws_s: Vec<f64> = (0..DRAWS)
        .filter_map(|draw| {
            let crowd = Crowd {
                seed: crowd.seed.wrapping_add(draw),
                ..crowd.clone()
            };
            Model::new(costs, sale, fleet, &crowd).run(LIMIT).sold_out_s
        })
        .collect();
    sold_out_draws_s.sort_by(f64::total_cmp);
    sold_out_draws_s
}

/// What the operator should know of a run that replica counts do not say.
fn notes(sale: &Sale, run: &Outcome, peaks: &Peaks) -> Vec<String> {
    let mut notes = Vec::new();
    if peaks.slot_redis > HEADROOM {
        notes.push(format!(
            "the sale's slot is busy {:.0} % of a core at the peak: one primary holds it whatever the fleet, so the joins queue there",
            peaks.slot_redis * 100.0
        ));
    }
    if peaks.pool_redis > HEADROOM {
        notes.push(format!(
            "one pool primary is busy {:.0} % of a core at the peak: its pools' slots hold it, whatever the number of primaries",
            peaks.pool_redis * 100.0
        ));
    }
    if run.refused_503 > 0 {
        notes.push(format!(
            "at the rate it admitted (the sale's {}/s, or the autopilot's) the model answered {} requests 503: see the admission rate above",
            sale.admission_rate, run.refused_503
        ));
    }
    if run.truncated {
        notes.push(format!(
            "the sale had not ended after {} hours of its virtual clock: the figures are partial",
            LIMIT.as_secs() / 3600
        ));
    }
    if run.sold_out_s.is_none() {
        notes.push(
            "the sale did not sell out in the model: fewer paid than there were seats".into(),
        );
    }
    notes
}

/// The fastest rate, up to what the booking fleet answers, at which the sale makes no 503 (by
/// bisection, on at most [`SEARCH_CROWD`] people, or fifty a seat if the sale is larger: only
/// the admitted reach the backend, and the stock bounds how many are).
fn safe_rate(costs: &Costs, sale: &Sale, crowd: &Crowd, fleet: &Fleet) -> SafeRate {
    let crowd = Crowd {
        people: crowd
            .people
            .min(SEARCH_CROWD.max(sale.seats().saturating_mul(50))),
        autopilot: None,
        ..crowd.clone()
    };
    let clean = |rate: f64| {
        let sale = Sale {
            admission_rate: rate,
            ..sale.clone()
        };
        Model::new(costs, &sale, fleet, &crowd)
            .run(LIMIT)
            .refused_503
            == 0
    };
    let (mut lo, mut hi) = (SLOWEST, fleet.booking_per_second.max(SLOWEST));
    if clean(hi) {
        return SafeRate::AtLeast { rate: hi };
    }
    if !clean(lo) {
        return SafeRate::NotFound { slowest: lo };
    }
    for _ in 0..12 {
        let mid = (lo + hi) / 2.0;
        if clean(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    SafeRate::Found { rate: lo }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::model::tests::{costs, crowd, sale};

    const SHAPE: Shape = Shape {
        cores: 1.0,
        connections_per_gateway: 100_000,
        clients_per_edge: 100_000,
    };

    #[test]
    fn a_crowd_gets_a_gateway_for_each_hundred_thousand_and_two_of_everything() {
        // A large sale's rate is searched too: 20,000 seats, a crowd that leaves within minutes.
        let mut big = crowd(200_000);
        big.patience_s = Some(60.0);
        let fleet = Fleet::of(&costs(), 4, 2, 3, 1.0);
        let found = safe_rate(&costs(), &sale(20_000, 500.0), &big, &fleet);
        assert!(!matches!(found, SafeRate::NotFound { .. }), "{found:?}");
        let plan = plan(
            &costs(),
            &sale(100, 50.0),
            &crowd(1_000_000),
            &SHAPE,
            Floors::default(),
        );
        assert!(plan.gateways >= 10, "{plan:?}");
        assert!(plan.booking >= 2 && plan.consumers >= 2 && plan.primaries >= 3);
        // Sized to the busiest second at 60 % of a core.
        assert!(plan.peaks.gateway_cores <= f64::from(plan.gateways) * HEADROOM + 1e-9);
        assert_eq!(plan.sold_out_draws_s.len() as u64, DRAWS);
        assert_eq!(plan.outcome.seats_sold, 100);
    }

    #[test]
    fn the_rate_found_makes_no_503_and_a_faster_one_does() {
        // Plenty of seats, but in the last of nine pools: people try up to nine pools each. A
        // backend of 60 requests a second, and a sale admitting 500 a second.
        let (c, mut s, p) = (costs(), sale(4_000, 500.0), crowd(30_000));
        s.pools = vec![1, 1, 1, 1, 1, 1, 1, 1, 3_992];
        s.hold_ttl_ms = 2_000;
        let fleet = Fleet {
            gateway_cores: 8.0,
            booking_per_second: 60.0,
            pool_primaries: 3,
        };
        let SafeRate::Found { rate } = safe_rate(&c, &s, &p, &fleet) else {
            panic!("a limit exists below the fleet's capacity");
        };
        assert!(rate > SLOWEST && rate < 60.0, "{rate}");
        let at = |r: f64| {
            Model::new(
                &c,
                &Sale {
                    admission_rate: r,
                    ..s.clone()
                },
                &fleet,
                &p,
            )
            .run(LIMIT)
        };
        assert_eq!(at(rate).refused_503, 0);
        assert!(at(rate * 2.0).refused_503 > 0);
        // A fleet that keeps up with anything: no limit found below its capacity.
        let wide = Fleet {
            booking_per_second: 100_000.0,
            ..fleet
        };
        assert!(matches!(
            safe_rate(&c, &s, &p, &wide),
            SafeRate::AtLeast { .. }
        ));
    }

    #[test]
    fn the_patch_raises_the_overlay_and_never_lowers_it() {
        let floors = Floors {
            gateways_min: 6,
            gateways_max: 60,
            edges_min: 4,
            edges_max: 40,
            booking: 3,
            consumers: 3,
        };
        let small = plan(&costs(), &sale(10, 50.0), &crowd(1_000), &SHAPE, floors);
        let patch = small.patch();
        assert!(
            patch.contains("minReplicas: 6\n  maxReplicas: 60\n"),
            "{patch}"
        );
        assert!(
            patch.contains("name: floodgate-cdn\nspec:\n  minReplicas: 4\n  maxReplicas: 40\n"),
            "{patch}"
        );
        assert!(
            patch.contains("replicas: 3\n---") && patch.ends_with("replicas: 3\n"),
            "{patch}"
        );
        let narrow = Shape {
            connections_per_gateway: 5_000,
            clients_per_edge: 10_000,
            ..SHAPE
        };
        let large = plan(&costs(), &sale(10, 50.0), &crowd(500_000), &narrow, floors);
        assert!(large.gateways >= 100);
        let patch = large.patch();
        let min = format!(
            "minReplicas: {}\n  maxReplicas: {}\n",
            large.gateways,
            large.gateways * 2
        );
        assert!(patch.contains(&min), "{patch}");
        // 500,000 people through edges of 10,000 each.
        assert_eq!(large.edges, 50);
        let edges = "name: floodgate-cdn\nspec:\n  minReplicas: 50\n  maxReplicas: 100\n";
        assert!(patch.contains(edges), "{patch}");
    }
}
