//! The rooms this gateway holds, one per sale it serves: started on first need, and only for a
//! sale Redis knows as armed (a made-up sale id starts nothing), retired once nobody has used one
//! for the idle time.

use std::collections::HashMap;
use std::sync::Arc;

use floodgate_platform::state::SaleStatus;
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;
use crate::room::RoomDriver;
use crate::{sale, scripts, AppState};

impl AppState {
    /// This gateway's room for `sale` (with what its sessions share), started on first use.
    /// A room costs a task and a few Redis commands a tick for as long as it lives, so one is
    /// started only for a sale Redis knows as armed: a stranger naming random sales gets 404s
    /// and leaves nothing behind.
    pub(crate) async fn room(&self, sale: &str) -> Result<Arc<sale::Context>, ApiError> {
        if let Some(room) = self.live_room(sale) {
            return Ok(room);
        }
        let mut pipe = redis::pipe();
        SaleStatus::query(&mut pipe, &self.keys.sale(sale));
        let status: (bool, bool) = pipe.query_async(&mut self.redis.clone()).await?;
        if !SaleStatus::from_replies(status).armed {
            return Err(ApiError::unknown_sale());
        }
        let room = self
            .rooms
            .entry(sale.to_owned())
            .or_insert_with(|| self.start_room(sale))
            .clone();
        Ok(room)
    }

    /// The room of `sale` if this gateway runs one now: a map lookup, no Redis.
    pub(crate) fn live_room(&self, sale: &str) -> Option<Arc<sale::Context>> {
        self.rooms.get(sale).map(|room| room.clone())
    }

    fn start_room(&self, sale: &str) -> Arc<sale::Context> {
        let config = &self.config;
        let driver = RoomDriver {
            sale: sale.to_owned(),
            keys: self.keys.clone(),
            redis: self.redis.clone(),
            instance_id: self.instance_id.clone(),
            tick: config.tick,
            lease: config.lease,
            grace: config.grace,
            heartbeat: config.heartbeat,
        };
        let retire = CancellationToken::new();
        let (room, task) = driver.start(self.shutdown.clone(), retire.clone());
        self.tasks.spawn(task);
        metrics::gauge!("floodgate_rooms").increment(1.0);
        tracing::info!(%sale, "room started");
        let scope = scripts::SaleScope {
            sale: sale.to_owned(),
            keys: self.keys.sale(sale),
            root_keys: self.keys.clone(),
            redis: self.redis.clone(),
            lines: scripts::tickets::Lines::new(
                self.redis.clone(),
                self.keys.sale(sale),
                self.instance_id.clone(),
                config.lease,
            ),
            instance_id: self.instance_id.clone(),
            lease: config.lease,
        };
        Arc::new(sale::Context {
            scope,
            room,
            signer: self.signer.clone(),
            resume: self.resume.clone(),
            seal: self.clients.seal.clone(),
            grace: config.grace,
            retire,
            idle_timeout: config.idle_timeout,
            send_timeout: config.send_timeout,
            waiting: sale::Waiting::default(),
        })
    }

    /// Retires the rooms that have had no session (and no join in progress) for the idle time:
    /// each stops its task and removes this gateway's keys from the sale's slot. `idle` keeps,
    /// between calls, since when each room has been seen empty.
    pub(crate) fn retire_idle_rooms(&self, idle: &mut HashMap<String, tokio::time::Instant>) {
        let now = tokio::time::Instant::now();
        let idle_time = self.config.room_idle;
        // The map holds one reference to a room's context; every session and every join in
        // progress holds another.
        let empty = |ctx: &Arc<sale::Context>| Arc::strong_count(ctx) == 1;
        idle.retain(|sale, _| self.rooms.get(sale).is_some_and(|ctx| empty(&ctx)));
        for room in self.rooms.iter() {
            if empty(room.value()) {
                idle.entry(room.key().clone()).or_insert(now);
            }
        }
        let due: Vec<String> = idle
            .iter()
            .filter(|(_, since)| now.duration_since(**since) >= idle_time)
            .map(|(sale, _)| sale.clone())
            .collect();
        for sale in due {
            idle.remove(&sale);
            // Checked again under the map's lock: a join that found the room just now keeps it.
            if let Some((_, ctx)) = self.rooms.remove_if(&sale, |_, ctx| empty(ctx)) {
                ctx.retire.cancel();
                metrics::gauge!("floodgate_rooms").decrement(1.0);
            }
        }
    }
}
