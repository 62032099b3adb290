// Floodgate's JavaScript client: the waiting room's WebSocket protocol (docs/asyncapi.yaml) and
// the booking API (docs/openapi/booking.json), as one ES module with no build step and no DOM.
// The page (app.js) imports it; a web or hybrid mobile app can import it the same way. Anything
// the platform provides (WebSocket, fetch, crypto, timers, randomness) can be passed in, which is
// how its Node tests drive it (tests/client/).

export const PROTOCOL_VERSION = 1;

/** The WebSocket close codes a gateway uses (docs/asyncapi.yaml `x-close-codes`). */
export const Close = Object.freeze({
  NORMAL: 1000, // admitted: the token was delivered
  GOING_AWAY: 1001, // reconnect with the resume token
  INVALID_DATA: 1007, // a text frame that is not UTF-8: a client bug
  MESSAGE_TOO_BIG: 1009, // a frame over 1024 bytes: a client bug
  INTERNAL_ERROR: 1011, // reconnect with back-off
  SERVICE_RESTART: 1012, // draining: the reason is the resume token; come back in 0-2 s
  BAD_MESSAGE: 4400, // not JSON, binary, an unknown type: a client bug
  UNKNOWN_SALE: 4404, // stop
  IDLE_TIMEOUT: 4408, // reconnect with the resume token
  SALE_OVER: 4410, // sold out, or this ticket's admission expired unused: stop
  UNAVAILABLE: 4503, // reconnect with back-off
});

/** The wait before reconnect attempt `attempt` (0, 1, ...): exponential, capped at 30 s, with
 *  jitter so a gateway's restart does not bring its crowd back in one instant (protocol.md 1.5). */
export function backoffDelay(attempt, random = Math.random) {
  return Math.min(30000, 500 * 2 ** attempt) * (0.5 + random() / 2);
}

/** The wait before coming back after a drain (1012): up to 2 s, at random. */
export function drainDelay(random = Math.random) {
  return random() * 2000;
}

