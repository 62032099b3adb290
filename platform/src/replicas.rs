//! Waiting until writes are on a replica before anything is promised on them.
//!
//! Redis replicates asynchronously: a write answered OK by a primary that dies a moment later may
//! never reach the replica promoted in its place. A booking answered 201 on such a write would be
//! forgotten by Redis while PostgreSQL has it, and its seat sold again. `WAIT n timeout` closes
//! the gap, knowing how it really behaves:
//!
//! - It counts the writes made on *the connection it is sent on* (the server remembers the
//!   replication offset of each client's last write). So it goes on the same connection as the
//!   write: the process's one multiplexed connection to that node, routed explicitly to the
//!   primary of the write's slot. (A plain `WAIT` through the cluster client would go to every
//!   primary and return the lowest answer.)
//! - A connection that made no write of its own has nothing for `WAIT` to count, and it returns
//!   at once: a replay answered from what another process wrote, or a retry on a connection made
//!   again after a reconnect. So each `WAIT` follows a write of its own on the same connection
//!   (an `INCR` of a mark key in the slot): replication is ordered, so a replica that has the
//!   mark has every write the primary made before it, whoever made them.
//! - One `WAIT` covers every write sent before it on that connection. So waits are grouped per
//!   slot: a caller whose write is done joins the next `WAIT` not yet sent, and at most one is in
//!   flight per slot while the next gathers callers. A busy node pays one replication round trip
//!   per batch, not one per reservation.
//! - The connection is blocked while `WAIT` runs (Redis serves a client's commands in order), so
//!   the timeout is short, well under the client's response timeout.
//!
//! With `min_replicas = 0` (a single Redis without replicas) nothing is sent at all.

use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};

use crate::batch::{self, Flush};
use crate::redis_conn::RedisConn;

/// Why writes could not be shown to be on enough replicas. Whoever waited must not promise
/// anything on them (and should take back what it can).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotReplicated {
    #[error("only {acked} of {wanted} replica(s) acknowledged the write in time")]
    TooFew { acked: i64, wanted: u32 },
    #[error("waiting for a replica failed: {0}")]
    Failed(String),
}

/// The outcome of one `WAIT`, shared by every caller it covers.
type Outcome = Result<(), NotReplicated>;

/// Sends one `WAIT` for a slot (the real one, or a scripted one in the unit tests).
pub trait SendWait: Send + Sync + 'static {
    fn send_wait(&self, slot: u16) -> BoxFuture<'static, Outcome>;
}

/// A `WAIT` is a batch of callers with nothing to bring: each batch is one `WAIT` on its slot.
struct Waits<S>(S);

impl<S: SendWait> Flush for Waits<S> {
    type Key = u16;
    type Item = ();
    type Answer = Outcome;

    fn flush(&self, slot: &u16, _callers: Vec<()>) -> BoxFuture<'static, Outcome> {
        self.0.send_wait(*slot)
    }
}

/// Groups waits per slot; see the module's notes.
pub struct Batcher<S: SendWait>(batch::Batcher<Waits<S>>);

impl<S: SendWait> Clone for Batcher<S> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<S: SendWait> Batcher<S> {
    pub fn new(sender: S) -> Self {
        // A caller brings nothing, so a batch has no reason to be capped.
        Self(batch::Batcher::new(Waits(sender), usize::MAX))
    }

    /// Resolves once a `WAIT` sent after this call has been answered for `slot`: every write
    /// this process finished on that slot's primary before calling is covered by it.
    pub async fn covered(&self, slot: u16) -> Outcome {
        match self.0.submit(slot, ()).await {
            Ok((_, outcome)) => outcome,
            Err(e) => Err(NotReplicated::Failed(e.to_string())),
        }
    }
}

/// The real sender: a mark written, then `WAIT min timeout`, on the process's connection to
/// the slot's primary.
pub struct RedisWait {
    conn: RedisConn,
    min_replicas: u32,
    timeout: Duration,
    /// The mark keys' prefix (the deployment's key prefix, so ACLs on it cover them).
    prefix: String,
}

