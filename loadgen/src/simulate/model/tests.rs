use std::time::Duration;

use floodgate_platform::autopilot::Settings;

use super::*;
use crate::simulate::scenario::{Crowd, Fleet, Sale};

pub(crate) fn costs() -> Costs {
    Costs {
        run: "round figures".into(),
        gateway_join_us: 100.0,
        slot_join_us: 10.0,
        gateway_message_us: 10.0,
        gateway_bytes_per_connection: 2_000.0,
        gateway_wait_front_us_per_client_s: 5.0,
        gateway_wait_behind_us_per_client_s: 1.5,
        slot_us_per_s: 10_000.0,
        booking_request_us: 150.0,
        claim_script_us: 25.0,
        reserve_script_us: 50.0,
        ack_script_us: 15.0,
        broker_event_us: 80.0,
        consumer_event_us: 10.0,
        postgres_event_us: 20.0,
        reservation_base_ms: 10.0,
        bench_gateway_cores: 1.0,
        bench_booking_per_second: 3_000.0,
        bench_fanout_cores: 1.0,
    }
}

pub(crate) fn sale(seats: u32, rate: f64) -> Sale {
    Sale {
        pools: vec![seats / 2, seats - seats / 2],
        admission_rate: rate,
        active_cap: 1_000_000,
        stock_factor: 2.0,
        hold_ttl_ms: 10_000,
        token_ttl_ms: 60_000,
        stock_hold_ms: 60_000,
        max_seats: 2,
    }
}

pub(crate) fn crowd(people: u64) -> Crowd {
    Crowd {
        people,
        prequeue: 1.0,
        prequeue_from_s: 5.0,
        prequeue_spread_s: 1.0,
        spike_s: 1.0,
        patience_s: None,
        think_ms: 1_000.0,
        pay_ratio: 0.5,
        pay_ms: 100.0,
        seats: 2,
        autopilot: None,
        seed: 3,
    }
}

fn fleet(booking_per_second: f64) -> Fleet {
    Fleet {
        gateway_cores: 4.0,
        booking_per_second,
        pool_primaries: 1,
    }
}

#[test]
fn every_seat_is_sold_once_and_then_the_room_closes() {
    let (c, s, f, p) = (costs(), sale(40, 20.0), fleet(3_000.0), crowd(2_000));
    let out = Model::new(&c, &s, &f, &p).run(Duration::from_secs(3_600));
    assert_eq!(out.seats_sold, 40, "{out:?}");
    assert!(out.sold_out_s.is_some());
    assert!(out.paid > 0 && out.walked_away > 0);
    // Everyone has an answer: bought, walked away, found nothing, or told it sold out.
    let answered =
        out.paid + out.walked_away + out.nothing_left_when_admitted + out.sold_out_while_waiting;
    assert_eq!(answered, 2_000);
    assert_eq!(out.refused_503, 0);
}

#[test]
fn admission_keeps_to_the_rate_and_the_stock() {
    let (c, f, p) = (costs(), fleet(3_000.0), crowd(50_000));
    let out = Model::new(&c, &sale(100_000, 200.0), &f, &p).run(Duration::from_secs(30));
    let busy: Vec<u64> = out
        .seconds
        .iter()
        .map(|s| s.admitted)
        .filter(|&n| n > 0)
        .collect();
    assert!(busy.len() >= 20, "admitting for the whole run: {busy:?}");
    // A tick's burst at most above the rate, in any one second.
    assert!(busy.iter().all(|&n| n <= 220), "{busy:?}");
    // Few seats: no more admitted at once than twice what is available.
    let out = Model::new(&c, &sale(10, 200.0), &f, &p).run(Duration::from_secs(8));
    let admitted: u64 = out.seconds.iter().map(|s| s.admitted).sum();
    assert_eq!(admitted, 20);
}

