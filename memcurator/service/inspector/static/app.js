/* memcurator inspector: vanilla JS over the service's REST API (no build step, no outside host).
   Every text from the server is put into the page as text (textContent), never as markup. */
"use strict";

const KEY = "memcurator.key";
const state = { who: null, glossary: null };

function el(tag, attrs, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") n.className = v;
    else if (k === "style") n.style.cssText = v;
    else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
    else n.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of kids.flat()) {
    if (c === null || c === undefined || c === false) continue;
    n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return n;
}
const $ = (sel) => document.querySelector(sel);
const fmt = (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US"));
const num = (x, d = 3) => (x === null || x === undefined ? "—" : Number(x).toFixed(d));
const when = (s) => new Date(s * 1000).toISOString().replace("T", " ").slice(0, 19);
const badge = (t) => el("span", { class: "badge b-" + t }, t);
const entryLink = (id) => el("a", { href: "#/entry/" + encodeURIComponent(id), class: "mono" }, id);

function key() { return sessionStorage.getItem(KEY); }

async function api(path, opts = {}) {
  const headers = { Authorization: "Bearer " + key() };
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  $("#status").textContent = "loading…";
  const r = await fetch(path, {
    method: opts.method || "GET", headers, credentials: "omit",
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  $("#status").textContent = "";
  let data = null;
  try { data = await r.json(); } catch (e) { data = null; }
  if (!r.ok) {
    const err = new Error((data && (data.detail || data.title)) || ("HTTP " + r.status));
    err.status = r.status;
    throw err;
  }
  return data;
}

function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== null && v !== undefined) u.set(k, v);
  const s = u.toString();
  return s ? "?" + s : "";
}

function show(...nodes) { $("#main").replaceChildren(...nodes.filter((n) => n !== null && n !== undefined && n !== false)); }
function errorBox(e) { return el("p", { class: "err", role: "alert" }, e.status ? `${e.status}: ${e.message}` : String(e.message || e)); }
function can(scope) { return !!(state.who && state.who.scopes.includes(scope)); }

/* ------------------------------------------------------------------ the key */
async function signIn(token) {
  sessionStorage.setItem(KEY, token);
  try {
    state.who = await api("/ui/api/whoami");
  } catch (e) {
    sessionStorage.removeItem(KEY);
    state.who = null;
    renderHeader();
    show(errorBox(e));
    return;
  }
  renderHeader();
  route();
}

function renderHeader() {
  const on = !!state.who;
  $("#keyform").hidden = on;
  $("#who").hidden = !on;
  $("#nav").hidden = !on;
  if (on) {
    const w = state.who;
    $("#whotext").textContent = `${w.name} @ ${w.namespace} (${w.scopes.join(", ")})`;
  }
}

/* ------------------------------------------------------------------ overview */
async function viewOverview() {
  const o = await api("/ui/api/overview");
  const pct = o.max_bytes ? Math.min(100, (100 * o.used_bytes) / o.max_bytes) : 0;
  const budget = el("div", { class: "card", id: "budget" },
    el("div", { class: "l" }, "bytes used / budget"),
    el("div", { class: "n" }, `${fmt(o.used_bytes)} / ${o.max_bytes ? fmt(o.max_bytes) : "no budget"}`),
    o.max_bytes ? el("div", { class: "bar" }, el("div", { style: `width:${pct.toFixed(1)}%` })) : null);
  const card = (label, value, id) => el("div", { class: "card", id }, el("div", { class: "l" }, label), el("div", { class: "n" }, value));
  const states = el("div", { class: "cards", id: "states" },
    ...Object.entries(o.states).map(([s, n]) =>
      el("a", { class: "card", href: "#/entries?state=" + s, style: "text-decoration:none;color:inherit" },
        el("div", { class: "l" }, badge(s)), el("div", { class: "n" }, fmt(n)))));
  const table = (title, counts) => el("div", {},
    el("h3", {}, title),
    el("div", { class: "tablewrap" }, el("table", {}, el("tbody", {},
      ...Object.entries(counts).map(([k, n]) => el("tr", {}, el("td", {}, k), el("td", { class: "num" }, fmt(n))))))));
  const plot = el("div", { class: "plot", id: "plot" }, el("p", { class: "note" }, "loading the bytes-over-time plot…"));
  show(
    el("h2", {}, "Namespace ", el("span", { class: "mono" }, o.name)),
    el("div", { class: "cards" }, budget,
      card("policy", o.policy, "policy"), card("resident entries", fmt(o.entries), "nentries"),
      card("decisions logged", fmt(o.decisions)), card("step", fmt(o.step))),
    el("h3", {}, "Entries by state"), states,
    el("h3", {}, "Bytes used over the decision log"), plot,
    el("div", { class: "two" }, table("By kind", o.kinds), table("By origin", o.origins)));
  api("/ui/api/usage").then((u) => drawUsage(plot, u)).catch((e) => plot.replaceChildren(errorBox(e)));
}

function drawUsage(box, u) {
  const pts = u.points.map((p) => [p.seq, p.used_bytes]);
  pts.push([u.now.seq, u.now.used_bytes]);
  const NS = "http://www.w3.org/2000/svg";
  const W = 800, H = 200, P = 34;
  const x0 = pts[0][0], x1 = Math.max(pts[pts.length - 1][0], x0 + 1);
  const ymax = Math.max(1, u.max_bytes || 0, ...pts.map((p) => p[1])) * 1.05;
  const X = (x) => P + ((x - x0) / (x1 - x0)) * (W - P - 6);
  const Y = (y) => H - 18 - (y / ymax) * (H - 28);
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "bytes used over the decision log");
  const add = (tag, attrs, text) => {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    svg.append(n); return n;
  };
  add("line", { x1: P, y1: H - 18, x2: W - 6, y2: H - 18, stroke: "#999" });
  if (u.max_bytes) {
    add("line", { x1: P, x2: W - 6, y1: Y(u.max_bytes), y2: Y(u.max_bytes), stroke: "#a8322d", "stroke-dasharray": "4 3" });
    add("text", { x: W - 8, y: Y(u.max_bytes) - 3, "text-anchor": "end", "font-size": 10, fill: "#a8322d" }, "budget " + fmt(u.max_bytes));
  }
  let d = "";
  pts.forEach(([x, y], i) => { d += (i ? "L" : "M") + X(x).toFixed(1) + " " + Y(y).toFixed(1); if (i < pts.length - 1) d += "H" + X(pts[i + 1][0]).toFixed(1); });
  add("path", { d, fill: "none", stroke: "#24506e", "stroke-width": 1.6 });
  add("text", { x: 2, y: 12, "font-size": 10, fill: "#5a6677" }, fmt(Math.round(ymax)) + " B");
  add("text", { x: P, y: H - 4, "font-size": 10, fill: "#5a6677" }, "seq " + x0);
  add("text", { x: W - 6, y: H - 4, "font-size": 10, fill: "#5a6677", "text-anchor": "end" }, "seq " + x1);
  performance.mark("ready:plot");
  box.replaceChildren(svg, el("p", { class: "note" }, "Replayed from the decision log (admit, distill, replace and update set an entry's bytes; evict and forget free them); the last point is the store's count now."));
}

