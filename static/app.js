// Floodgate's demo client: join the waiting room over WebSocket, wait, get admitted, reserve.
// Query parameters: sale (required), api (booking API origin; default: this host, port 8081).
"use strict";

const params = new URLSearchParams(location.search);
const sale = params.get("sale");
const api = params.get("api") || `${location.protocol}//${location.hostname}:8081`;
const $ = (id) => document.getElementById(id);

let firstPosition = null;
let token = null;
let maxSeats = 1;
let attempt = 0;
let opensAt = 0;
// The resume token keeps this tab's place across reconnects (and reloads, via sessionStorage).
const resumeKey = `floodgate:resume:${sale}`;
let resume = sessionStorage.getItem(resumeKey);

function setStatus(text, cls) {
  const el = $("status");
  el.textContent = text;
  el.className = "status " + (cls || "");
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  let url = `${scheme}://${location.host}/ws?sale=${encodeURIComponent(sale)}`;
  if (resume) url += `&resume=${encodeURIComponent(resume)}`;
  const ws = new WebSocket(url);
  let opened = false;
  ws.onopen = () => { opened = true; };
  ws.onmessage = (event) => {
    attempt = 0;
    const msg = JSON.parse(event.data);
    switch (msg.type) {
      case "ticket": {
        resume = msg.resume_token;
        sessionStorage.setItem(resumeKey, resume);
        $("ticket").textContent = msg.ticket;
        $("queue").hidden = false;
        opensAt = msg.opens_at_ms;
        const opens = new Date(msg.opens_at_ms);
        if (opens > new Date()) setStatus(`In the waiting room. Booking opens at ${opens.toLocaleTimeString()}.`);
        else setStatus("In the queue.");
        break;
      }
      case "pre_queue": {
        $("position").textContent = "–";
        $("eta").textContent = `${msg.size.toLocaleString()} people in the pre-queue. At the opening everyone here gets a random place.`;
        break;
      }
      case "position": {
        if (firstPosition === null || msg.position > firstPosition) firstPosition = msg.position;
        $("position").textContent = msg.position.toLocaleString();
        const done = firstPosition > 1 ? Math.round(100 * (firstPosition - msg.position) / (firstPosition - 1)) : 100;
        $("bar-fill").style.width = `${done}%`;
        document.querySelector(".bar").setAttribute("aria-valuenow", String(done));
        $("eta").textContent = msg.eta_secs != null
          ? `About ${formatSecs(msg.eta_secs)} to go.`
          : Date.now() >= opensAt
            ? "Admission is paused for a moment. You keep your place."
            : "Waiting for the opening.";
        setStatus(`Your place in line: ${msg.position.toLocaleString()}.`);
        break;
      }
      case "admitted":
        token = msg.token;
        maxSeats = msg.max_seats;
        $("queue").hidden = true;
        setStatus("It's your turn. Pick a class to reserve.", "ok");
        showPools(new Date(msg.expires_at_ms));
        break;
      case "sold_out":
        $("queue").hidden = true;
        setStatus("Sorry, everything has been sold.", "warn");
        break;
    }
  };
  ws.onclose = (event) => {
    if (token || event.code === 1000) return;
    if (event.code === 4410) {
      sessionStorage.removeItem(resumeKey);
      if (event.reason !== "sold out") setStatus("Your admission expired unused.", "warn");
      return;
    }
    if (event.code === 4404) { setStatus("This sale does not exist or is not open for queueing.", "warn"); return; }
    if (event.code === 1012 && event.reason) {
      // The gateway is draining and handed us our resume token: come back after a short, random delay.
      resume = event.reason;
      setTimeout(connect, Math.random() * 2000);
      return;
    }
    // A socket refused before it opened may be a dead ticket (410) or a bad token: after a few
    // failures with the token, start afresh without it.
    if (!opened && resume && attempt >= 5) { resume = null; sessionStorage.removeItem(resumeKey); }
    setStatus("Connection lost, reconnecting…", "warn");
    // Exponential back-off with jitter (docs/protocol.md 1.5), so a restart is not a reconnect storm.
    const delay = Math.min(30000, 500 * 2 ** attempt) * (0.5 + Math.random() / 2);
    attempt += 1;
    setTimeout(connect, delay);
  };
}

