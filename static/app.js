// Floodgate's browser client: browse a sale's trains (static catalog JSON and cached seat counts),
// wait in the waiting room over WebSocket, get admitted, reserve, pay, see the confirmation.
// Query parameter: sale (none: the list of sales). The protocol is docs/protocol.md.
//
// Everything goes to the page's own origin: the admission token and the reservation's secret
// are sent nowhere else, whatever a link says (the site's CDN, or the gateway itself, routes the
// booking paths to the booking service). A checkout URL is followed only to the payment
// provider's origins the site names in its `floodgate-checkout-origins` meta.
//
// The protocol itself (joining, resuming, back-off, the booking calls) is floodgate-client.js;
// this file is the page: what it shows and says.
import { Booking, WaitingRoom, fetchPuzzle, getJson, newDrawNonce, solvePuzzle } from "./floodgate-client.js";
import { SignIn } from "./signin.js";

const params = new URLSearchParams(location.search);
const sale = params.get("sale");
const api = "";
const checkoutOrigins = (document.querySelector('meta[name="floodgate-checkout-origins"]')?.content ?? "")
  .split(/\s+/).filter(Boolean);
const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.content ?? "";
// The operator's OpenID provider and this page's client id there (none: no sign-in offered).
const signin = new SignIn({ issuer: meta("floodgate-signin-issuer"), clientId: meta("floodgate-signin-client") });
const $ = (id) => document.getElementById(id);
const enc = encodeURIComponent;

// The signed-in buyer's identity token: the ID token of the operator's OpenID provider, got by the
// code flow (signin.js), never from a link. Kept in localStorage, so every tab of this browser
// is the same buyer, and sent only to this origin: as a WebSocket subprotocol when joining (a
// browser cannot set headers there) and as Floodgate-Identity on booking requests.
const identityKey = "floodgate:identity";

// Survive a reload: the resume token keeps the place in line, the hold keeps the reservation.
const resumeKey = `floodgate:resume:${sale}`;
const holdKey = `floodgate:hold:${sale}`;
// The pass while the buyer chooses, so a trip to the sign-in (a token renewed) keeps it.
const passKey = `floodgate:pass:${sale}`;

const TURN_PASSED = "Your turn passed without a booking. You can join the queue again.";

const state = {
  catalog: null, // the sale's catalog (trains, classes, pools, fares), or null if unpublished
  counts: new Map(), // pool id -> live counts from seats.json
  countsAt: 0,
  mode: "browse", // browse | queued | choose | held | done | over
  resume: sessionStorage.getItem(resumeKey),
  token: null,
  tokenExpires: 0,
  maxSeats: 1,
  opensAt: 0,
  firstPosition: null,
  room: null, // the WaitingRoom while queued
  spoken: { position: null, at: 0 },
  // When the last ETA said the turn would come (ms since the epoch): counted down between
  // messages, which far back in line come only every 15 s (docs/protocol.md, the freshness
  // contract).
  etaUntil: null,
  door: null, // the sale's door from its summary: identity required? a bot check?
};

// ---- small helpers -------------------------------------------------------------------------

function show(id, visible) { $(id).hidden = !visible; }

function setStatus(text, cls) {
  const el = $("status");
  el.textContent = text;
  el.className = "status " + (cls || "");
}

// Polite announcements for screen readers; `urgent` ones interrupt (admission, expiry).
function announce(text, urgent) {
  const el = urgent ? $("alert") : $("announce");
  el.textContent = "";
  // A fresh text node after a tick, so the same words twice are still read.
  setTimeout(() => { el.textContent = text; }, 50);
}

