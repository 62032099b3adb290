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
  PROTOCOL_ERROR: 1002, // a frame RFC 6455 forbids: a client bug
  INVALID_DATA: 1007, // a text frame that is not UTF-8: a client bug
  POLICY_VIOLATION: 1008, // more frames than a connection may send: a client bug
  MESSAGE_TOO_BIG: 1009, // a data frame or message over 1024 bytes: a client bug
  INTERNAL_ERROR: 1011, // reconnect with back-off
  SERVICE_RESTART: 1012, // draining: the reason is the resume token; come back in 0-2 s
  BAD_MESSAGE: 4400, // not JSON, binary, an unknown type: a client bug
  UNKNOWN_SALE: 4404, // stop
  IDLE_TIMEOUT: 4408, // reconnect with the resume token
  TAKEN_OVER: 4409, // a newer session (another tab or device) took this place back: it goes on there; stop
  SALE_OVER: 4410, // sold out, this ticket's admission expired unused, or its place taken by a signed-in buyer: stop
  UNAVAILABLE: 4503, // reconnect with back-off
});

/** The 4410 reason when a buyer signed in elsewhere made this session's buyerless place theirs
 *  (protocol.md 1.5): the place lives on in their signed-in session, not here. */
const PLACE_TAKEN = "place taken by its signed-in buyer";

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

// MD5 (RFC 1321) in plain JavaScript, for the proof of work. MD5 because it is the one hash the
// edge (nginx's secure_link_md5) can compute: it checks each answer's hash there, so a solved
// puzzle is told from a stranger's junk before any gateway hears of either (docs/protocol.md
// 1.3). Its collisions do not matter here: a puzzle asks for leading zero bits, found only by
// trying nonce after nonce. Plain JavaScript, not WebCrypto, because WebCrypto has no MD5 and
// costs an await per hash anyway. Every answer shares the puzzle as its prefix, so the prefix's
// whole blocks are hashed once.
const MD5_K = Uint32Array.from({ length: 64 }, (_, i) => Math.floor(Math.abs(Math.sin(i + 1)) * 2 ** 32));
const MD5_SHIFTS = [7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21];
const MD5_H0 = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476];

/** Folds the 64-byte block at `bytes[at..]` into state `h` (four 32-bit words), using `w`. */
function md5Block(h, bytes, at, w) {
  for (let i = 0; i < 16; i++) {
    const o = at + 4 * i;
    w[i] = bytes[o] | (bytes[o + 1] << 8) | (bytes[o + 2] << 16) | (bytes[o + 3] << 24);
  }
  let [a, b, c, d] = h;
  for (let i = 0; i < 64; i++) {
    const round = i >> 4;
    let f, g;
    if (round === 0) { f = (b & c) | (~b & d); g = i; }
    else if (round === 1) { f = (d & b) | (~d & c); g = (5 * i + 1) & 15; }
    else if (round === 2) { f = b ^ c ^ d; g = (3 * i + 5) & 15; }
    else { f = c ^ (b | ~d); g = (7 * i) & 15; }
    const s = MD5_SHIFTS[4 * round + (i & 3)];
    const x = (a + f + MD5_K[i] + w[g]) | 0;
    a = d; d = c; c = b;
    b = (b + ((x << s) | (x >>> (32 - s)))) | 0;
  }
  h[0] = (h[0] + a) | 0; h[1] = (h[1] + b) | 0; h[2] = (h[2] + c) | 0; h[3] = (h[3] + d) | 0;
}

/** MD5 of `prefix` (bytes) followed by an ASCII `tail`: what `md5Prefixed(prefix)(tail)`
 *  answers, as 16 bytes. The prefix's whole blocks are hashed once. */
export function md5Prefixed(prefix) {
  const whole = prefix.length - (prefix.length % 64);
  const mid = Int32Array.from(MD5_H0);
  const w = new Int32Array(16);
  for (let at = 0; at < whole; at += 64) md5Block(mid, prefix, at, w);
  const rest = prefix.subarray(whole);
  const block = new Uint8Array(128);
  const h = new Int32Array(4);
  return (tail) => {
    const length = rest.length + tail.length;
    const end = length + 9 > 64 ? 128 : 64;
    block.fill(0, 0, end);
    block.set(rest);
    for (let i = 0; i < tail.length; i++) block[rest.length + i] = tail.charCodeAt(i);
    block[length] = 0x80;
    // The message's length in bits, little-endian, in the last 8 bytes.
    const bits = (prefix.length + tail.length) * 8;
    block[end - 8] = bits; block[end - 7] = bits >>> 8; block[end - 6] = bits >>> 16; block[end - 5] = bits >>> 24;
    block[end - 4] = Math.floor(bits / 2 ** 32);
    h.set(mid);
    for (let at = 0; at < end; at += 64) md5Block(h, block, at, w);
    const out = new Uint8Array(16);
    for (let i = 0; i < 4; i++) {
      out[4 * i] = h[i]; out[4 * i + 1] = h[i] >>> 8; out[4 * i + 2] = h[i] >>> 16; out[4 * i + 3] = h[i] >>> 24;
    }
    return out;
  };
}