/** A fresh draw nonce for the pre-queue lottery: 16 random bytes as lowercase hex. */
export function newDrawNonce(cryptoImpl = globalThis.crypto) {
  const bytes = cryptoImpl.getRandomValues(new Uint8Array(16));
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Leading zero bits of a hash. */
export function zeroBits(hash) {
  let bits = 0;
  for (const byte of hash) {
    if (byte === 0) { bits += 8; continue; }
    return bits + Math.clz32(byte) - 24;
  }
  return bits;
}

/** Solves a proof-of-work puzzle (`GET /v1/sales/{sale}/challenge`): the answer to join with. */
export async function solvePuzzle(puzzle, cryptoImpl = globalThis.crypto) {
  const text = new TextEncoder();
  for (let n = 0; ; n++) {
    const answer = `${puzzle.puzzle}~${n.toString(16)}`;
    const hash = new Uint8Array(await cryptoImpl.subtle.digest("SHA-256", text.encode(answer)));
    if (zeroBits(hash) >= puzzle.difficulty) return answer;
  }
}

/**
 * One client's place in a sale's waiting room, kept across disconnects: it joins, follows the
 * room's messages, comes back with the resume token after a drain or a lost connection (with
 * back-off and jitter), and stops when the session is over.
 *
 * Options: `url` (the gateway's or CDN's `ws://` or `wss://` origin), `sale`, `resume` (a stored
 * resume token), `nonce` (the draw nonce; `newDrawNonce()` if absent), `identity` (a function
 * giving the buyer's identity token or null), `challenge` (an async function giving the bot
 * check's answer for a new place, or null), `onEvent` (see below), and the platform's
 * `WebSocket`, `setTimeout`, `random`.
 *
 * Events, in `onEvent({kind, ...})`:
 * - `message`: a server message (`message.type` is `ticket`, `pre_queue`, `position`,
 *   `admitted`, `sold_out` or `pong`), as docs/asyncapi.yaml describes it;
 * - `resume`: a new resume token to store (`token`), or null once the ticket is over;
 * - `reconnecting`: the socket closed (`code`) and the client comes back in `delayMs`;
 * - `done`: admitted, the session is complete;
 * - `over`: the session ended for good (`reason`: `sold_out`, `expired` or `unknown_sale`).
 */
export class WaitingRoom {
  constructor(options) {
    this.options = options;
    this.resume = options.resume ?? null;
    this.nonce = options.nonce ?? newDrawNonce(options.crypto);
    this.attempt = 0;
    this.socket = null;
    this.stopped = false;
    this.WebSocket = options.WebSocket ?? globalThis.WebSocket;
    this.setTimeout = options.setTimeout ?? globalThis.setTimeout.bind(globalThis);
    this.random = options.random ?? Math.random;
  }

  /** Joins (or rejoins with the stored resume token). */
  async start() {
    this.stopped = false;
    await this.connect();
  }

  /** Leaves: closes the socket and stops reconnecting (the place stays for the grace period). */
  stop() {
    this.stopped = true;
    this.socket?.close(Close.NORMAL);
  }

  /** Asks the gateway whether the session is alive (it answers `pong`). */
  ping() {
    this.socket?.send(JSON.stringify({ type: "ping" }));
  }

  emit(event) {
    this.options.onEvent?.(event);
  }

  async url() {
    const { url, sale } = this.options;
    let query = `sale=${encodeURIComponent(sale)}`;
    // The resume token is never put in the URL (proxies and CDNs log URLs): it rides as a
    // subprotocol (`protocols()`).
    if (!this.resume) {
      query += `&nonce=${this.nonce}`;
      // A new place costs the sale's bot check; a place taken back does not.
      const answer = await this.options.challenge?.();
      if (answer) query += `&challenge=${encodeURIComponent(answer)}`;
    }
    return `${url}/ws?${query}`;
  }

  async connect() {
    if (this.stopped) return;
    const socket = new this.WebSocket(await this.url(), this.protocols());
    this.socket = socket;
    let opened = false;
    socket.onopen = () => { opened = true; };
    socket.onmessage = (event) => this.receive(JSON.parse(event.data));
    socket.onclose = (event) => this.closed(event.code, event.reason, opened);
  }

  /** The subprotocols offered: a browser cannot set headers on a WebSocket, so the identity
   *  and resume tokens ride as subprotocols beside `floodgate` (the one the gateway answers). */
  protocols() {
    const identity = this.options.identity?.();
    const carried = [];
    if (identity) carried.push(`floodgate-identity.${identity}`);
    if (this.resume) carried.push(`floodgate-resume.${this.resume}`);
    return carried.length ? ["floodgate", ...carried] : [];
  }

  receive(message) {
    this.attempt = 0;
    if (message.type === "ticket" && message.resume_token !== this.resume) {
      this.resume = message.resume_token;
      this.emit({ kind: "resume", token: this.resume });
    }
    this.emit({ kind: "message", message });
  }

  forget() {
    this.resume = null;
    this.emit({ kind: "resume", token: null });
  }

  closed(code, reason, opened) {
    if (this.stopped) return;
    if (code === Close.NORMAL) { this.stopped = true; this.emit({ kind: "done" }); return; }
    if (code === Close.SALE_OVER || code === Close.UNKNOWN_SALE) {
      this.stopped = true;
      this.forget();
      const why = code === Close.UNKNOWN_SALE ? "unknown_sale" : reason === "sold out" ? "sold_out" : "expired";
      this.emit({ kind: "over", reason: why });
      return;
    }
    let delayMs;
    if (code === Close.SERVICE_RESTART && reason) {
      // The draining gateway handed over the resume token as the close reason.
      this.resume = reason;
      this.emit({ kind: "resume", token: reason });
      delayMs = drainDelay(this.random);
    } else {
      // A socket refused before it opened may be a dead ticket (410) or a bad token: after a
      // few such failures with the token, start afresh without it.
      if (!opened && this.resume && this.attempt >= 5) this.forget();
      delayMs = backoffDelay(this.attempt, this.random);
      this.attempt += 1;
    }
    this.emit({ kind: "reconnecting", code, delayMs });
    this.setTimeout(() => this.connect(), delayMs);
  }
}

/**
 * The booking API (docs/openapi/booking.json). Every call answers `{status, body, retryAfterMs}`
 * and never throws for an HTTP error: `body.error` is the code to branch on. A network failure
 * throws; retrying `reserve` with the same `idempotencyKey` is then safe (it gets the one
 * decision).
 */
export class Booking {
  /** `origin`: where the booking API is ("" for the page's own origin); `identity`: a function
   *  giving the buyer's identity token or null; `fetch`: the platform's. */
  constructor({ origin = "", identity = () => null, fetch: fetchImpl } = {}) {
    this.origin = origin;
    this.identity = identity;
    this.fetch = fetchImpl ?? globalThis.fetch.bind(globalThis);
  }

  async call(path, { method = "GET", headers = {}, body } = {}) {
    const identity = this.identity();
    const response = await this.fetch(`${this.origin}${path}`, {
      method,
      headers: identity ? { ...headers, "Floodgate-Identity": identity } : headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const retryAfter = Number(response.headers.get("Retry-After"));
    return {
      status: response.status,
      body: await response.json(),
      retryAfterMs: Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : null,
    };
  }

  /** Holds `seats` in `pool` with an admission token; 201 with the reservation and its secret. */
  reserve({ sale, pool, seats, token, idempotencyKey }) {
    return this.call(`/v1/sales/${encodeURIComponent(sale)}/reservations`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}`, "Idempotency-Key": idempotencyKey },
      body: { pool, seats },
    });
  }

  reservationPath(sale, id) {
    return `/v1/sales/${encodeURIComponent(sale)}/reservations/${encodeURIComponent(id)}`;
  }

  /** A reservation's state now, for whoever holds its secret. */
  reservation(sale, id, secret) {
    return this.call(this.reservationPath(sale, id), { headers: { Authorization: `Bearer ${secret}` } });
  }

  /** Starts paying for a held reservation; 202 with the provider's checkout URL. */
  startPayment(sale, id, secret) {
    return this.call(`${this.reservationPath(sale, id)}/payment`, { method: "POST", headers: { Authorization: `Bearer ${secret}` } });
  }

  /** A signed-in buyer's own reservations in a sale. */
  mine(sale) {
    return this.call(`/v1/sales/${encodeURIComponent(sale)}/reservations`);
  }
}