function clock(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = String(s % 60).padStart(2, "0");
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${sec}` : `${m}:${sec}`;
}

function aboutSecs(s) {
  if (s < 60) return "less than a minute";
  const m = Math.round(s / 60);
  if (m < 60) return m === 1 ? "about a minute" : `about ${m} minutes`;
  return `about ${Math.floor(m / 60)} h ${m % 60} min`;
}

function money(minor, currency) {
  try {
    return new Intl.NumberFormat(undefined, { style: "currency", currency, maximumFractionDigits: minor % 100 ? 2 : 0 }).format(minor / 100);
  } catch {
    return `${(minor / 100).toFixed(2)} ${currency}`;
  }
}

function day(date) {
  const d = new Date(`${date}T00:00:00`);
  return isNaN(d) ? date : d.toLocaleDateString(undefined, { weekday: "short", day: "numeric", month: "short" });
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text != null) node.textContent = text;
  return node;
}

function poolInfo(id) {
  const pool = state.catalog?.pools.find((p) => p.id === id);
  if (!pool) return { id, title: id, cls: id };
  const train = state.catalog.trains.find((t) => t.id === pool.train);
  const cls = state.catalog.classes.find((c) => c.code === pool.class);
  return {
    ...pool,
    title: train ? `${train.name} (${train.id})` : pool.train,
    route: train ? `${train.origin} ${train.departs} → ${train.destination} ${train.arrives}, ${day(pool.date)}` : day(pool.date),
    cls: cls ? `${cls.name} (${cls.code})` : pool.class,
  };
}

// Rows of [term, value, class of the value].
function fillSummary(dl, rows) {
  dl.innerHTML = "";
  for (const [term, value, cls] of rows) {
    dl.appendChild(el("dt", null, term));
    dl.appendChild(el("dd", cls, value));
  }
}

// ---- the list of sales (no sale given) -------------------------------------------------------

async function showSales() {
  show("sales-view", true);
  document.title = "Upcoming openings · Floodgate";
  $("draw-link").removeAttribute("href");
  const list = $("sales");
  try {
    const index = await (await fetch("/data/sales/index.json")).json();
    if (!index.sales.length) list.appendChild(el("li", "muted", "No sales are scheduled right now."));
    for (const s of index.sales) {
      const li = el("li", "card sale");
      const a = el("a", null, s.name);
      a.href = `/?sale=${enc(s.sale)}`;
      li.appendChild(a);
      li.appendChild(el("span", "muted", `Opens ${new Date(s.opens_at_ms).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" })}`));
      list.appendChild(li);
    }
  } catch {
    list.appendChild(el("li", "muted", "The list of sales could not be loaded. Try again in a moment."));
  }
}

// ---- the train list --------------------------------------------------------------------------

async function loadCatalog() {
  try {
    const response = await fetch(`/data/sales/${enc(sale)}.json`);
    if (response.ok) state.catalog = await response.json();
  } catch { /* the waiting room works without the catalog */ }
  if (state.catalog) {
    $("sale-name").textContent = state.catalog.name;
    document.title = `${state.catalog.name} · Floodgate`;
    state.opensAt = state.catalog.opens_at_ms;
    state.maxSeats = state.catalog.max_seats_per_booking;
  } else {
    $("sale-name").textContent = sale;
  }
}

function renderTrains() {
  const list = $("trains");
  list.innerHTML = "";
  if (!state.catalog) {
    list.appendChild(el("li", "muted", "The timetable is not available right now; you can still queue and book."));
    return;
  }
  const bookable = state.mode === "choose";
  for (const train of state.catalog.trains) {
    const pools = state.catalog.pools.filter((p) => p.train === train.id);
    const li = el("li", "card train");
    const head = el("div", "train-head");
    head.appendChild(el("h3", null, train.name));
    head.appendChild(el("span", "number", train.id));
    li.appendChild(head);
    const route = el("div", "route");
    const from = el("div", "stop");
    from.appendChild(el("strong", null, train.departs));
    from.appendChild(el("span", null, train.origin));
    const to = el("div", "stop end");
    to.appendChild(el("strong", null, train.arrives));
    to.appendChild(el("span", null, train.destination));
    route.appendChild(from);
    const line = el("div", "line");
    line.appendChild(el("span", null, pools[0] ? day(pools[0].date) : ""));
    route.appendChild(line);
    route.appendChild(to);
    li.appendChild(route);
    const classes = el("ul", "classes");
    for (const pool of pools) {
      const info = poolInfo(pool.id);
      const row = el("li", "class");
      const name = el("div", "class-name");
      name.appendChild(el("strong", null, info.cls));
      name.appendChild(el("span", "muted small", `${pool.quota === "TQ" ? "Tatkal" : pool.quota} quota`));
      row.appendChild(name);
      row.appendChild(el("span", "fare", money(pool.fare_minor, pool.currency)));
      const avail = el("span", "avail");
      avail.dataset.pool = pool.id;
      row.appendChild(avail);
      if (bookable) {
        const button = el("button", "book", "Book");
        button.dataset.pool = pool.id;
        button.setAttribute("aria-label", `Book ${info.cls} on ${train.name}, ${money(pool.fare_minor, pool.currency)} per seat`);
        button.onclick = () => reserve(pool.id, button);
        row.appendChild(button);
      }
      classes.appendChild(row);
    }
    li.appendChild(classes);
    list.appendChild(li);
  }
  paintCounts();
}

