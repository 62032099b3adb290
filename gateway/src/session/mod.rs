//! One client's WebSocket session in a waiting room.
//!
//! The session owns nothing shared: it sits on its room's board and sleeps until the room tells
//! it something (its shown position moved, its heartbeat is due, news for everyone), then reads
//! the room's view, works out what to show and pushes it if it changed, by the freshness
//! contract (`floodgate_protocol::freshness`): positions never go up; admission is sent the
//! moment it is seen. Bad input ends only this session, with a documented close code. However
//! it ends, the session tells Redis (leave.lua), so a client that does not come back within the
//! grace is skipped by the controller.
//!
//! `step` decides what to show; `sending` writes it; `incoming` answers what the client sends
//! (RFC 6455 to the letter); `ending` says how the session ends and closes it.

use std::borrow::Cow;
use std::sync::Arc;

use floodgate_protocol::now_millis;
use floodgate_protocol::token::AdmissionClaims;
use floodgate_protocol::ws::{close, ServerMessage, PROTOCOL_VERSION};
use futures::StreamExt as _;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Utf8Bytes;

use crate::room::board::{news, Board, Sitting};
use crate::room::frames::Shown;
use crate::room::RoomView;
use crate::sale::Context;
use crate::upgrade::{self, Socket};
use ending::{count_close, say_goodbye, End};
use step::{Standing, Step};

mod ending;
mod incoming;
mod sending;
mod step;

/// One client's session.
pub struct Session {
    pub ctx: Arc<Context>,
    pub ticket: u64,
    pub opens_at_ms: i64,
    /// Whether this session took an existing ticket back (resume) rather than a new one.
    pub resumed: bool,
    /// The frontier in Redis when the session began (resumed sessions): positions are computed
    /// from at least this, so a client moving from a gateway whose view was newer than this
    /// one's never sees its position go up.
    pub frontier_floor: u64,
    /// This session's number on the gateway (see [`Context::session_id`]).
    pub number: u64,
    /// What only the first message needs; dropped once it is sent.
    pub hello: Option<Box<Hello>>,
    /// The signed-in buyer whose place this is, bound into the admission token.
    pub buyer: Option<Arc<str>>,
    /// Holds this session's place in its address's counts (and its person's) until it ends.
    pub _connection: crate::limits::SessionSlot,
    /// Holds its place in the gateway's connection budget.
    pub _budget: crate::budget::BudgetSlot,
    /// Set once the ticket is written ([`Session::open`]): from then on the client has it.
    pub started: bool,
    /// Set once the departure is recorded; until then dropping the session records it.
    pub departed: bool,
}

/// A session dropped before it recorded its departure gives its ticket back: the request was
/// abandoned after the ticket was taken (the client reset), or the upgrade never completed, or
/// the task was torn down. Otherwise the ticket would stay live with nobody behind it, be
/// admitted, and hold a place under the active cap and the stock until its token expired.
impl Drop for Session {
    fn drop(&mut self) {
        if self.buyer.is_some() {
            self.ctx.waiting.remove(self.number);
        }
        if self.departed {
            return;
        }
        // A client that got its ticket (or already had it, to resume) may come back within the
        // grace; a new ticket nobody ever saw is skipped at once.
        let grace = if self.started || self.resumed {
            self.ctx.room.grace(self.ctx.grace).as_millis() as i64
        } else {
            0
        };
        let (ctx, ticket) = (self.ctx.clone(), self.ticket);
        let place = ctx.room.place(ticket).unwrap_or(0);
        let session_id = ctx.session_id(self.number);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let departed = (ticket, place);
                crate::scripts::departures::leave_from(&ctx.scope, departed, &session_id, grace)
                    .await;
            });
        }
    }
}

/// The parts of the ticket message that are not needed afterwards.
pub struct Hello {
    pub draw_nonce: Option<String>,
    /// The lottery commitment, as the ticket was taken.
    pub commitment: String,
}

