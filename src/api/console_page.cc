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
  .state-succeeded, .intact { color: var(--ok); }
  .state-failed, .state-cancelled, .broken { color: var(--bad); }
  .mode { display: inline-block; padding: 0 6px; margin: 1px 2px; border-radius: 10px; background: #eef2fb; font-size: 12px; }
  button { font: inherit; padding: 3px 10px; border-radius: 6px; border: 1px solid var(--line); background: #fff; cursor: pointer; }
  button.approve { border-color: var(--ok); color: var(--ok); }
  button.deny { border-color: var(--bad); color: var(--bad); }
  form#login { display: flex; gap: 8px; }
  form#login input { width: 360px; font: 13px ui-monospace, monospace; padding: 4px 6px; }
  .hidden, form#login.hidden { display: none; }
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
  <section class="wide"><h2>Sandboxes</h2>
    <table id="sandboxes"><thead><tr><th>ID</th><th>Name</th><th>Backend</th><th>Project</th><th>Run</th><th>Mode</th><th>Created</th><th>Expires</th><th>Memory limit</th><th>Worker</th><th></th></tr></thead><tbody></tbody></table>
  </section>
  <section><h2>Pending approvals</h2>
    <table id="approvals"><thead><tr><th>#</th><th>Kind</th><th>Request</th><th></th></tr></thead><tbody></tbody></table>
  </section>
  <section><h2>Audit chain</h2><div id="audit">unknown</div></section>
  <section class="wide"><h2>Runs</h2>
    <table id="runs"><thead><tr><th>ID</th><th>Workflow</th><th>State</th><th>Steps</th></tr></thead><tbody></tbody></table>
  </section>
</main>
<script>
"use strict";
let token = sessionStorage.getItem("rf-token") || "";
const fragment = new URLSearchParams(location.hash.slice(1));
if (fragment.get("token")) {
  token = fragment.get("token");
  sessionStorage.setItem("rf-token", token);
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
const size = (b) => b >= 1 << 30 ? (b / (1 << 30)).toFixed(1) + " GiB" : Math.round(b / (1 << 20)) + " MiB";
function fill(tbody, rows, columns) {
  tbody.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { class: "empty", colSpan: columns }, "none"))]));
}
let shownApprovals = null;
function renderApprovals(list) {
  fill($("#approvals tbody"), list.map((a) => {
    const reason = el("input", { placeholder: "reason to deny", "data-reason": a.id });
    return el("tr", { "data-approval": a.id },
      el("td", {}, a.id), el("td", {}, a.kind),
      el("td", {}, (a.request && (a.request.message || a.request.key)) || JSON.stringify(a.request)),
      el("td", {}, el("button", { class: "approve", "data-approve": a.id, onclick: () => decide(a.id, "approve", "") }, "Approve"), " ",
        reason, " ", el("button", { class: "deny", "data-deny": a.id, onclick: () => decide(a.id, "deny", reason.value) }, "Deny")));
  }), 4);
}
// Times as the operator's clock shows them, to the second.
const when = (ms) => ms ? new Date(ms).toLocaleString([], { dateStyle: "short", timeStyle: "medium" }) : "-";
let shownSandboxes = null;
function render(s) {
  $("#project").textContent = "project " + s.project;
  // Rebuilt only when they changed, so that a click on Kill is never lost.
  const sandboxes = JSON.stringify(s.sandboxes);
  if (sandboxes !== shownSandboxes) {
    shownSandboxes = sandboxes;
    fill($("#sandboxes tbody"), s.sandboxes.map((b) => el("tr", { "data-id": b.id },
      el("td", {}, el("code", {}, b.id)), el("td", {}, b.name || "-"), el("td", {}, b.backend), el("td", {}, b.project),
      el("td", {}, b.run || "-"), el("td", {}, b.mode), el("td", {}, when(b.created_at)), el("td", {}, when(b.expires_at)),
      el("td", {}, b.memory_limit || "-"), el("td", {}, b.worker || "-"),
      el("td", {}, b.mode === "api" ? el("button", { class: "deny", "data-kill": b.id, onclick: () => kill(b.id) }, "Kill") : ""))), 11);
  }
  // Only when they changed: a snapshot comes every second, and rebuilding the
  // rows would drop a click in flight and a reason being typed.
  const approvals = JSON.stringify(s.approvals);
  if (approvals !== shownApprovals) {
    shownApprovals = approvals;
    renderApprovals(s.approvals);
  }
  fill($("#runs tbody"), s.runs.map((r) => el("tr", { "data-run": r.id },
    el("td", {}, el("code", {}, r.id)), el("td", {}, r.workflow), el("td", { class: "state-" + r.state }, r.state),
    el("td", {}, ...r.steps.map((st) => el("span", { class: "mode", title: st.state }, st.step + ": " + st.mode))))), 4);
  const a = s.audit;
  $("#audit").replaceChildren(a.intact === null ? "unknown" :
    el("span", { class: a.intact ? "intact" : "broken" }, a.intact ? "intact" : "BROKEN (ringfence audit verify says where)"));
}
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
      if (r.status === 401) { status.textContent = "token refused"; status.className = ""; token = ""; sessionStorage.removeItem("rf-token"); return; }
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
  sessionStorage.setItem("rf-token", token);
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
