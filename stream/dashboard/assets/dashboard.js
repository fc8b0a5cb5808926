// flowtracer dashboard: polls api/state once a second and draws it. Plain JS, no libraries.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const POLL_MS = 1000;
const CHART_SPAN_MS = 5 * 60 * 1000;  // time series show the last 5 minutes
const PALETTE = ["#0969da", "#bc4c00", "#1a7f37", "#8250df", "#cf222e", "#0a7b83", "#9a6700", "#6e7781"];

let topo = null;
const linkEls = new Map();  // directed link id -> <line>

function el(tag, attrs, parent) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

function h(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// Utilization colour: pale grey when idle, then yellow, orange, red, dark red at line rate.
const UTIL_STOPS = [[0, [208, 215, 222]], [0.15, [242, 204, 96]], [0.45, [251, 143, 68]],
                    [0.75, [207, 34, 46]], [1, [130, 7, 30]]];

function utilColor(u) {
  const x = Math.max(0, Math.min(1, u));
  for (let i = 1; i < UTIL_STOPS.length; i++) {
    const [x1, c1] = UTIL_STOPS[i];
    if (x <= x1) {
      const [x0, c0] = UTIL_STOPS[i - 1];
      const f = (x - x0) / (x1 - x0);
      return `rgb(${c0.map((c, k) => Math.round(c + f * (c1[k] - c))).join(",")})`;
    }
  }
  return "rgb(130,7,30)";
}

function pct(u) { return u === null || u === undefined ? "–" : `${(100 * u).toFixed(1)}%`; }

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = [["TB", 1e12], ["GB", 1e9], ["MB", 1e6], ["kB", 1e3]];
  for (const [u, s] of units) if (n >= s) return `${(n / s).toFixed(1)} ${u}`;
  return `${n} B`;
}

// ECMP group ids list every neighbour ("leaf07:spine01|spine02|..."): shorten wide ones for display.
function shortGroup(id) {
  if (id.length <= 28) return id;
  const [sw, members] = id.split(":", 2);
  return `${sw} → ${(members || "").split("|").length}-way`;
}

// Let long link ids wrap after ">" and "|" rather than mid-name.
function breakable(id) { return id.replace(/([>|])/g, "$1\u200b"); }

function clock(ms) { return ms ? new Date(ms).toLocaleTimeString([], {hour12: false}) : "–"; }

// -- fabric drawing ------------------------------------------------------------------------------

function drawFabric(t) {
  const host = document.getElementById("fabric");
  host.textContent = "";
  const width = 1000;
  const rows = t.rows.map((names) => names.slice());
  const hosts = t.hosts.slice().sort((a, b) => (a.leaves[0] || "").localeCompare(b.leaves[0] || "")
                                               || a.name.localeCompare(b.name));
  const rowGap = 140;
  const drawHosts = hosts.length > 0 && hosts.length <= 256;
  const height = 40 + rowGap * (rows.length - 1) + (drawHosts ? rowGap * 0.8 : 0) + 50;
  const svg = el("svg", {viewBox: `0 0 ${width} ${height}`, "data-links": String(t.cables.length * 2)}, host);
  const pos = new Map();
  rows.forEach((names, r) => {
    const w = Math.max(4, Math.min(72, width / names.length - 4));  // wide fabrics: narrow boxes, no labels
    names.forEach((n, i) => pos.set(n, {x: (i + 0.5) * width / names.length, y: 30 + r * rowGap, kind: "switch",
                                        w, label: w >= 46}));
  });
  if (drawHosts) {
    const y = 30 + (rows.length - 1) * rowGap + rowGap * 0.8;
    hosts.forEach((hh, i) => pos.set(hh.name, {x: (i + 0.5) * width / hosts.length, y, kind: "host"}));
  }
  const links = el("g", {class: "links"}, svg);
  const nodes = el("g", {class: "nodes"}, svg);
  linkEls.clear();
  for (const c of t.cables) {
    const a = pos.get(c.lower), b = pos.get(c.upper);
    if (!a || !b) continue;
    const dx = b.x - a.x, dy = b.y - a.y, len = Math.hypot(dx, dy) || 1;
    const off = c.host ? 1.6 : 2.6;  // the two directions side by side
    const ox = -dy / len * off, oy = dx / len * off;
    for (const [id, s] of [[c.up, -1], [c.down, 1]]) {
      const line = el("line", {x1: a.x + s * ox, y1: a.y + s * oy, x2: b.x + s * ox, y2: b.y + s * oy,
                               class: "link", "data-link": id, stroke: "#d0d7de",
                               "stroke-width": c.host ? 2 : 3.5}, links);
      el("title", {}, line).textContent = id;
      linkEls.set(id, line);
    }
  }
  for (const [name, p] of pos) {
    if (p.kind === "switch") {
      const g = el("g", {class: "switch", "data-node": name}, nodes);
      el("rect", {x: p.x - p.w / 2, y: p.y - 12, width: p.w, height: 24, rx: Math.min(4, p.w / 3)}, g);
      if (p.label) el("text", {x: p.x, y: p.y + 4, "text-anchor": "middle"}, g).textContent = name;
      el("title", {}, g).textContent = name;
    } else {
      const g = el("g", {class: "host", "data-node": name}, nodes);
      el("circle", {cx: p.x, cy: p.y, r: hosts.length > 64 ? 3 : 7}, g);
      if (hosts.length <= 32) {
        el("text", {x: p.x, y: p.y + 22, "text-anchor": "middle"}, g).textContent = name;
      }
      el("title", {}, g).textContent = name;
    }
  }
}

