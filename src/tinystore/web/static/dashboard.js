// The dashboard's page: three views (the queues, a page of jobs, one job), drawn from JSON.
// Every text the store holds is user data: it is put in the page with textContent (el() below),
// never as HTML. Every URL is relative to the page's <base>, where the app is mounted.
"use strict";

const STATES = ["scheduled", "waiting", "running", "done", "failed"];
const main = document.getElementById("main");
let stream = null;      // the EventSource of the view shown
let overview = null;    // the last counts the server told

// --- Building the page -------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

function when(iso) {
  return iso ? el("time", { datetime: iso, title: iso }, new Date(iso).toLocaleString()) : "—";
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 60) return seconds.toFixed(1) + "s";
  const m = Math.floor(seconds / 60);
  if (m < 60) return m + "m" + String(Math.floor(seconds % 60)).padStart(2, "0") + "s";
  const h = Math.floor(m / 60);
  if (h < 24) return h + "h" + String(m % 60).padStart(2, "0") + "m";
  return Math.floor(h / 24) + "d" + String(h % 24).padStart(2, "0") + "h";
}

function json(value) {
  return JSON.stringify(value, null, 2);
}

function link(hash, params, text) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v)).toString();
  return el("a", { href: "#/" + hash + (query ? "?" + query : "") }, text);
}

function meter(used, limit) {
  const share = limit ? Math.min(1, used / limit) : 0;
  const bar = el("i", { class: share >= 1 ? "full" : null });
  bar.style.width = (share * 100).toFixed(0) + "%";
  return el("span", { class: "meter", role: "img", "aria-label": `${used} of ${limit}` }, bar);
}

function say(text, bad) {
  const box = document.getElementById("status");
  box.textContent = text;
  box.className = bad ? "bad" : "";
  box.hidden = !text;
}

// --- Talking to the server ---------------------------------------------------------------------

async function answer(response) {
  // The server's JSON, or what it said instead (a proxy's page, a crash) as an error.
  const text = await response.text();
  try { return JSON.parse(text); } catch (e) { return { error: `${response.status} ${response.statusText}: ${text.slice(0, 200)}` }; }
}

async function read(path, params) {
  const response = await fetch(path + "?" + new URLSearchParams(params).toString());
  const body = await answer(response);
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function token() {
  let known = sessionStorage.getItem("tinystore-token");
  if (!known) {
    known = prompt("This action needs the dashboard's token (printed by `tinystore dashboard`):");
    if (known) sessionStorage.setItem("tinystore-token", known.trim());
  }
  return known ? known.trim() : null;
}

async function act(path, body, question) {
  if (!confirm(question)) return;
  const secret = token();
  if (!secret) { say("Nothing was changed: no token was given.", true); return; }
  let response;
  try {
    response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Tinystore-Token": secret },
      body: JSON.stringify(body),
    });
  } catch (e) { say(`Nothing was changed: the dashboard could not be reached (${e.message}).`, true); return; }
  const said = await answer(response);
  if (response.status === 403) sessionStorage.removeItem("tinystore-token");  // asked for again next time
  say(said.message || said.error, !response.ok || !said.done);
}

function listen(params) {
  if (stream) stream.close();
  const live = document.getElementById("live");
  stream = new EventSource("api/events?" + new URLSearchParams(params).toString());
  stream.onopen = () => { live.textContent = "live"; live.className = "live on"; };
  stream.onerror = () => { live.textContent = "reconnecting"; live.className = "live off"; };
  stream.addEventListener("overview", (e) => {
    const data = JSON.parse(e.data);
    if (data.error) say(data.error, true);  // the store cannot be read for a while: the feed reads again
    else showOverview(data);
  });
  stream.addEventListener("trouble", (e) => say(JSON.parse(e.data).error, true));
  return stream;
}

function showOverview(data) {
  overview = data;
  document.getElementById("store").textContent = data.store || "";
  const diagram = document.getElementById("diagram");
  if (diagram && data.totals) diagram.replaceWith(drawDiagram(data.totals, data.hour));
  const cards = document.getElementById("cards");
  if (cards && data.queues) cards.replaceChildren(...queueCards(data.queues));
}

