//! Natural batching: callers that arrive while a batch of their kind is being served gather into
//! the next one, which is sent as soon as the one in flight is answered.
//!
//! Used wherever one Redis call can serve many callers and a node must not pay one round trip per
//! caller: a `WAIT` for replicas covers every write made before it (`replicas`), and one run of
//! the join script hands out a whole batch of tickets (the gateway). The shape is the same:
//!
//! - Per key, at most one batch is in flight, and callers gather into the next in arrival order:
//!   a caller's position in its batch is the order it called [`Batcher::submit`] in. A batch is
//!   taken for sending (under the lock every caller takes) before it is sent, so a caller never
//!   joins a batch already on the wire.
//! - No timer: a lone caller is sent at once, and a batch grows only while the previous one is
//!   in flight, so batching adds at most one round trip of delay and grows with the load.
//! - A batch holds at most `max_items`; past that a further batch gathers behind it, each sent
//!   when the one before it is answered.
//! - A caller that stops waiting (its future dropped) is still in its batch, which is sent
//!   anyway; [`Flush::abandoned`] is told whose answers nobody took, so whatever the batch made
//!   for them can be undone.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::oneshot;

/// Sends one batch. The answer is shared by every caller of the batch, each of which also learns
/// its position in it.
pub trait Flush: Send + Sync + 'static {
    /// What batches are grouped by (a Redis slot; `()` for one stream of batches).
    type Key: Hash + Eq + Clone + Send + Sync + 'static;
    /// What one caller brings to its batch.
    type Item: Send + 'static;
    /// The batch's answer, as every caller of the batch sees it.
    type Answer: Clone + Send + Sync + 'static;

    /// Serves one batch: `items` in arrival order, never empty.
    fn flush(&self, key: &Self::Key, items: Vec<Self::Item>) -> BoxFuture<'static, Self::Answer>;

    /// Called after a batch was answered with the positions of the callers that had stopped
    /// waiting by then (never empty), for undoing what the batch did for them.
    fn abandoned(
        &self,
        _key: &Self::Key,
        _answer: &Self::Answer,
        _positions: Vec<usize>,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

/// A caller's share of a batch's answer: its position in the batch, and the answer.
pub type Share<A> = (usize, A);

/// The batch was never answered (its task panicked or the runtime is shutting down).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the batch was never answered")]
pub struct Unanswered;

/// One batch still gathering callers.
struct Gathering<F: Flush> {
    items: Vec<F::Item>,
    waiters: Vec<oneshot::Sender<Share<F::Answer>>>,
}

/// The batches of one key: those gathering (sent front first), and whether a driver is sending.
struct Lane<F: Flush> {
    gathering: VecDeque<Gathering<F>>,
    driving: bool,
}

impl<F: Flush> Default for Lane<F> {
    fn default() -> Self {
        Self {
            gathering: VecDeque::new(),
            driving: false,
        }
    }
}

/// Groups calls into batches; see the module's notes. Cheap to clone (one shared state).
pub struct Batcher<F: Flush> {
    flusher: Arc<F>,
    max_items: usize,
    lanes: Arc<Mutex<HashMap<F::Key, Lane<F>>>>,
}

impl<F: Flush> Clone for Batcher<F> {
    fn clone(&self) -> Self {
        Self {
            flusher: self.flusher.clone(),
            max_items: self.max_items,
            lanes: self.lanes.clone(),
        }
    }
}

impl<F: Flush> Batcher<F> {
    /// Batches of at most `max_items` (at least 1).
    pub fn new(flusher: F, max_items: usize) -> Self {
        Self {
            flusher: Arc::new(flusher),
            max_items: max_items.max(1),
            lanes: Arc::default(),
        }
    }

    pub fn flusher(&self) -> &F {
        &self.flusher
    }

    /// Adds `item` to the next batch of `key` not yet sent and resolves with its position in
    /// that batch and the batch's answer.
    pub async fn submit(&self, key: F::Key, item: F::Item) -> Result<Share<F::Answer>, Unanswered> {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
            let lane = lanes.entry(key.clone()).or_default();
            match lane.gathering.back_mut() {
                Some(batch) if batch.items.len() < self.max_items => {
                    batch.items.push(item);
                    batch.waiters.push(tx);
                }
                _ => lane.gathering.push_back(Gathering {
                    items: vec![item],
                    waiters: vec![tx],
                }),
            }
            !std::mem::replace(&mut lane.driving, true)
        };
        if start {
            tokio::spawn(self.clone().drive(key));
        }
        rx.await.map_err(|_| Unanswered)
    }

    /// Sends `key`'s batches one after another until none is gathering.
    async fn drive(self, key: F::Key) {
        // Should a flush panic, the lane must not stay marked as driven with nobody driving it:
        // its gathering callers are told `Unanswered` and the next caller starts afresh.
        let _abandon = AbandonOnPanic {
            lanes: self.lanes.clone(),
            key: key.clone(),
        };
        loop {
            let batch = {
                let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
                let Some(lane) = lanes.get_mut(&key) else {
                    return;
                };
                match lane.gathering.pop_front() {
                    Some(batch) => batch,
                    None => {
                        lanes.remove(&key);
                        return;
                    }
                }
            };
            let answer = self.flusher.flush(&key, batch.items).await;
            let gone: Vec<usize> = batch
                .waiters
                .into_iter()
                .enumerate()
                .filter_map(|(position, waiter)| {
                    waiter
                        .send((position, answer.clone()))
                        .err()
                        .map(|_| position)
                })
                .collect();
            if !gone.is_empty() {
                self.flusher.abandoned(&key, &answer, gone).await;
            }
        }
    }
}

