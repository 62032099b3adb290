//! How the booking service's failures become refusals: every domain error a client can see is
//! turned into an [`ApiError`] (`floodgate_platform::http`: a code, whose status is the code's,
//! and a message) here and nowhere else, so the mapping from "what went wrong" to "what the
//! client is told" can be read in one place. Internal errors are logged with their cause and
//! answered as a bare 500 that reveals nothing.

pub use floodgate_platform::http::ApiError;
use floodgate_protocol::api::code;

use crate::gatekeeper::ReserveError;
use crate::publish::PublishError;
use crate::reservations::NotReserved;

impl From<ReserveError> for ApiError {
    fn from(e: ReserveError) -> Self {
        let message = e.to_string();
        match e {
            ReserveError::UnknownSale => ApiError::unknown_sale(),
            ReserveError::UnknownPool => ApiError::new(code::UNKNOWN_POOL, message),
            ReserveError::PoolUnavailable => {
                tracing::error!("a pool's Redis state is missing: refused until rebuilt");
                ApiError::new(code::POOL_UNAVAILABLE, message)
            }
            ReserveError::Late => ApiError::new(code::RESERVATION_LATE, message),
            ReserveError::SoldOut { .. } => ApiError::new(code::SOLD_OUT, message),
            ReserveError::SaleEnded => ApiError::new(code::SALE_ENDED, message),
            ReserveError::TokenSpent => ApiError::new(code::TOKEN_SPENT, message),
            ReserveError::Unsettled => ApiError::new(code::RESERVATION_UNSETTLED, message),
            ReserveError::NotReplicated => ApiError::new(code::REPLICA_UNAVAILABLE, message),
            ReserveError::BuyerLimit { .. } => ApiError::new(code::BUYER_LIMIT, message),
            ReserveError::KeyReused => ApiError::new(code::IDEMPOTENCY_KEY_REUSED, message),
            ReserveError::Redis(e) => e.into(),
            ReserveError::Protocol(_) => ApiError::internal(message),
        }
    }
}

impl From<NotReserved> for ApiError {
    fn from(e: NotReserved) -> Self {
        match e {
            NotReserved::Refused(e) => e.into(),
            NotReserved::NotDurable(_) => ApiError::new(
                code::BROKER_UNAVAILABLE,
                "the reservation could not be made durable and was not kept; retry with the same Idempotency-Key".into(),
            ),
            NotReserved::NotReplicated(_) => ApiError::new(
                code::REPLICA_UNAVAILABLE,
                "the reservation could not be copied to a Redis replica in time; retry with the same Idempotency-Key".into(),
            ),
            NotReserved::Ended { state } => ApiError::new(
                code::RESERVATION_ENDED,
                format!("the hold ended ({state}) before it could be confirmed; it is not yours any more"),
            ),
        }
    }
}

impl From<PublishError> for ApiError {
    fn from(e: PublishError) -> Self {
        tracing::warn!(error = %e, "reservation not acknowledged by the broker");
        ApiError::new(
            code::BROKER_UNAVAILABLE,
            "the reservation could not be made durable; retry with the same Idempotency-Key".into(),
        )
    }
}