/// A short hash tag for each of the 16,384 slots (`tags()[slot]` hashes to `slot`), found once.
fn tags() -> &'static [String] {
    static TAGS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    TAGS.get_or_init(|| {
        let mut tags = vec![String::new(); 16_384];
        let mut missing = tags.len();
        let mut n: u64 = 0;
        while missing > 0 {
            let tag = n.to_string();
            let slot = usize::from(crc16(tag.as_bytes()) % 16_384);
            if tags[slot].is_empty() {
                tags[slot] = tag;
                missing -= 1;
            }
            n += 1;
        }
        tags
    })
}

/// The key of `slot`'s mark: the write each `WAIT` follows.
fn mark_key(prefix: &str, slot: u16) -> String {
    format!("{prefix}{{{}}}:replicated", tags()[usize::from(slot)])
}

impl SendWait for RedisWait {
    fn send_wait(&self, slot: u16) -> BoxFuture<'static, Outcome> {
        let mut conn = self.conn.clone();
        let min = self.min_replicas;
        // The mark and the wait as one pipeline: sent together, in order, on one connection,
        // and sent again together if the client retries, so the wait never goes alone (a wait on
        // a connection without a write of its own would count nothing and return at once).
        let mut both = redis::pipe();
        both.cmd("INCR").arg(mark_key(&self.prefix, slot));
        both.cmd("WAIT")
            .arg(min)
            .arg(self.timeout.as_millis() as u64);
        async move {
            let answers: redis::RedisResult<Vec<redis::Value>> = match &mut conn {
                RedisConn::Single(c) => both.query_async(c).await,
                RedisConn::Cluster(c) => {
                    let route = Route::new(slot, SlotAddr::Master);
                    c.route_pipeline(&both, 0, 2, SingleNodeRoutingInfo::SpecificNode(route))
                        .await
                }
            };
            // The mark must be an increment on the slot's primary (an error or a redirect is
            // no mark), and the wait's answer a count.
            let acked = answers.and_then(|answers| match answers.as_slice() {
                [redis::Value::Int(_), acked] => redis::from_redis_value::<i64>(acked),
                other => Err(redis::RedisError::from((
                    redis::ErrorKind::TypeError,
                    "the replica mark was not written",
                    format!("{other:?}"),
                ))),
            });
            match acked {
                Ok(n) if n >= i64::from(min) => Ok(()),
                Ok(n) => Err(NotReplicated::TooFew {
                    acked: n,
                    wanted: min,
                }),
                Err(e) => Err(NotReplicated::Failed(e.to_string())),
            }
        }
        .boxed()
    }
}

/// How many replicas must have a write before it is promised, and how long to wait for them.
#[derive(Clone)]
pub struct Replication {
    batcher: Option<Batcher<RedisWait>>,
}

impl Replication {
    /// The longest a `WAIT` may block: under the connection's 2 s response timeout, which would
    /// otherwise fail the wait (and every command queued behind it) as a broken connection.
    pub const MAX_TIMEOUT: Duration = Duration::from_millis(1_500);

    /// Waits for `min_replicas` (none at all when 0) for at most `timeout` (capped at
    /// [`Self::MAX_TIMEOUT`]); each wait's mark key starts with `prefix`.
    pub fn new(conn: RedisConn, min_replicas: u32, timeout: Duration, prefix: &str) -> Self {
        let batcher = (min_replicas > 0).then(|| {
            Batcher::new(RedisWait {
                conn,
                min_replicas,
                timeout: timeout.min(Self::MAX_TIMEOUT),
                prefix: prefix.to_owned(),
            })
        });
        Self { batcher }
    }

    /// Whether writes wait for replicas at all (callers skip building keys when not).
    pub fn required(&self) -> bool {
        self.batcher.is_some()
    }

    /// Resolves once every write this process finished on `key`'s primary before the call is on
    /// enough replicas.
    pub async fn replicated(&self, key: &str) -> Outcome {
        match &self.batcher {
            None => Ok(()),
            Some(batcher) => batcher.covered(key_slot(key.as_bytes())).await,
        }
    }

