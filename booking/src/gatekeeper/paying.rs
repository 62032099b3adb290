//! A reservation read as it is stored, and the payment started for it (`start_payment.lua`).

use floodgate_platform::script::LuaScript as _;
use floodgate_platform::scripts::PoolLayout;
use floodgate_protocol::reservation::ReservationState;

use super::replies::{self, PaymentStart, StartedPayment, StoredReservation};
use super::{not_replicated, scripts, Gatekeeper};

impl Gatekeeper {
    /// Reads a reservation, with its pool's fare.
    pub async fn reservation(
        &self,
        sale: &str,
        pool: &str,
        reservation_id: &str,
    ) -> redis::RedisResult<Option<StoredReservation>> {
        let keys = self.keys.pool(sale, pool);
        let (fields, fare): (
            std::collections::HashMap<String, String>,
            (Option<i64>, Option<String>),
        ) = redis::pipe()
            .hgetall(keys.reservation(reservation_id))
            .hget(keys.config(), &["fare_minor", "currency"])
            .query_async(&mut self.redis.clone())
            .await?;
        if fields.is_empty() {
            return Ok(None);
        }
        let get = |k: &str| fields.get(k).cloned().unwrap_or_default();
        let int = |k: &str| get(k).parse::<i64>().unwrap_or(0);
        let mut refunds: Vec<(String, String)> = fields
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("refund:").map(|p| (p.to_owned(), v.clone())))
            .collect();
        refunds.sort();
        let Some(state) = ReservationState::from_lua(&get("state")) else {
            return Err(replies::odd_record(&get("state")));
        };
        // A payment recorded before its checkout was (an earlier release) is not one to send a
        // payer back to: a new start replaces it.
        let started = match (
            fields.get("pending_payment_id"),
            fields.get("pending_checkout_url"),
        ) {
            (Some(payment_id), Some(checkout_url)) => Some(StartedPayment {
                payment_id: payment_id.clone(),
                checkout_url: checkout_url.clone(),
                status: get("pending_status"),
            }),
            _ => None,
        };
        Ok(Some(StoredReservation {
            id: get("id"),
            secret: get("secret"),
            seats: int("seats") as u32,
            state,
            hold_expires_at_ms: int("expires_ms"),
            reserved_at_ms: int("at_ms"),
            payment_id: fields.get("payment_id").cloned(),
            started,
            refunds,
            fare_minor: fare.0.unwrap_or(0),
            currency: fare.1.unwrap_or_default(),
        }))
    }

    /// Records the payment started at the provider for a held reservation (`start_payment.lua`):
    /// the one payment that may buy it (starting a payment changes no seat), unless one was
    /// recorded first, which stays the one (and is answered).
    pub async fn start_payment(
        &self,
        sale: &str,
        pool: &str,
        reservation_id: &str,
        payment: &StartedPayment,
    ) -> redis::RedisResult<PaymentStart> {
        let keys = self.keys.pool(sale, pool);
        let started = scripts::StartPayment {
            pool: PoolLayout::new(&keys, reservation_id),
            unused: keys.relay(),
            payment_id: &payment.payment_id,
            checkout_url: &payment.checkout_url,
            status: &payment.status,
        }
        .run(&mut self.redis.clone())
        .await?;
        self.pool_replicated(sale, pool)
            .await
            .map_err(not_replicated)?;
        Ok(started)
    }
}