/// Removes a lane whose driver is unwinding from a panic (see [`Batcher::drive`]).
struct AbandonOnPanic<F: Flush> {
    lanes: Arc<Mutex<HashMap<F::Key, Lane<F>>>>,
    key: F::Key,
}

impl<F: Flush> Drop for AbandonOnPanic<F> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
            lanes.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Records every batch it serves and answers with the batch's number; takes a moment, so
    /// callers gather behind it.
    #[derive(Default)]
    struct Recorder {
        batches: Mutex<Vec<Vec<u32>>>,
        abandoned: Mutex<Vec<(usize, Vec<usize>)>>,
        sends: AtomicUsize,
    }

    impl Flush for Arc<Recorder> {
        type Key = u8;
        type Item = u32;
        type Answer = usize;

        fn flush(&self, _key: &u8, items: Vec<u32>) -> BoxFuture<'static, usize> {
            let n = self.sends.fetch_add(1, Ordering::SeqCst);
            self.batches.lock().unwrap().push(items);
            async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                n
            }
            .boxed()
        }

        fn abandoned(
            &self,
            _key: &u8,
            batch: &usize,
            positions: Vec<usize>,
        ) -> BoxFuture<'static, ()> {
            self.abandoned.lock().unwrap().push((*batch, positions));
            Box::pin(async {})
        }
    }

    /// `submit(key, item)`, polled once so it has joined its batch: callers made one after the
    /// other arrive in that order.
    async fn arrive(
        batcher: &Batcher<Arc<Recorder>>,
        key: u8,
        item: u32,
    ) -> BoxFuture<'static, Result<Share<usize>, Unanswered>> {
        let batcher = batcher.clone();
        let mut call = async move { batcher.submit(key, item).await }.boxed();
        assert!(futures::poll!(&mut call).is_pending());
        call
    }

    #[tokio::test]
    async fn callers_gather_in_arrival_order_and_each_learns_its_place() {
        let recorder = Arc::new(Recorder::default());
        let batcher = Batcher::new(recorder.clone(), 1_000);
        let mut callers = Vec::new();
        for i in 0..300u32 {
            callers.push((i, arrive(&batcher, 1, i).await));
            if i % 10 == 0 {
                // The batch in flight is answered now and then, and the next one sent.
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        let mut seen = Vec::new();
        for (i, caller) in callers {
            let (position, batch) = caller.await.unwrap();
            let batches = recorder.batches.lock().unwrap().clone();
            assert_eq!(batches[batch][position], i, "caller {i} found at its place");
            seen.push((batch, position));
        }
        // Arrival order is answer order: batch by batch, position by position.
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
        let sends = recorder.sends.load(Ordering::SeqCst);
        assert!(
            (2..100).contains(&sends),
            "300 callers took {sends} batches"
        );
        assert!(recorder.abandoned.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_lone_caller_is_sent_at_once_and_batches_are_capped() {
        let recorder = Arc::new(Recorder::default());
        let batcher = Batcher::new(recorder.clone(), 3);
        assert_eq!(batcher.submit(9, 1).await, Ok((0, 0)));
        // Eight callers at once, batches of at most three, in order.
        let all = futures::future::join_all((10..18).map(|i| batcher.submit(9, i))).await;
        let batches = recorder.batches.lock().unwrap().clone();
        assert_eq!(
            batches,
            vec![vec![1], vec![10, 11, 12], vec![13, 14, 15], vec![16, 17]]
        );
        let shares: Vec<_> = all.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            shares[4],
            (1, 2),
            "the fifth of eight: second of the second batch"
        );
        // Keys have their own batches.
        assert_eq!(batcher.submit(2, 5).await, Ok((0, 4)));
    }

    /// Panics on the item 0, answers the others.
    struct Fragile;

    impl Flush for Fragile {
        type Key = ();
        type Item = u32;
        type Answer = u32;

        fn flush(&self, _key: &(), items: Vec<u32>) -> BoxFuture<'static, u32> {
            async move {
                assert!(!items.contains(&0), "a flush that panics");
                items[0]
            }
            .boxed()
        }
    }

    #[tokio::test]
    async fn a_flush_that_panics_answers_its_callers_and_leaves_the_batcher_usable() {
        let batcher = Batcher::new(Fragile, 10);
        assert_eq!(batcher.submit((), 0).await, Err(Unanswered));
        // Without the lane cleared, this caller would gather behind a driver that is gone.
        let next = tokio::time::timeout(Duration::from_secs(5), batcher.submit((), 7)).await;
        assert_eq!(next, Ok(Ok((0, 7))), "the batcher is stuck after a panic");
    }

    #[tokio::test]
    async fn callers_that_stop_waiting_are_reported() {
        let recorder = Arc::new(Recorder::default());
        let batcher = Batcher::new(recorder.clone(), 100);
        // The first batch is in flight; three callers gather behind it, the middle one gives up.
        let first = arrive(&batcher, 1, 0).await;
        while recorder.sends.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        let a = arrive(&batcher, 1, 1).await;
        drop(arrive(&batcher, 1, 2).await);
        let c = arrive(&batcher, 1, 3).await;
        assert_eq!(first.await, Ok((0, 0)));
        assert_eq!(a.await, Ok((0, 1)));
        assert_eq!(c.await, Ok((2, 1)));
        assert_eq!(*recorder.abandoned.lock().unwrap(), vec![(1, vec![1])]);
    }
}
