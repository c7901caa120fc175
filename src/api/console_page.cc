#include "api/console_page.h"

namespace rf::api {

std::string_view console_page() {
  static constexpr std::string_view kPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ringfence console</title>
<style>
  :root { --fg: #1d2230; --dim: #6b7285; --line: #e3e6ee; --ok: #1a7f4b; --bad: #b42318; --accent: #2b59c3; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: #f7f8fb; }
  header { display: flex; align-items: center; gap: 16px; padding: 12px 20px; background: #fff; border-bottom: 1px solid var(--line); }
  header h1 { font-size: 16px; margin: 0; }
  #status { color: var(--dim); }
  #status.live::before { content: "\25CF "; color: var(--ok); }
  main { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; padding: 16px 20px; }
  section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; }
  section.wide { grid-column: 1 / -1; }
  h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .04em; color: var(--dim); margin: 0 0 8px; }
  table { width: 100%; border-collapse: collapse; }
  th, td { text-align: left; padding: 4px 6px; border-bottom: 1px solid var(--line); font-variant-numeric: tabular-nums; }
  th { font-weight: 600; color: var(--dim); font-size: 12px; }
  td.empty { color: var(--dim); font-style: italic; }
  code { font: 12px ui-monospace, monospace; }
  code.id { white-space: nowrap; }
  .state-succeeded, .intact { color: var(--ok); }
  .state-failed, .state-cancelled, .broken { color: var(--bad); }
  .mode { display: inline-block; padding: 0 6px; margin: 1px 2px; border-radius: 10px; background: #eef2fb; font-size: 12px; }
  button { font: inherit; padding: 3px 10px; border-radius: 6px; border: 1px solid var(--line); background: #fff; cursor: pointer; }
  button.approve { border-color: var(--ok); color: var(--ok); }
  button.deny { border-color: var(--bad); color: var(--bad); }
  form#login { display: flex; gap: 8px; }
  form#login input { width: 360px; font: 13px ui-monospace, monospace; padding: 4px 6px; }
  .hidden, form#login.hidden, tr.filtered { display: none; }
  #search { width: 280px; padding: 4px 6px; font: inherit; }
  select { font: inherit; padding: 2px 4px; }
  .tools { display: flex; gap: 8px; align-items: center; margin: 0 0 6px; }
  .tools h2 { margin: 0; flex: 1; }
  .use { white-space: nowrap; }
  .bar { display: inline-block; width: 48px; height: 6px; border-radius: 3px; background: var(--line); vertical-align: middle; margin-left: 4px; }
  .bar > i { display: block; height: 100%; border-radius: 3px; background: var(--accent); }
  pre#output { max-height: 360px; overflow: auto; background: #10131a; color: #e6e9f0; padding: 8px 10px; border-radius: 6px; font: 12px/1.4 ui-monospace, monospace; white-space: pre-wrap; word-break: break-all; margin: 6px 0 0; }
  .detail-json { font: 11px ui-monospace, monospace; color: var(--dim); max-width: 420px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
</style>
</head>
<body>
<header>
  <h1>ringfence</h1>
  <span id="project"></span>
  <span id="status">not connected</span>
  <form id="login">
    <input id="token" type="password" placeholder="API token (ringfence token create --project P)" autocomplete="off">
    <button type="submit">Connect</button>
  </form>
</header>
<main>
  <section class="wide"><div class="tools"><h2>Sandboxes</h2>
    <input id="search" type="search" placeholder="search every table: id, name, command, kind, actor...">
    <select id="sandbox-mode" title="mode"><option value="">every mode</option><option>api</option><option>per_tool</option><option>per_run</option><option>per_worker</option></select></div>
    <table id="sandboxes"><thead><tr><th>ID</th><th>Name</th><th>Backend</th><th>Run</th><th>Mode</th><th>Created</th><th>Age</th><th>Expires</th><th>Memory (in use / limit)</th><th>CPU (in use / limit)</th><th>Worker</th><th></th></tr></thead><tbody></tbody></table>
  </section>
  <section class="wide hidden" id="detail"><div class="tools"><h2 id="detail-title">Output</h2><button id="detail-close">Close</button></div>
    <table id="processes" class="hidden"><thead><tr><th>PID</th><th>Tag</th><th>Command</th><th>State</th><th>Exit</th><th>Started</th><th>Output</th><th></th></tr></thead><tbody></tbody></table>
    <pre id="output"></pre>
  </section>
  <section class="wide"><div class="tools"><h2>Calls</h2>
    <select id="call-state" title="state"><option value="">every state</option><option>running</option><option>done</option><option>failed</option><option>queued</option><option>cancelled</option><option>interrupted</option><option>revoked</option></select></div>
    <table id="calls"><thead><tr><th>ID</th><th>Command</th><th>State</th><th>Exit</th><th>Sandbox</th><th>Worker</th><th>Started</th><th>Duration</th><th>CPU</th><th>Peak memory</th><th></th></tr></thead><tbody></tbody></table>
  </section>
  <section class="wide"><h2>Pending approvals</h2>
    <table id="approvals"><thead><tr><th>#</th><th>Kind</th><th>Request</th><th>Project</th><th>Run</th><th>Step</th><th>Key</th><th>Scope</th><th>Reason</th><th>Asked</th><th></th></tr></thead><tbody></tbody></table>
  </section>
  <section class="wide"><h2>Runs</h2>
    <table id="runs"><thead><tr><th>ID</th><th>Workflow</th><th>State</th><th>Started</th><th>Ended</th><th>Duration</th><th>Steps</th></tr></thead><tbody></tbody></table>
  </section>
  <section class="wide"><div class="tools"><h2>Audit</h2><span>chain: <span id="audit">unknown</span></span></div>
    <table id="events"><thead><tr><th>Seq</th><th>Time</th><th>Kind</th><th>Actor</th><th>About</th><th>Detail</th></tr></thead><tbody></tbody></table>
  </section>
</main>
<script>
"use strict";
// The token lives in this page's memory only, never in storage: a sandbox's
// page served through /v1/sandboxes/ID/ports/... shares this origin, and
// could read what the origin stores (a reload asks for the token again).
let token = "";
sessionStorage.removeItem("rf-token");  // what an older console kept
const fragment = new URLSearchParams(location.hash.slice(1));
if (fragment.get("token")) {
  token = fragment.get("token");
  history.replaceState(null, "", location.pathname);
}
const $ = (sel) => document.querySelector(sel);
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v; else if (k.startsWith("data-")) e.setAttribute(k, v); else e[k] = v;
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(shown(String(k))));
  return e;
};
// Text a sandbox or a tenant wrote (a reason, a run or step name) is shown
// with its control, C1 and bidirectional-override characters as \uXXXX: a
// cell says what it holds, it never reorders or hides its neighbours.
const shown = (t) => t.replace(/[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g,
  (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
const size = (b) => b >= 1 << 30 ? (b / (1 << 30)).toFixed(1) + " GiB" : b >= 1 << 20 ? (b / (1 << 20)).toFixed(1) + " MiB" : Math.round(b / 1024) + " KiB";
// Output as it was written, line breaks and tabs kept; other controls shown.
const shownOutput = (t) => t.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g,
  (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
function fill(tbody, rows, columns) {
  tbody.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { class: "empty", colSpan: columns }, "none"))]));
}
let shownApprovals = null;
function renderApprovals(list) {
  fill($("#approvals tbody"), list.map((a) => {
    const q = a.request || {};
    const reason = el("input", { placeholder: "reason to deny", "data-reason": a.id });
    return el("tr", { "data-approval": a.id },
      el("td", {}, a.id), el("td", {}, a.kind),
      el("td", {}, q.message || q.key || JSON.stringify(q)),
      el("td", {}, a.project), el("td", {}, a.run || "-"), el("td", {}, a.step || q.step || "-"),
      el("td", {}, q.key || "-"), el("td", {}, q.scope || "-"), el("td", {}, q.reason || "-"),
      el("td", {}, when(a.created_at)),
      el("td", {}, el("button", { class: "approve", "data-approve": a.id, onclick: () => decide(a.id, "approve", "") }, "Approve"), " ",
        reason, " ", el("button", { class: "deny", "data-deny": a.id, onclick: () => decide(a.id, "deny", reason.value) }, "Deny")));
  }), 11);
}
// Times as the operator's clock shows them, to the second.
const when = (ms) => ms ? new Date(ms).toLocaleString([], { dateStyle: "short", timeStyle: "medium" }) : "-";
const span = (ms) => ms < 1000 ? (ms < 10 ? ms.toFixed(1) : Math.round(ms)) + " ms" : ms < 60000 ? (ms / 1000).toFixed(1) + " s" :
  ms < 3600000 ? Math.floor(ms / 60000) + "m" + String(Math.floor(ms / 1000) % 60).padStart(2, "0") + "s" :
  Math.floor(ms / 3600000) + "h" + String(Math.floor(ms / 60000) % 60).padStart(2, "0") + "m";
const between = (a, b) => a ? span(Math.max(0, (b || Date.now()) - a)) : "-";
// "12.0 MiB / 300m" with a bar of the share, when both are known.
const limitBytes = (t) => { const m = /^(\d+(?:\.\d+)?)([kmgt]?)i?b?$/i.exec(String(t || "").trim());
  return m ? parseFloat(m[1]) * ({ "": 1, k: 1 << 10, m: 1 << 20, g: 1 << 30, t: 2 ** 40 })[m[2].toLowerCase()] : 0; };
function use(now, limit, share) {
  const cell = el("span", { class: "use" }, (now === undefined ? "-" : now) + " / " + (limit || "none"));
  if (share !== null && share >= 0) {
    const bar = el("span", { class: "bar", title: Math.round(share * 100) + "%" }, el("i"));
    bar.firstChild.style.width = Math.min(100, Math.round(share * 100)) + "%";
    cell.append(bar);
  }
  return cell;
}
let shownSandboxes = null;
const shownRows = {};
const changed = (name, rows) => {
  const text = JSON.stringify(rows || []);
  if (shownRows[name] === text) return false;
  shownRows[name] = text;
  return true;
};
function render(s) {
  $("#project").textContent = "project " + s.project;
  // Rebuilt only when they changed, so that a click on Kill is never lost.
  // What they use changes every second: those cells alone are redone.
  const sandboxes = JSON.stringify(s.sandboxes.map(({ memory_bytes, cpu_percent, ...rest }) => rest));
  const usage = (b) => {
    const memLimit = limitBytes(b.memory_limit);
    const cpuLimit = parseFloat(b.cpu_limit) || 0;
    return [use(b.memory_bytes === undefined ? undefined : size(b.memory_bytes), b.memory_limit,
        b.memory_bytes !== undefined && memLimit ? b.memory_bytes / memLimit : null),
      use(b.cpu_percent === undefined ? undefined : b.cpu_percent.toFixed(1) + "%",
        cpuLimit ? cpuLimit + " cpu" : "", b.cpu_percent !== undefined && cpuLimit ? b.cpu_percent / 100 / cpuLimit : null)];
  };
  if (sandboxes === shownSandboxes) {
    for (const b of s.sandboxes) {
      const [mem, cpu] = usage(b);
      const m = document.querySelector(`td[data-memory="${CSS.escape(b.id)}"]`);
      const c = document.querySelector(`td[data-cpu="${CSS.escape(b.id)}"]`);
      if (m) m.replaceChildren(mem);
      if (c) c.replaceChildren(cpu);
    }
  } else {
    shownSandboxes = sandboxes;
    fill($("#sandboxes tbody"), s.sandboxes.map((b) => {
      const [mem, cpu] = usage(b);
      return el("tr", { "data-id": b.id, "data-mode": b.mode },
        el("td", {}, el("code", { class: "id" }, b.id)), el("td", {}, b.name || "-"), el("td", {}, b.backend),
        el("td", {}, b.run || "-"), el("td", {}, b.mode), el("td", {}, when(b.created_at)),
        el("td", { "data-age": b.created_at }, between(b.created_at)), el("td", {}, when(b.expires_at)),
        el("td", { "data-memory": b.id }, mem), el("td", { "data-cpu": b.id }, cpu), el("td", {}, b.worker || "-"),
        el("td", {}, ...(b.mode === "api" ? [
          el("button", { "data-processes": b.id, onclick: () => showProcesses(b.id) }, "Processes"), " ",
          el("button", { class: "deny", "data-kill": b.id, onclick: () => kill(b.id) }, "Kill")] : [])));
    }), 12);
  }
  // Only when they changed: a snapshot comes every second, and rebuilding the
  // rows would drop a click in flight and a reason being typed.
  const approvals = JSON.stringify(s.approvals);
  if (approvals !== shownApprovals) {
    shownApprovals = approvals;
    renderApprovals(s.approvals);
  }
  // Each table is rebuilt only when its rows changed (a click in flight survives).
  if (changed("calls", s.calls)) fill($("#calls tbody"), (s.calls || []).map((c) => el("tr", { "data-call": c.id, "data-state": c.state },
    el("td", {}, c.id), el("td", {}, el("code", {}, c.argv)), el("td", { class: "state-" + (c.state === "done" ? "succeeded" : c.state) }, c.state),
    el("td", {}, c.exit_code === null ? "-" : c.exit_code), el("td", {}, c.sandbox_id ? el("code", { class: "id" }, c.sandbox_id) : "-"),
    el("td", {}, c.worker || "-"), el("td", {}, when(c.enqueued_at)),
    el("td", {}, c.wall_ms !== undefined ? span(c.wall_ms) : between(c.enqueued_at, c.finished_at)),
    el("td", {}, c.cpu_user_ms !== undefined ? span(c.cpu_user_ms + c.cpu_system_ms) : "-"),
    el("td", {}, c.peak_memory_bytes ? size(c.peak_memory_bytes) : "-"),
    el("td", {}, el("button", { "data-output": c.id, onclick: () => showCall(c.id) }, "Output")))), 11);
  if (changed("runs", s.runs)) fill($("#runs tbody"), s.runs.map((r) => el("tr", { "data-run": r.id },
    el("td", {}, el("code", { class: "id" }, r.id)), el("td", {}, r.workflow), el("td", { class: "state-" + r.state }, r.state),
    el("td", {}, when(r.started_at || r.enqueued_at)), el("td", {}, when(r.finished_at)),
    el("td", {}, between(r.started_at || r.enqueued_at, r.finished_at)),
    el("td", {}, ...r.steps.map((st) => el("span", { class: "mode", title: st.state }, st.step + ": " + st.mode))))), 7);
  const a = s.audit;
  $("#audit").replaceChildren(a.intact === null ? "unknown" :
    el("span", { class: a.intact ? "intact" : "broken" }, a.intact ? "intact" : "BROKEN (ringfence audit verify says where)"));
  if (changed("events", a.events)) fill($("#events tbody"), (a.events || []).map((e) => el("tr", { "data-seq": e.seq },
    el("td", {}, e.seq), el("td", {}, when(e.at)), el("td", {}, e.kind), el("td", {}, e.actor),
    el("td", {}, e.sandbox ? "sandbox " + e.sandbox : e.run ? "run " + e.run : e.call ? "call " + e.call : "-"),
    el("td", { class: "detail-json", title: JSON.stringify(e.detail) }, JSON.stringify(e.detail)))), 6);
  applyFilters();
}
// Search and filters hide rows; the next snapshot keeps them hidden.
function applyFilters() {
  const q = $("#search").value.trim().toLowerCase();
  const mode = $("#sandbox-mode").value, state = $("#call-state").value;
  for (const tr of document.querySelectorAll("main tbody tr")) {
    const hit = !q || tr.textContent.toLowerCase().includes(q);
    const modeOk = !mode || !tr.dataset.mode || tr.dataset.mode === mode;
    const stateOk = !state || !tr.dataset.state || tr.dataset.state === state;
    tr.classList.toggle("filtered", !(hit && modeOk && stateOk));
  }
}
for (const id of ["#search", "#sandbox-mode", "#call-state"]) $(id).addEventListener("input", applyFilters);
// The output panel: one call's or one process's, live while it runs.
let viewing = 0;  // bumped by each new choice: an older one's loop stops
function openDetail(title) {
  $("#detail").classList.remove("hidden");
  $("#detail-title").textContent = title;
  $("#output").textContent = "";
  return ++viewing;
}
$("#detail-close").addEventListener("click", () => { viewing++; $("#detail").classList.add("hidden"); });
const api = (path) => fetch(path, { headers: { Authorization: "Bearer " + token } });
const bytesOf = (j, name) => j[name] !== null && j[name] !== undefined ? j[name] :
  j[name + "_base64"] ? "(" + atob(j[name + "_base64"]).length + " bytes, not UTF-8)" : "";
async function showCall(id) {
  const mine = openDetail("Call " + id);
  $("#processes").classList.add("hidden");
  while (mine === viewing) {
    const r = await api("/v1/calls/" + id);
    if (!r.ok) { $("#output").textContent = "HTTP " + r.status; return; }
    const j = await r.json();
    $("#output").textContent = shownOutput(bytesOf(j, "stdout") + bytesOf(j, "stderr")) +
      (j.state === "running" || j.state === "queued" || j.state === "claimed" ? "" : "\n[" + j.state + (j.exit_code !== null ? ", exit " + j.exit_code : "") + "]");
    if (!["running", "queued", "claimed"].includes(j.state)) return;
    await new Promise((ok) => setTimeout(ok, 1000));
  }
}
async function showProcesses(id) {
  const mine = openDetail("Sandbox " + id + ": processes");
  $("#processes").classList.remove("hidden");
  const r = await api("/v1/sandboxes/" + encodeURIComponent(id) + "/processes");
  if (mine !== viewing) return;
  if (!r.ok) { $("#output").textContent = "HTTP " + r.status; return; }
  const list = (await r.json()).processes;
  fill($("#processes tbody"), list.map((p) => el("tr", { "data-pid": p.pid },
    el("td", {}, p.pid), el("td", {}, p.tag || "-"), el("td", {}, el("code", {}, p.argv.join(" "))),
    el("td", {}, p.state), el("td", {}, p.exit_code === null ? "-" : p.exit_code), el("td", {}, when(p.started_at)),
    el("td", {}, size(p.output_bytes)),
    el("td", {}, el("button", { "data-follow": p.pid, onclick: () => followProcess(id, p.pid, mine) }, "Output")))), 8);
}
async function followProcess(id, pid, mine) {
  if (mine !== viewing) return;
  $("#output").textContent = "";
  const me = ++viewing;
  let from = "start";
  while (me === viewing) {
    const r = await api("/v1/sandboxes/" + encodeURIComponent(id) + "/processes/" + pid + "/output?from=" + from + "&wait_ms=1000");
    if (!r.ok || me !== viewing) return;
    const j = await r.json();
    $("#output").textContent += shownOutput(bytesOf(j, "stdout") + bytesOf(j, "stderr"));
    from = j.next;
    if (j.ended) { $("#output").textContent += "\n[" + j.process.state + (j.process.exit_code !== null ? ", exit " + j.process.exit_code : "") + "]"; return; }
  }
}
// Ages tick between snapshots.
setInterval(() => { for (const td of document.querySelectorAll("td[data-age]")) td.textContent = between(+td.dataset.age); }, 1000);
// An API sandbox ended now (DELETE /v1/sandboxes/ID): its processes with it.
async function kill(id) {
  const r = await fetch("/v1/sandboxes/" + encodeURIComponent(id), {
    method: "DELETE", headers: { Authorization: "Bearer " + token } });
  if (!r.ok && r.status !== 404) alert((await r.json()).error);
}
async function decide(id, action, reason) {
  const r = await fetch("/v1/approvals/" + id + ":" + action, {
    method: "POST", headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
    body: JSON.stringify(reason ? { reason } : {}) });
  if (!r.ok) alert((await r.json()).error);
}
async function follow() {
  const status = $("#status");
  while (token) {
    try {
      const r = await fetch("/v1/console/events", { headers: { Authorization: "Bearer " + token } });
      if (r.status === 401) { status.textContent = "token refused"; status.className = ""; token = ""; return; }
      if (!r.ok) throw new Error("HTTP " + r.status);
      status.textContent = "live"; status.className = "live";
      $("#login").classList.add("hidden");
      const reader = r.body.getReader();
      const decoder = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let end;
        while ((end = buf.indexOf("\n\n")) >= 0) {
          const event = buf.slice(0, end); buf = buf.slice(end + 2);
          const data = event.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
          if (event.startsWith("event: snapshot") && data) render(JSON.parse(data));
        }
      }
    } catch (e) { /* retried below */ }
    status.textContent = "disconnected, retrying"; status.className = "";
    await new Promise((ok) => setTimeout(ok, 1000));
  }
}
$("#login").addEventListener("submit", (e) => {
  e.preventDefault();
  token = $("#token").value.trim();
  $("#token").value = "";
  follow();
});
if (token) follow();
</script>
</body>
</html>
)HTML";
  return kPage;
}

}  // namespace rf::api
