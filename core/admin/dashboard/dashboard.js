// Sluice's dashboard: polls /stats once a second and keeps the last minutes of samples
// (seeded from /stats/history) for the charts. No dependencies, no build step.
"use strict";

const POLL_MS = 1000;
const KEEP = 300; // samples kept per route, as /stats/history

const state = { samples: [], updates: 0, edge: { producer: 0, consumer: 0 } };

function $(sel, root) { return (root || document).querySelector(sel); }

function fmtBytes(n) {
  if (!isFinite(n)) return "∞";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + units[i];
}

function fmtNum(n) {
  if (!isFinite(n)) return "–";
  if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(2) + "M";
  if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

function fmtDuration(s) {
  s = Math.floor(s);
  const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  if (d) return d + "d " + h + "h";
  if (h) return h + "h " + m + "m";
  if (m) return m + "m " + (s % 60) + "s";
  return s + "s";
}

// set writes a figure: its raw value in data-value (what tests compare with /metrics) and
// its text for people.
function set(el, value, text) {
  if (!el) return;
  el.dataset.value = String(value);
  el.textContent = text === undefined ? fmtNum(value) : text;
}

function setMetric(key, value, text) {
  set(document.querySelector('[data-metric="' + CSS.escape(key) + '"]'), value, text);
}

// sampleOf turns a /stats answer into a history sample, the shape /stats/history serves.
function sampleOf(st) {
  return {
    time: st.time,
    producer_used: st.producer_pool.edge.used, producer_limit: st.producer_pool.edge.limit,
    consumer_used: st.consumer_pool.edge.used, consumer_limit: st.consumer_pool.edge.limit,
    routes: st.routes.map(r => ({
      name: r.name,
      producer_used: r.producer_pool.used, producer_limit: r.producer_pool.limit,
      consumer_used: r.consumer_pool.used, consumer_limit: r.consumer_pool.limit,
      in_flight: r.in_flight,
      sessions: r.sessions.producer + r.sessions.consumer + r.sessions.reader,
      ok: r.producer.ok, rejected: r.producer.rejected,
      failed: r.producer.send_errors + r.producer.send_timeouts + r.producer.invalid,
      deliveries: r.consumer.deliveries, acks: r.consumer.acks,
      pauses: r.producer.pauses, slow_consumer_closes: r.consumer.slow_consumer_closes,
    })),
  };
}

function push(sample) {
  state.samples.push(sample);
  if (state.samples.length > KEEP) state.samples.splice(0, state.samples.length - KEEP);
}

// series is one route's samples, oldest first, each with the edge pools' limits: a route
// without a limit of its own shares the edge pool, and is charted against it.
function series(name) {
  const out = [];
  for (const s of state.samples) {
    const r = s.routes.find(x => x.name === name);
    if (r) out.push({ t: Date.parse(s.time), r, edge: { producer_limit: s.producer_limit || 0, consumer_limit: s.consumer_limit || 0 } });
  }
  return out;
}

// rate is a counter's change a second between the last two samples of a route.
function rate(points, field) {
  if (points.length < 2) return 0;
  const a = points[points.length - 2], b = points[points.length - 1];
  const dt = (b.t - a.t) / 1000;
  return dt > 0 ? Math.max(0, (b.r[field] - a.r[field]) / dt) : 0;
}

const SVG = "http://www.w3.org/2000/svg";

function svgEl(name, attrs) {
  const el = document.createElementNS(SVG, name);
  for (const k in attrs) el.setAttribute(k, attrs[k]);
  return el;
}

// drawChart plots a route's pool usage, as a share of its limit (the edge pool's for a route
// without one; of the largest value seen when both are unbounded), over the samples kept.
function drawChart(svg, points) {
  const W = Math.max(svg.clientWidth || 600, 200), H = 160, L = 34, B = 16, T = 6;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  svg.replaceChildren();
  for (const f of [0, 0.5, 1]) {
    const y = T + (H - T - B) * (1 - f);
    svg.append(svgEl("line", { x1: L, x2: W, y1: y, y2: y, class: "grid" }));
    const label = svgEl("text", { x: 2, y: y + 3, class: "axis" });
    label.textContent = (f * 100).toFixed(0) + "%";
    svg.append(label);
  }
  if (points.length === 0) return;
  const t0 = points[0].t, t1 = Math.max(points[points.length - 1].t, t0 + 1);
  const span = svgEl("text", { x: L, y: H - 3, class: "axis" });
  span.textContent = "last " + fmtDuration((t1 - t0) / 1000);
  svg.append(span);
  const peakOf = f => points.reduce((m, p) => Math.max(m, p.r[f]), 0);
  const pp = peakOf("producer_used"), cp = peakOf("consumer_used");
  const share = (p, used, limit, peak) => {
    const l = p.r[limit] > 0 ? p.r[limit] : p.edge[limit];
    return l > 0 ? p.r[used] / l : (peak > 0 ? p.r[used] / peak : 0);
  };
  for (const [cls, used, limit, peak] of [["prod", "producer_used", "producer_limit", pp], ["cons", "consumer_used", "consumer_limit", cp]]) {
    const d = points.map(p => {
      const x = L + (W - L) * (p.t - t0) / (t1 - t0);
      const y = T + (H - T - B) * (1 - Math.min(1, share(p, used, limit, peak)));
      return x.toFixed(1) + "," + y.toFixed(1);
    }).join(" ");
    svg.append(svgEl("polyline", { points: d, class: cls }));
  }
}

function routeCard(r) {
  const id = "route-" + r.name;
  let card = document.getElementById(id);
  if (card) return card;
  card = document.createElement("div");
  card.className = "route";
  card.id = id;
  const fig = (key, label) => '<div class="row"><span>' + label + '</span><span data-metric="route:' + r.name + ':' + key + '" data-value="0">0</span></div>';
  card.innerHTML =
    '<div class="route-head"><h3></h3><span class="badge strategy"></span><span class="muted meta"></span></div>' +
    '<div class="route-body"><div><svg class="chart"></svg>' +
    '<div class="legend"><span class="p">■</span> producer pool <span class="pv"></span> &nbsp; <span class="c">■</span> consumer pool <span class="cv"></span></div></div>' +
    '<div class="figures">' +
    fig("sessions", "sessions") + fig("in_flight", "in flight") +
    fig("ok_rate", "acked /s") + fig("rejected_rate", "rejected /s") +
    fig("ok", "acked") + fig("rejected", "rejected") +
    fig("failed", "failed") + fig("pauses", "pauses") +
    fig("deliveries_rate", "delivered /s") + fig("acks_rate", "consumer acks /s") +
    fig("slow_consumer_closes", "slow consumers closed") + fig("producer_used", "producer pool") +
    '</div></div>';
  $("h3", card).textContent = r.name;
  $("#routes").append(card);
  return card;
}

function renderRoute(r) {
  const card = routeCard(r);
  const st = $(".strategy", card);
  st.textContent = (r.plugin ? r.plugin + "/" : "") + r.strategy + " · " + r.strategy_state.replace("_", "-");
  st.className = "badge strategy " + ({ plugin: "ok", in_process: "ok", fallback: "warn", unavailable: "bad" }[r.strategy_state] || "");
  $(".meta", card).textContent = r.match + " · on_full " + r.on_full + " · slow consumers " + r.slow_consumer;
  const points = series(r.name);
  drawChart($("svg", card), points);
  const k = key => "route:" + r.name + ":" + key;
  const sessions = r.sessions.producer + r.sessions.consumer + r.sessions.reader;
  setMetric(k("sessions"), sessions);
  setMetric(k("in_flight"), r.in_flight);
  setMetric(k("ok"), r.producer.ok);
  setMetric(k("rejected"), r.producer.rejected);
  setMetric(k("failed"), r.producer.send_errors + r.producer.send_timeouts + r.producer.invalid);
  setMetric(k("pauses"), r.producer.pauses);
  setMetric(k("slow_consumer_closes"), r.consumer.slow_consumer_closes);
  setMetric(k("producer_used"), r.producer_pool.used, fmtBytes(r.producer_pool.used) + " / " + (r.producer_pool.limit > 0 ? fmtBytes(r.producer_pool.limit) : "edge"));
  for (const [key, field] of [["ok_rate", "ok"], ["rejected_rate", "rejected"], ["deliveries_rate", "deliveries"], ["acks_rate", "acks"]]) {
    setMetric(k(key), rate(points, field));
  }
  const pct = (u, l, edge) => l > 0 ? " " + (100 * u / l).toFixed(0) + "% of the route's limit" :
    (edge > 0 ? " " + (100 * u / edge).toFixed(0) + "% of the edge pool" : "");
  $(".pv", card).textContent = fmtBytes(r.producer_pool.used) + pct(r.producer_pool.used, r.producer_pool.limit, state.edge.producer);
  $(".cv", card).textContent = fmtBytes(r.consumer_pool.used) + pct(r.consumer_pool.used, r.consumer_pool.limit, state.edge.consumer);
}

function renderPool(id, name, p, cls) {
  const el = document.getElementById(id);
  const limit = p.edge.limit;
  const share = limit > 0 ? Math.min(1, p.edge.used / limit) : 0;
  el.innerHTML = '<div class="label"><span>' + name + '</span><span></span></div><div class="bar ' + cls + '"><div></div></div>';
  const label = el.querySelector(".label span:last-child");
  label.dataset.metric = "edge:" + name + "_pool_used";
  set(label, p.edge.used, fmtBytes(p.edge.used) + " / " + (limit > 0 ? fmtBytes(limit) : "unbounded") + (p.edge.waiters ? " · " + p.edge.waiters + " waiting" : ""));
  label.dataset.limit = String(limit);
  el.querySelector(".bar > div").style.width = (share * 100).toFixed(1) + "%";
}

function render(st) {
  $("#version").textContent = st.version;
  $("#uptime").textContent = fmtDuration(st.uptime_seconds);
  const ready = $("#ready");
  ready.textContent = st.ready.ready ? "ready" : (st.ready.draining ? "draining" : "not ready");
  ready.className = "badge " + (st.ready.ready ? "ok" : "bad");
  ready.dataset.value = String(st.ready.ready);
  const checks = $("#checks");
  checks.replaceChildren(...st.ready.checks.map(c => {
    const d = document.createElement("div");
    d.className = c.ok ? "" : "bad";
    d.textContent = (c.ok ? "✓ " : "✗ ") + c.name + (c.reason ? ": " + c.reason : "");
    return d;
  }));
  state.edge = { producer: st.producer_pool.edge.limit, consumer: st.consumer_pool.edge.limit };
  const s = st.sessions;
  setMetric("edge:sessions", s.producer + s.consumer + s.reader);
  for (const k of ["producer", "consumer", "reader"]) setMetric("edge:sessions:" + k, s[k]);
  setMetric("edge:refused", Object.values(st.handshakes_refused).reduce((a, b) => a + b, 0));
  setMetric("edge:broker_up", st.broker.up ? 1 : 0, st.broker.up ? "reachable" : "unreachable");
  setMetric("edge:reloads", st.config.reloads);
  setMetric("edge:reload_failures", st.config.reload_failures);
  renderPool("pool-producer", "producer", st.producer_pool, "");
  renderPool("pool-consumer", "consumer", st.consumer_pool, "cons");
  renderPool("pool-session", "session", st.session_pool, "sess");
  const tbody = $("#plugins tbody");
  tbody.replaceChildren(...st.plugins.map(p => {
    const tr = document.createElement("tr");
    tr.dataset.plugin = p.name;
    for (const [v, cls] of [[p.name, ""], [p.status, p.status === "healthy" ? "ok" : "bad"], [String(p.restarts), ""]]) {
      const td = document.createElement("td");
      td.textContent = v;
      if (cls) td.className = cls;
      tr.append(td);
    }
    return tr;
  }));
  $("#plugins").hidden = st.plugins.length === 0;
  const names = new Set(st.routes.map(r => r.name));
  for (const card of document.querySelectorAll(".route")) {
    if (!names.has(card.id.slice("route-".length))) card.remove();
  }
  for (const r of st.routes) renderRoute(r);
}

async function poll() {
  try {
    const res = await fetch("/stats", { cache: "no-store" });
    if (!res.ok) throw new Error("/stats answered " + res.status);
    const st = await res.json();
    push(sampleOf(st));
    render(st);
    state.updates++;
    document.body.dataset.updates = String(state.updates);
    document.body.dataset.statsTime = st.time;
    $("#updated").textContent = new Date(st.time).toLocaleTimeString();
    $("#error").hidden = true;
  } catch (e) {
    const el = $("#error");
    el.textContent = String(e.message || e);
    el.hidden = false;
  }
}

async function start() {
  try {
    const res = await fetch("/stats/history", { cache: "no-store" });
    if (res.ok) {
      const h = await res.json();
      for (const s of h.samples) push(s);
    }
  } catch (e) { /* the history is a nicety: live samples follow */ }
  await poll();
  setInterval(poll, POLL_MS);
}

start();
