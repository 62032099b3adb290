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

use std::collections::HashMap;
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

/// Who serves a range of slots: the node (a promotion changes it) and, when it could be asked,
/// its process (a restart changes it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Primary {
    node: Arc<str>,
    run: Option<Arc<str>>,
}

impl Primary {
    /// Whether `newer` is another process than `self`: another node, or the same node with
    /// another run (a run not known on either side is not counted as a change: the node was
    /// asked about before, or is asked again next time).
    fn replaced_by(&self, newer: &Primary) -> bool {
        self.node != newer.node || matches!((&self.run, &newer.run), (Some(a), Some(b)) if a != b)
    }
}

/// The slots' primaries at one moment: ranges of slots, each with its primary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// `(first slot, last slot, primary)`, sorted by first slot, not overlapping.
    ranges: Vec<(u16, u16, Primary)>,
}

impl Layout {
    /// The primary of `slot` (`None`: the slot is served by nobody known).
    pub fn primary(&self, slot: u16) -> Option<&Primary> {
        let at = self.ranges.partition_point(|(_, last, _)| *last < slot);
        self.ranges
            .get(at)
            .filter(|(first, _, _)| *first <= slot)
            .map(|(_, _, who)| who)
    }

    /// Whether `slot` is served by another process in `newer` than in `self` (a slot nobody
    /// was known to serve before counts as moved: what it held then is not known either).
    pub fn moved(&self, newer: &Layout, slot: u16) -> bool {
        match (self.primary(slot), newer.primary(slot)) {
            (Some(before), Some(after)) => before.replaced_by(after),
            (Some(_), None) => false,
            (None, _) => true,
        }
    }

    fn from_ranges(mut ranges: Vec<(u16, u16, Primary)>) -> Self {
        ranges.sort_by_key(|(first, _, _)| *first);
        Self { ranges }
    }
}

/// Asks Redis for the current layout. For a cluster: `CLUSTER SLOTS` (the ranges and their
/// primaries' node ids), then each primary once for `CLUSTER MYID` and `INFO server` (its
/// `run_id`), on the connection the client sends that node's writes to. A primary that does not
/// answer, or whose answer comes from another node (the client's map of the cluster is behind),
/// keeps the run it had in `previous` (if still the same node), or an unknown one. For a single
/// Redis: its `run_id`, for every slot.
pub async fn fetch(conn: &RedisConn, previous: Option<&Layout>) -> redis::RedisResult<Layout> {
    let mut info = redis::cmd("INFO");
    info.arg("server");
    match conn {
        RedisConn::Single(c) => {
            let text: String = info.query_async(&mut c.clone()).await?;
            let run = Some(Arc::from(run_id(&text)?));
            let primary = Primary {
                node: Arc::from("single"),
                run,
            };
            Ok(Layout::from_ranges(vec![(0, 16_383, primary)]))
        }
        RedisConn::Cluster(c) => {
            let mut c = c.clone();
            let random = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
            let slots = c
                .route_command(redis::cmd("CLUSTER").arg("SLOTS"), random)
                .await?;
            let ranges = slot_ranges(&slots)?;
            let mut runs: HashMap<&str, Option<Arc<str>>> = HashMap::new();
            for (first, _, node) in &ranges {
                if !runs.contains_key(node.as_str()) {
                    let run = ask_run(&mut c, *first, node).await;
                    runs.insert(node, run);
                }
            }
            let layout = ranges.iter().map(|(first, last, node)| {
                let node: Arc<str> = Arc::from(node.as_str());
                let run = runs[&*node].clone().or_else(|| {
                    previous
                        .and_then(|p| p.primary(*first))
                        .filter(|p| p.node == node)
                        .and_then(|p| p.run.clone())
                });
                (*first, *last, Primary { node, run })
            });
            Ok(Layout::from_ranges(layout.collect()))
        }
    }
}

