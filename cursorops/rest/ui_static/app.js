/* The Cursors page: hash routes over the cursorops REST API, charts as inline SVG. */
"use strict";

const BASE = location.pathname.replace(/\/ui\/?$/, "");   // where the plugin is mounted
const SKIP_DAGS = [
  "cursorops_skip_messages", "cursorops_skip_matching", "cursorops_skip_head",
  "cursorops_undo_skip", "cursorops_redrive", "cursorops_reset_cursor", "cursorops_unsubscribe",
];
/* The audit kinds the page lists: each gated operation's change and its closing request. */
const OPERATIONS = ["skip", "undo-skip", "redrive", "reset-cursor", "unsubscribe"];
const fmt = new Intl.NumberFormat("en-US");
const $ = (id) => document.getElementById(id);

function esc(text) {
  return String(text ?? "").replace(/[&<>"']/g, (c) =>
    ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
/* Text someone else wrote (a subscription's name, a key, a property, a payload, a reason, a
   ticket) is shown by core/domain/legible.py's rule: every character of these Unicode general
   categories (controls, bidirectional and zero-width characters, separators, private-use,
   surrogate, unassigned) is spelled out as its code point, \u{202E}, so it cannot reorder,
   hide or forge a line; any other character, in any script, reads as written. A test holds
   this list equal to cursorops.core.domain.legible.HIDDEN. */
const HIDDEN = ["Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"];
const HIDDEN_CHAR = new RegExp(`[${HIDDEN.map((c) => `\\p{${c}}`).join("")}]`, "gu");
const CELL_CHARS = 160;   // what a table cell shows of someone else's text before the cut
const NAME_CHARS = 120;   // a name in the breadcrumb or a title
const REASON_CHARS = 300; // a reason, a ticket or an outcome statement in a table cell

function legible(text) {
  return String(text ?? "").replace(HIDDEN_CHAR, (c) =>
    "\\u{" + c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0") + "}");
}

/* Legible text cut after `width` characters (counted as core/domain/legible.py's cut counts them),
   never inside a spelled-out code point: [shown, how many more characters]. */
function cutText(text, width) {
  const chars = [...text];
  if (chars.length <= width) return [text, 0];
  const shown = chars.slice(0, width).join("").replace(/\\u\{[0-9A-F]{0,6}$/, "");
  return [shown, chars.length - [...shown].length];
}

/* Someone else's text as HTML: legible, escaped, and cut after `width` characters with the
   cut said; the whole (legible) value is the span's title and one click on the cut shows it.
   Cells wrap anywhere (style.css), so no value can widen its table. */
function theirs(value, width = CELL_CHARS, href = null) {
  const text = legible(value);
  const [shown, more] = cutText(text, width);
  const inner = href === null ? esc(shown) : `<a href="${href}">${esc(shown)}</a>`;
  if (!more) return `<span class="theirs">${inner}</span>`;
  return `<span class="theirs" title="${esc(text)}">${inner}<button type="button" class="more" ` +
    `data-testid="more">… (${num(more)} more characters)</button></span>`;
}

/* Plain text (a title, a message): legible and cut, the cut said. */
function theirsText(value, width = CELL_CHARS) {
  const [shown, more] = cutText(legible(value), width);
  return more ? `${shown}… (${num(more)} more characters)` : shown;
}

// One click on a cut shows the whole value in place (inside its link, if it has one).
document.addEventListener("click", (event) => {
  const more = event.target.closest && event.target.closest("button.more");
  if (!more) return;
  const span = more.parentElement;
  more.remove();
  (span.querySelector("a") || span).textContent = span.title;
  span.removeAttribute("title");
});

const seg = (s) => encodeURIComponent(s);
// Text in any script as a header value: RFC 8187's UTF-8'' form (core/domain/header_text.py).
const headerText = (s) => "UTF-8''" + encodeURIComponent(s);
const num = (n) => fmt.format(n);

function utc(ms) {
  if (ms === null || ms === undefined || ms === "") return "—";
  const d = typeof ms === "number" ? new Date(ms) : new Date(ms);
  if (isNaN(d)) return esc(ms);
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

async function getJson(url) {
  const answer = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
  let body = null;
  try { body = await answer.json(); } catch (e) { body = null; }
  if (!answer.ok) {
    const why = body && (body.reason || body.detail) ? (body.reason || JSON.stringify(body.detail)) : answer.statusText;
    const error = new Error(`${answer.status}: ${why}`);
    error.status = answer.status;
    throw error;
  }
  return body;
}

function failed(where, error) {
  return `<p class="error" data-testid="error">Could not read ${esc(where)}: ${theirs(error.message, 600)}</p>`;
}

/* ---------- routes ---------- */

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  return parts;
}

function crumbs(parts) {
  const links = [`<a href="#/">Tenants</a>`];
  const names = ["tenant", "namespace", "topic", "subscription"];
  for (let i = 0; i < parts.length; i++) {
    const href = "#/" + parts.slice(0, i + 1).map(seg).join("/");
    const label = `<span class="muted">${names[i]}</span> ${theirs(parts[i], NAME_CHARS)}`;
    links.push(i === parts.length - 1 ? `<strong>${label}</strong>` : `<a href="${href}">${label}</a>`);
  }
  $("crumbs").innerHTML = links.join(`<span class="sep">›</span>`);
}

async function render() {
  const parts = route();
  crumbs(parts);
  $("audit").hidden = true;
  const body = $("view-body");
  body.innerHTML = `<p class="muted">Loading…</p>`;
  try {
    if (parts.length === 0) await tenantsView(body);
    else if (parts.length === 1) await namespacesView(body, parts[0]);
    else if (parts.length === 2) await topicsView(body, parts[0], parts[1]);
    else if (parts.length === 3) await topicView(body, parts[0], parts[1], parts[2]);
    else await subscriptionView(body, parts[0], parts[1], parts[2], parts[3]);
  } catch (error) {
    // Listing tenants is for superusers and listing namespaces for tenant admins (Pulsar's
    // rule): any other role may still open the namespaces and topics it holds grants on.
    if (error.status === 403 && parts.length === 0) {
      body.innerHTML = `<p class="muted" data-testid="not-superuser">Listing tenants is for superusers ` +
        `(Pulsar's rule). Open a namespace or topic your role holds grants on:</p>` + openForm(parts);
    } else {
      const open = error.status === 403 && parts.length < 2 ? openForm(parts) : "";
      body.innerHTML = failed("this view", error) + open;
    }
  }
  document.body.dataset.loaded = location.hash || "#/";
}

function openForm(parts) {
  const example = parts.length ? `${parts[0]}/namespace` : "tenant/namespace";
  return `<form class="open" data-testid="open-form"><label>Open a namespace or topic your role may read: ` +
    `<input name="path" size="48" placeholder="${esc(theirsText(example, NAME_CHARS))}[/topic[/subscription]]"></label> ` +
    `<button type="submit">Open</button></form>`;
}

document.addEventListener("submit", (event) => {
  if (!event.target.matches("form.open")) return;
  event.preventDefault();
  const typed = event.target.elements.path.value.trim().replace(/^persistent:\/\//, "");
  const parts = typed.split("/").filter(Boolean);
  if (parts.length) location.hash = "#/" + parts.map(seg).join("/");
});

function linkList(items, href, testid) {
  if (!items.length) return `<p class="muted">None.</p>`;
  return `<table data-testid="${testid}"><tbody>${items.map((name, i) =>
    `<tr><td>${theirs(name, CELL_CHARS, href[i])}</td></tr>`).join("")}</tbody></table>`;
}

async function tenantsView(body) {
  $("view-title").textContent = "Tenants";
  const tenants = await getJson(`${BASE}/admin/v2/tenants`);
  body.innerHTML = linkList(tenants, tenants.map((t) => `#/${seg(t)}`), "tenants");
}

async function namespacesView(body, tenant) {
  $("view-title").textContent = `Namespaces of ${theirsText(tenant, NAME_CHARS)}`;
  const names = await getJson(`${BASE}/admin/v2/namespaces/${seg(tenant)}`);
  const short = names.map((n) => n.split("/").slice(1).join("/"));
  body.innerHTML = linkList(short, short.map((n) => `#/${seg(tenant)}/${seg(n)}`), "namespaces");
}

async function topicsView(body, tenant, namespace) {
  $("view-title").textContent = `Topics of ${theirsText(`${tenant}/${namespace}`, NAME_CHARS)}`;
  const path = `${BASE}/admin/v2/persistent/${seg(tenant)}/${seg(namespace)}`;
  const [all, partitioned] = await Promise.all([getJson(path), getJson(`${path}/partitioned`)]);
  const short = (full) => full.split("/").pop();
  const rows = partitioned.map((t) => ({ name: short(t), partitions: all.filter((p) => p.startsWith(t + "-partition-")).length }));
  for (const t of all) {
    if (!partitioned.some((p) => t.startsWith(p + "-partition-"))) rows.push({ name: short(t), partitions: 0 });
  }
  rows.sort((a, b) => a.name.localeCompare(b.name));
  if (!rows.length) { body.innerHTML = `<p class="muted">No topics.</p>`; return; }
  body.innerHTML = `<table data-testid="topics"><thead><tr><th>topic</th><th class="num">partitions</th></tr></thead><tbody>${
    rows.map((r) => `<tr><td>${theirs(r.name, CELL_CHARS, `#/${seg(tenant)}/${seg(namespace)}/${seg(r.name)}`)}</td>` +
      `<td class="num">${r.partitions || "not partitioned"}</td></tr>`).join("")}</tbody></table>`;
}

async function topicView(body, tenant, namespace, topic) {
  $("view-title").textContent = `Subscriptions of ${theirsText(`persistent://${tenant}/${namespace}/${topic}`, NAME_CHARS)}`;
  const path = `${BASE}/admin/v2/persistent/${seg(tenant)}/${seg(namespace)}/${seg(topic)}`;
  const stats = await getJson(`${path}/stats`);
  const subs = Object.entries(stats.subscriptions || {}).sort((a, b) => a[0].localeCompare(b[0]));
  body.innerHTML = subs.length ? `<table data-testid="subscriptions"><thead><tr><th>subscription</th><th>type</th>` +
    `<th class="num">backlog (messages)</th></tr></thead><tbody>${subs.map(([name, s]) =>
      `<tr><td>${theirs(name, CELL_CHARS, `#/${seg(tenant)}/${seg(namespace)}/${seg(topic)}/${seg(name)}`)}</td>` +
      `<td>${theirs(s.type || "")}</td><td class="num" data-testid="msgBacklog-${esc(name)}">${num(s.msgBacklog)}</td></tr>`).join("")}` +
    `</tbody></table>` : `<p class="muted">No subscriptions.</p>`;
  await auditView(path, null);
}

async function subscriptionView(body, tenant, namespace, topic, sub) {
  $("view-title").textContent = `${theirsText(`persistent://${tenant}/${namespace}/${topic}`, NAME_CHARS)} · ` +
    `subscription ${theirsText(sub, NAME_CHARS)}`;
  const path = `${BASE}/admin/v2/persistent/${seg(tenant)}/${seg(namespace)}/${seg(topic)}`;
  const [analysis, history] = await Promise.all([
    getJson(`${path}/subscription/${seg(sub)}/analyzeBacklog`),
    getJson(`${path}/subscription/${seg(sub)}/backlogHistory?limit=1000`),
  ]);
  const parts = analysis.partitions.map((p) => ({
    label: p.topicPartition.match(/-partition-(\d+)$/) ? "p" + p.topicPartition.match(/-partition-(\d+)$/)[1] : "topic",
    name: p.topicPartition, messages: p.messages, entries: p.entries,
  }));
  body.innerHTML = `<div class="grid2">
    <div><h3>Exact backlog per partition</h3>${barChart(parts)}
      <table data-testid="backlog-table"><thead><tr><th>partition</th><th class="num">messages</th><th class="num">entries</th></tr></thead><tbody>
      ${parts.map((p) => `<tr><td class="mono">${theirs(p.name)}</td><td class="num" data-testid="backlog-${esc(p.label)}">${num(p.messages)}</td><td class="num">${num(p.entries)}</td></tr>`).join("")}
      <tr class="total"><td>total</td><td class="num" data-testid="backlog-total">${num(analysis.messages)}</td><td class="num">${num(analysis.entries)}</td></tr>
      </tbody></table></div>
    <div><h3>Backlog history (backlog audit DAG)</h3>${history.length ? lineChart(history) : `<p class="muted">No history yet: the <code>cursorops_backlog_audit</code> DAG has not measured this subscription.</p>`}
      ${history.length ? `<table data-testid="history-table"><thead><tr><th>measured at (UTC)</th><th class="num">messages</th><th class="num">entries</th></tr></thead><tbody>
      ${history.slice(-12).reverse().map((h) => `<tr><td class="when">${utc(h.atMs)}</td><td class="num">${num(h.messages)}</td><td class="num">${num(h.entries)}</td></tr>`).join("")}
      </tbody></table>${history.length > 12 ? `<p class="muted">Newest 12 of ${history.length} measurements listed; all are drawn.</p>` : ""}` : ""}
    </div></div>
    <div data-testid="radar"><h3>Poison-pill radar</h3><div id="radar-body"><p class="muted">Looking…</p></div></div>`;
  await Promise.all([radarView(path, sub), auditView(path, sub)]);
}

/* ---------- poison-pill radar: messages stuck at the head, with a prefilled skip request ---------- */

async function radarView(path, sub) {
  const target = $("radar-body");
  let radar;
  try {
    radar = await getJson(`${path}/subscription/${seg(sub)}/poisonRadar`);
  } catch (error) { target.innerHTML = failed("the radar", error); return; }
  const limits = radar.limits || {};
  const rule = `redelivered at least ${esc(limits.minRedeliveries)} times, or unacknowledged for ` +
    `${esc(limits.minAgeSeconds)} s behind a later message a consumer acknowledged`;
  if (!radar.listed.length) {
    target.innerHTML = `<p class="muted" data-testid="radar-none">Nothing stuck at the head (${rule}).</p>`;
    return;
  }
  const request = radar.skipRequest;
  target.innerHTML = `<p>${num(radar.stuck)} message(s) stuck (${rule}); ${num(radar.listed.length)} listed.</p>` +
    `<table data-testid="radar-table"><thead><tr><th>id</th><th>partition</th><th>key</th>` +
    `<th class="num">redeliveries</th><th class="num">age (s)</th></tr></thead><tbody>${
      radar.listed.map((m) => `<tr data-testid="radar-row"><td class="mono">${theirs(m.messageId)}</td>` +
        `<td>${theirs(m.partition)}</td><td>${theirs(m.key ?? "")}</td><td class="num">${num(m.redeliveryCount)}</td>` +
        `<td class="num">${num(m.ageSeconds)}</td></tr>`).join("")}</tbody></table>` +
    (request ? `<p><button type="button" data-testid="radar-skip">${radar.approvalRequired ?
      `request a skip of these ${num(radar.listed.length)}…` : `skip these ${num(radar.listed.length)} now…`}</button> ` +
      `<span class="radar-result muted"></span></p><div data-testid="radar-preview" hidden></div>` :
      `<p class="muted">Skip by id needs a Shared or Key_Shared subscription.</p>`);
  const button = target.querySelector("[data-testid=radar-skip]");
  if (button) button.addEventListener("click", () => previewSkip(path, sub, request, button));
}

/* The radar's skip goes through the normal preview first: the same request with
   ?preview=true plans exactly what the skip would apply (or send for approval) and changes
   nothing. The preview shows its counts, the exact backlog before and after per partition
   and the ids; only its confirm sends the request. */
async function previewSkip(path, sub, request, button) {
  const out = button.parentElement.querySelector(".radar-result");
  const box = button.parentElement.nextElementSibling;
  const url = `${path}/subscription/${seg(sub)}/skipByMessageIds`;
  const body = JSON.stringify({ type: "messageId", messageIds: request.conf.message_ids.map((triplet) => {
    const [ledgerId, entryId, batchIndex] = triplet.split(":").map(Number);
    return batchIndex === undefined ? { ledgerId, entryId } : { ledgerId, entryId, batchIndex };
  }) });
  button.disabled = true;
  out.textContent = "planning the skip…";
  let plan;
  try {
    const response = await fetch(`${url}?preview=true`, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json" }, body,
    });
    plan = await response.json().catch(() => ({}));
    if (!response.ok) {
      out.textContent = `refused: ${theirsText(plan.reason || response.status)}`;
      button.disabled = false;
      return;
    }
  } catch (error) { out.textContent = `failed: ${error}`; button.disabled = false; return; }
  out.textContent = "";
  const gated = plan.approvalRequired;
  const parts = Object.entries(plan.backlog.perPartition);
  const action = gated ? `request approval to skip ${num(plan.ids)}` : `skip ${num(plan.ids)} now`;
  box.innerHTML = `<p data-testid="radar-preview-summary">${gated ? "Requested for approval, this skip would acknowledge" :
      "This skip acknowledges, at once,"} ${num(plan.ids)} message id(s) (${num(plan.messages)} message(s)); ` +
      `${num(plan.alreadyAcknowledged)} already acknowledged. Backlog ${num(plan.backlog.before)} → ${num(plan.backlog.after)}.</p>` +
    `<table data-testid="radar-preview-table"><thead><tr><th>partition</th><th class="num">ids</th>` +
    `<th class="num">backlog before</th><th class="num">after</th></tr></thead><tbody>${parts.map(([name, p]) =>
      `<tr><td class="mono">${theirs(name)}</td><td class="num">${num(p.ids)}</td><td class="num">${num(p.before)}</td>` +
      `<td class="num">${num(p.after)}</td></tr>`).join("")}</tbody></table>` +
    `<details><summary>the ${num(plan.ids)} id(s)</summary><p class="mono" data-testid="radar-preview-ids">${
      plan.messageIds.map((m) => esc(`${m.partition}/${m.messageId}`)).join(" ")}</p></details>` +
    // A reason is what the approver reads (required there, and recorded with the request).
    (gated ? `<p><label>why (the approver reads it) <input type="text" size="60" data-testid="radar-reason"></label></p>` : "") +
    `<p><button type="button" data-testid="radar-confirm">${action}</button> ` +
    `<button type="button" data-testid="radar-cancel">cancel</button></p>`;
  const reason = box.querySelector("[data-testid=radar-reason]");
  if (reason) reason.value = request.conf.reason;
  box.hidden = false;
  box.querySelector("[data-testid=radar-cancel]").addEventListener("click", () => {
    box.hidden = true; box.innerHTML = ""; button.disabled = false;
  });
  box.querySelector("[data-testid=radar-confirm]").addEventListener("click", (event) =>
    applySkip(url, body, reason ? reason.value : null, plan, event.target, out));
}

/* The confirmed request through skipByMessageIds: applied at once, or, where the namespace
   requires approval, the skip workflow started as this user (the answer links to its
   approval) with the reason. */
async function applySkip(url, body, reason, plan, confirm, out) {
  confirm.disabled = true;
  const headers = { "Content-Type": "application/json" };
  if (reason !== null) headers["X-Cursorops-Reason"] = headerText(reason);
  try {
    const response = await fetch(url, { method: "POST", credentials: "same-origin", headers, body });
    const answer = await response.json().catch(() => ({}));
    if (response.status === 202) {
      out.innerHTML = `waiting for approval: <a href="${esc(answer.url)}">run ${esc(answer.runId)}</a>`;
    } else if (response.ok) {
      out.textContent = `skipped ${num(plan.ids)} message id(s)`;
    } else {
      out.textContent = `refused: ${theirsText(answer.reason || response.status)}`;
      confirm.disabled = false;
    }
  } catch (error) { out.textContent = `failed: ${error}`; confirm.disabled = false; }
}

/* ---------- audit log ---------- */

async function auditView(path, sub) {
  const section = $("audit");
  section.hidden = false;
  const target = $("audit-body");
  let records;
  try {
    records = await getJson(`${path}/auditLog?limit=200`);
  } catch (error) { target.innerHTML = failed("the audit log", error); return; }
  const undone = new Set(records.filter((r) => r.kind === "undo-skip").map((r) => r.detail && r.detail.skipId));
  // A refusal before any plan (a workflow's validation) has no closing record: it is its own row.
  const refusedEarly = (r) => r.kind.endsWith("-refused") && !(r.detail || {}).planDigest;
  records = records.filter((r) => OPERATIONS.some((op) => r.kind === op || r.kind === `${op}-request` ||
    (r.kind === `${op}-refused` && refusedEarly(r))) &&
    (!sub || r.subscription === sub));
  if (!records.length) {
    target.innerHTML = `<p class="muted">No skips recorded${sub ? " on this subscription" : ""}.</p>`;
    await openRequestsView(path, sub);
    return;
  }
  target.innerHTML = `<table data-testid="audit-table"><thead><tr><th>when (UTC)</th><th>what</th><th>subscription</th><th>requested by</th><th>approved by</th><th>why</th><th>outcome</th></tr></thead><tbody>${
    records.map((r) => auditRow(r, undone)).join("")}</tbody></table>`;
  target.querySelectorAll("button.undo").forEach((button) => button.addEventListener("click", () => requestUndo(path, button)));
  await openRequestsView(path, sub);
}

/* Requests planned and never closed: waiting, or forced green, failed or abandoned before
   their closing record. Listed until a closing record names their plan. */
async function openRequestsView(path, sub) {
  const target = $("open-requests-body");
  let found;
  try {
    found = await getJson(`${path}/openRequests`);
  } catch (error) { target.innerHTML = failed("the open requests", error); return; }
  found = found.filter((r) => !sub || r.subscription === sub);
  if (!found.length) { target.innerHTML = `<p class="muted" data-testid="no-open-requests">Every request planned here is closed.</p>`; return; }
  target.innerHTML = `<table data-testid="open-requests-table"><thead><tr><th>planned (UTC)</th><th>what</th><th>subscription</th><th>requested by</th><th>why</th><th>state</th></tr></thead><tbody>${
    found.map((r) => `<tr data-testid="open-request-row" data-run-id="${esc(r.runId)}"><td class="when">${utc(r.plannedAtMs)}</td>` +
      `<td>${esc(r.operation)} via <a href="/dags/${seg(r.dagId)}/runs/${seg(r.runId)}">${esc(r.dagId)}</a></td>` +
      `<td>${theirs(r.subscription)}</td><td>${theirs(r.requester)}</td><td>${theirs(r.reason, REASON_CHARS)}</td>` +
      `<td><span class="badge ${r.applied ? "partly-applied" : "awaiting"}">${r.applied ? "applied, not closed" : "not applied"}</span><br>${planCell(r)}</td></tr>`).join("")}</tbody></table>`;
}

/* Undo of a skip: applied at once, or, where the namespace requires approval, a workflow run
   started as this user (the answer links to its approval). The reason is recorded. */
async function requestUndo(path, button) {
  const reason = window.prompt(`Why undo skip ${button.dataset.skipId}? (recorded; its messages are delivered again)`);
  if (reason === null) return;
  const out = button.parentElement.querySelector(".undo-result");
  button.disabled = true;
  try {
    const response = await fetch(
      `${path}/subscription/${seg(button.dataset.subscription)}/undoSkip/${seg(button.dataset.skipId)}`,
      { method: "POST", credentials: "same-origin", headers: { "X-Cursorops-Reason": headerText(reason) } });
    const body = await response.json().catch(() => ({}));
    if (response.status === 202) {
      out.innerHTML = `waiting for approval: <a href="${esc(body.url)}">run ${esc(body.runId)}</a>`;
    } else if (response.ok) {
      out.textContent = `undone: ${num((body.unacknowledged || []).length)} message(s) delivered again`;
    } else {
      out.textContent = `refused: ${theirsText(body.reason || response.status)}`;
      button.disabled = false;
    }
  } catch (error) { out.textContent = `failed: ${error}`; button.disabled = false; }
}

/* One identifier per plan: the plan record's digest, which the approver read in the gate's
   text, in full; a direct change (no approval) has only core's plan id. */
function planCell(d) {
  return d.planDigest
    ? `<span class="muted">plan</span> <code data-testid="plan-digest">${esc(legible(d.planDigest))}</code>`
    : `<span class="muted">direct, plan id</span> <code>${esc([...legible(d.planId || "")].slice(0, 12).join(""))}</code>`;
}

function auditRow(r, undone) {
  const d = r.detail || {};
  if (r.kind.endsWith("-request")) {
    const answer = d.answer || {};
    return `<tr data-testid="audit-row" data-run-id="${esc(d.runId)}"><td class="when">${utc(r.atMs)}</td>` +
      `<td>request via <a href="/dags/${seg(d.dagId)}/runs/${seg(d.runId)}">${esc(d.dagId)}</a></td>` +
      `<td>${theirs(r.subscription)}</td><td>${theirs(d.requester)}</td>` +
      `<td>${answer.by ? `${theirs(answer.by)}<br><span class="muted nowrap">${utc(answer.at)}</span>` : `<span class="muted">nobody</span>`}</td>` +
      `<td>${theirs(d.reason, REASON_CHARS)}${d.ticket ? `<br><span class="muted">ticket ${theirs(d.ticket)}</span>` : ""}</td>` +
      `<td><span class="badge ${esc(d.outcome)}">${esc(d.outcome)}</span><br><span class="muted">${theirs(d.statement, REASON_CHARS)}</span><br>${planCell(d)}</td></tr>`;
  }
  if (r.kind.endsWith("-refused")) {
    return `<tr data-testid="audit-row" data-run-id="${esc(d.runId)}"><td class="when">${utc(r.atMs)}</td>` +
      `<td>request via <a href="/dags/${seg(d.dagId)}/runs/${seg(d.runId)}">${esc(d.dagId)}</a><br>` +
      `<span class="muted">refused at ${esc(d.stage)}, before any plan</span></td>` +
      `<td>${theirs(r.subscription)}</td><td>${theirs(d.requester || r.role)}</td>` +
      `<td><span class="muted">nobody</span></td><td></td>` +
      `<td><span class="badge refused">refused</span><br><span class="muted">${theirs(d.reason, REASON_CHARS)}</span></td></tr>`;
  }
  if (r.kind !== "skip") {
    const what = { "undo-skip": `undo of skip ${esc(d.skipId)}`, redrive: "redrive", "reset-cursor": "reset-cursor", unsubscribe: "unsubscribe" }[r.kind] || esc(r.kind);
    const changed = r.kind === "undo-skip" ? `${num((d.unacknowledged || []).length)} delivered again`
      : r.kind === "redrive" ? (d.redrivenTo ? `${num((d.deadLetterIds || []).length)} redriven to ${theirs(d.redrivenTo)}` : `${num((d.deadLetterIds || []).length)} redriven`)
      : r.kind === "unsubscribe" ? `${num(d.dropped || 0)} message(s) dropped`
      : `${num((d.partitions || []).length)} partition(s) moved`;
    return `<tr data-testid="audit-row"><td class="when">${utc(r.atMs)}</td><td class="nowrap">${what} via ${esc(d.via || "?")}</td>` +
      `<td>${theirs(r.subscription)}</td><td>${theirs(r.role)}</td>` +
      `<td>${d.via === "airflow" ? `<span class="muted">see the request</span>` : `<span class="muted">not required</span>`}</td>` +
      `<td>${planCell(d)}</td>` +
      `<td><span class="badge applied">applied</span><br>${changed}</td></tr>`;
  }
  const skipped = (d.skipped || []).length;
  const undo = undone.has(r.id) ? `<br><span class="muted" data-testid="undone">undone</span>`
    : skipped ? `<br><button type="button" class="undo" data-testid="undo-skip" data-skip-id="${esc(r.id)}" data-subscription="${esc(r.subscription)}">request undo</button> <span class="undo-result muted"></span>` : "";
  return `<tr data-testid="audit-row" data-skip-id="${esc(r.id)}"><td class="when">${utc(r.atMs)}</td><td class="nowrap">skip via ${esc(d.via || "?")}<br><span class="muted">skip id ${esc(r.id)}</span></td>` +
    `<td>${theirs(r.subscription)}</td><td>${theirs(r.role)}</td>` +
    `<td>${d.via === "airflow" ? `<span class="muted">see the request</span>` : `<span class="muted">not required</span>`}</td>` +
    `<td>${planCell(d)}</td>` +
    `<td><span class="badge applied">applied</span><br>${num(skipped)} skipped, ${num((d.alreadyAcknowledged || []).length)} already acknowledged, ${num((d.acknowledgedMeanwhile || []).length)} acknowledged meanwhile${undo}</td></tr>`;
}

/* ---------- pending approvals (Airflow's own REST API, the caller's cookie) ---------- */

async function approvals() {
  await listApprovals($("approvals-body"));
  $("approvals").dataset.loaded = "1";
}

async function listApprovals(target) {
  let found;
  try {
    const query = `response_received=false&state=awaiting_input&dag_id_prefix_pattern=cursorops_&limit=100&order_by=-created_at`;
    found = await getJson(`/api/v2/dags/~/dagRuns/~/hitlDetails?${query}`);
  } catch (error) { target.innerHTML = failed("Airflow's approvals", error); return; }
  // Airflow keeps a gate that timed out (its task failed) among the unanswered ones: only
  // a gate whose task still waits can be approved (the query asks for those, and so does this).
  const pending = (found.hitl_details || []).filter((h) =>
    SKIP_DAGS.includes(h.task_instance.dag_id) && h.task_instance.state === "awaiting_input");
  if (!pending.length) { target.innerHTML = `<p class="muted" data-testid="no-approvals">No request waits for an approval.</p>`; return; }
  // The link sits under the subject, not in a column of its own: a wide preview can never
  // push it out of sight.
  target.innerHTML = `<table data-testid="approvals-table"><thead><tr><th>waiting since (UTC)</th><th>request</th></tr></thead><tbody>${
    pending.map((h) => {
      const ti = h.task_instance;
      const page = `/dags/${seg(ti.dag_id)}/runs/${seg(ti.dag_run_id)}/tasks/${seg(ti.task_id)}/required_actions`;
      return `<tr data-testid="approval-row" data-run-id="${esc(ti.dag_run_id)}"><td class="when">${utc(h.created_at)}</td>` +
        `<td><strong>${theirs(h.subject, REASON_CHARS)}</strong><br><span class="muted">${esc(ti.dag_id)} · run <code>${theirs(ti.dag_run_id)}</code></span>` +
        `<br><a class="approve-link" href="${page}">Approve or reject in Airflow →</a>` +
        `<details class="preview" data-dag-id="${esc(ti.dag_id)}" data-run-id="${esc(ti.dag_run_id)}"><summary>Preview</summary>` +
        `<div class="md">${markdown(h.body || "")}</div></details></td></tr>`;
    }).join("")}</tbody></table>`;
  // The same plan record, rendered by cursorops for this viewer: keys, properties and payload
  // excerpts only where the viewer's role may peek on the topic (Airflow's page masks them).
  await Promise.all([...target.querySelectorAll("details.preview")].map(async (box) => {
    try {
      const plan = await getJson(`${BASE}/planRecords/${seg(box.dataset.dagId)}/${seg(box.dataset.runId)}`);
      box.querySelector(".md").innerHTML = markdown(plan.preview);
      box.dataset.payloads = plan.contentShown ? "shown" : "masked";
      if (plan.stale) {
        // The gate says the same and offers only Reject: no link that invites an Approve.
        const link = box.parentElement.querySelector("a.approve-link");
        if (link) { link.textContent = "No longer approvable: reject in Airflow →"; link.dataset.stale = "1"; }
      }
    } catch (error) { /* Airflow's own text stays */ }
  }));
}

/* ---------- markdown (the gate's body): escaped first, a small subset ---------- */

function inline(text) {
  // Backslash-escaped punctuation (how the gate makes requester text inert) is literal text:
  // held aside first, so it can never open a code span, bold text or a table cell.
  const literal = [];
  const held = legible(text).replace(/\\([!-\/:-@\[-`{-~])/g, (_, ch) => { literal.push(ch); return `\uE000${literal.length - 1}\uE001`; });
  const html = esc(held).split(/(`[^`]*`)/).map((piece) => piece.startsWith("`") && piece.endsWith("`") && piece.length > 1
    ? `<code>${piece.slice(1, -1)}</code>` : piece.replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")).join("");
  return html.replace(/\uE000(\d+)\uE001/g, (_, k) => esc(literal[Number(k)]));
}

function markdown(source) {
  const lines = source.split("\n");
  const out = [];
  let i = 0;
  const cells = (line) => line.trim().replace(/^\||(?<!\\)\|$/g, "").split(/(?<!\\)\|/).map((c) => c.trim());
  while (i < lines.length) {
    const line = lines[i];
    if (/^\s*$/.test(line)) { i++; continue; }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) { const n = Math.min(heading[1].length + 1, 6); out.push(`<h${n}>${inline(heading[2])}</h${n}>`); i++; continue; }
    if (/^\s*[-*]\s+/.test(line)) {
      const items = [];
      while (i < lines.length && /^\s*[-*]\s+/.test(lines[i])) items.push(`<li>${inline(lines[i++].replace(/^\s*[-*]\s+/, ""))}</li>`);
      out.push(`<ul>${items.join("")}</ul>`); continue;
    }
    if (line.trim().startsWith("|") && i + 1 < lines.length && /^\s*\|?\s*:?-{3,}/.test(lines[i + 1])) {
      const head = cells(line);
      const align = cells(lines[i + 1]).map((c) => (c.endsWith(":") ? "num" : ""));
      i += 2;
      const rows = [];
      while (i < lines.length && lines[i].trim().startsWith("|")) rows.push(cells(lines[i++]));
      out.push(`<table><thead><tr>${head.map((h, k) => `<th class="${align[k] || ""}">${inline(h)}</th>`).join("")}</tr></thead><tbody>${
        rows.map((r) => `<tr>${r.map((c, k) => `<td class="${align[k] || ""}">${inline(c)}</td>`).join("")}</tr>`).join("")}</tbody></table>`);
      continue;
    }
    const para = [];
    while (i < lines.length && !/^\s*$/.test(lines[i]) && !/^(#{1,6}\s|\s*[-*]\s|\s*\|)/.test(lines[i])) para.push(lines[i++]);
    if (!para.length) para.push(lines[i++]);
    out.push(`<p>${inline(para.join(" "))}</p>`);
  }
  return out.join("");
}

/* ---------- charts: inline SVG, y in messages, exact values labelled ---------- */

function niceTicks(max, count = 5) {
  if (max <= 0) return [0, 1];
  const raw = max / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
  const stepInt = Math.max(1, Math.round(step));
  const ticks = [];
  for (let v = 0; v <= max + stepInt * 0.999; v += stepInt) ticks.push(v);
  if (ticks[ticks.length - 1] < max) ticks.push(ticks[ticks.length - 1] + stepInt);
  return ticks;
}

const W = 560, H = 300, M = { left: 70, right: 20, top: 24, bottom: 56 };

function yAxis(ticks, y, label) {
  return ticks.map((t) => `<line class="gridline" x1="${M.left}" x2="${W - M.right}" y1="${y(t)}" y2="${y(t)}"/>` +
    `<text x="${M.left - 8}" y="${y(t) + 4}" text-anchor="end">${num(t)}</text>`).join("") +
    `<line class="axis" x1="${M.left}" x2="${M.left}" y1="${M.top}" y2="${H - M.bottom}"/>` +
    `<line class="axis" x1="${M.left}" x2="${W - M.right}" y1="${H - M.bottom}" y2="${H - M.bottom}"/>` +
    `<text class="axis-label" transform="translate(16 ${(M.top + H - M.bottom) / 2}) rotate(-90)" text-anchor="middle">${label}</text>`;
}

function barChart(parts) {
  const max = Math.max(0, ...parts.map((p) => p.messages));
  const ticks = niceTicks(max);
  const top = ticks[ticks.length - 1];
  const y = (v) => M.top + (H - M.top - M.bottom) * (1 - v / top);
  const slot = (W - M.left - M.right) / Math.max(parts.length, 1);
  const bw = Math.min(64, slot * 0.6);
  const bars = parts.map((p, i) => {
    const x = M.left + slot * i + (slot - bw) / 2;
    return `<g data-testid="bar"><title>${esc(theirsText(p.name))}: ${num(p.messages)} messages</title>` +
      `<rect class="bar-rect" x="${x}" y="${y(p.messages)}" width="${bw}" height="${Math.max(0, y(0) - y(p.messages))}"/>` +
      `<text class="bar-value" x="${x + bw / 2}" y="${y(p.messages) - 6}" text-anchor="middle">${num(p.messages)}</text>` +
      `<text x="${x + bw / 2}" y="${H - M.bottom + 16}" text-anchor="middle">${esc(p.label)}</text></g>`;
  }).join("");
  return `<svg class="chart" data-testid="bar-chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="Exact backlog per partition, in messages">` +
    yAxis(ticks, y, "messages") + bars +
    `<text class="axis-label" x="${(M.left + W - M.right) / 2}" y="${H - 14}" text-anchor="middle">partition</text></svg>`;
}

const STEPS_MS = [60e3, 5 * 60e3, 15 * 60e3, 30 * 60e3, 3600e3, 2 * 3600e3, 6 * 3600e3, 12 * 3600e3, 86400e3, 7 * 86400e3];

function timeTicks(t0, t1, most = 6) {
  // Round UTC times (whole minutes, hours, days), at most `most` of them.
  const step = STEPS_MS.find((s) => (t1 - t0) / s <= most) || Math.ceil((t1 - t0) / most / 86400e3) * 86400e3;
  const out = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) out.push(t);
  return out.length ? out : [t0];
}

function lineChart(history) {
  const xs = history.map((h) => h.atMs);
  let t0 = Math.min(...xs), t1 = Math.max(...xs);
  if (t0 === t1) { t0 -= 60_000; t1 += 60_000; }
  const ticks = niceTicks(Math.max(0, ...history.map((h) => h.messages)));
  const top = ticks[ticks.length - 1];
  const y = (v) => M.top + (H - M.top - M.bottom) * (1 - v / top);
  const x = (t) => M.left + 10 + (W - M.left - M.right - 20) * ((t - t0) / (t1 - t0));
  const sameDay = new Date(t0).toISOString().slice(0, 10) === new Date(t1).toISOString().slice(0, 10);
  const label = (t) => {
    const iso = new Date(t).toISOString();
    return sameDay ? iso.slice(11, 16) : `${iso.slice(5, 10)} ${iso.slice(11, 16)}`;
  };
  const tt = timeTicks(t0, t1);
  // Labels near an edge are anchored inside the chart so none is cut off.
  const anchor = (t) => (x(t) < M.left + 40 ? "start" : x(t) > W - M.right - 40 ? "end" : "middle");
  const xt = tt.map((t) => `<line class="axis" x1="${x(t)}" x2="${x(t)}" y1="${H - M.bottom}" y2="${H - M.bottom + 4}"/>` +
    `<text x="${x(t)}" y="${H - M.bottom + 16}" text-anchor="${anchor(t)}">${label(t)}</text>`).join("");
  const path = history.map((h, k) => `${k ? "L" : "M"}${x(h.atMs).toFixed(1)},${y(h.messages).toFixed(1)}`).join(" ");
  const dots = history.map((h) => `<circle class="dot" data-testid="history-point" data-messages="${h.messages}" data-at-ms="${h.atMs}" cx="${x(h.atMs).toFixed(1)}" cy="${y(h.messages).toFixed(1)}" r="3.5">` +
    `<title>${utc(h.atMs)}: ${num(h.messages)} messages</title></circle>`).join("");
  const day = sameDay ? ` on ${new Date(t0).toISOString().slice(0, 10)}` : "";
  return `<svg class="chart" data-testid="line-chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="Backlog history, in messages">` +
    yAxis(ticks, y, "messages") + xt + `<path class="line" d="${path}"/>` + dots +
    `<text class="axis-label" x="${(M.left + W - M.right) / 2}" y="${H - 14}" text-anchor="middle">time (UTC)${day}</text></svg>`;
}

/* ---------- start ---------- */

window.addEventListener("hashchange", render);
render();
approvals();
