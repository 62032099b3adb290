//! What a run checks once everyone is done and every hold has settled: the counters in Redis,
//! the rows in PostgreSQL, and the order people were admitted in (as `reads` gathers them).

use serde::Serialize;

use super::person::{Outcome, Person};
use super::reads::{PoolCounters, Row};

/// Whether the sale has settled, so its checks mean something: no hold is left in Redis, every
/// reservation this run was told it holds is in PostgreSQL with a final status, and the
/// consumer has applied everything else too (anyone's): per pool, PostgreSQL confirms exactly
/// the seats Redis sold and keeps none pending.
pub fn settled(counters: &[PoolCounters], rows: &[Row], expected: &[&Person]) -> bool {
    let pools_agree = counters.iter().all(|c| {
        let in_pool = rows.iter().filter(|r| r.pool == c.pool);
        let confirmed: i64 = in_pool
            .clone()
            .filter(|r| r.status == "CONFIRMED")
            .map(|r| r.seats)
            .sum();
        let pending = in_pool.clone().any(|r| r.status == "PENDING_PAYMENT");
        c.held == 0 && !pending && Some(confirmed) == c.sold
    });
    pools_agree
        && expected.iter().all(|p| {
            let (id, _, _) = p.reservation.as_ref().expect("people with a reservation");
            rows.iter()
                .any(|r| &r.id == id && r.status != "PENDING_PAYMENT")
        })
}

/// The outcome of one invariant.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

/// No oversell in Redis: every pool's counters present, none negative, adding up to capacity.
pub fn check_counters(counters: &[PoolCounters]) -> Check {
    let wrong: Vec<String> = counters
        .iter()
        .filter(|c| match (c.available, c.sold) {
            (Some(a), Some(s)) => a < 0 || s < 0 || c.held < 0 || a + c.held + s != c.capacity,
            _ => true,
        })
        .map(|c| format!("{c:?}"))
        .collect();
    let sold: i64 = counters.iter().filter_map(|c| c.sold).sum();
    let capacity: i64 = counters.iter().map(|c| c.capacity).sum();
    Check {
        name: "no oversell (Redis counters add up to capacity)",
        ok: wrong.is_empty() && sold <= capacity,
        detail: if wrong.is_empty() {
            format!("{sold} of {capacity} seats sold")
        } else {
            wrong.join("; ")
        },
    }
}

/// Every 201 is in PostgreSQL with the outcome its holder caused, and PostgreSQL's confirmed
/// seats per pool are exactly what Redis sold.
pub fn check_persisted(counters: &[PoolCounters], rows: &[Row], people: &[Person]) -> Check {
    let mut problems = Vec::new();
    for p in people {
        let Some((id, _, seats)) = &p.reservation else {
            continue;
        };
        let Some(row) = rows.iter().find(|r| &r.id == id) else {
            problems.push(format!("{id}: answered 201, missing in PostgreSQL"));
            continue;
        };
        let expected = match p.outcome {
            Outcome::Paid => "CONFIRMED",
            Outcome::WalkedAway => "EXPIRED",
            _ => continue,
        };
        if row.status != expected || row.seats != i64::from(*seats) {
            problems.push(format!(
                "{id}: {} seats {}, expected {expected} seats {seats}",
                row.status, row.seats
            ));
        }
    }
    for c in counters {
        let confirmed: i64 = rows
            .iter()
            .filter(|r| r.pool == c.pool && r.status == "CONFIRMED")
            .map(|r| r.seats)
            .sum();
        if Some(confirmed) != c.sold || confirmed > c.capacity {
            problems.push(format!(
                "{}: PostgreSQL confirms {confirmed} seats, Redis sold {:?} of {}",
                c.pool, c.sold, c.capacity
            ));
        }
    }
    let held = people.iter().filter(|p| p.reservation.is_some()).count();
    Check {
        name: "every 201 persisted with its outcome",
        ok: problems.is_empty(),
        detail: if problems.is_empty() {
            format!("{held} reservations, {} rows", rows.len())
        } else {
            format!("{} problems: {}", problems.len(), first(&problems))
        },
    }
}

/// Admission follows the line: sorted by place, the admission batches never go backwards, and
/// nobody refused (sold out while waiting) stood ahead of someone admitted.
pub fn check_order(order: &[(u64, Option<i64>)]) -> Check {
    let mut sorted = order.to_vec();
    sorted.sort_by_key(|(place, _)| *place);
    let mut problems = Vec::new();
    let mut last: Option<(u64, i64)> = None;
    let mut first_refused: Option<u64> = None;
    for (place, batch) in &sorted {
        match batch {
            Some(batch) => {
                if let Some(refused) = first_refused {
                    problems.push(format!(
                        "place {place} admitted after place {refused} was refused"
                    ));
                }
                if let Some((before, earlier)) = last {
                    if *batch < earlier {
                        problems.push(format!(
                            "place {place} admitted in an earlier batch than place {before}"
                        ));
                    }
                }
                last = Some((*place, *batch));
            }
            None => {
                first_refused.get_or_insert(*place);
            }
        }
    }
    let admitted = sorted.iter().filter(|(_, b)| b.is_some()).count();
    Check {
        name: "admissions in the order of the line",
        ok: problems.is_empty(),
        detail: if problems.is_empty() {
            format!("{admitted} admitted in order")
        } else {
            format!("{} out of order: {}", problems.len(), first(&problems))
        },
    }
}