/// The `run_id` of `node`, asked on the connection the client routes `slot`'s writes to, if that
/// is `node` and it answers.
async fn ask_run(
    c: &mut redis::cluster_async::ClusterConnection,
    slot: u16,
    node: &str,
) -> Option<Arc<str>> {
    let mut both = redis::pipe();
    both.cmd("CLUSTER").arg("MYID");
    both.cmd("INFO").arg("server");
    let route = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
    let answers: (String, String) = match c.route_pipeline(&both, 0, 2, route).await {
        Ok(values) => redis::from_redis_value(&Value::Array(values)).ok()?,
        Err(_) => return None,
    };
    (answers.0 == node)
        .then(|| run_id(&answers.1).ok().map(Arc::from))
        .flatten()
}

/// Publishes the layout every [`WATCH_INTERVAL`] until `stop`, each time it differs from the
/// last one published. The receiver starts with the first layout that could be read (`None`
/// until then). `floodgate_redis_primaries_known` is 1 while the layout can be read, 0 while it
/// cannot (no change of primary is noticed then), and a warning is logged when it stops.
pub fn watch(
    conn: RedisConn,
    stop: CancellationToken,
) -> (
    watch::Receiver<Option<Arc<Layout>>>,
    impl std::future::Future<Output = ()> + Send + 'static,
) {
    let (tx, rx) = watch::channel(None::<Arc<Layout>>);
    let task = async move {
        let mut every = crate::service::Every::new(WATCH_INTERVAL, stop);
        let known = metrics::gauge!("floodgate_redis_primaries_known");
        let mut failing = false;
        while every.tick().await {
            let previous = tx.borrow().clone();
            match fetch(&conn, previous.as_deref()).await {
                Ok(layout) => {
                    if std::mem::take(&mut failing) {
                        tracing::info!("the Redis slots' primaries can be read again");
                    }
                    known.set(1.0);
                    tx.send_if_modified(|last| {
                        let changed = last.as_deref() != Some(&layout);
                        if changed {
                            *last = Some(Arc::new(layout));
                        }
                        changed
                    });
                }
                Err(e) => {
                    known.set(0.0);
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!(error = %e, "cannot read the Redis slots' primaries: a failover would go unnoticed until they can be read");
                    }
                }
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

    fn who(node: &str, run: Option<&str>) -> Primary {
        Primary {
            node: Arc::from(node),
            run: run.map(Arc::from),
        }
    }

    fn layout(ranges: &[(u16, u16, &str, Option<&str>)]) -> Layout {
        Layout::from_ranges(
            ranges
                .iter()
                .map(|(a, b, node, run)| (*a, *b, who(node, *run)))
                .collect(),
        )
    }

    #[test]
    fn a_slot_is_served_by_its_ranges_primary() {
        let now = layout(&[
            (5461, 10922, "b", None),
            (0, 5460, "a", None),
            (10923, 16383, "c", None),
        ]);
        assert_eq!(now.primary(0), Some(&who("a", None)));
        assert_eq!(now.primary(5460), Some(&who("a", None)));
        assert_eq!(now.primary(5461), Some(&who("b", None)));
        assert_eq!(now.primary(16383), Some(&who("c", None)));
        let gap = layout(&[(0, 10, "a", None), (20, 30, "b", None)]);
        assert_eq!(gap.primary(15), None);
        assert_eq!(gap.primary(31), None);
    }

    #[test]
    fn only_the_slots_of_a_new_primary_moved() {
        let before = layout(&[(0, 5460, "a", Some("1")), (5461, 16383, "b", Some("1"))]);
        // a restarted (another run of the same node).
        let restarted = layout(&[(0, 5460, "a", Some("2")), (5461, 16383, "b", Some("1"))]);
        assert!(before.moved(&restarted, 0));
        assert!(!before.moved(&restarted, 9000));
        // b's replica d took over; it has not answered yet (its run unknown).
        let promoted = layout(&[(0, 5460, "a", Some("1")), (5461, 16383, "d", None)]);
        assert!(!before.moved(&promoted, 100));
        assert!(before.moved(&promoted, 9000));
        // Once d answers, that is no second change; nor is a run not known for a while.
        let answered = layout(&[(0, 5460, "a", Some("1")), (5461, 16383, "d", Some("7"))]);
        assert!(!promoted.moved(&answered, 9000));
        let silent = layout(&[(0, 5460, "a", None), (5461, 16383, "d", Some("7"))]);
        assert!(!before.moved(&silent, 100));
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