// Seat counts are rough (a second or two old, cached by the CDN): for display, never a promise.
function paintCounts() {
  const open = Date.now() >= state.opensAt;
  for (const node of document.querySelectorAll(".avail")) {
    const pool = state.catalog.pools.find((p) => p.id === node.dataset.pool);
    const c = state.counts.get(node.dataset.pool);
    let text, cls;
    if (!c) { text = `${pool.capacity} seats`; cls = ""; }
    else if (c.available == null) { text = "Unavailable"; cls = "warn"; }
    else if (!open) { text = `${c.capacity} seats`; cls = ""; }
    else if (c.available > 5) { text = `${c.available} available`; cls = "ok"; }
    else if (c.available > 0) { text = `Only ${c.available} left`; cls = "low"; }
    else if (c.held > 0) { text = "All held · may return"; cls = "low"; }
    else { text = "Sold out"; cls = "gone"; }
    node.textContent = text;
    node.className = `avail ${cls}`;
    const button = document.querySelector(`button.book[data-pool="${CSS.escape(node.dataset.pool)}"]`);
    if (button && c && c.available === 0 && c.held === 0) button.disabled = true;
  }
  if (state.countsAt) $("counts-age").textContent = `Seats as of ${new Date(state.countsAt).toLocaleTimeString()}`;
}

// One fetch of the counts, painted on arrival; a failure keeps the last counts.
async function loadCounts() {
  try {
    const response = await fetch(state.catalog.seats_url || `/v1/sales/${enc(sale)}/seats.json`);
    if (!response.ok) return;
    const seats = await response.json();
    for (const p of seats.pools) state.counts.set(p.pool, p);
    state.countsAt = seats.at_ms;
    paintCounts();
  } catch { /* keep the last counts */ }
}

async function refreshCounts() {
  if (document.visibilityState === "visible" && state.catalog && !["done", "over"].includes(state.mode)) {
    await loadCounts();
  }
  // Faster while choosing a class, gentle while browsing or waiting (the CDN serves these).
  setTimeout(refreshCounts, state.mode === "choose" ? 2000 : 10000);
}

function tickOpening() {
  const left = state.opensAt - Date.now();
  const at = new Date(state.opensAt).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  if (!state.opensAt) $("opening").textContent = "";
  else if (left > 0) {
    $("sale-kind").textContent = "Booking opens";
    $("opening").textContent = `at ${at} · in ${clock(left)}`;
  } else {
    $("sale-kind").textContent = "Booking is open";
    $("opening").textContent = `since ${at}`;
  }
  // Counts read differently once the sale is open (capacity before, what is left after).
  if (state.catalog && state.mode !== "held") paintCounts();
  setTimeout(tickOpening, 1000 - (Date.now() % 1000));
}

// ---- the waiting room ------------------------------------------------------------------------

function join() {
  if (state.door?.identity === "required" && !identity()) { signIn(); return; }
  state.mode = "queued";
  state.firstPosition = null;
  state.spoken = { position: null, at: 0 };
  show("join-box", false);
  setStatus("Joining the queue…");
  connect();
}

