//! The front door's limits, one rule a test.

use super::*;

#[test]
fn connections_are_counted_per_address_and_given_back() {
    let limits = IpLimits::new(2, 1_000);
    let a: IpAddr = "10.0.0.1".parse().unwrap();
    let b: IpAddr = "10.0.0.2".parse().unwrap();
    let first = limits.admit(a).unwrap();
    let _second = limits.admit(a).unwrap();
    assert_eq!(limits.admit(a).err(), Some(LimitError::TooManyConnections));
    let _other = limits.admit(b).expect("another address is not affected");
    drop(first);
    assert_eq!(limits.connections(a), 1);
    assert!(limits.admit(a).is_ok());
}

#[test]
fn joins_are_rate_limited_per_address() {
    let limits = IpLimits::new(1_000, 2);
    let a: IpAddr = "10.0.0.1".parse().unwrap();
    let slots: Vec<_> = (0..4).map_while(|_| limits.admit(a).ok()).collect();
    assert_eq!(slots.len(), 4, "a burst of twice the rate");
    assert_eq!(limits.admit(a).err(), Some(LimitError::JoiningTooFast));
    assert!(limits.admit("10.0.0.9".parse().unwrap()).is_ok());
}

#[test]
fn a_person_is_held_to_their_own_allowance_whatever_the_address() {
    let limits = IpLimits::new(1, 1);
    let a: IpAddr = "10.0.0.1".parse().unwrap();
    // The address's allowance spent by someone else...
    while limits.charge(a).is_ok() {}
    // ...is not this person's, who has their own.
    let place = Person::of(("s", 7u64));
    for _ in 0..PERSON_BURST {
        assert_eq!(limits.person(place), Ok(()));
    }
    assert_eq!(limits.person(place), Err(LimitError::PersonTooFast));
    assert_eq!(
        limits.person(Person::of(("s", 8u64))),
        Ok(()),
        "another place"
    );
    assert_eq!(
        limits.person(Person::of(("t", 7u64))),
        Ok(()),
        "another sale"
    );
}

#[test]
fn paid_sessions_are_held_per_person_and_under_a_wider_cap_per_address() {
    let limits = IpLimits::new(1, 1_000);
    let a: IpAddr = "10.0.0.1".parse().unwrap();
    let anonymous = limits.hold(a, Payer::Anonymous, None).unwrap();
    assert_eq!(
        limits.hold(a, Payer::Anonymous, None).err(),
        Some(LimitError::TooManyConnections)
    );
    // One place: as many sessions as a person may hold, from any address.
    let place = Some(Person::of(("s", 7u64)));
    let tabs: Vec<_> = (0..PERSON_SESSIONS)
        .map(|_| limits.hold(a, Payer::Paid, place).unwrap())
        .collect();
    assert_eq!(
        limits.hold(a, Payer::Paid, place).err(),
        Some(LimitError::PersonTooMany)
    );
    drop(tabs);
    // Sessions paid for by solved puzzles: many, but not without end.
    let every = PAID_SESSIONS_PER_ANONYMOUS as usize;
    let solved: Vec<_> = (1..every)
        .map(|_| limits.hold(a, Payer::Paid, None).unwrap())
        .collect();
    assert_eq!(solved.len(), every - 1, "the anonymous one counts too");
    assert_eq!(
        limits.hold(a, Payer::Paid, None).err(),
        Some(LimitError::TooManyConnections)
    );
    drop((anonymous, solved));
    assert_eq!(limits.sessions.get(&(a, 128)), 0, "every slot given back");
}

#[test]
fn defect_03_an_ipv6_client_counts_as_its_whole_64() {
    // One host gets a /64: every address in it is the same client to the limits.
    let limits = IpLimits::new(2, 1_000);
    let _a = limits.admit("2001:db8:1:2::1".parse().unwrap()).unwrap();
    let _b = limits
        .admit("2001:db8:1:2:ffff::9".parse().unwrap())
        .unwrap();
    assert_eq!(
        limits.admit("2001:db8:1:2:abcd::1".parse().unwrap()).err(),
        Some(LimitError::TooManyConnections)
    );
    assert!(
        limits.admit("2001:db8:1:3::1".parse().unwrap()).is_ok(),
        "the next /64 is someone else"
    );
    let rate = IpLimits::new(1_000, 1);
    let slots: Vec<_> = (1..=2)
        .map(|i| {
            rate.admit(format!("2001:db8::{i}").parse().unwrap())
                .unwrap()
        })
        .collect();
    assert_eq!(slots.len(), 2);
    assert_eq!(
        rate.admit("2001:db8::3".parse().unwrap()).err(),
        Some(LimitError::JoiningTooFast),
        "the join rate counts the /64 too"
    );
}

#[test]
fn defect_03_a_mapped_client_counts_as_its_ipv4_address() {
    let limits = IpLimits::new(1, 1_000);
    let _held = limits.admit("203.0.113.7".parse().unwrap()).unwrap();
    assert_eq!(
        limits.admit("::ffff:203.0.113.7".parse().unwrap()).err(),
        Some(LimitError::TooManyConnections)
    );
}

#[test]
fn the_ipv6_prefix_is_configurable() {
    let per_48 = IpLimits::with_ipv6_prefix(1, 1_000, 48);
    let _held = per_48.admit("2001:db8:1:2::1".parse().unwrap()).unwrap();
    assert_eq!(
        per_48.admit("2001:db8:1:ffff::1".parse().unwrap()).err(),
        Some(LimitError::TooManyConnections)
    );
}