/* ------------------------------------------------------------------ entries */
function params() {
  const h = location.hash, i = h.indexOf("?");
  return new URLSearchParams(i < 0 ? "" : h.slice(i + 1));
}

async function viewEntries() {
  const p = params();
  const f = {
    q: p.get("q") || "", state: p.get("state") || "", kind: p.get("kind") || "",
    origin: p.get("origin") || "", meta_key: p.get("meta_key") || "", meta_value: p.get("meta_value") || "",
    order: p.get("order") || "newest", offset: Number(p.get("offset") || 0), limit: 50,
  };
  const sel = (name, opts) => el("select", { name, id: "f-" + name },
    ...opts.map((o) => el("option", { value: o, selected: f[name] === o }, o || "any")));
  const form = el("form", { class: "filters", id: "entryfilters", onsubmit: (ev) => {
    ev.preventDefault();
    const d = new FormData(form); const o = {};
    for (const [k, v] of d.entries()) if (v) o[k] = v;
    location.hash = "#/entries" + qs(o);
  } },
    el("label", {}, "search text or id", el("input", { name: "q", id: "f-q", value: f.q, type: "search" })),
    el("label", {}, "state", sel("state", ["", "injectable", "probation", "distilled"])),
    el("label", {}, "kind", sel("kind", ["", "raw", "insight", "skill"])),
    el("label", {}, "origin", sel("origin", ["", "self", "peer", "external"])),
    el("label", {}, "meta key", el("input", { name: "meta_key", value: f.meta_key, size: 10 })),
    el("label", {}, "meta value", el("input", { name: "meta_value", value: f.meta_value, size: 10 })),
    el("label", {}, "order", sel("order", ["newest", "oldest"])),
    el("button", { type: "submit", class: "primary" }, "Search"));
  show(el("h2", {}, "Entries"), form, el("p", { class: "note" }, "loading…"));
  const page = await api("/ui/api/entries" + qs(f));
  const rows = page.rows.map((r) => el("tr", { class: "click", "data-id": r.id, onclick: () => { location.hash = "#/entry/" + encodeURIComponent(r.id); } },
    el("td", {}, entryLink(r.id)),
    el("td", { class: "preview" }, r.preview),
    el("td", {}, badge(r.state)),
    el("td", { class: "wide" }, r.kind),
    el("td", {}, r.origin, r.origin_detail ? el("span", { class: "muted" }, " " + r.origin_detail) : null),
    el("td", { class: "num wide" }, fmt(r.bytes)),
    el("td", { class: "num wide" }, fmt(r.created_step))));
  const go = (off) => { const o = Object.fromEntries(params()); o.offset = off; location.hash = "#/entries" + qs(o); };
  const pager = el("div", { class: "pager" },
    el("span", { id: "entrycount" }, page.total ? `${fmt(page.offset + 1)}–${fmt(page.offset + page.rows.length)} of ${fmt(page.total)}` : "no entry matches"),
    page.offset > 0 ? el("button", { onclick: () => go(Math.max(0, page.offset - f.limit)) }, "‹ previous") : null,
    page.next_offset !== null ? el("button", { id: "nextpage", onclick: () => go(page.next_offset) }, "next ›") : null);
  show(el("h2", {}, "Entries"), form, pager,
    el("div", { class: "tablewrap" }, el("table", { id: "entries", class: "rows" },
      el("thead", {}, el("tr", {}, el("th", {}, "id"), el("th", {}, "text"), el("th", {}, "state"),
        el("th", { class: "wide" }, "kind"), el("th", {}, "origin"), el("th", { class: "num wide" }, "bytes"), el("th", { class: "num wide" }, "step"))),
      el("tbody", {}, ...rows))));
}

