//! Who one join is charged to, as it goes.

use std::sync::Arc;

use crate::error::ApiError;
use crate::limits::{IpLimits, Payer, Person, SessionSlot};

/// Who one join is charged to (crate::limits), before the Redis work it leads to: its address at
/// most once, for whatever it did not show to be its own.
pub(super) struct Entry<'a> {
    limits: &'a Arc<IpLimits>,
    client: std::net::IpAddr,
    charged: bool,
}

impl<'a> Entry<'a> {
    pub(super) fn new(limits: &'a Arc<IpLimits>, client: std::net::IpAddr) -> Self {
        Self {
            limits,
            client,
            charged: false,
        }
    }

    /// Charges the address (once per join).
    pub(super) fn address(&mut self) -> Result<(), ApiError> {
        if !self.charged {
            self.limits.charge(self.client)?;
            self.charged = true;
        }
        Ok(())
    }

    /// A credential or an answer that failed, charged to the address: the refusal, or past the
    /// address's allowance a 429. A check that could not be made (a 5xx) is nobody's doing.
    pub(super) fn failed(&mut self, refused: ApiError) -> ApiError {
        if refused.status().is_server_error() {
            return refused;
        }
        self.address().err().unwrap_or(refused)
    }

    /// Charges `person`'s own allowance.
    pub(super) fn person(&self, person: Person) -> Result<(), ApiError> {
        Ok(self.limits.person(person)?)
    }

    /// Charges a place coming back to its address's allowance of returns.
    pub(super) fn returning(&self) -> Result<(), ApiError> {
        Ok(self.limits.returning(self.client)?)
    }

    /// Holds the join's session slots: its address's (as `payer` counts) and its person's.
    pub(super) fn hold(
        &self,
        payer: Payer,
        person: Option<Person>,
    ) -> Result<SessionSlot, ApiError> {
        Ok(self.limits.hold(self.client, payer, person)?)
    }
}