function paintLinks(state) {
  const colliding = new Set(state.collisions.map((c) => c.link));
  for (const [id, line] of linkEls) {
    const l = state.links[id];
    const title = line.firstChild;
    line.classList.toggle("colliding", colliding.has(id));
    if (!l) {
      line.setAttribute("stroke", "#d0d7de");
      line.removeAttribute("stroke-dasharray");
      title.textContent = `${id}: no data yet`;
      continue;
    }
    if (l.u === null) {
      line.setAttribute("stroke", "#afb8c1");
      line.setAttribute("stroke-dasharray", "4 3");
      title.textContent = `${id}: no trusted counter delta; attributed ${bytes(l.ab)} (${l.fc} flows)`;
    } else {
      line.setAttribute("stroke", utilColor(l.u));
      line.removeAttribute("stroke-dasharray");
      title.textContent = `${id}: ${pct(l.u)} measured ${bytes(l.mb)}, attributed ${bytes(l.ab)} (${l.fc} flows)`;
    }
    line.setAttribute("data-util", l.u === null ? "" : String(l.u));
  }
}

// -- charts --------------------------------------------------------------------------------------

function chart(svg, seriesList, nowMs) {
  svg.textContent = "";
  const W = 600, H = 200, L = 34, R = 6, T = 8, B = 20;
  const x0 = nowMs - CHART_SPAN_MS;
  let tmin = Infinity;
  for (const s of seriesList) for (const [t] of s.points) tmin = Math.min(tmin, t);
  const start = Math.max(x0, isFinite(tmin) ? tmin : x0);
  const span = Math.max(10000, nowMs - start);
  const X = (t) => L + (W - L - R) * (t - start) / span;
  const Y = (v) => T + (H - T - B) * (1 - v);
  for (const v of [0, 0.25, 0.5, 0.75, 1]) {
    el("line", {x1: L, x2: W - R, y1: Y(v), y2: Y(v), class: "grid"}, svg);
    el("text", {x: L - 4, y: Y(v) + 4, "text-anchor": "end"}, svg).textContent = v.toFixed(2);
  }
  el("text", {x: L, y: H - 5}, svg).textContent = `−${Math.round(span / 1000)} s`;
  el("text", {x: W - R, y: H - 5, "text-anchor": "end"}, svg).textContent = "now";
  for (const s of seriesList) {
    const pts = s.points.filter(([t]) => t >= start).map(([t, v]) => `${X(t).toFixed(1)},${Y(v).toFixed(1)}`);
    if (pts.length === 0) continue;
    el("polyline", {points: pts.join(" "), fill: "none", stroke: s.color, "stroke-width": s.width || 2,
                    "stroke-dasharray": s.dash || "", "vector-effect": "non-scaling-stroke",
                    "data-series": s.name}, svg);
  }
}