function failed(target, error) {
  target.replaceChildren(el("p", { class: "err" }, error.message));
}

// --- The queues --------------------------------------------------------------------------------

function drawDiagram(totals, hour) {
  // The chapter's states: scheduled → waiting → running → done / failed, and cancelled.
  const box = { w: 118, h: 46 };
  const at = { scheduled: [8, 40], waiting: [184, 40], running: [360, 40], done: [534, 4], failed: [534, 82], cancelled: [272, 150] };
  const edges = [
    ["scheduled", "waiting", "due"], ["waiting", "running", "claimed"],
    ["running", "done", ""], ["running", "failed", ""],
  ];
  const root = svg("svg", { class: "diagram", id: "diagram", viewBox: "0 0 660 206", role: "img", "aria-label": "the states of a job" });
  root.append(svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" },
    svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#5f6b7a" }))));
  const right = (s) => [at[s][0] + box.w, at[s][1] + box.h / 2];
  const left = (s) => [at[s][0], at[s][1] + box.h / 2];
  for (const [from, to, label] of edges) {
    const [x1, y1] = right(from), [x2, y2] = left(to);
    root.append(svg("path", { class: "edge", d: `M ${x1} ${y1} C ${x1 + 30} ${y1}, ${x2 - 30} ${y2}, ${x2 - 2} ${y2}` }));
    if (label) root.append(svg("text", { class: "label", x: (x1 + x2) / 2, y: y1 - 6, "text-anchor": "middle" }, label));
  }
  const [rx, ry] = [at.running[0] + box.w / 2, at.running[1]];
  root.append(svg("path", { class: "edge", d: `M ${rx} ${ry} C ${rx} ${ry - 34}, ${at.scheduled[0] + box.w / 2} ${ry - 34}, ${at.scheduled[0] + box.w / 2} ${ry - 2}` }));
  root.append(svg("text", { class: "label", x: at.waiting[0] + box.w / 2, y: 12, "text-anchor": "middle" }, "raised: retried after its backoff"));
  for (const from of ["scheduled", "waiting", "running"]) {
    const [x, y] = [at[from][0] + box.w / 2, at[from][1] + box.h];
    root.append(svg("path", { class: "edge", d: `M ${x} ${y} L ${at.cancelled[0] + box.w / 2} ${at.cancelled[1] - 2}` }));
  }
  for (const [state, [x, y]] of Object.entries(at)) {
    const count = state === "cancelled" ? "gone" : String(totals[state] ?? 0);
    const g = svg("g", { class: "node", "data-state": state });
    g.append(svg("rect", { x, y, width: box.w, height: box.h, rx: 6, fill: "#fff", stroke: `var(--${state})`, "stroke-width": 2.5 }));
    g.append(svg("text", { x: x + 10, y: y + 18 }, state));
    g.append(svg("text", { class: "n", x: x + 10, y: y + 38 }, count));
    if (hour && (state === "done" || state === "failed")) {
      g.append(svg("text", { class: "label", x: x + box.w - 6, y: y + 38, "text-anchor": "end" }, `${hour[state]} in 1h`));
    }
    root.append(g);
  }
  return root;
}

function chart(hour) {
  const n = hour.done.length;
  const top = Math.max(1, ...hour.done.map((d, i) => d + hour.failed[i]));
  const root = svg("svg", { class: "chart", viewBox: `0 0 ${n * 4} 40`, preserveAspectRatio: "none", role: "img",
    "aria-label": `done and failed per minute over the last hour: ${hour.done.reduce((a, b) => a + b, 0)} done, ${hour.failed.reduce((a, b) => a + b, 0)} failed` });
  hour.done.forEach((done, i) => {
    const failedCount = hour.failed[i], hd = (done / top) * 40, hf = (failedCount / top) * 40;
    if (done) root.append(svg("rect", { class: "bar-done", x: i * 4, y: 40 - hd, width: 3, height: hd }));
    if (failedCount) root.append(svg("rect", { class: "bar-failed", x: i * 4, y: 40 - hd - hf, width: 3, height: hf }));
  });
  return root;
}

function limits(l) {
  const rows = [];
  rows.push(["running", l.concurrency ? [`${l.running} of ${l.concurrency} `, meter(l.running, l.concurrency)] : `${l.running} (no concurrency limit)`]);
  if (l.rate) {
    const count = Number(l.rate.split("/")[0]);
    rows.push(["rate", [`${l.rate_used} of ${l.rate} `, meter(l.rate_used, count)]]);
  }
  if (l.group_concurrency || l.group_rate) {
    const of = l.group_concurrency ? ` of ${l.group_concurrency}` : "";
    const busiest = l.busiest_groups.map((g) => `${g.group}: ${g.running}${of}`).join(", ") || "none running";
    rows.push(["per group", [l.group_concurrency ? `at most ${l.group_concurrency}` : "", l.group_rate ? ` ${l.group_rate}` : ""]]);
    rows.push(["busiest groups", busiest]);
  }
  return rows;
}

function queueCards(queues) {
  if (!queues.length) return [el("p", {}, "No queues yet: a queue appears when it is first named.")];
  return queues.map((q) => {
    const counts = STATES.map((s) => link("jobs", { queue: q.name, state: s }, [s + " ", el("b", {}, q.counts[s])]));
    counts.forEach((a, i) => { a.className = "count s-" + STATES[i]; });
    const facts = [["oldest due", age(q.oldest_due_age)], ["last minute", `${q.last_minute.started} started, ${q.last_minute.done} done, ${q.last_minute.failed} failed`], ...limits(q.limits)];
    if (q.schedule) facts.push(["schedule", [q.schedule.rule + ", next ", when(q.schedule.next)]]);
    const pausing = q.paused
      ? el("button", { class: "resume", onclick: () => act("api/resume", { queue: q.name }, `Resume ${q.name}? Every worker starts its due jobs again.`) }, "Resume")
      : el("button", { class: "pause", onclick: () => act("api/pause", { queue: q.name }, `Pause ${q.name}? No worker starts its jobs until it is resumed; running ones finish.`) }, "Pause");
    const retrying = q.counts.failed
      ? el("button", { class: "danger", onclick: () => act("api/retry-failed", { queue: q.name }, `Retry every failed job of ${q.name} (${q.counts.failed})?`) }, "Retry every failed job")
      : null;
    const actions = el("div", { class: "actions" }, pausing, retrying);
    return el("section", { class: "card" + (q.paused ? " paused" : ""), "data-queue": q.name },
      el("h3", {}, link("jobs", { queue: q.name }, q.name), q.paused ? el("span", { class: "badge-paused" }, "paused") : null),
      el("div", { class: "counts" }, counts),
      chart(q.hour),
      el("div", { class: "legend" }, "last hour per minute: ", el("span", { class: "d" }, "done"), ", ", el("span", { class: "f" }, "failed")),
      el("dl", { class: "facts" }, facts.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
      actions);
  });
}

function showQueues() {
  // The counts come with the stream's first message: one read of the store for every browser that looks.
  main.replaceChildren(el("h1", {}, "Queues"), drawDiagram({}), el("div", { class: "cards", id: "cards" }, "Loading…"));
  listen({ view: "queues" });
  if (overview) showOverview(overview);
}

// --- A page of jobs ----------------------------------------------------------------------------

function jobRows(data) {
  if (!data.jobs.length) return el("p", {}, "No job matches.");
  // The page's jobs in id order; the priority heading sorts them in start order (priority, then due).
  const byStart = el("button", { type: "button", class: "sort", title: "sort in start order" }, "priority");
  const head = el("tr", {}, el("th", {}, "id"), el("th", {}, "state"), el("th", {}, byStart),
    ...["group", "due", "attempt", "error"].map((h) => el("th", {}, h)));
  const rows = data.jobs.map((j) => el("tr", { "data-id": j.id },
    el("td", { class: "id" }, link("job", { queue: data.queue, id: j.id }, j.id)),
    el("td", { class: "state s-" + j.state, "data-label": "state" }, j.state),
    el("td", { "data-label": "priority" }, String(j.priority)),
    el("td", { "data-label": "group" }, j.group ?? "—"), el("td", { "data-label": "due" }, when(j.at)),
    el("td", { "data-label": "attempt" }, `${j.attempt}/${j.attempts}`),
    j.error ? el("td", { class: "err", "data-label": "error" }, j.error) : el("td", {})));
  const body = el("tbody", {}, rows);
  byStart.addEventListener("click", () => {
    const order = data.jobs.map((j, n) => [j, rows[n]]).sort(([a], [b]) => b.priority - a.priority || (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
    body.replaceChildren(...order.map(([, row]) => row));
  });
  return el("div", { class: "table" }, el("table", {}, el("thead", {}, head), body));
}

function cancelShown(params) {
  // Every job the filters list, on every page (cancel_many): not for done or failed jobs, which cannot
  // be cancelled, nor under an id prefix, which cancel_many does not take.
  if (["done", "failed"].includes(params.state) || params.prefix) return null;
  const what = [params.state || "scheduled, waiting and running", "jobs of", params.queue, params.group ? `in group ${params.group}` : ""].join(" ").trim();
  return el("div", { class: "actions" }, el("button", { class: "danger", id: "cancel-many", onclick: () => act("api/cancel-many", { queue: params.queue, state: params.state || "", group: params.group || "" }, `Cancel the ${what}, on every page?`) }, "Cancel every job listed"));
}

async function showJobs(params) {
  let names = [];
  try { names = (await read("api/queues", {})).queues; } catch (e) { failed(main, e); return; }
  if (!params.queue && names.length) params.queue = names[0];
  const field = (name, label, input) => el("label", {}, label, input);
  const queue = el("select", { name: "queue" }, names.map((n) => el("option", { value: n, selected: n === params.queue }, n)));
  const state = el("select", { name: "state" }, el("option", { value: "" }, "any"), STATES.map((s) => el("option", { value: s, selected: s === params.state }, s)));
  const group = el("input", { name: "group", value: params.group || "", placeholder: "any", size: 10 });
  const prefix = el("input", { name: "prefix", value: params.prefix || "", placeholder: "id begins with", size: 14 });
  const form = el("form", { class: "filters", onsubmit: (e) => {
    e.preventDefault();
    location.hash = link("jobs", { queue: queue.value, state: state.value, group: group.value, prefix: prefix.value }, "").getAttribute("href");
  } }, field("queue", "queue", queue), field("state", "state", state), field("group", "group", group), field("prefix", "id prefix", prefix), el("button", { type: "submit" }, "Show"));
  const list = el("div", { id: "list" }, "Loading…");
  main.replaceChildren(el("h1", {}, "Jobs"), form, list);
  if (!params.queue) { list.textContent = "No queues yet."; return; }
  let drawn = null;
  const draw = (data) => {
    const text = JSON.stringify(data);
    if (text === drawn) return;
    drawn = text;
    const pager = el("div", { class: "pager" },
      params.after ? link("jobs", { ...params, after: "" }, "First page") : null,
      data.next ? link("jobs", { ...params, after: data.next }, "Next page") : null);
    list.replaceChildren(jobRows(data), pager, cancelShown(params));
  };
  listen({ view: "jobs", ...params }).addEventListener("view", (e) => { const d = JSON.parse(e.data); if (d.jobs) draw(d); else if (d.error) say(d.error, true); });
  try { draw(await read("api/jobs", params)); } catch (e) { failed(list, e); }
}

// --- One job -----------------------------------------------------------------------------------

const seen = [];  // the changes of the job seen while its page is open, for its timeline

function drawJob(job) {
  const facts = [
    ["state", el("span", { class: "state s-" + job.state, id: "job-state" }, job.state)],
    ["queue", link("jobs", { queue: job.queue }, job.queue)], ["attempt", `${job.attempt} of ${job.attempts}`],
    [job.state === "scheduled" || job.state === "waiting" ? "due" : "was due", when(job.at)], ["group", job.group ?? "—"],
    ["priority", job.priority],
  ];
  if (job.ahead !== null) facts.push(["ahead", job.ahead]);
  if (job.repeat) facts.push(["repeats", job.repeat]);
  if (job.lease && job.lease.gone) facts.push(["lease", el("span", { id: "holder-gone" }, `attempt ${job.lease.attempt}: its holder is gone: ${job.lease.gone}`)]);
  else if (job.lease) facts.push(["lease", [`attempt ${job.lease.attempt}, held by pid ${job.lease.pid} on ${job.lease.host}, until `, when(job.lease.expires)]]);
  const buttons = [];
  if (job.state === "failed") buttons.push(el("button", { class: "act", id: "retry", onclick: () => act("api/retry", { queue: job.queue, id: job.id }, `Retry job ${job.id} of ${job.queue}?`) }, "Retry"));
  if (["scheduled", "waiting", "running"].includes(job.state)) buttons.push(el("button", { class: "danger", id: "cancel", onclick: () => act("api/cancel", { queue: job.queue, id: job.id }, `Cancel job ${job.id} of ${job.queue}?`) }, "Cancel"));
  const last = seen[seen.length - 1];
  const now = [job.state, job.attempt, job.error].join("|");
  if (!last || last.key !== now) seen.push({ key: now, at: new Date().toISOString(), what: `seen ${job.state}, attempt ${job.attempt}` });
  const timeline = [...job.timeline, ...seen.slice(1)].map((t) => el("li", {}, when(t.at), " ", t.what));
  return [
    el("h1", {}, "Job ", el("span", { id: "job-id" }, job.id)),
    el("div", { class: "actions" }, buttons),
    el("dl", { class: "facts" }, facts.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
    el("h2", {}, "Payload"), el("pre", { id: "payload" }, json(job.payload)),
    job.progress !== null ? [el("h2", {}, "Progress"), el("pre", { id: "progress" }, json(job.progress))] : null,
    job.result !== null ? [el("h2", {}, "Result"), el("pre", { id: "result" }, json(job.result))] : null,
    job.error ? [el("h2", {}, "Error"), el("pre", { class: "error", id: "error" }, job.error)] : null,
    el("h2", {}, "Steps kept"),
    job.steps.length ? el("div", { class: "table" }, el("table", {}, el("tr", { class: "head" }, el("th", {}, "step"), el("th", {}, "attempt"), el("th", {}, "answer")),
      job.steps.map((s) => el("tr", {}, el("td", { "data-label": "step" }, s.name), el("td", { "data-label": "attempt" }, s.attempt),
        el("td", {}, el("pre", {}, json(s.answer))))))) : el("p", { class: "muted" }, "none"),
    el("h2", {}, "Timeline"), el("ol", { class: "timeline" }, timeline),
  ];
}

async function showJob(params) {
  seen.length = 0;
  main.replaceChildren(el("p", {}, "Loading…"));
  let drawn = null;
  const draw = (job) => {
    const text = JSON.stringify(job);
    if (text === drawn) return;  // the stream's first message is what the page read: nothing to redraw
    drawn = text;
    if (job.gone) main.replaceChildren(el("h1", {}, "Job ", params.id), el("p", {}, job.gone));
    else if (job.error && !job.id) say(job.error, true);
    else main.replaceChildren(...drawJob(job).flat().filter(Boolean));
  };
  listen({ view: "job", queue: params.queue, id: params.id }).addEventListener("view", (e) => draw(JSON.parse(e.data)));
  try { draw(await read("api/job", params)); } catch (e) { failed(main, e); }
}

// --- Routing: #/, #/jobs?..., #/job?queue=&id= ---------------------------------------------------

function route() {
  const hash = location.hash || "#/";
  if (hash.startsWith("#token=")) {  // the address the command prints carries the token, never sent to the server
    sessionStorage.setItem("tinystore-token", decodeURIComponent(hash.slice(7)));
    history.replaceState(null, "", location.pathname + location.search + "#/");
    return route();
  }
  const [path, query] = hash.slice(1).split("?");
  const params = Object.fromEntries(new URLSearchParams(query || ""));
  say("");
  if (path === "/jobs") showJobs(params);
  else if (path === "/job") showJob(params);
  else showQueues();
}

window.addEventListener("hashchange", route);
route();