/* ------------------------------------------------------------------ decisions */
function termLinks(row) {
  const found = new Set();
  if (row.term) found.add(row.term);
  for (const t of state.glossary || []) {
    const names = [t.name, ...t.aliases];
    for (const n of names) {
      if (n.length < 3 && n !== "ρ" && n !== "θ") continue;
      if (row.reason.toLowerCase().includes(n.toLowerCase())) { found.add(t.name); break; }
    }
  }
  return [...found].map((t) => el("a", { class: "term", href: "#/glossary/" + encodeURIComponent(t), title: "memcurator explain " + t }, "explain: " + t));
}

function timelineItem(r) {
  return el("li", { class: "a-" + r.action, "data-seq": r.seq, "data-action": r.action },
    el("div", { class: "head" }, badge(r.action), el("span", { class: "mono" }, "#" + r.seq),
      el("span", { class: "muted" }, "step " + r.step), el("span", { class: "muted wide" }, when(r.at)),
      r.entry_id ? entryLink(r.entry_id) : null,
      el("span", { class: "muted" }, fmt(r.bytes) + " B"),
      r.score !== null ? el("span", { class: "muted" }, "score " + num(r.score)) : null),
    el("div", { class: "words" }, r.words),
    el("div", { class: "reason" }, "reason: ", el("q", {}, r.reason)),
    el("div", { class: "head" }, ...termLinks(r)));
}

async function ensureGlossary() {
  if (!state.glossary) state.glossary = await api("/ui/api/glossary");
}

