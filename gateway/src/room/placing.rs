//! The away tickets whose people left before the draw (their place was not known then): the
//! leader places them once it knows the draw, and those just past the frontier before it lets
//! anyone in past them (`lua/advance.lua`'s `furthest`), or each would count as someone there.

use floodgate_platform::keys::SaleKeys;
use floodgate_platform::runtime::RedisConn;

use crate::scripts;
use crate::scripts::leader::Placing;

/// Places past the frontier the leader looks at while away tickets remain unplaced; no step
/// goes further then (20,000 places a second at the default tick, far more than any rate).
const FRONT: u64 = 2_000;

/// The places of the away tickets that left before the draw: the leader's read gives a few
/// hundred of them (`unplaced`), and while more may remain, those among the next [`FRONT`]
/// places are looked up and placed too, and the step goes no further: an unplaced one would
/// count as someone there, taking a permit and holding stock for a pass nobody holds (a
/// stranger's places dropped just before the opening would otherwise fill the front of the line
/// until the leader got round to them, a few hundred a tick).
pub(super) async fn placing(
    conn: &mut RedisConn,
    keys: &SaleKeys,
    draw: &floodgate_protocol::lottery::Draw,
    frontier: u64,
    unplaced: &[u64],
) -> redis::RedisResult<Placing> {
    let mut placed: std::collections::BTreeMap<u64, u64> =
        unplaced.iter().map(|t| (*t, draw.place(*t))).collect();
    if unplaced.len() < scripts::room::PLACING_BATCH {
        // Every one left is placed by this step.
        return Ok(Placing {
            placed: placed.into_iter().collect(),
            furthest: 0,
        });
    }
    let furthest = frontier.saturating_add(FRONT);
    // A later arrival's place is its ticket (`ticket_at` says so), and one may be unplaced too:
    // a dead gateway's tickets are handed to their grace without their places (sweep.lua).
    let tickets: Vec<u64> = (frontier + 1..=furthest)
        .map(|place| draw.ticket_at(place))
        .collect();
    let found = scripts::room::unplaced_among(conn, keys, &tickets).await?;
    for (ticket, unplaced) in tickets.into_iter().zip(found) {
        if unplaced {
            placed.insert(ticket, draw.place(ticket));
        }
    }
    Ok(Placing {
        placed: placed.into_iter().collect(),
        furthest,
    })
}