function showFabricFim(state) {
  for (const basis of ["measured", "attributed"]) {
    const f = state.fabric[basis];
    const node = document.getElementById(`fim-fabric-${basis}`);
    node.textContent = f ? f.fim.toFixed(3) : "–";
    node.setAttribute("data-fim", f ? String(f.fim) : "");
    node.setAttribute("data-window-end-ms", f ? String(f.window_end_ms) : "");
    node.title = f ? `rolling window ending ${clock(f.window_end_ms)}; ${f.members} groups carried traffic; ` +
                     `${bytes(f.total_bytes)}` : "no sample yet";
  }
  const m = state.fabric.measured;
  document.getElementById("fim-window").textContent = m ? `window ending ${clock(m.window_end_ms)}` : "";
  const series = [];
  if (state.fabric.measured) {
    series.push({name: "measured", points: state.fabric.measured.series, color: "#0969da", width: 2.5});
  }
  if (state.fabric.attributed) {
    series.push({name: "attributed", points: state.fabric.attributed.series, color: "#bc4c00", dash: "6 4"});
  }
  chart(document.getElementById("fim-fabric-chart"), series, state.now_ms);
  const groups = Object.entries(state.groups);
  const gs = groups.filter(([, v]) => v.measured || v.attributed).map(([g, v], i) => ({
    name: g, points: (v.measured || v.attributed).series, color: PALETTE[i % PALETTE.length], width: 1.8,
    last: (v.measured || v.attributed).fim}));
  chart(document.getElementById("fim-groups-chart"), gs, state.now_ms);
  const legend = document.getElementById("group-legend");
  legend.textContent = "";
  for (const s of gs) {
    const item = h("span", {"data-group": s.name, title: s.name});
    const sw = h("span", {class: "line"});
    sw.style.borderTopColor = s.color;
    item.appendChild(sw);
    item.appendChild(document.createTextNode(` ${shortGroup(s.name)} ${s.last.toFixed(2)}`));
    legend.appendChild(item);
  }
  if (state.group_count > gs.length) legend.appendChild(h("span", {class: "note"}, `+${state.group_count - gs.length} more`));
}

// -- collisions and health -----------------------------------------------------------------------

function flowText(f) {
  const who = [f.job && `job ${f.job}`, f.collective, f.comm && `comm ${f.comm.slice(0, 8)}`].filter(Boolean).join(" / ");
  return `${f.src_host || f.src_ip} > ${f.dst_host || f.dst_ip}  sport ${f.udp_src_port}  ${who}  ${bytes(f.bytes)}`;
}

// Whether the collision congested its member (Collision.harmful, docs/stream.md "Collision harm"), with the evidence.
function harmCell(c) {
  if (!c.harm_basis) return h("td", {class: "harm"}, "unknown");
  if (!c.harmful) return h("td", {class: "harm"}, "no");
  const what = c.harm_basis === "switch"
    ? [c.link_ecn_marked_pkts && `ECN ${c.link_ecn_marked_pkts}`, c.link_dropped_pkts && `drops ${c.link_dropped_pkts}`,
       c.link_pfc_pauses && `paused ${c.link_pfc_pauses}`].filter(Boolean).join(", ")
    : "";
  const cnps = c.receiver_cnps ? `CNPs ${c.receiver_cnps}` : "";
  return h("td", {class: "harm hot"}, ["harmful", [what, cnps].filter(Boolean).join(", ")].filter(Boolean).join(": "));
}

// Empty a table's body; with no rows to show, fill it with one "none" row of `cols` columns. Returns the body,
// or null when there is nothing to show.
function tableBody(selector, rows, cols) {
  const body = document.querySelector(selector);
  body.textContent = "";
  if (rows.length > 0) return body;
  const tr = h("tr", {class: "empty"});
  tr.appendChild(h("td", {colspan: String(cols)}, "none"));
  body.appendChild(tr);
  return null;
}

function showCollisions(state) {
  const body = tableBody("#collisions tbody", state.collisions, 8);
  if (body === null) return;
  for (const c of state.collisions) {
    const tr = h("tr", {class: "collision", "data-group": c.group, "data-link": c.link,
                        "data-harm": c.harm_basis ? String(c.harmful) : "unknown"});
    tr.appendChild(h("td", {title: c.group}, breakable(shortGroup(c.group))));
    tr.appendChild(h("td", {}, breakable(c.link)));
    tr.appendChild(h("td", {class: "num hot"}, pct(c.link_utilization)));
    tr.appendChild(h("td", {}, breakable(c.idle_link)));
    tr.appendChild(h("td", {class: "num"}, pct(c.idle_utilization)));
    const flows = h("td", {class: "flows"});
    for (const f of c.flows.slice(0, 4)) flows.appendChild(h("div", {}, flowText(f)));
    if (c.flows.length > 4) flows.appendChild(h("div", {class: "note"}, `+${c.flows.length - 4} more flows`));
    tr.appendChild(flows);
    tr.appendChild(h("td", {class: "num"}, `${c.windows} hops since ${clock(c.first_seen_ms)}`));
    tr.appendChild(harmCell(c));
    body.appendChild(tr);
  }
}