impl Session {
    /// Opens the WebSocket on the upgraded connection with the session's first message, the
    /// ticket (written before the WebSocket layer exists: see [`upgrade`]). `Err` if the client
    /// does not take it; it then never had its ticket, and dropping the session gives it back.
    pub async fn open(
        &mut self,
        connection: hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>,
    ) -> Result<Socket, ()> {
        let (draw_nonce, commitment) = self
            .hello
            .take()
            .map_or((None, String::new()), |h| (h.draw_nonce, h.commitment));
        let ticket = ServerMessage::Ticket {
            protocol: PROTOCOL_VERSION,
            sale: self.ctx.scope.sale.clone(),
            ticket: self.ticket,
            opens_at_ms: self.opens_at_ms,
            resume_token: self.ctx.seal.seal(&self.resume_token()),
            resumed: self.resumed,
            draw_nonce,
            commitment,
        };
        let text = serde_json::to_string(&ticket).expect("server messages serialise");
        match upgrade::open(connection, &text, self.ctx.send_timeout).await {
            Ok(socket) => {
                self.started = true;
                sending::count_sent(ticket.kind());
                Ok(socket)
            }
            Err(e) => {
                tracing::debug!(
                    error = %e,
                    sale = %self.ctx.scope.sale,
                    ticket = self.ticket,
                    "the ticket could not be written; the client left"
                );
                Err(())
            }
        }
    }

    /// Serves the session to its end. The session is boxed, and the span is attached by the
    /// caller (not `#[instrument]`, which keeps a second copy of the arguments in the future):
    /// every idle client's task is sized by this future, so it stays small.
    #[allow(clippy::manual_async_fn)] // deliberately not an async fn: see below
    pub fn run(
        mut self: Box<Self>,
        mut socket: Socket,
    ) -> impl std::future::Future<Output = ()> + Send {
        // An `async move` block that uses its captures in place, rather than an `async fn`: the
        // arguments of an async fn are stored twice in its future (once as captured, once as
        // locals), and every idle client pays for each byte of this future.
        async move {
            // The gauge is looked up at each end rather than held: every idle session's future
            // would carry it.
            metrics::gauge!("floodgate_ws_sessions").increment(1.0);
            let end = self.serve(&mut socket).await;
            metrics::gauge!("floodgate_ws_sessions").decrement(1.0);
            // Tell Redis first: a client told to reconnect may be back on another gateway at
            // once. Cold paths are boxed, so they do not size the idle session's task.
            Box::pin(self.leave(&end)).await;
            self.departed = true;
            Box::pin(say_goodbye(&mut socket, &end)).await;
            tracing::debug!(?end, "session ended");
        }
    }

    async fn leave(&self, end: &End) {
        let grace = if end.keeps_place() {
            self.ctx.room.grace(self.ctx.grace).as_millis() as i64
        } else {
            -1
        };
        let session_id = self.ctx.session_id(self.number);
        let departed = (self.ticket, self.ctx.room.place(self.ticket).unwrap_or(0));
        crate::scripts::departures::leave_from(&self.ctx.scope, departed, &session_id, grace).await;
    }

    /// The client's resume token, bound to the buyer whose place this is (derived again when
    /// needed rather than kept per session: every idle session would pay for it).
    fn resume_token(&self) -> String {
        let mark = self.buyer.as_deref().map(|b| self.ctx.resume.buyer_mark(b));
        self.ctx
            .resume
            .issue(&self.ctx.scope.sale, self.ticket, mark.as_ref())
    }

    async fn serve(&self, socket: &mut Socket) -> End {
        let ctx = &*self.ctx;
        let room = &*ctx.room;
        // Seated before anything is read, so nothing the room tells from here on is missed.
        let mut seated = Seated {
            board: room.board(),
            sitting: room.board().sit(self.number),
            place: 0,
        };
        let mut last_heard = Instant::now();
        // What the client was last shown and where it stands: small values, because every idle
        // session carries them.
        let mut shown: Option<Shown> = None;
        let mut standing = Standing::default();
        // What the room told this session since it last looked; the first look needs no news.
        let mut told = news::ROOM;
        loop {
            if told & news::CLOSING != 0 {
                // The room task ended, which only the gateway's shutdown does: drain. The reason
                // carries the resume token, so the client can take its place to another gateway
                // without having kept the first message; sealed for the edge if the seal fits
                // in a close reason's 123 bytes (a token of a long sale id goes bare, counted
                // against its address at the edge until the next session hands a sealed one).
                let token = ctx.seal.seal_within(&self.resume_token(), 123);
                return End::Closed(close::SERVICE_RESTART, Cow::Owned(token));
            }
            if told & news::TAKEN_OVER != 0 {
                // The place went on in a newer session: this one says so and goes (its
                // departure changes nothing: leave.lua sees the newer holder).
                return End::Closed(
                    close::TAKEN_OVER,
                    Cow::Borrowed("this place was taken up by a newer session"),
                );
            }
            let heartbeat = told & news::HEARTBEAT != 0;
            if heartbeat && last_heard.elapsed() >= ctx.idle_timeout {
                return End::Closed(
                    close::IDLE_TIMEOUT,
                    Cow::Borrowed("no answer to pings; reconnect"),
                );
            }
            if told != 0 {
                // Placed on the board before the view is read: a tick after this wakes it.
                if seated.place == 0 {
                    if let Some(place) = room.place(self.ticket) {
                        room.board().place(seated.sitting.slot, place);
                        seated.place = place;
                    }
                }
                let step = self.step(&room.view(), &mut standing);
                let next = match step {
                    Step::Wait => None,
                    Step::SoldOut => return Box::pin(self.sold_out(socket)).await,
                    Step::Admit { place, max_seats } => {
                        return Box::pin(self.admit(socket, place, max_seats)).await;
                    }
                    Step::Show(next) => Some(next).filter(|next| heartbeat || shown != Some(*next)),
                };
                if next.is_some() || heartbeat {
                    if Box::pin(self.push(socket, next, heartbeat)).await.is_err() {
                        return End::ClientLeft;
                    }
                    shown = next.or(shown);
                }
            }
            told = tokio::select! {
                told = seated.sitting.seat.news() => told,
                incoming = socket.next() => {
                    last_heard = Instant::now();
                    if let Some(end) = Box::pin(self.on_client_message(socket, incoming)).await {
                        return end;
                    }
                    0
                }
            };
        }
    }