/// Nobody was sent away while a seat was left: the room says "sold out" only when nothing is
/// available and nothing held (so no seat can come back), hence every seat must be sold. (An
/// admitted person finding nothing left is not a refusal: the seats were in holds then.)
pub fn check_served(counters: &[PoolCounters], people: &[Person]) -> Check {
    let sold: i64 = counters.iter().filter_map(|c| c.sold).sum();
    let capacity: i64 = counters.iter().map(|c| c.capacity).sum();
    let refused = people
        .iter()
        .filter(|p| p.outcome == Outcome::SoldOut)
        .count();
    Check {
        name: "nobody refused while seats were left",
        ok: refused == 0 || sold == capacity,
        detail: format!("{refused} refused; {sold} of {capacity} seats sold"),
    }
}

fn first(problems: &[String]) -> String {
    problems
        .iter()
        .take(3)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(capacity: i64, available: i64, held: i64, sold: i64) -> PoolCounters {
        PoolCounters {
            pool: "p".into(),
            capacity,
            available: Some(available),
            held,
            sold: Some(sold),
        }
    }

    #[test]
    fn counters_that_do_not_add_up_or_are_missing_fail_the_oversell_check() {
        assert!(check_counters(&[pool(10, 2, 0, 8)]).ok);
        assert!(
            !check_counters(&[pool(10, 0, 0, 11)]).ok,
            "sold past capacity"
        );
        assert!(!check_counters(&[pool(10, -1, 0, 11)]).ok);
        assert!(
            !check_counters(&[pool(10, 3, 0, 8)]).ok,
            "one seat too many"
        );
        let mut lost = pool(10, 2, 0, 8);
        lost.available = None;
        assert!(
            !check_counters(&[lost]).ok,
            "a missing counter is never zero"
        );
    }

    fn holder(id: &str, outcome: Outcome, seats: u32) -> Person {
        Person {
            ticket: 1,
            prequeue: false,
            batch: Some(1),
            outcome,
            reservation: Some((id.into(), "p".into(), seats)),
            admitted_after: None,
            reserve_latency: None,
            held_at_ms: None,
        }
    }

    fn row(id: &str, seats: i64, status: &str) -> Row {
        Row {
            id: id.into(),
            pool: "p".into(),
            seats,
            status: status.into(),
        }
    }

    #[test]
    fn a_201_missing_or_with_the_wrong_outcome_in_postgres_fails_the_durability_check() {
        let counters = [pool(10, 8, 0, 2)];
        let people = [
            holder("a", Outcome::Paid, 2),
            holder("b", Outcome::WalkedAway, 1),
        ];
        let good = [row("a", 2, "CONFIRMED"), row("b", 1, "EXPIRED")];
        assert!(check_persisted(&counters, &good, &people).ok);
        assert!(
            !check_persisted(&counters, &good[..1], &people).ok,
            "b is missing"
        );
        let wrong = [row("a", 2, "CONFIRMED"), row("b", 1, "CONFIRMED")];
        assert!(
            !check_persisted(&counters, &wrong, &people).ok,
            "b walked away"
        );
        let more_sold = [pool(10, 7, 0, 3)];
        assert!(
            !check_persisted(&more_sold, &good, &people).ok,
            "Redis sold more"
        );
    }

    #[test]
    fn a_sale_has_settled_only_once_postgres_agrees_with_redis() {
        let me = holder("r1", Outcome::Paid, 1);
        let expected = [&me];
        let mine = row("r1", 1, "CONFIRMED");
        // Someone else's sale is in Redis but not yet in PostgreSQL.
        assert!(!settled(
            &[pool(10, 8, 0, 2)],
            std::slice::from_ref(&mine),
            &expected
        ));
        let theirs = row("r2", 1, "CONFIRMED");
        assert!(settled(
            &[pool(10, 8, 0, 2)],
            &[mine.clone(), theirs.clone()],
            &expected
        ));
        assert!(
            !settled(
                &[pool(10, 7, 1, 2)],
                &[mine.clone(), theirs.clone()],
                &expected
            ),
            "a hold is left"
        );
        let pending = row("r3", 1, "PENDING_PAYMENT");
        assert!(
            !settled(&[pool(10, 8, 0, 2)], &[mine, theirs, pending], &expected),
            "a booking is not final yet"
        );
    }

    #[test]
    fn admission_out_of_line_order_fails_the_order_check() {
        assert!(check_order(&[(1, Some(5)), (2, Some(5)), (3, Some(6)), (4, None)]).ok);
        assert!(
            !check_order(&[(1, Some(6)), (2, Some(5))]).ok,
            "a later place first"
        );
        assert!(!check_order(&[(1, None), (2, Some(5))]).ok, "passed over");
        // The input order does not matter: the check sorts by place.
        assert!(check_order(&[(3, Some(6)), (1, Some(5)), (2, Some(5))]).ok);
    }

    #[test]
    fn refusing_anyone_while_seats_are_left_fails_the_service_check() {
        let mut refused = holder("a", Outcome::SoldOut, 1);
        refused.reservation = None;
        assert!(check_served(&[pool(10, 0, 0, 10)], std::slice::from_ref(&refused)).ok);
        assert!(!check_served(&[pool(10, 1, 0, 9)], &[refused]).ok);
    }
}