async function viewDecisions() {
  await ensureGlossary();
  const p = params();
  const f = { action: p.get("action") || "", reason: p.get("reason") || "", origin: p.get("origin") || "",
    peer: p.get("peer") || "", entry_id: p.get("entry_id") || "", before: p.get("before") || "" };
  const actions = ["", "admit", "reject", "evict", "distill", "forget", "update", "replace", "reinforce",
    "downgrade", "corroborate", "trial", "receive", "share", "quarantine", "release", "notice", "compact"];
  const form = el("form", { class: "filters", id: "decfilters", onsubmit: (ev) => {
    ev.preventDefault(); const o = {};
    for (const [k, v] of new FormData(form).entries()) if (v) o[k] = v;
    location.hash = "#/decisions" + qs(o);
  } },
    el("label", {}, "action", el("select", { name: "action", id: "d-action" }, ...actions.map((a) => el("option", { value: a, selected: f.action === a }, a || "any")))),
    el("label", {}, "reason contains", el("input", { name: "reason", id: "d-reason", value: f.reason, type: "search" })),
    el("label", {}, "origin", el("select", { name: "origin" }, ...["", "self", "peer", "external"].map((a) => el("option", { value: a, selected: f.origin === a }, a || "any")))),
    el("label", {}, "peer", el("input", { name: "peer", id: "d-peer", value: f.peer, size: 10 })),
    el("label", {}, "entry id", el("input", { name: "entry_id", value: f.entry_id, size: 12 })),
    el("button", { type: "submit", class: "primary" }, "Filter"));
  show(el("h2", {}, "Decision log"), form, el("p", { class: "note" }, "loading…"));
  const page = await api("/ui/api/decisions" + qs(f));
  const counts = Object.entries(page.actions || {}).map(([a, n]) => el("span", {}, badge(a), " ", fmt(n), " "));
  const older = page.next_before !== null
    ? el("button", { onclick: () => { const o = Object.fromEntries(params()); o.before = page.next_before; location.hash = "#/decisions" + qs(o); } }, "older ›") : null;
  show(el("h2", {}, "Decision log"), form,
    counts.length ? el("p", { class: "note" }, ...counts) : null,
    page.decisions.length ? el("ol", { class: "timeline", id: "timeline" }, ...page.decisions.map(timelineItem))
      : el("p", { class: "note", id: "timeline" }, "no decision matches"),
    el("div", { class: "pager" }, older));
}

/* ------------------------------------------------------------------ one entry */
function kv(obj, id) {
  return el("dl", { class: "kv", id }, ...Object.entries(obj).flatMap(([k, v]) => [
    el("dt", {}, k), el("dd", {}, v === null || v === undefined || v === "" ? "—" : (typeof v === "object" && !(v instanceof Node) ? JSON.stringify(v) : v))]));
}

async function viewEntry(id) {
  await ensureGlossary();
  const d = await api("/ui/api/entries/" + encodeURIComponent(id));
  const parts = [el("h2", {}, "Entry ", el("span", { class: "mono" }, d.id), " ",
    d.resident ? badge(d.entry.state) : badge("gone"))];
  if (d.resident) {
    const e = d.entry, t = d.trust;
    const valueBox = el("div", { id: "valuebox" }, el("p", { class: "note" }, "computing the value terms…"));
    parts.push(el("pre", { class: "text", id: "entrytext" }, e.text));
    parts.push(el("div", { class: "two" },
      el("div", {}, el("h3", {}, "Provenance"), kv({
        origin: e.origin, "origin detail (the writing key)": e.origin_detail, kind: e.kind, user: e.user,
        "bytes (stored)": fmt(e.bytes), "raw bytes": fmt(e.raw_bytes), "created at step": e.created_step,
        "last used at step": e.last_used_step, "uses / successes / failures": `${e.uses} / ${e.successes} / ${e.failures}`,
        reinforcement: e.reinforcement, "derived from": t.derived_from, "claimed origin": t.claimed_origin,
        "signature": t.signed ? "signed by the service (origin proven)" : "unsigned (external)",
        meta: e.meta }, "provenance")),
      el("div", {}, el("h3", {}, "Trust"), kv({
        state: badge(t.state), "on probation for": t.probation, "held for what it says": t.held_for,
        taint: t.taint, "corroborated by": t.corroborated.join("; "), "vouched by": t.vouched_by.join(", "),
        "still lacks": t.lacks.join("; ") }, "trust"),
      el("h3", {}, "Value terms"), valueBox)));
    api("/ui/api/entries/" + encodeURIComponent(id) + "/value").then((v) => valueBox.replaceChildren(
      el("p", { class: "note" }, "policy ", v.policy),
      Object.keys(v.terms).length
        ? kv(Object.fromEntries(Object.entries(v.terms).map(([k, x]) => [k, num(x, 4)])), "value")
        : el("p", { class: "note", id: "value" }, v.note || "no value terms under this policy"),
      Object.keys(v.terms).length ? el("p", { class: "note" }, el("a", { href: "#/glossary/ρ" }, "explain: ρ"),
        " — rho: net value per byte; V value, H helpfulness, p propensity, q helpfulness estimate, a abstraction gain, b bytes.",
        v.note ? " " + v.note : "") : null)).catch((e) => valueBox.replaceChildren(errorBox(e)));
  } else {
    parts.push(el("p", { class: "note", id: "gone" }, "Not resident any more: what happened to it is in its decisions below."));
  }
  parts.push(feedbackBox(d.feedback));
  parts.push(el("h3", {}, "Decisions that touched it"),
    el("ol", { class: "timeline", id: "entrydecisions" }, ...d.decisions.map(timelineItem)));
  show(...parts);
}