async function connect() {
  // A signed-in buyer's token runs out soon, or ran out while waiting: sign in again (the resume
  // token brings the same place back afterwards).
  if (renewIdentity(60)) return;
  if (state.door?.identity === "required" && identityLeft() === 0) {
    localStorage.removeItem(identityKey);
    signIn();
    return;
  }
  state.room?.stop();
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  state.room = new WaitingRoom({
    url: `${scheme}://${location.host}`,
    sale,
    resume: state.resume,
    // This browser's own contribution to the pre-queue lottery, chosen here so no server picks
    // it; kept with the ticket so its holder can check the published draw counted it.
    nonce: drawNonce(),
    identity,
    challenge: passChallenge,
    onEvent: onRoomEvent,
  });
  state.room.start();
}

const handlers = { ticket: onTicket, pre_queue: onPreQueue, position: onPosition, admitted: onAdmitted, sold_out: soldOut };

function onRoomEvent(event) {
  if (event.kind === "message") handlers[event.message.type]?.(event.message);
  else if (event.kind === "resume") {
    state.resume = event.token;
    if (event.token) sessionStorage.setItem(resumeKey, event.token);
    else sessionStorage.removeItem(resumeKey);
  } else if (event.kind === "over" && state.mode === "queued") {
    if (event.reason === "sold_out") soldOut();
    else if (event.reason === "unknown_sale") over("This sale does not exist or is not open for queueing.", false);
    else if (event.reason === "taken") over("You signed in in another tab or app: your place is waiting there.", false);
    else if (event.reason === "elsewhere") over("Your place is now open in another tab or window: it keeps its place there.", false);
    else over(TURN_PASSED, true);
  } else if (event.kind === "reconnecting" && state.mode === "queued" && event.code !== 1012) {
    setStatus("Connection lost. Reconnecting; you keep your place…", "warn");
  }
}

// ---- who is buying, and the bot check -------------------------------------------------------

function identity() { return localStorage.getItem(identityKey); }