#[test]
fn a_persons_sessions_are_not_the_addresss_and_an_ipv6_clients_caps_hold_for_its_48() {
    let limits = IpLimits::new(1, 1_000);
    let a: IpAddr = "10.0.0.1".parse().unwrap();
    // The address's sessions full of new places paid for by puzzles...
    let every = PAID_SESSIONS_PER_ANONYMOUS as usize;
    let solved: Vec<_> = (0..every)
        .map(|_| limits.hold(a, Payer::Paid, None).unwrap())
        .collect();
    assert_eq!(
        limits.hold(a, Payer::Paid, None).err(),
        Some(LimitError::TooManyConnections)
    );
    // ...shut out none of its people coming back, nor its signed-in buyers.
    let back = limits
        .hold(a, Payer::Place, Some(Person::of(("s", 1u64))))
        .expect("a place coming back");
    let buyer = limits
        .hold(a, Payer::Paid, Some(Person::of(("s", "buyer", "amrita"))))
        .expect("a signed-in buyer");
    drop((solved, back, buyer));
    // An IPv6 client taking a fresh /64 per session meets its /56's cap (16 times a /64's).
    let anonymous: Vec<_> = (0..100u32)
        .map_while(|i| {
            let ip: IpAddr = format!("2001:db8:5:{i:x}::").parse().unwrap();
            limits.hold(ip, Payer::Anonymous, None).ok()
        })
        .collect();
    assert_eq!(anonymous.len(), 16);
    drop(anonymous);
    assert!(limits
        .hold("2001:db8:5:1::".parse().unwrap(), Payer::Anonymous, None)
        .is_ok());
}

#[test]
fn a_place_refused_for_coming_back_too_often_spends_nothing_of_its_addresss_returns() {
    // Returns: 10 times one join a second, bursts of twice that.
    let limits = IpLimits::new(1_000, 1);
    let a: IpAddr = "10.0.0.1".parse().unwrap();
    let stranger = Person::of(("s", "place", 1u64));
    let mut back = 0;
    for _ in 0..100 {
        back += usize::from(limits.place_comes_back(a, stranger).is_ok());
    }
    assert_eq!(back, PERSON_BURST as usize, "the place's own burst");
    // Everyone else behind the address still has the address's whole burst but what the
    // stranger's place took.
    let every = 2 * RETURNS_PER_JOIN as usize - PERSON_BURST as usize;
    for n in 0..every {
        let person = Person::of(("s", "place", 100 + n as u64));
        assert_eq!(limits.place_comes_back(a, person), Ok(()), "person {n}");
    }
    let late = Person::of(("s", "place", 9_999u64));
    assert_eq!(
        limits.place_comes_back(a, late),
        Err(LimitError::JoiningTooFast)
    );
}

#[test]
fn a_48s_sessions_stop_well_short_of_what_a_gateway_holds() {
    // Every session of a /64: 32 times 32 anonymous ones.
    let limits = IpLimits::new(32, 1_000);
    let mut held = Vec::new();
    // A /64 in each of 20 /56s of one /48, each filling its own 1,024.
    for network in 0..20u16 {
        let ip = IpAddr::V6(std::net::Ipv6Addr::new(
            0x2001,
            0xdb8,
            7,
            network << 8,
            0,
            0,
            0,
            1,
        ));
        while let Ok(slot) = limits.hold(ip, Payer::Paid, None) {
            held.push(slot);
        }
    }
    assert_eq!(held.len(), 16 * 1_024, "the /48's every session");
    let elsewhere = IpAddr::V6(std::net::Ipv6Addr::new(0x2001, 0xdb8, 8, 0, 0, 0, 0, 1));
    assert!(
        limits.hold(elsewhere, Payer::Paid, None).is_ok(),
        "another /48"
    );
}

/// A machine's places, each left and taken back within its grace, are held to their address's
/// cap of places coming back: before, a place coming back on a sale that asks for a proof of work
/// counted against nothing of its address's, and one address could fill a gateway with them (a
/// new place a join, then back, again and again). The address's new places still shut out none
/// of its places coming back, and another address's come back.
#[test]
fn an_addresss_places_coming_back_stop_at_its_cap_of_them() {
    let limits = IpLimits::new(1, 1_000);
    let a: IpAddr = "10.0.0.1".parse().unwrap();
    let every = PAID_SESSIONS_PER_ANONYMOUS as usize;
    let new_places: Vec<_> = (0..every)
        .map(|_| limits.hold(a, Payer::Paid, None).unwrap())
        .collect();
    let place = |n: usize| Some(Person::of(("s", "place", n as u64)));
    let back: Vec<_> = (0..10_000)
        .map_while(|n| limits.hold(a, Payer::Place, place(n)).ok())
        .collect();
    assert_eq!(back.len(), every, "as many as every session of the address");
    assert_eq!(
        limits.hold(a, Payer::Place, place(20_000)).err(),
        Some(LimitError::TooManyConnections)
    );
    let b: IpAddr = "10.0.0.2".parse().unwrap();
    assert!(limits.hold(b, Payer::Place, place(20_001)).is_ok());
    drop((new_places, back));
    assert_eq!(
        limits.places_back.get(&(a, 128)),
        0,
        "every slot given back"
    );
}
