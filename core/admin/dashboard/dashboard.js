// Sluice's dashboard: polls stats (the figures), stats/history (the samples the charts are
// drawn from, each received once) and stats/topics once a second. The charts are SVG
// polylines drawn here: no dependencies, no build step, nothing fetched from elsewhere.
//
// Every URL is relative to the page, so that the page works under a path prefix (an embedder
// mounting the admin handler at /ops/). With admin_auth the page asks for a super-user's
// token, keeps it in sessionStorage and sends it as a bearer token.
"use strict";

const POLL_MS = 1000;
const KEEP = 300; // samples kept, as /stats/history
const TOKEN_KEY = "sluice-admin-token";

const state = { samples: [], bounds: [], updates: 0, edge: { producer: 0, consumer: 0 } };

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

function fmtMs(s) {
  const ms = s * 1000;
  if (ms === 0) return "0";
  return ms >= 100 ? ms.toFixed(0) + " ms" : ms.toFixed(1) + " ms";
}

function fmtPct(f) { return (f * 100).toFixed(0) + "%"; }

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

// api fetches a path relative to the page, with the token when there is one. A 401 or 403
// shows the token form.
async function api(path) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  const res = await fetch(path, { cache: "no-store", headers });
  if (res.status === 401 || res.status === 403) {
    $("#login").hidden = false;
    let reason = res.statusText;
    try { reason = (await res.json()).reason || reason; } catch (e) { /* not JSON */ }
    throw new Error(path + ": " + res.status + " " + reason);
  }
  if (!res.ok) throw new Error(path + " answered " + res.status);
  return res.json();
}