function showCauses(state) {
  const causes = state.congestion_causes || [];
  const body = tableBody("#congestion-causes tbody", causes, 7);
  if (body === null) return;
  for (const c of causes) {
    const tr = h("tr", {class: `cause ${c.cause}`, "data-link": c.link});
    tr.appendChild(h("td", {}, breakable(c.link)));
    tr.appendChild(h("td", {class: c.cause === "unknown" ? "" : "hot"}, c.cause.replace("_", " ")));
    const origin = c.cause === "collision" ? `sibling ${c.sibling}` : c.origin;
    const spread = c.spread_links.length > 1 ? ` over ${c.spread_links.length} links` : "";
    tr.appendChild(h("td", {title: c.spread_links.join("\n")}, breakable(`${origin || "–"}${spread}`)));
    tr.appendChild(h("td", {class: "num"}, `${c.pfc_pauses_received}`));
    tr.appendChild(h("td", {class: "num"}, `${c.ecn_marked_pkts}`));
    tr.appendChild(h("td", {class: "num"}, `${c.dropped_pkts}`));
    tr.appendChild(h("td", {class: "flows"}, c.evidence));
    body.appendChild(tr);
  }
}

function showCollectives(state) {
  const colls = state.collectives || [];
  const body = tableBody("#collectives tbody", colls, 8);
  if (body === null) return;
  for (const c of colls) {
    const tr = h("tr", {class: "collective", "data-job": c.job, "data-op": c.operation,
                        "data-calls": `${c.calls}`, "data-bytes": `${c.call_bytes}`});
    tr.appendChild(h("td", {}, c.job || "–"));
    tr.appendChild(h("td", {}, c.comm));
    tr.appendChild(h("td", {}, c.operation));
    tr.appendChild(h("td", {class: "num"}, bytes(c.call_bytes)));
    tr.appendChild(h("td", {class: "num"}, `${c.nranks}`));
    tr.appendChild(h("td", {class: "num"}, `${c.calls}`));
    tr.appendChild(h("td", {class: "num", title: c.hosts.join(", ")}, `${c.hosts.length}`));
    const bw = c.bus_bw_bytes_per_s === null ? "–" : `${(c.bus_bw_bytes_per_s / 1e9).toFixed(2)} GB/s`;
    tr.appendChild(h("td", {class: "num"}, bw));
    body.appendChild(tr);
  }
}

function sprayedText(sp) {
  if (!sp || !sp.placed_bytes) return "–";
  const share = (100 * sp.bytes / sp.placed_bytes).toFixed(1);
  return sp.bytes ? `${share}% of bytes, ${sp.paths} paths` : "none";
}

