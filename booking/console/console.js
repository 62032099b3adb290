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

// The audit trail: who changed what, newest first; each row names only the settings that moved.
function showAudit(entries) {
  $("audit").replaceChildren();
  for (const e of entries) {
    const changed = Object.keys(e.after)
      .filter((k) => JSON.stringify(e.before[k]) !== JSON.stringify(e.after[k]))
      .map((k) => `${k}: ${e.before[k]} → ${e.after[k]}`)
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
$("pause").onclick = () => act("POST", "/pause");
$("resume").onclick = () => act("POST", "/resume");
$("open-now").onclick = () => { if (confirm("Open the sale now, for everyone?")) act("POST", "/open-now"); };
if ($("sale").value && $("token").value) $("watch").onclick();