function feedbackBox(f) {
  const c = f.counts;
  return el("section", { id: "feedback" }, el("h3", {}, "Feedback"),
    c ? kv({ uses: c.uses, "successes (reward ≥ 0.5)": c.successes, failures: c.failures,
      "last used at step": c.last_used_step,
      "the policy's per-entry statistics": Object.keys(f.stats).length ? f.stats : null }, "feedbackcounts")
      : el("p", { class: "note" }, "Not resident any more: its counts went with it."),
    f.logged.length ? el("ol", { class: "timeline", id: "feedbackrows" }, ...f.logged.map((r) => el("li", {},
      el("span", { class: "muted" }, `step ${r.step} · ${r.action} · reward ${num(r.reward, 2)} `), r.reason)))
      : el("p", { class: "note", id: "feedbackrows" }, "No outcome wrote a row about it."),
    el("p", { class: "note" }, f.note));
}

/* ------------------------------------------------------------------ recall playground */
async function viewRecall() {
  const form = el("form", { class: "filters", id: "recallform", onsubmit: async (ev) => {
    ev.preventDefault();
    const fd = new FormData(form);
    const where = [];
    if (fd.get("kind")) where.push({ field: "kind", op: "eq", value: fd.get("kind") });
    if (fd.get("origin")) where.push({ field: "origin", op: "eq", value: fd.get("origin") });
    if (fd.get("meta_key")) where.push({ field: "meta." + fd.get("meta_key"), op: fd.get("meta_value") ? "eq" : "exists", value: fd.get("meta_value") || true });
    const body = { query: fd.get("query"), k: Number(fd.get("k") || 5), where };
    if (fd.get("user")) body.user = fd.get("user");
    out.replaceChildren(el("p", { class: "note" }, "recalling…"));
    try { out.replaceChildren(recallResult(await api("/ui/api/recall", { method: "POST", body }))); }
    catch (e) { out.replaceChildren(errorBox(e)); }
  } },
    el("label", { style: "flex:1 1 16rem" }, "query", el("input", { name: "query", id: "r-query", required: true })),
    el("label", {}, "k", el("input", { name: "k", id: "r-k", type: "number", min: 1, max: 100, value: 5, style: "width:5rem" })),
    el("label", {}, "kind", el("select", { name: "kind" }, ...["", "raw", "insight", "skill"].map((a) => el("option", { value: a }, a || "any")))),
    el("label", {}, "origin", el("select", { name: "origin" }, ...["", "self", "peer", "external"].map((a) => el("option", { value: a }, a || "any")))),
    el("label", {}, "meta key", el("input", { name: "meta_key", size: 8 })),
    el("label", {}, "meta value", el("input", { name: "meta_value", size: 8 })),
    el("label", {}, "user", el("input", { name: "user", size: 8 })),
    el("button", { type: "submit", class: "primary", id: "r-go" }, "Recall"));
  const out = el("div", { id: "recallout" });
  show(el("h2", {}, "Recall playground"),
    el("p", { class: "note" }, "Runs the namespace's recall without observing the query or logging anything, and shows each candidate's scores."),
    form, out);
}