function showHealth(state) {
  const hl = state.health;
  const dl = document.getElementById("health");
  dl.textContent = "";
  const rows = [
    ["lag", hl.lag_s === null ? "–" : `${hl.lag_s.toFixed(1)} s`, hl.lag_s !== null && hl.lag_s > 10],
    ["stage windows finalized", hl.windows],
    ["switches reporting", `${hl.switches_reporting} / ${hl.switches_total}`,
     hl.switches_reporting < hl.switches_total],
    ["hosts sending flows", `${hl.hosts_sending} / ${hl.hosts_total}`],
    ["counter batches", hl.records_counters ?? "–"],
    ["flow batches", hl.records_flows ?? "–"],
    ["dead letters", hl.dead_letters ?? "–", (hl.dead_letters || 0) > 0],
    ["late records", hl.late_records ?? "–", (hl.late_records || 0) > 0],
    ["held until durable", hl.pending_acks ?? "–"],
    ["unattributed flows", hl.unattributed_flows ?? "–", (hl.unattributed_flows || 0) > 0],
    // flows without one path: a switch sprays or routes them adaptively; placed by the counters' shares
    ["sprayed (no one path)", sprayedText(state.sprayed)],
  ];
  for (const [k, v, bad] of rows) {
    dl.appendChild(h("dt", {}, k));
    dl.appendChild(h("dd", {class: bad ? "bad" : "", "data-key": k}, String(v)));
  }
  if (hl.switches_silent && hl.switches_silent.length) {
    dl.appendChild(h("dt", {}, "silent switches"));
    dl.appendChild(h("dd", {class: "bad"}, hl.switches_silent.join(", ")));
  }
  const ck = hl.clocks;
  if (ck && ck.max_delay) {
    // delivery delay from a source to its collector or agent (a busy machine): latency, not a clock problem
    dl.appendChild(h("dt", {}, "slowest delivery"));
    dl.appendChild(h("dd", {"data-key": "slowest delivery"}, `${ck.max_delay.source} ${ck.max_delay.delay_s.toFixed(2)} s`));
  }
  if (ck && ck.max_transit) {
    dl.appendChild(h("dt", {}, "slowest transit"));
    dl.appendChild(h("dd", {"data-key": "slowest transit"}, `${ck.max_transit.source} ${ck.max_transit.transit_s.toFixed(2)} s`));
  }
  if (ck && ck.skewed_count > 0) {
    const signed = (s) => `${s >= 0 ? "+" : ""}${s.toFixed(1)} s`;
    dl.appendChild(h("dt", {}, "clocks off"));
    dl.appendChild(h("dd", {class: "bad", "data-key": "clocks off"},
      ck.skewed.map((r) => `${r.source} ${signed(r.offset_s)}`).join(", ") +
      (ck.skewed_count > ck.skewed.length ? ` +${ck.skewed_count - ck.skewed.length} more` : "")));
  }
  document.getElementById("worker").textContent = hl.worker ? `worker ${hl.worker}` : "";
  const st = document.getElementById("status");
  if (hl.lag_s === null) {
    st.className = "status waiting";
    st.textContent = "waiting for the first window";
  } else {
    st.className = hl.lag_s > 10 ? "status lagging" : "status ok";
    st.textContent = `live · lag ${hl.lag_s.toFixed(1)} s · ${clock(state.now_ms)}`;
  }
}

// -- incidents -----------------------------------------------------------------------------------

function showIncidents(state) {
  const body = document.querySelector("#incidents tbody");
  body.textContent = "";
  const inc = state.incidents;
  const list = inc ? inc.list : [];
  if (list.length === 0) {
    const tr = h("tr", {class: "empty"});
    tr.appendChild(h("td", {colspan: "6"}, inc === null ? "not read (no Kafka)" : (inc.error || "none")));
    body.appendChild(tr);
    return;
  }
  for (const i of list) {
    const tr = h("tr", {class: `incident ${i.state}`, "data-kind": i.kind, "data-id": i.id});
    tr.appendChild(h("td", {class: i.state === "open" ? "hot" : ""}, i.kind.replaceAll("_", " ")));
    tr.appendChild(h("td", {}, i.state === "open" ? "open" : `closed ${clock(i.end_ms)}`));
    const sus = h("td", {class: "flows"});
    for (const s of i.suspects) sus.appendChild(h("div", {}, breakable(`${s.component} (${s.score.toFixed(2)})`)));
    tr.appendChild(sus);
    tr.appendChild(h("td", {class: "flows"}, i.suspects.length ? i.suspects[0].evidence.join("; ") : ""));
    tr.appendChild(h("td", {class: "num"}, `${clock(i.start_ms)} (reported ${clock(i.detected_ms)})`));
    const hosts = i.hosts.slice(0, 6).join(", ") + (i.hosts.length > 6 ? ` +${i.hosts.length - 6}` : "");
    const jobs = (i.jobs || []).slice(0, 3).join(", ") + ((i.jobs || []).length > 3 ? ` +${i.jobs.length - 3}` : "");
    tr.appendChild(h("td", {}, `${jobs ? `jobs ${jobs}; ` : ""}${i.flow_count} flows; ${hosts || "–"}`));
    body.appendChild(tr);
  }
  if (inc.dropped) {  // the topic named more incidents than the board keeps (stream/diagnosis/snapshots.py)
    const tr = h("tr", {class: "empty"});
    tr.appendChild(h("td", {colspan: "6"}, `${inc.dropped} more incident ids let go (closed and oldest first)`));
    body.appendChild(tr);
  }
}

