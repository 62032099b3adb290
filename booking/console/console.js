// Floodgate's ops console: polls the ops API of this admin listener every second and turns its
// controls. The ops token stays in this tab (sessionStorage) and is sent only to this origin.
"use strict";

const $ = (id) => document.getElementById(id);
const history = {};
const HISTORY = 120;
let timer = null;

$("sale").value = new URLSearchParams(location.search).get("sale") || sessionStorage.getItem("fg-ops-sale") || "";
$("token").value = sessionStorage.getItem("fg-ops-token") || "";

async function call(method, path, body) {
  const response = await fetch(`/admin/v1/sales/${encodeURIComponent($("sale").value.trim())}${path}`, {
    method,
    headers: { Authorization: `Bearer ${$("token").value}`, "Content-Type": "application/json" },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(json.message || `${response.status}`);
  return json;
}

function plot(series, value) {
  const points = (history[series] = (history[series] || []).concat([value]).slice(-HISTORY));
  const max = Math.max(1, ...points);
  const svg = document.querySelector(`svg[data-series="${series}"] polyline`);
  // The line spans the chart's width whatever the number of samples (up to two minutes' worth).
  const step = 120 / Math.max(1, points.length - 1);
  svg.setAttribute("points", points.map((v, i) => `${i * step},${40 - (v / max) * 38}`).join(" "));
}

function show(f) {
  const sum = (key) => f.pools.reduce((n, p) => n + (p[key] || 0), 0);
  const figures = {
    waiting: f.waiting, admitted: f.admitted, active: f.active,
    sold: sum("sold"), held: sum("held"), measured_rate: f.measured_rate,
  };
  for (const [key, value] of Object.entries(figures)) {
    $(key).textContent = Number(value).toLocaleString();
    plot(key, Number(value));
  }
  const state = f.sold_out ? "sold_out" : f.paused ? "paused" : f.open ? "open" : "before opening";
  $("state").textContent = state.replace("_", " ");
  $("state").className = `state ${state}`;
  if (document.activeElement !== $("rate")) $("rate").value = f.admission_rate;
  if (document.activeElement !== $("cap")) $("cap").value = f.active_cap;
  if (document.activeElement !== $("challenge")) $("challenge").value = f.door.challenge;
  if (document.activeElement !== $("difficulty")) $("difficulty").value = f.door.pow_difficulty;
  showAutopilot(f.autopilot);
  $("pools").innerHTML = "";
  for (const p of f.pools) {
    const row = document.createElement("tr");
    for (const v of [p.pool, p.capacity, p.available, p.held, p.sold]) {
      const cell = document.createElement("td");
      cell.textContent = v ?? "lost";
      row.appendChild(cell);
    }
    $("pools").appendChild(row);
  }
}

// The autopilot: on or off with its bounds, and what the sale's leader last decided and why.
const SIGNALS = {
  reservation_latency: "reservation p99", errors: "503/5xx share", script_latency: "pool script p99",
  produce_latency: "broker ack p99", consumer_lag: "consumer lag",
};
const HOLDS = {
  stale: "no fresh health from the services", settling: "waiting for the last change to show",
  at_floor: "strained, at the floor", at_ceiling: "calm, at the ceiling", within_band: "neither calm nor strained",
};
// The targets the autopilot runs with, kept when the bounds are changed here (the console sets
// no targets of its own: they are set through the ops API).
let autopilotTargets = null;
function showAutopilot(a) {
  $("autopilot-state").textContent = a.enabled
    ? `on (${a.settings.floor} to ${a.settings.ceiling} / s)` : "off";
  $("autopilot-state").className = `state ${a.enabled ? "open" : ""}`;
  autopilotTargets = a.enabled ? a.settings.targets : null;
  if (a.enabled) {
    if (document.activeElement !== $("ap-floor")) $("ap-floor").value = a.settings.floor;
    if (document.activeElement !== $("ap-ceiling")) $("ap-ceiling").value = a.settings.ceiling;
    if (document.activeElement !== $("ap-settle")) $("ap-settle").value = a.settings.settle_ms / 1000;
  }
  const s = a.last_step;
  if (!s) { $("autopilot-step").textContent = "no step lately"; return; }
  const d = s.decision;
  const said = d.action === "cut"
    ? `cut ${d.from.toFixed(1)} → ${d.to.toFixed(1)} / s: ${SIGNALS[d.signal] || d.signal} at ${d.pressure.toFixed(2)}× its target`
    : d.action === "raised" ? `raised ${d.from.toFixed(1)} → ${d.to.toFixed(1)} / s: every signal calm`
    : `held at ${d.rate.toFixed(1)} / s: ${HOLDS[d.why] || d.why}`;
  $("autopilot-step").textContent = `${new Date(s.at_ms).toLocaleTimeString()} (gateway ${s.leader}): ${said}`;
}

// A setting as the audit shows it: the autopilot's settings as their bounds, anything else as is.
function shown(v) {
  if (v && typeof v === "object") return "floor" in v ? `${v.floor} to ${v.ceiling} / s` : JSON.stringify(v);
  return v ?? "off";
}

// The audit trail: who changed what, newest first; each row names only the settings that moved.
function showAudit(entries) {
  $("audit").replaceChildren();
  for (const e of entries) {
    const changed = Object.keys(e.after)
      .filter((k) => JSON.stringify(e.before[k]) !== JSON.stringify(e.after[k]))
      .map((k) => `${k}: ${shown(e.before[k])} → ${shown(e.after[k])}`)
      .join(", ");
    const row = document.createElement("tr");
    for (const v of [new Date(e.at).toLocaleTimeString(), e.actor, e.action, changed || "-"]) {
      const cell = document.createElement("td");
      cell.textContent = v;
      row.appendChild(cell);
    }
    $("audit").appendChild(row);
  }
}

async function refresh() {
  try {
    show(await call("GET", ""));
    showAudit(await call("GET", "/audit?limit=20"));
    $("message").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (e) {
    $("state").textContent = "error";
    $("state").className = "state error";
    $("message").textContent = e.message;
  }
}

async function act(method, path, body) {
  try {
    show(await call(method, path, body));
    $("message").textContent = "done";
  } catch (e) {
    $("message").textContent = `refused: ${e.message}`;
  }
}

$("watch").onclick = () => {
  sessionStorage.setItem("fg-ops-sale", $("sale").value.trim());
  sessionStorage.setItem("fg-ops-token", $("token").value);
  clearInterval(timer);
  refresh();
  timer = setInterval(refresh, 1000);
};
$("set-rate").onclick = () => act("PATCH", "", { admission_rate: Number($("rate").value) });
$("set-cap").onclick = () => act("PATCH", "", { active_cap: Number($("cap").value) });
// During an attack on the door: a proof of work at every join, each bit doubling a bot's cost.
$("set-door").onclick = () => act("PATCH", "", {
  challenge: $("challenge").value,
  pow_difficulty: Number($("difficulty").value),
});
$("ap-on").onclick = () => act("PATCH", "", { autopilot: {
  enabled: true, floor: Number($("ap-floor").value), ceiling: Number($("ap-ceiling").value),
  settle_secs: Number($("ap-settle").value),
  ...(autopilotTargets ? { targets: autopilotTargets } : {}),
} });
$("ap-off").onclick = () => act("PATCH", "", { autopilot: { enabled: false } });
$("pause").onclick = () => act("POST", "/pause");
$("resume").onclick = () => act("POST", "/resume");
$("open-now").onclick = () => { if (confirm("Open the sale now, for everyone?")) act("POST", "/open-now"); };
if ($("sale").value && $("token").value) $("watch").onclick();