// Whole seconds until the identity token expires (0 if unreadable or none).
function identityLeft() {
  try {
    const claims = JSON.parse(atob(identity().split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
    return Math.max(0, claims.exp - Math.floor(Date.now() / 1000));
  } catch { return 0; }
}

// Off to the provider's sign-in, back to this sale afterwards. A buyer already signed in there
// comes straight back: this is also how a token about to expire is renewed.
function signIn() {
  if (!signin.available) { setStatus("Signing in is not available here.", "warn"); return; }
  signin.start(location.pathname + location.search).catch(() => {
    setStatus("The sign-in cannot be reached just now. Try again in a moment.", "warn");
  });
}

// Back from the provider (`/?code=...&state=...`): redeem the code for the ID token if this tab
// started that sign-in, then go back to the sale. True when the page is going elsewhere.
async function finishSignIn() {
  // The page reads nothing from its fragment; one that carries parameters (a link with a token
  // in it, say) is dropped so it stays in no history or bookmark.
  if (location.hash.includes("=")) history.replaceState(null, "", location.pathname + location.search);
  const result = await signin.finish();
  if (identity() && identityLeft() === 0) localStorage.removeItem(identityKey);
  if (!result) return false;
  if (result.error) {
    setStatus(`${result.error} You can sign in again.`, "warn");
    return false;
  }
  localStorage.setItem(identityKey, result.token);
  location.replace(result.returnTo);
  return true;
}

// A signed-in buyer's token must outlast what comes next (a reconnect, a booking call): when it
// has less than `secs` left, sign in again now. Never while waiting on an open connection (the
// door does not check it again; a trip away would risk the place once past its grace); at a
// reconnect, on admission (the pass is kept in this tab's storage) and before booking. True when
// the page is leaving.
function renewIdentity(secs) {
  if (!identity() || identityLeft() >= secs || !signin.available) return false;
  // Once a minute at most: a provider whose tokens live shorter than a pass gets no loop.
  const renewedKey = "floodgate:identity-renewed-at";
  if (Date.now() - Number(sessionStorage.getItem(renewedKey) ?? 0) < 60_000) return false;
  sessionStorage.setItem(renewedKey, String(Date.now()));
  signIn();
  return true;
}

function showWho() {
  const token = identity();
  let name = "";
  try { name = JSON.parse(atob(token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).sub; } catch { name = ""; }
  $("signed-in").textContent = token ? `Signed in as ${name}` : "";
  show("signed-in", Boolean(token));
  show("signin", !token && signin.available);
  show("signout", Boolean(token));
  show("signin-needed", state.door?.identity === "required" && !token);
  $("join").textContent = state.door?.identity === "required" && !token ? "Sign in to join" : "Join the queue";
}

// The answer to the sale's proof of work, if it asks for one: find a nonce whose MD5 with the
// puzzle starts with `difficulty` zero bits (docs/protocol.md 1.12). A person's browser spends a
// fraction of a second; a bot joining thousands of times pays for each.
// The sale's door (who may join, the bot check), from its summary; null if it could not be had,
// and then asked again before the next join (a busy edge's refusal, waited out, say).
async function loadDoor() {
  try {
    state.door = (await getJson({ path: `/v1/sales/${enc(sale)}` })).door ?? null;
  } catch { state.door = null; }
}

async function passChallenge() {
  if (!state.door) await loadDoor();
  // Still unknown: no join that would only be refused; the room tries again after its back-off.
  if (!state.door) throw new Error("the sale's door could not be read");
  if (state.door?.challenge !== "pow") return null;
  setStatus("Checking this is a person's browser…");
  const puzzle = await fetchPuzzle({ sale });
  return puzzle ? solvePuzzle(puzzle) : null;
}

function drawNonce() {
  const key = `floodgate:nonce:${sale}`;
  let nonce = sessionStorage.getItem(key);
  if (!nonce) {
    nonce = newDrawNonce();
    sessionStorage.setItem(key, nonce);
  }
  return nonce;
}

function onTicket(msg) {
  state.mode = "queued";
  state.opensAt = msg.opens_at_ms;
  $("ticket").textContent = msg.ticket;
  show("join-box", false);
  show("queue", true);
  $("panel-title").textContent = "You are in the queue";
  if (msg.opens_at_ms > Date.now()) {
    setStatus(`You are in. Booking opens at ${new Date(msg.opens_at_ms).toLocaleTimeString()}.`);
    announce("You are in the waiting room. Your place is drawn when booking opens.");
  } else {
    setStatus("You are in the queue.");
  }
}

function onPreQueue(msg) {
  $("position").textContent = "Drawn at the opening";
  $("position").classList.add("pending");
  const others = msg.size - 1;
  $("eta").textContent = others > 0
    ? `You and ${others.toLocaleString()} ${others === 1 ? "other person are" : "others are"} waiting for the opening. Then everyone here gets a random place in line, by a lottery anyone can check.`
    : "You are the first here. At the opening, everyone who is here gets a random place in line, by a lottery anyone can check.";
}

function onPosition(msg) {
  const position = msg.position;
  if (state.firstPosition === null || position > state.firstPosition) state.firstPosition = position;
  $("position").textContent = position.toLocaleString();
  $("position").classList.remove("pending");
  const done = state.firstPosition > 1 ? Math.round(100 * (state.firstPosition - position) / (state.firstPosition - 1)) : 100;
  $("bar-fill").style.width = `${done}%`;
  $("bar").setAttribute("aria-valuenow", String(done));
  let eta;
  state.etaUntil = msg.eta_secs != null ? Date.now() + msg.eta_secs * 1000 : null;
  if (msg.eta_secs != null) eta = `Estimated wait: ${aboutSecs(msg.eta_secs)}.`;
  else if (Date.now() >= state.opensAt) eta = "Admission is paused for a moment. You keep your place.";
  else eta = "Waiting for the opening.";
  $("eta").textContent = eta;
  // Beyond the front 1,000 the gateway rounds the place up to within 1 %: say "about".
  const ahead = `${(position - 1).toLocaleString()} ${position === 2 ? "person is" : "people are"} ahead of you.`;
  setStatus(position === 1 ? "You are next." : position > 1000 ? `About ${ahead}` : ahead);
  document.title = `(${position.toLocaleString()}) ${state.catalog?.name ?? "Waiting"} · Floodgate`;
  // Speak the place when it first arrives, then when it has moved a good deal (a tenth) and at
  // least 20 s have passed, and at every step of the last ten: often enough to follow, never a
  // stream of numbers.
  const last = state.spoken.position;
  const moved = last === null || (last - position) >= Math.max(1, last / 10);
  if (last === null || (moved && Date.now() - state.spoken.at >= 20000) || (position <= 10 && position < last)) {
    state.spoken = { position, at: Date.now() };
    announce(`Your place in line: ${position}. ${eta}`);
  }
}

// The ETA counts down between messages.
setInterval(() => {
  if (state.etaUntil === null) return;
  const left = Math.max(0, Math.round((state.etaUntil - Date.now()) / 1000));
  $("eta").textContent = `Estimated wait: ${aboutSecs(left)}.`;
}, 1000);

function onAdmitted(msg) {
  // The token is here: whatever the socket does next, this session is done.
  state.room?.stop();
  state.etaUntil = null;
  state.mode = "choose";
  state.token = msg.token;
  state.tokenExpires = msg.expires_at_ms;
  state.maxSeats = msg.max_seats;
  sessionStorage.setItem(passKey, JSON.stringify(msg));
  // Booking needs the buyer's token beside the pass: if it would run out first, renew it now.
  if (renewIdentity(Math.ceil((msg.expires_at_ms - Date.now()) / 1000) + 30)) return;
  // Admission means the sale is open, whatever this device's clock says.
  state.opensAt = Math.min(state.opensAt, Date.now());
  show("join-box", false);
  show("queue", false);
  show("choose", true);
  $("panel-title").textContent = "It's your turn";
  setStatus("Pick a train and class below to hold your seats.", "ok");
  document.title = `Your turn · ${state.catalog?.name ?? "Floodgate"}`;
  announce("It's your turn. Choose a train and class to book.", true);
  const seats = $("seats");
  seats.innerHTML = "";
  for (let n = 1; n <= state.maxSeats; n++) seats.add(new Option(String(n), String(n)));
  if (state.catalog) renderTrains();
  else showBarePools();
  $("trains-title").scrollIntoView({ behavior: "smooth", block: "start" });
  tickPass();
  if (state.catalog) loadCounts();
}

// Without a published catalog, the gateway's summary still names the pools.
async function showBarePools() {
  const summary = await (await fetch(`/v1/sales/${enc(sale)}`)).json();
  const list = $("trains");
  list.innerHTML = "";
  for (const pool of summary.pools) {
    const li = el("li", "card class");
    li.appendChild(el("strong", null, pool));
    const button = el("button", "book", "Book");
    button.dataset.pool = pool;
    button.onclick = () => reserve(pool, button);
    li.appendChild(button);
    list.appendChild(li);
  }
}

function tickPass() {
  if (state.mode !== "choose") return;
  const left = state.tokenExpires - Date.now();
  $("pass-left").textContent = clock(left);
  if (left <= 0) { over(TURN_PASSED, true); return; }
  setTimeout(tickPass, 1000 - (Date.now() % 1000));
}

function soldOut() {
  over("Sorry, every seat has been sold. Seats from unpaid holds may come back: this page shows them.", true);
  $("panel-title").textContent = "Sold out";
}

function over(text, canRejoin) {
  state.etaUntil = null;
  state.mode = "over";
  state.room?.stop();
  sessionStorage.removeItem(resumeKey);
  sessionStorage.removeItem(passKey);
  state.resume = null;
  for (const id of ["queue", "choose", "hold"]) show(id, false);
  setStatus(text, "warn");
  announce(text, true);
  if (canRejoin) {
    $("join").textContent = "Join the queue again";
    show("join-box", true);
    state.mode = "browse";
  }
  renderTrains();
}

// ---- reserve, hold, pay ------------------------------------------------------------------------

// A signed-in buyer's pass is good only with their identity beside it.
const booking = new Booking({ origin: api, identity });

async function reserve(pool, button, key = crypto.randomUUID()) {
  if (renewIdentity(30)) return;
  for (const b of document.querySelectorAll("button.book")) b.disabled = true;
  button.textContent = "Holding…";
  const retry = (ms) => setTimeout(() => reserve(pool, button, key), ms);
  let status, body, retryAfterMs;
  try {
    ({ status, body, retryAfterMs } = await booking.reserve({
      sale, pool, seats: Number($("seats").value), token: state.token, idempotencyKey: key,
    }));
  } catch {
    // No answer: the same key again is safe, it gets the one decision.
    setStatus("Network trouble, retrying…", "warn");
    return retry(1000);
  }
  if (status === 201) {
    sessionStorage.setItem(holdKey, JSON.stringify(body));
    sessionStorage.removeItem(passKey);
    return showHold(body);
  }
  // 503 (busy) and 429 (this address or pass is asking too fast: a crowd behind one carrier
  // address, say): the same key again after Retry-After is safe and gets the one decision.
  if (status === 503 || status === 429) {
    setStatus("Very busy, retrying…", "warn");
    return retry(retryAfterMs ?? 1000);
  }
  for (const b of document.querySelectorAll("button.book")) b.disabled = false;
  button.textContent = "Book";
  if (body.error === "sold_out") {
    button.disabled = true;
    button.textContent = "Sold out";
    setStatus("Not enough seats left in that class. Try another one.", "warn");
    announce("Not enough seats left in that class. Try another one.", true);
    return;
  }
  if (body.error === "token_expired") return over(TURN_PASSED, true);
  // The buyer's token ran out (a clock ahead of this device's): renew it, the pass is kept.
  if (body.error === "identity_expired" && signin.available) return signIn();
  setStatus(body.message || "The reservation failed.", "warn");
}

function showHold(body) {
  state.mode = "held";
  const info = poolInfo(body.pool);
  show("join-box", false);
  show("queue", false);
  show("choose", false);
  show("hold", true);
  $("trains").closest("section").hidden = true;
  $("panel-title").textContent = "Your seats are held";
  document.title = `Seats held · ${state.catalog?.name ?? "Floodgate"}`;
  const total = info.fare_minor != null ? money(info.fare_minor * body.seats, info.currency) : null;
  fillSummary($("hold-summary"), [
    ["Train", info.title],
    ...(info.route ? [["Journey", info.route]] : []),
    ["Class", info.cls],
    ["Passengers", String(body.seats)],
    ...(total ? [["Total", total]] : []),
  ]);
  $("pay").textContent = total ? `Pay ${total}` : "Pay";
  setStatus("Pay now to make them yours.", "ok");
  announce(`Seats held. You have ${aboutSecs((body.hold_expires_at_ms - Date.now()) / 1000)} to pay.`, true);
  const span = body.hold_expires_at_ms - body.reserved_at_ms;
  let warned = false;
  const tick = () => {
    if (state.mode !== "held") return;
    const left = body.hold_expires_at_ms - Date.now();
    $("hold-left").textContent = clock(left);
    $("hold-fill").style.width = `${Math.max(0, (100 * left) / span)}%`;
    $("hold-left").classList.toggle("low", left < 60000);
    if (!warned && left < 60000 && left > 0) { warned = true; announce("One minute left to pay.", true); }
    if (left <= 0) {
      $("hold-note").textContent = "The time is up. Checking with the booking service…";
      return;
    }
    setTimeout(tick, 1000 - (Date.now() % 1000));
  };
  tick();
  $("pay").onclick = () => pay(body.reservation_id, body.secret);
  watch(body.reservation_id, body.secret);
}

async function pay(id, secret) {
  $("pay").disabled = true;
  try {
    const { status, body: payment } = await booking.startPayment(sale, id, secret);
    if (status !== 202) { setStatus(payment.message, "warn"); $("pay").disabled = false; return; }
    let checkout;
    try { checkout = new URL(payment.checkout_url); } catch { checkout = null; }
    if (!checkout || !checkoutOrigins.includes(checkout.origin)) {
      setStatus("The payment page is not at the payment provider this site uses, so it was not opened. Please contact support.", "warn");
      $("pay").disabled = false;
      return;
    }
    window.open(checkout.href, "_blank", "noopener");
    setStatus("Complete the payment in the new tab. This page updates by itself.");
  } catch {
    setStatus("Could not reach the payment service. Try again.", "warn");
    $("pay").disabled = false;
  }
}

// The outcome (payment or expiry) is decided on the server: follow the reservation until it
// settles. The provider's webhook, not this page, confirms a payment.
async function watch(id, secret) {
  let view = null;
  try {
    const { status, body } = await booking.reservation(sale, id, secret);
    if (status === 200) view = body;
  } catch { /* try again */ }
  if (!view || view.status === "held") { setTimeout(() => watch(id, secret), 1500); return; }
  sessionStorage.removeItem(holdKey);
  sessionStorage.removeItem(resumeKey);
  state.resume = null;
  settle(view);
}

function settle(view) {
  state.mode = view.status === "confirmed" ? "done" : "over";
  for (const id of ["join-box", "queue", "choose", "hold"]) show(id, false);
  const info = poolInfo(view.pool);
  if (view.status === "confirmed") {
    show("done", true);
    $("panel-title").textContent = "Booking confirmed";
    document.title = `Booking confirmed · ${state.catalog?.name ?? "Floodgate"}`;
    $("trains").closest("section").hidden = true;
    setStatus("Your seats are confirmed. Keep the reference below: it is your booking.", "ok");
    announce("Booking confirmed.", true);
    fillSummary($("done-summary"), [
      ["Reference", view.reservation_id, "mono"],
      ["Train", info.title],
      ...(info.route ? [["Journey", info.route]] : []),
      ["Class", info.cls],
      ["Passengers", String(view.seats)],
      ["Paid", money(view.amount_minor, view.currency)],
      ["Payment", view.payment_id, "mono"],
    ]);
    return;
  }
  const texts = {
    expired: "The hold expired before a payment arrived, and the seats went back on sale. Any money taken is refunded automatically.",
    cancelled: "The payment did not go through, so the seats were released.",
    aborted: "The reservation could not be recorded and was withdrawn. Nothing was charged.",
  };
  $("panel-title").textContent = view.status === "expired" ? "Hold expired" : "Not booked";
  const text = texts[view.status] || `Reservation ${view.status}.`;
  setStatus(text, "warn");
  announce(text, true);
  $("trains").closest("section").hidden = false;
  // Seats may be left: a new place in line can still get one.
  $("join").textContent = "Join the queue again";
  show("join-box", true);
  state.mode = "browse";
  renderTrains();
}

// ---- start -----------------------------------------------------------------------------------

async function start() {
  if (await finishSignIn()) return;
  $("signin").onclick = signIn;
  $("signout").onclick = () => { localStorage.removeItem(identityKey); showWho(); };
  showWho();
  if (!sale) { showSales(); return; }
  show("sale-view", true);
  $("draw-link").href = `/v1/sales/${enc(sale)}/draw`;
  $("join").onclick = join;
  await loadDoor();
  showWho();
  await loadCatalog();
  tickOpening();
  renderTrains();
  refreshCounts();
  const held = sessionStorage.getItem(holdKey);
  const pass = JSON.parse(sessionStorage.getItem(passKey) ?? "null");
  if (held) {
    showHold(JSON.parse(held));
  } else if (pass && pass.expires_at_ms > Date.now()) {
    // Back from renewing the sign-in with a pass in hand.
    onAdmitted(pass);
  } else if (state.resume) {
    // Back after a reload: take the place in line up again.
    show("join-box", false);
    setStatus("Taking your place in line back…");
    state.mode = "queued";
    connect();
  } else {
    setStatus(state.catalog ? "Browse the trains, then join the queue." : "Join the queue to book.");
    show("join-box", true);
  }
}

start();