#[test]
fn joins_are_ticketed_as_fast_as_the_gateways_cores_allow() {
    let (c, s) = (costs(), sale(10, 20.0));
    let mut p = crowd(40_000);
    p.prequeue_spread_s = 0.0;
    // 40,000 joins at 100 us on 4 cores: a second.
    let out = Model::new(&c, &s, &fleet(3_000.0), &p).run(Duration::ZERO);
    assert!(
        (out.all_ticketed_s - 1.0).abs() < 0.01,
        "{}",
        out.all_ticketed_s
    );
    // On 40 cores the slot (10 us a join) is the slower: 0.4 s.
    let wide = Fleet {
        gateway_cores: 40.0,
        ..fleet(3_000.0)
    };
    let out = Model::new(&c, &s, &wide, &p).run(Duration::ZERO);
    assert!(
        (out.all_ticketed_s - 0.4).abs() < 0.01,
        "{}",
        out.all_ticketed_s
    );
}

#[test]
fn with_the_autopilot_a_slow_backend_answers_far_fewer_503s() {
    // The backend answers 40 requests a second; the sale admits 400 a second into plenty of seats.
    let (c, s, f) = (costs(), sale(100_000, 400.0), fleet(40.0));
    let mut p = crowd(20_000);
    p.think_ms = 2_000.0;
    let fixed = Model::new(&c, &s, &f, &p).run(Duration::from_secs(120));
    p.autopilot = Some(Settings::new(5.0, 400.0).with_settle(4_000));
    let piloted = Model::new(&c, &s, &f, &p).run(Duration::from_secs(120));
    assert!(
        fixed.refused_503 > 1_000,
        "the fault shows at a fixed rate: {}",
        fixed.refused_503
    );
    assert!(piloted.rate_changes > 0);
    assert!(
        piloted.refused_503 * 4 < fixed.refused_503,
        "{} against {}",
        piloted.refused_503,
        fixed.refused_503
    );
    let last = piloted.seconds.last().map_or(0.0, |s| s.rate);
    assert!(last < 400.0, "the rate was cut: {last}");
}

#[test]
fn a_line_everyone_leaves_ends_when_the_last_has_gone() {
    // Nobody pays, so the seats come back each time a hold expires and the sale never sells out;
    // the crowd leaves within minutes. Once all have gone nothing can change, and the run ends.
    let (c, f) = (costs(), fleet(3_000.0));
    let mut s = sale(2, 20.0);
    s.stock_factor = 0.5;
    let mut p = crowd(5_000);
    p.patience_s = Some(30.0);
    p.pay_ratio = 0.0;
    s.hold_ttl_ms = 10_000;
    let out = Model::new(&c, &s, &f, &p).run(Duration::from_secs(6 * 3_600));
    assert!(!out.truncated);
    assert!(out.left_the_line > 4_900, "{}", out.left_the_line);
    assert!(
        out.everyone_finished_s < 1_200.0,
        "{}",
        out.everyone_finished_s
    );
    // The limit, when it comes first, is reported.
    let short = Model::new(&c, &s, &f, &p).run(Duration::from_secs(20));
    assert!(short.truncated);
}

#[test]
fn a_shorter_hold_on_the_stock_sells_past_slow_bookers_sooner() {
    let (c, f, mut p) = (costs(), fleet(3_000.0), crowd(2_000));
    // Everyone thinks 15 to 45 s before booking, and their passes live a minute.
    p.think_ms = 30_000.0;
    let held = |hold_ms: i64| {
        let mut s = sale(40, 20.0);
        s.stock_hold_ms = hold_ms;
        Model::new(&c, &s, &f, &p).run(Duration::from_secs(3_600))
    };
    let (whole, short) = (held(60_000), held(5_000));
    let (whole_s, short_s) = (whole.sold_out_s.unwrap(), short.sold_out_s.unwrap());
    assert!(short_s < whole_s, "{short_s} s against {whole_s} s");
    // The price: more people let in to find nothing left.
    assert!(
        short.nothing_left_when_admitted > whole.nothing_left_when_admitted,
        "{short:?} against {whole:?}"
    );
    assert_eq!((short.seats_sold, whole.seats_sold), (40, 40));
}
