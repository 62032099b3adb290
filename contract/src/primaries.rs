//! Which server process is the primary of each hash slot, watched, so that what a failover may
//! have lost can be written again by whoever still holds it.
//!
//! Some writes are not worth a `WAIT` each (a buyer's record at every join: the rush's hottest
//! path), yet cost a person their place if a failover loses them. They are written again after
//! a change of primary instead, from the process that holds the truth in memory (the gateway
//! whose session holds the ticket). A write is lost only when the process serving its slot
//! changes: a replica promoted in a failover, or a primary restarted from files that lacked its
//! last writes. Both show here as a new identity for the slot: the node id (which a promotion
//! changes) and the process's `run_id` (which a restart changes).
//!
//! [`watch`] asks every [`WATCH_INTERVAL`] and publishes each new [`Layout`]; a watcher
//! compares the slots it cares about between the layout it last acted on and the new one
//! ([`Layout::moved`]). A question that fails (a node down, mid-failover) publishes nothing and
//! is asked again: the change shows once the cluster has settled.

use std::sync::Arc;
use std::time::Duration;

use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::redis_conn::RedisConn;

/// How often the layout is asked for: a few Redis commands per process, and the longest a lost
/// write waits to be noticed once the cluster has settled.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// The slots' primaries at one moment: ranges of slots, each with its primary's identity.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// `(first slot, last slot, identity)`, sorted by first slot, not overlapping.
    ranges: Vec<(u16, u16, Arc<str>)>,
}

impl Layout {
    /// The identity of `slot`'s primary (`None`: the slot is served by nobody known).
    pub fn primary(&self, slot: u16) -> Option<&str> {
        let at = self.ranges.partition_point(|(_, last, _)| *last < slot);
        self.ranges
            .get(at)
            .filter(|(first, _, _)| *first <= slot)
            .map(|(_, _, who)| &**who)
    }

    /// Whether `slot` is served by another process in `newer` than in `self` (a slot nobody
    /// was known to serve before counts as moved: what it held then is not known either).
    pub fn moved(&self, newer: &Layout, slot: u16) -> bool {
        self.primary(slot)
            .is_none_or(|before| Some(before) != newer.primary(slot))
    }

    fn from_ranges(mut ranges: Vec<(u16, u16, Arc<str>)>) -> Self {
        ranges.sort_by_key(|(first, _, _)| *first);
        Self { ranges }
    }
}

/// Asks Redis for the current layout: for a cluster `CLUSTER SLOTS` (the ranges and their
/// primaries' node ids) and `INFO server` from each primary (its `run_id`); for a single Redis
/// its `run_id`, for every slot.
pub async fn fetch(conn: &RedisConn) -> redis::RedisResult<Layout> {
    let mut info = redis::cmd("INFO");
    info.arg("server");
    match conn {
        RedisConn::Single(c) => {
            let text: String = info.query_async(&mut c.clone()).await?;
            let run = run_id(&text)?;
            Ok(Layout::from_ranges(vec![(0, 16_383, Arc::from(run))]))
        }
        RedisConn::Cluster(c) => {
            let mut c = c.clone();
            let random = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
            let slots = c
                .route_command(redis::cmd("CLUSTER").arg("SLOTS"), random)
                .await?;
            let mut ranges = Vec::new();
            for (first, last, node) in slot_ranges(&slots)? {
                // Asked of the slot's primary as the client routes it: the process the writes
                // go to.
                let route = Route::new(first, SlotAddr::Master);
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
                let text: String =
                    redis::from_redis_value(&c.route_command(&info, routing).await?)?;
                let who = format!("{node}/{}", run_id(&text)?);
                ranges.push((first, last, Arc::from(who)));
            }
            Ok(Layout::from_ranges(ranges))
        }
    }
}

/// Publishes the layout every [`WATCH_INTERVAL`] until `stop`, each time it differs from the
/// last one published. The receiver starts with the first layout that could be read (`None`
/// until then).
pub fn watch(
    conn: RedisConn,
    stop: CancellationToken,
) -> (
    watch::Receiver<Option<Arc<Layout>>>,
    impl std::future::Future<Output = ()> + Send + 'static,
) {
    let (tx, rx) = watch::channel(None);
    let task = async move {
        let mut every = tokio::time::interval(WATCH_INTERVAL);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = every.tick() => {}
            }
            match fetch(&conn).await {
                Ok(layout) => {
                    tx.send_if_modified(|last| {
                        let changed = last.as_deref() != Some(&layout);
                        if changed {
                            *last = Some(Arc::new(layout));
                        }
                        changed
                    });
                }
                // Mid-failover some node does not answer: asked again next time.
                Err(e) => tracing::debug!(error = %e, "reading the slots' primaries"),
            }
        }
    };
    (rx, task)
}