// -- flows and their paths ---------------------------------------------------------------------

const chosen = {job: "", flow: ""};  // what the person chose: a job, and within it maybe one flow

function showJobs(state) {
  const select = document.getElementById("flow-job");
  const jobs = state.jobs || [];
  const want = jobs.map((j) => j.job);
  const have = Array.from(select.options).slice(1).map((o) => o.value);
  if (want.join("\n") !== have.join("\n")) {  // rebuilt only when the jobs change: keeps the choice open
    while (select.options.length > 1) select.remove(1);
    for (const j of jobs) {
      const o = h("option", {value: j.job}, `${j.job || "(no job)"} (${j.flows} flows)`);
      select.appendChild(o);
    }
    select.value = want.includes(chosen.job) ? chosen.job : "";
  }
}

// The chosen paths drawn thick with their utilization colour, every other link faded.
function highlight(links) {
  const on = new Set(links);
  for (const [id, line] of linkEls) line.classList.toggle("path", on.has(id));
  const svg = document.querySelector("#fabric svg");
  if (svg) svg.classList.toggle("choosing", on.size > 0);
}

async function showFlows() {
  if (!chosen.job) {
    tableBody("#flows tbody", [], 4);
    document.getElementById("flow-count").textContent = "";
    highlight([]);
    return;
  }
  const data = await getJson(`api/flows?job=${encodeURIComponent(chosen.job)}`);
  if (chosen.flow && !data.flows.some((f) => f.flow_id === chosen.flow)) chosen.flow = "";
  const one = data.flows.find((f) => f.flow_id === chosen.flow);
  highlight(one ? one.links : data.links);
  document.getElementById("flow-count").textContent =
    `${data.count} flows` + (data.count > data.flows.length ? `, the first ${data.flows.length} listed` : "");
  const body = tableBody("#flows tbody", data.flows, 4);
  if (body === null) return;
  for (const f of data.flows) {
    const tr = h("tr", {class: "flow" + (f.flow_id === chosen.flow ? " chosen" : ""), "data-flow": f.flow_id,
                        "data-links": f.links.join(" ")});
    tr.appendChild(h("td", {class: "flows"}, `${f.src} > ${f.dst} sport ${f.udp_src_port}`));
    tr.appendChild(h("td", {}, [f.comm, f.collective].filter(Boolean).join(" / ") || "–"));
    tr.appendChild(h("td", {}, `${f.method} (${f.confidence.toFixed(2)})`));
    tr.appendChild(h("td", {class: "flows"}, f.hops.map((x) => `${x.switch} ${x.in_port}>${x.out_port}`).join(" → ")));
    tr.addEventListener("click", () => {
      chosen.flow = chosen.flow === f.flow_id ? "" : f.flow_id;
      showFlows().catch(() => {});
    });
    body.appendChild(tr);
  }
}

document.getElementById("flow-job").addEventListener("change", (ev) => {
  chosen.job = ev.target.value;
  chosen.flow = "";
  showFlows().catch(() => {});
});

// -- loop ----------------------------------------------------------------------------------------

async function getJson(path) {
  const r = await fetch(path, {cache: "no-store"});
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
  return r.json();
}

async function tick() {
  try {
    if (topo === null) {
      topo = await getJson("api/topology");
      document.getElementById("topo-name").textContent = topo.name;
      document.getElementById("rolling").textContent = String(topo.rolling_window_s);
      drawFabric(topo);
    }
    const state = await getJson("api/state");
    paintLinks(state);
    document.getElementById("fabric-window").textContent =
      state.newest_window_end_ms ? `ending ${clock(state.newest_window_end_ms)}` : "";
    showFabricFim(state);
    showCollisions(state);
    showCauses(state);
    showCollectives(state);
    showJobs(state);
    await showFlows();
    showIncidents(state);
    showHealth(state);
    document.body.setAttribute("data-updated-ms", String(state.now_ms));
  } catch (err) {
    const st = document.getElementById("status");
    st.className = "status error";
    st.textContent = `cannot reach the processor: ${err.message}`;
  } finally {
    setTimeout(tick, POLL_MS);
  }
}

tick();