function recallResult(r) {
  const removed = Object.entries(r.removed).filter(([, n]) => n !== null)
    .map(([w, n]) => el("li", {}, `${w}: ${fmt(n)}`));
  return el("div", {},
    el("p", {}, `${fmt(r.resident)} resident entries; left out before ranking:`),
    el("ul", { id: "removed" }, ...removed),
    r.candidates.length ? el("div", { class: "tablewrap" }, el("table", { id: "candidates", class: "rows" },
      el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, "id"), el("th", {}, "text"),
        el("th", { class: "num" }, "ranked score"), el("th", { class: "num" }, "dense"), el("th", { class: "num" }, "lexical"))),
      el("tbody", {}, ...r.candidates.map((c) => el("tr", {},
        el("td", {}, c.rank), el("td", {}, entryLink(c.id)), el("td", { class: "preview" }, c.preview),
        el("td", { class: "num" }, num(c.score)), el("td", { class: "num" }, num(c.dense)), el("td", { class: "num" }, num(c.lexical)))))))
      : el("p", { class: "note", id: "candidates" }, "nothing recalled"),
    el("p", { class: "note" }, "ranked score: the policy's score plus the lexical blend (what recall sorts by); dense: cosine of query and entry; lexical: BM25 over the best BM25 of the query."),
    injectBox(r.inject));
}

function injectBox(i) {
  return el("section", { id: "inject" },
    el("h3", {}, "What the model would be given"),
    el("p", { class: "note", id: "inject-note" }, i.note, i.curator ? ` — operator ${i.operator}` : ""),
    i.payload ? el("pre", { class: "text", id: "inject-payload" }, i.payload)
      : el("p", { class: "note", id: "inject-payload" }, "nothing: an empty payload"),
    el("p", { class: "muted" }, "drawn from ", ...i.source_ids.flatMap((s, n) => n ? [", ", entryLink(s)] : [entryLink(s)]),
      i.source_ids.length ? "" : "no entry", `; raw text read: ${fmt(i.raw_chars)} characters`),
    i.notes.length ? el("ul", { class: "note" }, ...i.notes.map((n) => el("li", {}, n))) : null);
}

/* ------------------------------------------------------------------ trust */
async function viewTrust() {
  const p = params();
  const off = Number(p.get("offset") || 0);
  const q = await api("/ui/api/probation" + qs({ offset: off, limit: 50 }));
  const admin = can("admin");
  const rows = q.rows.map((r) => {
    const reason = el("input", { placeholder: "reason (logged)", value: "checked by a person", "aria-label": "reason" });
    const act = async (what) => {
      try {
        await api(`/ui/api/probation/${encodeURIComponent(r.id)}/${what}` + qs({ reason: reason.value }), { method: "POST" });
        route();
      } catch (e) { tr.after(el("tr", {}, el("td", { colspan: 4 }, errorBox(e)))); }
    };
    const tr = el("tr", { "data-id": r.id },
      el("td", {}, entryLink(r.id), el("div", { class: "muted" }, r.origin, " ", r.origin_detail)),
      el("td", { class: "preview" }, r.preview),
      el("td", {}, el("div", {}, "held: ", r.trust.probation || "—"),
        r.trust.vouched_by.length ? el("div", {}, "vouched by: ", r.trust.vouched_by.join(", ")) : null,
        el("div", { class: "muted" }, `uses ${r.uses}, successes ${r.successes}, failures ${r.failures}`),
        el("div", {}, "lacks: ", r.trust.lacks.join("; "))),
      admin ? el("td", {}, el("div", { class: "actions" }, reason,
        el("button", { class: "primary release", onclick: () => act("release") }, "Release"),
        el("button", { class: "danger forget", onclick: () => act("forget") }, "Forget"))) : null);
    return tr;
  });
  show(el("h2", {}, "Trust: the probation queue"),
    el("p", { class: "note" }, "Entries from unproven sources are kept and counted but never injected until a verified outcome or agreement corroborates them. ",
      admin ? "Your key has the admin scope: a release or forget is logged with its name." : el("span", { id: "readonly" }, "Your key has no admin scope: this queue is read-only here (and the API refuses the actions).")),
    el("p", { id: "probcount" }, `${fmt(q.total)} on probation`),
    el("div", { class: "tablewrap" }, el("table", { id: "probation", class: "rows" },
      el("thead", {}, el("tr", {}, el("th", {}, "entry"), el("th", {}, "text"), el("th", {}, "evidence"), admin ? el("th", {}, "action") : null)),
      el("tbody", {}, ...rows))),
    el("div", { class: "pager" },
      off > 0 ? el("button", { onclick: () => { location.hash = "#/trust" + qs({ offset: Math.max(0, off - 50) }); } }, "‹ previous") : null,
      q.next_offset !== null ? el("button", { onclick: () => { location.hash = "#/trust" + qs({ offset: q.next_offset }); } }, "next ›") : null));
}