fn run_id(info: &str) -> redis::RedisResult<&str> {
    info.lines()
        .find_map(|line| line.strip_prefix("run_id:"))
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| odd("INFO server has no run_id"))
}

/// `(first, last, primary's node id)` of each range of a `CLUSTER SLOTS` answer
/// (`[[first, last, [host, port, id, ...], replicas...], ...]`).
fn slot_ranges(answer: &Value) -> redis::RedisResult<Vec<(u16, u16, String)>> {
    let ranges: Vec<Vec<Value>> = redis::from_redis_value(answer)?;
    ranges
        .iter()
        .map(|range| match range.as_slice() {
            [first, last, primary, ..] => {
                let node: Vec<Value> = redis::from_redis_value(primary)?;
                let id = node
                    .get(2)
                    .map(redis::from_redis_value::<String>)
                    .transpose()?
                    .ok_or_else(|| odd("CLUSTER SLOTS names no node id"))?;
                Ok((
                    redis::from_redis_value(first)?,
                    redis::from_redis_value(last)?,
                    id,
                ))
            }
            _ => Err(odd("a CLUSTER SLOTS range is too short")),
        })
        .collect()
}

fn odd(what: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::TypeError, what))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(ranges: &[(u16, u16, &str)]) -> Layout {
        Layout::from_ranges(
            ranges
                .iter()
                .map(|(a, b, who)| (*a, *b, Arc::from(*who)))
                .collect(),
        )
    }

    #[test]
    fn a_slot_is_served_by_its_ranges_primary() {
        let now = layout(&[(5461, 10922, "b"), (0, 5460, "a"), (10923, 16383, "c")]);
        assert_eq!(now.primary(0), Some("a"));
        assert_eq!(now.primary(5460), Some("a"));
        assert_eq!(now.primary(5461), Some("b"));
        assert_eq!(now.primary(16383), Some("c"));
        let gap = layout(&[(0, 10, "a"), (20, 30, "b")]);
        assert_eq!(gap.primary(15), None);
        assert_eq!(gap.primary(31), None);
    }

    #[test]
    fn only_the_slots_of_a_new_primary_moved() {
        let before = layout(&[(0, 5460, "a/1"), (5461, 16383, "b/1")]);
        // b's replica took over (another node), a restarted (another run).
        let after = layout(&[(0, 5460, "a/2"), (5461, 16383, "b/1")]);
        assert!(before.moved(&after, 0));
        assert!(!before.moved(&after, 9000));
        let failover = layout(&[(0, 5460, "a/1"), (5461, 16383, "d/7")]);
        assert!(!before.moved(&failover, 100));
        assert!(before.moved(&failover, 9000));
        // Nothing known before: whatever the slot held then is not known either.
        assert!(Layout::default().moved(&before, 100));
    }

    #[test]
    fn cluster_slots_and_info_answers_are_read() {
        let node = |host: &str, port: i64, id: &str| {
            Value::Array(vec![
                Value::BulkString(host.into()),
                Value::Int(port),
                Value::BulkString(id.into()),
            ])
        };
        let answer = Value::Array(vec![Value::Array(vec![
            Value::Int(0),
            Value::Int(5460),
            node("127.0.0.1", 7000, "abc"),
            node("127.0.0.1", 7003, "def"),
        ])]);
        assert_eq!(slot_ranges(&answer).unwrap(), vec![(0, 5460, "abc".into())]);
        let short = Value::Array(vec![Value::Array(vec![Value::Int(0)])]);
        assert!(slot_ranges(&short).is_err());
        assert_eq!(
            run_id("# Server\r\nredis_version:7.0.15\r\nrun_id:9f3e\r\n").unwrap(),
            "9f3e"
        );
        assert!(run_id("# Server\r\n").is_err());
    }
}