function push(samples) {
  for (const s of samples) {
    const last = state.samples[state.samples.length - 1];
    if (last && Date.parse(s.time) <= Date.parse(last.time)) continue;
    state.samples.push(s);
  }
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

// rates turns a route's counter field into per-second rates between consecutive samples.
function rates(points, field) {
  const out = [];
  for (let i = 1; i < points.length; i++) {
    const a = points[i - 1], b = points[i], dt = (b.t - a.t) / 1000;
    if (dt > 0) out.push([b.t, Math.max(0, (b.r[field] - a.r[field]) / dt)]);
  }
  return out;
}

// rate is a counter's change a second between the last two samples of a route.
function rate(points, field) {
  const r = rates(points.slice(-2), field);
  return r.length ? r[0][1] : 0;
}

// latencies are the mean and the 99th percentile of the send latency in each interval
// between samples (the percentile is its bucket's upper bound), where there were answers.
function latencies(points) {
  const mean = [], p99 = [];
  for (let i = 1; i < points.length; i++) {
    const a = points[i - 1].r.send_latency, b = points[i].r.send_latency;
    if (!a || !b) continue;
    const n = b.count - a.count;
    if (n <= 0) continue;
    const t = points[i].t;
    mean.push([t, (b.sum_seconds - a.sum_seconds) / n]);
    let q = state.bounds[state.bounds.length - 1] || 0;
    for (let j = 0; j < b.buckets.length && j < state.bounds.length; j++) {
      if (b.buckets[j] - (a.buckets[j] || 0) >= 0.99 * n) { q = state.bounds[j]; break; }
    }
    p99.push([t, q]);
  }
  return { mean, p99 };
}

const SVG = "http://www.w3.org/2000/svg";

function svgEl(name, attrs) {
  const el = document.createElementNS(SVG, name);
  for (const k in attrs) el.setAttribute(k, attrs[k]);
  return el;
}

// lineChart draws lines ({cls, pts: [[t, v]…]}) over the time the samples cover, against
// opts.max (or the largest value drawn), labelling the axis with opts.fmt. It records what
// it drew in data-points (the points plotted) and data-max (the largest value), for tests.
function lineChart(svg, lines, opts) {
  const W = Math.max(svg.clientWidth || 400, 200), H = 140, L = 52, B = 16, T = 6;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  svg.replaceChildren();
  let peak = 0;
  for (const l of lines) for (const p of l.pts) peak = Math.max(peak, p[1]);
  const max = opts.max || (peak > 0 ? peak : 1);
  for (const f of [0, 0.5, 1]) {
    const y = T + (H - T - B) * (1 - f);
    svg.append(svgEl("line", { x1: L, x2: W, y1: y, y2: y, class: "grid" }));
    const label = svgEl("text", { x: 2, y: y + 3, class: "axis" });
    label.textContent = opts.fmt(f * max);
    svg.append(label);
  }
  const samples = state.samples;
  let n = 0;
  if (samples.length > 0) {
    const t0 = Date.parse(samples[0].time), t1 = Math.max(Date.parse(samples[samples.length - 1].time), t0 + 1);
    const span = svgEl("text", { x: L, y: H - 3, class: "axis" });
    span.textContent = "last " + fmtDuration((t1 - t0) / 1000);
    svg.append(span);
    for (const l of lines) {
      if (l.pts.length === 0) continue;
      const d = l.pts.map(([t, v]) => {
        const x = L + (W - L) * (t - t0) / (t1 - t0);
        const y = T + (H - T - B) * (1 - Math.min(1, v / max));
        return x.toFixed(1) + "," + y.toFixed(1);
      }).join(" ");
      svg.append(svgEl("polyline", { points: d, class: l.cls }));
      n += l.pts.length;
    }
  }
  svg.dataset.points = String(n);
  svg.dataset.max = String(peak);
}

// poolShares are a route's pool usage as a share of its limit (the edge pool's for a route
// without one; of the largest value seen when both are unbounded).
function poolShares(points) {
  const peakOf = f => points.reduce((m, p) => Math.max(m, p.r[f]), 0);
  const share = (p, used, limit, peak) => {
    const l = p.r[limit] > 0 ? p.r[limit] : p.edge[limit];
    return l > 0 ? p.r[used] / l : (peak > 0 ? p.r[used] / peak : 0);
  };
  const pp = peakOf("producer_used"), cp = peakOf("consumer_used");
  return {
    prod: points.map(p => [p.t, share(p, "producer_used", "producer_limit", pp)]),
    cons: points.map(p => [p.t, share(p, "consumer_used", "consumer_limit", cp)]),
  };
}

function routeCard(r) {
  const id = "route-" + r.name;
  let card = document.getElementById(id);
  if (card) return card;
  card = document.createElement("div");
  card.className = "route";
  card.id = id;
  const fig = (key, label) => '<div class="row"><span>' + label + '</span><span data-metric="route:' + r.name + ':' + key + '" data-value="0">0</span></div>';
  const chart = (name, title, legend) => '<div class="panel"><h4>' + title + '</h4><svg class="chart" data-chart="' + name + '"></svg><div class="legend">' + legend + '</div></div>';
  card.innerHTML =
    '<div class="route-head"><h3></h3><span class="badge strategy"></span><span class="muted meta"></span></div>' +
    '<div class="charts">' +
    chart("throughput", "Throughput (messages /s)",
      '<span class="k-prod">■</span> published <span class="k-cons">■</span> delivered <span class="k-ack">■</span> acked <span class="k-bad">■</span> rejected') +
    chart("latency", "Broker send latency",
      '<span class="k-prod">■</span> mean <span class="k-bad">■</span> p99') +
    chart("pools", "Pool occupancy",
      '<span class="k-prod">■</span> producer <span class="pv"></span> <span class="k-cons">■</span> consumer <span class="cv"></span>') +
    '</div><div class="figures">' +
    fig("sessions", "sessions") + fig("in_flight", "in flight") +
    fig("ok_rate", "acked /s") + fig("rejected_rate", "rejected /s") +
    fig("ok", "acked") + fig("rejected", "rejected") +
    fig("failed", "failed") + fig("pauses", "pauses") +
    fig("deliveries_rate", "delivered /s") + fig("acks_rate", "consumer acks /s") +
    fig("slow_consumer_closes", "slow consumers closed") + fig("producer_used", "producer pool") +
    '</div>';
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
  lineChart($('[data-chart="throughput"]', card), [
    { cls: "prod", pts: rates(points, "ok") },
    { cls: "cons", pts: rates(points, "deliveries") },
    { cls: "ack", pts: rates(points, "acks") },
    { cls: "bad", pts: rates(points, "rejected") },
  ], { fmt: fmtNum });
  const lat = latencies(points);
  lineChart($('[data-chart="latency"]', card), [{ cls: "prod", pts: lat.mean }, { cls: "bad", pts: lat.p99 }], { fmt: fmtMs });
  const pools = poolShares(points);
  lineChart($('[data-chart="pools"]', card), [{ cls: "prod", pts: pools.prod }, { cls: "cons", pts: pools.cons }], { fmt: fmtPct, max: 1 });
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

function renderSessionsChart() {
  const kind = k => state.samples.filter(s => s.sessions_by_kind).map(s => [Date.parse(s.time), s.sessions_by_kind[k] || 0]);
  lineChart($("#chart-sessions"), [
    { cls: "prod", pts: kind("producer") }, { cls: "cons", pts: kind("consumer") }, { cls: "read", pts: kind("reader") },
  ], { fmt: fmtNum });
}

function renderTopics(topics) {
  const peak = topics.reduce((m, t) => Math.max(m, t.msg_rate_in + t.msg_rate_out), 0);
  $("#topics tbody").replaceChildren(...topics.map(t => {
    const tr = document.createElement("tr");
    tr.dataset.topic = t.topic;
    const cells = [t.topic, String(t.producers), String(t.consumers), fmtNum(t.msg_rate_in), fmtNum(t.msg_rate_out)];
    cells.forEach((v, i) => {
      const td = document.createElement("td");
      td.textContent = v;
      if (i > 0) td.className = "num";
      if (i === 0) td.title = v;
      tr.append(td);
    });
    const bar = document.createElement("td");
    bar.innerHTML = '<div class="bar rate"><div></div></div>';
    bar.querySelector(".bar > div").style.width = (peak > 0 ? 100 * (t.msg_rate_in + t.msg_rate_out) / peak : 0).toFixed(1) + "%";
    tr.append(bar);
    return tr;
  }));
  $("#topics").hidden = topics.length === 0;
  $("#topics-empty").hidden = topics.length > 0;
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
  renderSessionsChart();
  for (const r of st.routes) renderRoute(r);
}

// history fetches the samples taken since the last one held (all of them at first).
async function history() {
  const last = state.samples[state.samples.length - 1];
  const h = await api("stats/history" + (last ? "?since=" + encodeURIComponent(last.time) : ""));
  state.bounds = h.latency_bounds || state.bounds;
  push(h.samples);
}

async function poll() {
  try {
    const [st, , topics] = await Promise.all([api("stats"), history(), api("stats/topics?limit=8")]);
    render(st);
    renderTopics(topics);
    state.updates++;
    document.body.dataset.updates = String(state.updates);
    document.body.dataset.statsTime = st.time;
    $("#updated").textContent = new Date(st.time).toLocaleTimeString();
    $("#error").hidden = true;
    $("#login").hidden = true;
  } catch (e) {
    const el = $("#error");
    el.textContent = String(e.message || e);
    el.hidden = false;
  }
}

$("#login").addEventListener("submit", ev => {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("#token").value.trim());
  $("#token").value = "";
  poll();
});

poll();
setInterval(poll, POLL_MS);