/** Bytes as unpadded base64url (RFC 4648 5), as the edge and the gateways write a hash. */
export function base64url(bytes) {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Solves a proof-of-work puzzle (`GET /v1/sales/{sale}/challenge`): the answer to join with,
 *  `<puzzle>~<nonce>~<proof>`, the proof being the base64url MD5 of `<puzzle>~<nonce>`.
 *  Everyone asking within a few seconds gets the same puzzle and each answer joins once, so the
 *  search starts from a random nonce of its own (a neighbour's would be found first, and spent).
 *  The page stays responsive: the search yields to the event loop every few thousand hashes. */
export async function solvePuzzle(puzzle) {
  const hash = md5Prefixed(new TextEncoder().encode(`${puzzle.puzzle}~`));
  const own = Array.from(crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, "0")).join("");
  for (let n = 0; ; n++) {
    const nonce = own + n.toString(16);
    const digest = hash(nonce);
    if (zeroBits(digest) >= puzzle.difficulty) return `${puzzle.puzzle}~${nonce}~${base64url(digest)}`;
    if (n % 4096 === 4095) await new Promise((resolve) => setTimeout(resolve, 0));
  }
}

/** A public document's JSON (`path`: the sale's summary, its puzzle). A refusal for now (a busy
 *  edge's or gateway's 429, a 503) is waited out as its `Retry-After` says, then asked again, a
 *  few times; anything else, or refusals past the last try, throws. `sleep` and `random` are the
 *  platform's unless given. */
export async function getJson({
  origin = "", path, fetch: fetchImpl = globalThis.fetch.bind(globalThis),
  sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms)), random = Math.random, tries = 5,
}) {
  for (let attempt = 1; ; attempt++) {
    const response = await fetchImpl(`${origin}${path}`, { cache: "no-store" });
    if (response.ok) return response.json();
    if (attempt >= tries || ![429, 503].includes(response.status)) {
      throw new Error(`${path} could not be fetched (HTTP ${response.status})`);
    }
    const retryAfter = Number(response.headers.get("Retry-After"));
    await sleep(Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : backoffDelay(attempt - 1, random));
  }
}

/** The sale's puzzle (`GET /v1/sales/{sale}/challenge`), or null if it asks for none, fetched as
 *  `getJson` does: a refusal for now is never taken for "no puzzle", which would only send a
 *  join without an answer to be refused (the WaitingRoom tries the join again after its
 *  back-off if the puzzle cannot be had). */
export async function fetchPuzzle({ sale, ...options }) {
  const puzzle = await getJson({ ...options, path: `/v1/sales/${encodeURIComponent(sale)}/challenge` });
  return puzzle.kind === "pow" ? puzzle : null;
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
 * - `over`: the session ended for good (`reason`: `sold_out`, `expired`, `taken` (the place is
 *   a signed-in session's now) or `unknown_sale`).
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
    this.fetch = options.fetch ?? globalThis.fetch?.bind(globalThis);
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
    let url;
    try {
      url = await this.url();
    } catch {
      // The bot check could not be passed now (its puzzle refused past every retry): tried
      // again after the back-off, as a socket that never opened would be (1006, what a browser
      // reports for one).
      this.closed(1006, "", false);
      return;
    }
    const socket = new this.WebSocket(url, this.protocols());
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
      const why = code === Close.UNKNOWN_SALE ? "unknown_sale"
        : reason === "sold out" ? "sold_out"
        : reason === PLACE_TAKEN ? "taken"
        : "expired";
      this.emit({ kind: "over", reason: why });
      return;
    }
    if (code === Close.TAKEN_OVER) {
      // The place goes on in the newer session. The token is kept: coming back with it on the
      // person's word takes the place here again (and closes that one), which is theirs to ask.
      this.stopped = true;
      this.emit({ kind: "over", reason: "elsewhere" });
      return;
    }
    let delayMs;
    let checked = null;
    if (code === Close.SERVICE_RESTART && reason) {
      // The draining gateway handed over the resume token as the close reason. It goes without
      // the edge's seal when the seal would not fit a close reason (a long sale id): the sealed
      // token held already is the same one, and is kept (an unsealed one counts against its
      // address's ceiling at the edge, which a stranger there may have filled).
      const same = this.resume?.startsWith(`${reason}~`);
      if (!same) {
        this.resume = reason;
        this.emit({ kind: "resume", token: reason });
      }
      delayMs = drainDelay(this.random);
    } else {
      // A socket refused before it opened may be a dead ticket (410) or a bad token, or only a
      // busy edge or gateway (a 429 or 503 the browser does not show): after a few such
      // failures with the token, ask where the place stands, and start afresh without it only
      // if it is gone for good.
      if (!opened && this.resume && this.attempt >= 5) checked = this.keepIfPlaceLives();
      delayMs = backoffDelay(this.attempt, this.random);
      this.attempt += 1;
    }
    this.emit({ kind: "reconnecting", code, delayMs });
    this.setTimeout(async () => {
      await checked;
      await this.connect();
    }, delayMs);
  }

  /** Asks `GET /v1/sales/{sale}/place` with the resume token and forgets the token only on an
   *  answer that the place is over or the token no good (docs/protocol.md 1.5): a refusal for
   *  the rate (429), a busy gateway (503) or no answer at all keeps it, since the place may be
   *  waiting still. Without `fetch` there is nobody to ask: the token is forgotten as before. */
  async keepIfPlaceLives() {
    const token = this.resume;
    if (!this.fetch) { this.forget(); return; }
    const base = this.options.url.replace(/^ws/, "http");
    const headers = { "Floodgate-Resume": token };
    const identity = this.options.identity?.();
    if (identity) headers["Floodgate-Identity"] = identity;
    try {
      const response = await this.fetch(
        `${base}/v1/sales/${encodeURIComponent(this.options.sale)}/place`, { headers });
      if (PLACE_GONE.has(response.status) && this.resume === token) this.forget();
    } catch {
      // No answer: the place may be there still.
    }
  }
}

/** The answers of `/place` that say a resume token will never take its place back: malformed,
 *  another sale's, another buyer's, no such ticket, over (docs/protocol.md 1.5). */
const PLACE_GONE = new Set([400, 401, 403, 404, 410]);

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