function formatSecs(s) {
  if (s < 60) return `${s} s`;
  const m = Math.round(s / 60);
  return m < 60 ? `${m} min` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

async function showPools(expiry) {
  $("token-expiry").textContent = expiry.toLocaleTimeString();
  const seats = $("seats");
  seats.innerHTML = "";
  for (let n = 1; n <= maxSeats; n++) seats.add(new Option(String(n), String(n)));
  $("booking").hidden = false;
  const summary = await (await fetch(`/v1/sales/${encodeURIComponent(sale)}`)).json();
  const list = $("pools");
  list.innerHTML = "";
  for (const pool of summary.pools) {
    const li = document.createElement("li");
    const button = document.createElement("button");
    button.textContent = describePool(pool);
    button.onclick = () => reserve(pool, button);
    li.appendChild(button);
    list.appendChild(li);
  }
}

// Pool ids read TRAIN-DATE-CLASS-QUOTA in the demo catalog.
function describePool(id) {
  const [train, date, cls, quota] = id.split("-");
  return cls ? `Train ${train} · ${date} · class ${cls} · quota ${quota}` : id;
}

async function reserve(pool, button, key = crypto.randomUUID()) {
  button.disabled = true;
  const response = await fetch(`${api}/v1/sales/${encodeURIComponent(sale)}/reservations`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}`, "Idempotency-Key": key },
    body: JSON.stringify({ pool, seats: Number($("seats").value) }),
  });
  const body = await response.json();
  if (response.status === 201) return showHold(body);
  if (response.status === 503) {
    // Retry with the same key: the answer, when it comes, is the one decision.
    const wait = Number(response.headers.get("Retry-After") || "1") * 1000;
    setStatus("Busy, retrying…");
    return setTimeout(() => reserve(pool, button, key), wait);
  }
  if (body.error === "sold_out") {
    button.textContent += " — sold out";
    setStatus(body.message + " Try another class.", "warn");
    return;
  }
  setStatus(body.message || "The reservation failed.", "warn");
  button.disabled = false;
}

function showHold(body) {
  $("booking").hidden = true;
  const result = $("result");
  result.hidden = false;
  result.innerHTML = "";
  const p = document.createElement("p");
  p.innerHTML = `<strong class="ok">Reserved ${body.seats} seat(s)</strong> in <code></code>. Reservation <code></code>.`;
  p.querySelectorAll("code")[0].textContent = body.pool;
  p.querySelectorAll("code")[1].textContent = body.reservation_id;
  result.appendChild(p);
  const timer = document.createElement("p");
  timer.setAttribute("aria-live", "polite");
  result.appendChild(timer);
  const pay = document.createElement("button");
  pay.textContent = "Pay now";
  pay.className = "primary";
  result.appendChild(pay);
  let settled = false;
  const tick = () => {
    if (settled) return;
    const left = Math.max(0, Math.round((body.hold_expires_at_ms - Date.now()) / 1000));
    timer.textContent = left > 0 ? `Held for you for ${formatSecs(left)} more. Pay before then.` : "The hold has lapsed.";
    if (left > 0) setTimeout(tick, 1000);
  };
  tick();
  setStatus("Seats held.", "ok");
  const reservationUrl = `${api}/v1/sales/${encodeURIComponent(sale)}/reservations/${encodeURIComponent(body.reservation_id)}`;
  const auth = { Authorization: `Bearer ${body.secret}` };
  pay.onclick = async () => {
    pay.disabled = true;
    const started = await fetch(`${reservationUrl}/payment`, { method: "POST", headers: auth });
    const payment = await started.json();
    if (!started.ok) { setStatus(payment.message, "warn"); pay.disabled = false; return; }
    window.open(payment.checkout_url, "_blank");
    setStatus("Complete the payment in the new tab…");
    // The outcome arrives by webhook; watch the reservation until it settles.
    const watch = async () => {
      const view = await (await fetch(reservationUrl, { headers: auth })).json();
      if (view.status === "held") return setTimeout(watch, 1000);
      settled = true;
      pay.hidden = true;
      const done = { confirmed: ["Booked! Your seats are confirmed.", "ok"], cancelled: ["The payment failed; the seats were released.", "warn"], expired: ["The hold lapsed before the payment arrived; any money taken is refunded.", "warn"] };
      const [text, cls] = done[view.status] || [`Reservation ${view.status}.`, "warn"];
      timer.textContent = "";
      setStatus(text, cls);
    };
    watch();
  };
}

if (!sale) {
  setStatus("No sale given: open this page as /?sale=<sale id>.", "warn");
} else {
  $("sale-id").textContent = sale;
  connect();
}