    /// Both keys' writes replicated (their waits run at once).
    pub async fn both_replicated(&self, a: &str, b: &str) -> Outcome {
        let (a, b) = tokio::join!(self.replicated(a), self.replicated(b));
        a.and(b)
    }

    /// Every key's writes replicated (their waits run at once).
    pub async fn all_replicated(&self, keys: &[&str]) -> Outcome {
        let waits = keys.iter().map(|key| self.replicated(key));
        futures::future::join_all(waits).await.into_iter().collect()
    }
}

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag (the part inside the
/// first `{...}`, when non-empty) or of the whole key, modulo 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16(tagged) % 16_384
}

fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT` on a real Redis.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"hello"), 866);
        // A hash tag decides the slot; an empty tag does not count.
        assert_eq!(key_slot(b"{foo}.anything"), key_slot(b"foo"));
        assert_eq!(key_slot(b"fg:{foo}:bar"), 12182);
        assert_ne!(key_slot(b"{}foo"), key_slot(b"foo"));
    }

    #[test]
    fn every_slot_has_a_mark_key_in_it() {
        for slot in [0u16, 1, 866, 12182, 16_383] {
            let key = mark_key("fg:", slot);
            assert_eq!(key_slot(key.as_bytes()), slot, "{key}");
            assert!(key.starts_with("fg:{"), "{key}");
        }
        assert!(tags().iter().all(|t| !t.is_empty() && t.len() <= 6));
    }

    /// A scripted `WAIT`: counts sends, stamps each with the "write clock" at the moment it was
    /// sent, and takes a little while to answer.
    #[derive(Clone, Default)]
    struct Scripted {
        sends: Arc<AtomicU64>,
        clock: Arc<AtomicU64>,
        sent_at: Arc<Mutex<Vec<u64>>>,
    }

    impl SendWait for Scripted {
        fn send_wait(&self, _slot: u16) -> BoxFuture<'static, Outcome> {
            self.sends.fetch_add(1, Ordering::SeqCst);
            let at = self.clock.load(Ordering::SeqCst);
            let this = self.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                this.sent_at.lock().unwrap().push(at);
                Ok(())
            }
            .boxed()
        }
    }

    #[tokio::test]
    async fn many_callers_share_few_waits_and_each_is_covered() {
        let sender = Scripted::default();
        let batcher = Batcher::new(sender.clone());
        let mut callers = Vec::new();
        for _ in 0..200 {
            let (batcher, sender) = (batcher.clone(), sender.clone());
            callers.push(tokio::spawn(async move {
                // "Write", then wait: the wait that answers must have been sent after it.
                let written = sender.clock.fetch_add(1, Ordering::SeqCst) + 1;
                batcher.covered(7).await.unwrap();
                written
            }));
            tokio::task::yield_now().await;
        }
        for caller in callers {
            let written = caller.await.unwrap();
            let sent_at = sender.sent_at.lock().unwrap().clone();
            assert!(
                sent_at.iter().any(|&at| at >= written),
                "write {written} answered before any wait sent after it: {sent_at:?}"
            );
        }
        let sends = sender.sends.load(Ordering::SeqCst);
        assert!((1..50).contains(&sends), "200 callers took {sends} waits");
    }

    #[tokio::test]
    async fn a_caller_after_a_send_waits_for_the_next() {
        let sender = Scripted::default();
        let batcher = Batcher::new(sender.clone());
        let first = tokio::spawn({
            let batcher = batcher.clone();
            async move { batcher.covered(1).await }
        });
        // Let the first wait be sent, then write and wait again: a second send must follow.
        while sender.sends.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        sender.clock.fetch_add(1, Ordering::SeqCst);
        batcher.covered(1).await.unwrap();
        first.await.unwrap().unwrap();
        assert_eq!(sender.sends.load(Ordering::SeqCst), 2);
        assert_eq!(*sender.sent_at.lock().unwrap(), vec![0, 1]);
        // Another slot has its own waits.
        batcher.covered(2).await.unwrap();
        assert_eq!(sender.sends.load(Ordering::SeqCst), 3);
    }
}
