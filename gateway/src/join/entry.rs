//! What a join pays with before any Redis work: a place in the gateway's budget, and whoever it
//! is charged to (crate::limits), as it goes.

use std::sync::Arc;

use floodgate_protocol::api::code;
use floodgate_protocol::identity::BuyerId;
use floodgate_protocol::resume;
use floodgate_protocol::settings::{ChallengeRule, Door};

use super::JoinRequest;
use crate::budget::BudgetSlot;
use crate::door;
use crate::error::ApiError;
use crate::limits::{IpLimits, Payer, Person, SessionSlot};
use crate::scripts::takeback;
use crate::AppState;

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

    /// Charges a place coming back with no buyer signed in to its own allowance of returns and
    /// then its address's.
    pub(super) fn place_comes_back(&self, place: Person) -> Result<(), ApiError> {
        Ok(self.limits.place_comes_back(self.client, place)?)
    }

    /// A place coming back with an identity pays its own allowance before that identity's
    /// signature is checked: a genuine resume token sent with junk identities (which the edge
    /// lets past its ceiling, the token being sealed) costs a check at the place's rate only.
    pub(super) fn before_identity(
        &self,
        request: &JoinRequest,
        identified: bool,
    ) -> Result<(), ApiError> {
        match &request.resumed {
            Some(claim) if identified => self.person(place(request, claim)),
            _ => Ok(()),
        }
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

/// A place in this gateway's connection budget. A draining gateway takes no one new: a session
/// started now would be told to leave at once, and the 503 lets the load balancer or CDN try
/// another gateway (cdn.conf does).
pub(super) fn gateway_slot(state: &AppState) -> Result<BudgetSlot, ApiError> {
    if state.draining.is_cancelled() {
        return Err(ApiError::new(
            code::GATEWAY_DRAINING,
            "this gateway is shutting down; reconnect, another gateway will take you".into(),
        ));
    }
    state.budget.take().ok_or(ApiError::new(
        code::GATEWAY_FULL,
        "this gateway is full; retry after the delay (with jitter), or another gateway".into(),
    ))
}

/// Charges a join to whoever pays for it (crate::limits), checks what it claims of a place before
/// any script, and holds its session slots.
pub(super) async fn pay(
    state: &AppState,
    entry: &mut Entry<'_>,
    request: &JoinRequest,
    ctx: &crate::sale::Context,
    door: &Door,
    buyer: Option<&BuyerId>,
    mark: Option<&resume::BuyerMark>,
) -> Result<SessionSlot, ApiError> {
    // What a resume token claims, checked in memory first: a refusal is its address's to pay.
    if let Some(claim) = &request.resumed {
        if !claim.may_be_taken_by(mark) {
            return Err(entry.failed(takeback::other_buyers()));
        }
        // A ticket this gateway knows expired is refused without its script.
        if ctx.room.is_expired(claim.ticket) {
            return Err(entry.failed(takeback::expired()));
        }
    }
    // Who pays (crate::limits): a signed-in buyer, and on a sale that asks for a proof of work
    // every place (it cost one), pay with their own allowance; on a sale that asks for nothing,
    // a new place of someone not signed in has only its address to show. A place coming back
    // that no buyer signed in to also spends its address's allowance of returns, on any sale:
    // each return is a script in the sale's slot, and a stranger's places (solved puzzles are
    // cheap to a machine) coming back as often as each may would spend the gateway's budget
    // of returns for everyone.
    let person = match (buyer, &request.resumed) {
        (Some(buyer), _) => Some(Person::of((&request.sale, "buyer", buyer.as_str()))),
        (None, Some(claim)) => Some(place(request, claim)),
        (None, None) => None,
    };
    let payer = match (buyer, &request.resumed, door.challenge) {
        (Some(_), _, _) | (None, None, ChallengeRule::Pow) => Payer::Paid,
        (None, Some(_), ChallengeRule::Pow) => Payer::Place,
        (None, Some(_), ChallengeRule::None) => Payer::Returning,
        (None, None, ChallengeRule::None) => Payer::Anonymous,
    };
    match (payer, person) {
        (Payer::Anonymous, _) => entry.address()?,
        (_, Some(person)) => entry.person(person)?,
        // A new place on a sale that asks for a proof of work: its answer pays (or, failing,
        // its address).
        (_, None) => {}
    }
    // The slots first: an answer is spent only on a join that will be let in.
    let slot = entry.hold(payer, person)?;
    // A return runs its script alone (a new place's join is batched): a place no buyer signed
    // in to within its own allowance of returns and then its address's, then within this
    // gateway's budget of them and its address's share of that (crate::guards::resumes). After
    // the slots, so a session the place may not hold spends none of them; the address's after
    // the place's, so a token sent again and again spends only its own.
    if let Some(claim) = &request.resumed {
        if buyer.is_none() {
            entry.place_comes_back(place(request, claim))?;
        }
        state.resumes.read(entry.client)?;
    }
    // Coming back with a resume token takes back a place already won at the door, and nothing
    // else (a dead ticket is refused, not replaced).
    if request.resumed.is_none() {
        door::pass_challenge(state, ctx, door, request.challenge.as_deref())
            .await
            .map_err(|e| entry.failed(e))?;
    }
    Ok(slot)
}

/// The person a place coming back is: its sale and ticket, whoever presents its token.
fn place(request: &JoinRequest, claim: &resume::Claim) -> Person {
    Person::of((&request.sale, "place", claim.ticket))
}