/* ------------------------------------------------------------------ peers, glossary */
async function viewPeers() {
  if (!can("peer") && !can("admin")) {
    show(el("h2", {}, "Peers"), el("p", { class: "note" }, "The hub's traffic needs a key with the peer or admin scope."));
    return;
  }
  const p = await api("/ui/api/peers");
  const cols = ["messages", "entries", "wire_bytes", "notices", "resident", "probation", "refused"];
  const heads = ["peer", "messages", "entries pushed", "bytes on the wire", "notices", "resident here", "on probation", "refused",
    "reputation (weight)", "mean", "outcomes", "quarantined"];
  const rep = (r) => r.reputation
    ? [el("td", { class: "num" }, num(r.reputation.weight)), el("td", { class: "num" }, num(r.reputation.mean)),
      el("td", { class: "num" }, fmt(r.reputation.outcomes)), el("td", {}, r.reputation.quarantined || "no")]
    : [el("td", { colspan: 4, class: "muted" }, "not kept")];
  const body = p.peers.map((r) => el("tr", {}, el("td", {}, r.peer),
    ...cols.map((k) => el("td", { class: "num" }, fmt(r[k]))), ...rep(r)));
  const table = el("div", { class: "tablewrap" }, el("table", { id: "peers" },
    el("thead", {}, el("tr", {}, ...heads.map((h) => el("th", {}, h)))),
    el("tbody", {}, ...body)));
  show(el("h2", {}, "Peers: hub traffic"),
    p.peers.length ? table : el("p", { class: "note" }, "No peer has pushed through this server's hub, and no resident entry came from a peer."),
    el("p", { class: "note", id: "repnote" }, p.reputation_note),
    el("p", { class: "note" }, "The hub keeps its queue in the server's memory: counts start at the server's start."));
}

async function viewGlossary(term) {
  await ensureGlossary();
  show(el("h2", {}, "Glossary (memcurator explain)"),
    el("dl", { class: "terms" }, ...state.glossary.flatMap((t) => [
      el("dt", { id: "term-" + t.name, class: t.name === term ? "hl" : null }, t.name,
        t.aliases.length ? el("span", { class: "muted" }, "  (" + t.aliases.join(", ") + ")") : null),
      el("dd", {}, t.text)])));
  if (term) { const n = document.getElementById("term-" + term); if (n) n.scrollIntoView(); }
}

/* ------------------------------------------------------------------ routing */
async function route() {
  if (!state.who) return;
  const h = location.hash || "#/overview";
  const path = h.split("?")[0].slice(2);
  const [page, ...rest] = path.split("/");
  const arg = decodeURIComponent(rest.join("/"));
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("on", a.getAttribute("href") === "#/" + page);
  try {
    if (page === "entries") await viewEntries();
    else if (page === "entry") await viewEntry(arg);
    else if (page === "decisions") await viewDecisions();
    else if (page === "recall") await viewRecall();
    else if (page === "trust") await viewTrust();
    else if (page === "peers") await viewPeers();
    else if (page === "glossary") await viewGlossary(arg);
    else await viewOverview();
  } catch (e) {
    $("#status").textContent = "";
    show(errorBox(e));
    if (e.status === 401) { sessionStorage.removeItem(KEY); state.who = null; renderHeader(); }
  }
  document.body.dataset.ready = page || "overview";
  performance.mark("ready:" + (page || "overview"));  // read by benchmarks/inspector_render.py
}

document.addEventListener("DOMContentLoaded", () => {
  $("#keyform").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const t = $("#key").value.trim();
    $("#key").value = "";
    if (t) signIn(t);
  });
  $("#logout").addEventListener("click", () => {
    sessionStorage.removeItem(KEY); state.who = null; state.glossary = null;
    renderHeader(); location.hash = "";
    show(el("p", { class: "note" }, "Key forgotten in this tab."));
  });
  window.addEventListener("hashchange", () => { delete document.body.dataset.ready; route(); });
  if (key()) signIn(key()); else renderHeader();
});
