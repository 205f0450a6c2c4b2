// The flow view: opens /api/flows (server-sent events from flowctl, which
// follows the flow stream as the kubeconfig's user) for the scope and filters
// of the form, and draws the map and the table as flows arrive.
"use strict";

// The page's key is a cookie flowctl set (HttpOnly: not ours to read), which
// the browser sends with the stream's request.
const params = new URLSearchParams(location.search);
const form = document.getElementById("scope");
const statusEl = document.getElementById("status");
const errorEl = document.getElementById("error");
const tbody = document.querySelector("#flows tbody");
const countEl = document.getElementById("count");
const svg = document.getElementById("map");
const SVGNS = "http://www.w3.org/2000/svg";
const MAX_ROWS = 2000;

let source = null;
let vertices = new Map(); // id -> {v, x, y}
let edges = new Map();    // from|to|outcome -> {from, to, outcome, connections, bytes}
let rows = 0;

// The form starts from the page's address, so a link keeps its scope.
for (const [k, v] of params) {
  const el = form.elements.namedItem(k);
  if (!el) continue;
  if (el.type === "checkbox") el.checked = v === "true"; else el.value = v;
}

form.addEventListener("submit", (ev) => { ev.preventDefault(); start(); });
if (params.get("namespace") || params.get("clusterWide") === "true") start();

function start() {
  if (source) source.close();
  vertices = new Map(); edges = new Map(); rows = 0;
  tbody.textContent = ""; svg.textContent = ""; countEl.textContent = "0";
  errorEl.hidden = true; errorEl.textContent = "";
  const q = new URLSearchParams();
  for (const el of form.elements) {
    if (!el.name) continue;
    if (el.type === "checkbox") { if (el.checked) q.set(el.name, "true"); }
    else if (el.value) q.set(el.name, el.value);
  }
  history.replaceState(null, "", "?" + q.toString()); // the address bar keeps the scope
  statusEl.textContent = "connecting…";
  source = new EventSource("api/flows?" + q.toString());
  source.addEventListener("status", (e) => { statusEl.textContent = JSON.parse(e.data); });
  source.addEventListener("flows", (e) => {
    const flows = JSON.parse(e.data);
    statusEl.textContent = "live";
    for (const f of flows) { addRow(f); addEdge(f); }
    draw();
  });
  source.addEventListener("gap", (e) => {
    const g = JSON.parse(e.data);
    const tr = document.createElement("tr");
    tr.className = "gap";
    const td = document.createElement("td");
    td.colSpan = 8;
    td.textContent = g.reason === "server_restarted"
      ? "the flow stream restarted: flows may be missing here"
      : `up to ${g.lost} flows missing here (${g.reason.replace("_", " ")})`;
    tr.appendChild(td);
    tbody.prepend(tr);
  });
  source.addEventListener("failed", (e) => {
    errorEl.textContent = JSON.parse(e.data);
    errorEl.hidden = false;
    statusEl.textContent = "stopped";
    source.close();
  });
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) return;
    statusEl.textContent = "flowctl ui is not answering; retrying…";
  };
}

function addRow(f) {
  const tr = document.createElement("tr");
  tr.dataset.id = f.id;
  if (f.outcome) tr.className = f.outcome;
  for (const v of [new Date(f.end).toLocaleTimeString(), f.src, f.dst, f.proto, f.type, f.service, f.verdict, f.bytes]) {
    const td = document.createElement("td");
    td.textContent = String(v);
    tr.appendChild(td);
  }
  tbody.prepend(tr);
  rows++;
  countEl.textContent = String(rows);
  while (tbody.rows.length > MAX_ROWS) tbody.deleteRow(-1);
}

function addEdge(f) {
  for (const v of [f.from, f.to]) {
    if (!vertices.has(v.ID)) vertices.set(v.ID, { v });
  }
  const k = f.from.ID + "|" + f.to.ID + "|" + f.outcome;
  let e = edges.get(k);
  if (!e) { e = { from: f.from.ID, to: f.to.ID, outcome: f.outcome, connections: 0, bytes: 0 }; edges.set(k, e); }
  e.connections++;
  e.bytes += f.bytes;
}

// draw lays the vertices on a circle, grouped by Namespace, and the edges
// between them; refused and denied edges in their own colour.
function draw() {
  svg.textContent = "";
  const list = [...vertices.values()].sort((a, b) =>
    (a.v.Namespace || "~").localeCompare(b.v.Namespace || "~") || a.v.ID.localeCompare(b.v.ID));
  const cx = 400, cy = 300, r = Math.max(120, Math.min(250, 40 * list.length / Math.PI));
  list.forEach((p, i) => {
    const a = (2 * Math.PI * i) / Math.max(list.length, 1) - Math.PI / 2;
    p.x = cx + r * Math.cos(a); p.y = cy + r * Math.sin(a);
  });
  const defs = el("defs", {});
  for (const o of ["allowed", "refused", "denied"]) {
    const m = el("marker", { id: "arrow-" + o, viewBox: "0 0 10 10", refX: 22, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" });
    m.appendChild(el("path", { d: "M0,0 L10,5 L0,10 z", fill: o === "denied" ? "#d0021b" : o === "refused" ? "#e08a00" : "#6b8fb5" }));
    defs.appendChild(m);
  }
  svg.appendChild(defs);
  for (const e of edges.values()) {
    const a = vertices.get(e.from), b = vertices.get(e.to);
    const o = e.outcome || "allowed";
    const bend = e.outcome ? 30 : 0; // refused and denied edges beside the allowed one
    const mx = (a.x + b.x) / 2 + bend * Math.sign(b.y - a.y || 1), my = (a.y + b.y) / 2 - bend * Math.sign(b.x - a.x || 1);
    const d = a === b ? `M${a.x},${a.y} c40,-60 80,0 0,0` : `M${a.x},${a.y} Q${mx},${my} ${b.x},${b.y}`;
    const path = el("path", { d, class: "edge " + o, "data-from": e.from, "data-to": e.to, "data-outcome": o,
      "stroke-width": Math.min(6, 1 + Math.log10(1 + e.connections)), "marker-end": `url(#arrow-${o})` });
    const t = el("title", {});
    t.textContent = `${e.from} → ${e.to}: ${e.connections} flows, ${e.bytes} bytes${e.outcome ? ", " + e.outcome : ""}`;
    path.appendChild(t);
    svg.appendChild(path);
  }
  for (const p of list) {
    const g = el("g", { class: "vertex " + p.v.Kind, "data-id": p.v.ID, transform: `translate(${p.x},${p.y})` });
    if (p.v.Kind === "workload" || p.v.Kind === "node") g.appendChild(el("rect", { x: -14, y: -10, width: 28, height: 20, rx: 4 }));
    else g.appendChild(el("circle", { r: 11 }));
    const label = el("text", { x: 16, y: 4 });
    label.textContent = (p.v.Namespace ? p.v.Namespace + "/" : "") + p.v.Label;
    g.appendChild(label);
    svg.appendChild(g);
  }
}

function el(name, attrs) {
  const n = document.createElementNS(SVGNS, name);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
  return n;
}