    /// What a new view means for this session.
    fn step(&self, view: &RoomView, standing: &mut Standing) -> Step {
        step::step(
            &self.ctx.room,
            self.ticket,
            self.frontier_floor,
            view,
            standing,
            now_millis(),
        )
    }

    async fn sold_out(&self, socket: &mut Socket) -> End {
        if self.send(socket, &ServerMessage::SoldOut).await.is_err() {
            return End::ClientLeft;
        }
        End::Over("sold out")
    }

    async fn admit(&self, socket: &mut Socket, place: u64, max_seats: u32) -> End {
        // A session without an identity whose place a buyer has since made theirs (they signed
        // in elsewhere with its token) was left behind: its pass would book the buyer's place
        // without the buyer. If Redis cannot say, the session closes as after any error, keeps
        // its grace, and asks again when it comes back.
        if self.buyer.is_none() {
            match crate::scripts::takeback::owned(&self.ctx.scope, self.ticket).await {
                Ok(false) => {}
                Ok(true) => return End::Over("place taken by its signed-in buyer"),
                Err(_) => {
                    return End::Closed(
                        close::INTERNAL_ERROR,
                        Cow::Borrowed("briefly unavailable; reconnect with the resume token"),
                    )
                }
            }
        }
        let now = now_millis();
        // Every token of a batch expires together, when the controller stops counting it as
        // active; a client that comes back after that has lost its turn.
        let Some(exp_ms) = self.ctx.room.token_expiry(place).filter(|exp| *exp > now) else {
            return End::Over("admission expired unused");
        };
        let claims = AdmissionClaims {
            sale: self.ctx.scope.sale.clone(),
            ticket: self.ticket,
            // One id per ticket: however many sessions a ticket has had, it makes one
            // reservation (the booking service refuses a second use of a token id).
            jti: format!("t{}", self.ticket),
            max_seats,
            // Issued when its batch was admitted, not now: a ticket coming back within the pass's
            // life gets the same pass again, byte for byte (the signature is deterministic), not
            // one more credential for the edge and the booking service to count and check.
            iat_ms: (exp_ms - self.ctx.room.view().token_ttl_ms).min(now),
            exp_ms,
            buyer: self.buyer.as_deref().map(str::to_owned),
        };
        let admitted = ServerMessage::Admitted {
            token: self.ctx.seal.seal(&self.ctx.signer.sign(&claims)),
            expires_at_ms: claims.exp_ms,
            max_seats: claims.max_seats,
        };
        if self.send(socket, &admitted).await.is_err() {
            // Its tokens are minted again if the client resumes within the token's lifetime.
            return End::ClientLeft;
        }
        tracing::debug!("admitted");
        metrics::counter!("floodgate_admissions_pushed_total").increment(1);
        count_close(close::NORMAL);
        ending::send_close(socket, close::NORMAL, Utf8Bytes::from_static("admitted")).await;
        End::Admitted
    }
}

/// A session's seat on its room's board, given up when the session ends however it ends.
struct Seated<'a> {
    board: &'a Board,
    sitting: Sitting,
    place: u64,
}

impl Drop for Seated<'_> {
    fn drop(&mut self) {
        self.board.leave(&self.sitting, self.place);
    }
}
