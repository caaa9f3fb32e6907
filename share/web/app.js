// vigil web admin page (docs/web.md). Plain script, no framework, no build step.
// Every piece of data comes from the /v1 API with the bearer token from sessionStorage, and is
// put on the page with textContent (never innerHTML): a name or a message cannot run script.
'use strict';

const TOKEN_KEY = 'vigil.token';
const state = { route: null, kill: null, lastEventId: null, stream: null, refreshTimer: 0,
  openRuns: new Set() };

// ---- DOM helpers --------------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') node.className = v;
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}
const $ = (id) => document.getElementById(id);
const text = (v) => (v === undefined || v === null ? '' : typeof v === 'string' ? v : JSON.stringify(v, null, 2));
const when = (t) => (t ? new Date(typeof t === 'number' ? t / 1000 : t).toLocaleString() : '');
const badge = (s) => el('span', { class: 'badge ' + (s || '') }, s || '?');

function notice(message) {
  const n = $('notice');
  n.textContent = message || '';
  n.hidden = !message;
  padUnderBar();
}

// The top bar (with the notices under it) is sticky: scrolling to a field or a link (Tab, a
// route's focus) stops below it, never under it (trial F14).
function padUnderBar() {
  document.documentElement.style.scrollPaddingTop = $('bar').offsetHeight + 'px';
}

// What an action did (a run cancelled, a re-run queued): beside the notice, read out politely.
function say(message) {
  const s = $('status');
  s.textContent = message || '';
  s.hidden = !message;
  padUnderBar();
}

// A refresh rebuilds the view it shows while events arrive; what a person is typing must
// survive it. Fields carry a data-keep key: the new field of the same key gets the old one's
// value, and focus and caret when it had them.
function swap(parent, ...children) {
  const kept = {};
  for (const f of parent.querySelectorAll('[data-keep]')) if (f.value) kept[f.dataset.keep] = f.value;
  const a = document.activeElement;
  const focus = a && a.dataset && a.dataset.keep && parent.contains(a)
    ? { key: a.dataset.keep, start: a.selectionStart, end: a.selectionEnd } : null;
  parent.replaceChildren(...children);
  for (const f of parent.querySelectorAll('[data-keep]')) {
    if (kept[f.dataset.keep] !== undefined && !f.value) f.value = kept[f.dataset.keep];
    if (focus && f.dataset.keep === focus.key) {
      f.focus();
      try { f.setSelectionRange(focus.start, focus.end); } catch (e) { /* not a text field */ }
    }
  }
}

// ---- markdown (the report) as DOM nodes: headings, lists, code, emphasis, links -------------
// Built with createElement and text nodes only, so markdown from an agent can add no markup of
// its own; a link is kept only for http(s) addresses.
function mdInline(src) {
  const out = [];
  const re = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*|_[^_\s][^_]*_)|\[([^\]]+)\]\(([^)\s]+)\)/g;
  let last = 0, m;
  while ((m = re.exec(src))) {
    out.push(src.slice(last, m.index));
    if (m[1]) out.push(el('code', {}, m[1].slice(1, -1)));
    else if (m[2]) out.push(el('strong', {}, m[2].slice(2, -2)));
    else if (m[3]) out.push(el('em', {}, m[3].slice(1, -1)));
    else out.push(/^https?:\/\//i.test(m[5]) ? el('a', { href: m[5], rel: 'noreferrer noopener', target: '_blank' }, m[4]) : m[0]);
    last = re.lastIndex;
  }
  out.push(src.slice(last));
  return out;
}

function markdown(src) {
  const root = el('div', { class: 'markdown' });
  let list = null, para = null, code = null;
  for (const line of src.split('\n')) {
    if (code) {
      if (/^```/.test(line)) code = null;
      else code.append(line + '\n');
      continue;
    }
    const h = line.match(/^(#{1,6})\s+(.*)$/), li = line.match(/^\s*(?:[-*+]|(\d+)\.)\s+(.*)$/);
    if (/^```/.test(line)) { root.append(el('pre', {}, code = el('code', {}))); list = para = null; }
    else if (h) { root.append(el('h' + Math.min(h[1].length + 2, 6), {}, mdInline(h[2]))); list = para = null; }
    else if (li) {
      const tag = li[1] ? 'ol' : 'ul';
      if (!list || list.tagName.toLowerCase() !== tag) root.append(list = el(tag, {}));
      list.append(el('li', {}, mdInline(li[2])));
      para = null;
    } else if (!line.trim()) { list = para = null; }
    else if (para) para.append(' ', ...mdInline(line));
    else { root.append(para = el('p', {}, mdInline(line))); list = null; }
  }
  return root;
}

// ---- the API ------------------------------------------------------------------------------
const token = () => sessionStorage.getItem(TOKEN_KEY);

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || 'HTTP ' + status);
    this.status = status;
    this.code = body && body.code;
  }
}

async function api(method, path, body) {
  const headers = { Authorization: 'Bearer ' + token() };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body) });
  const data = res.status === 204 ? null : await res.json().catch(() => null);
  if (res.status === 401) signOut('The token was refused: paste the one `vigil token` prints.');
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

// Run an action from a button; a refusal shows in the notice bar, and the view refreshes.
async function act(button, fn) {
  button.disabled = true;
  say('');
  try {
    await fn();
    notice('');
  } catch (e) {
    notice(e.message);
  } finally {
    button.disabled = false;
    refresh();
  }
}

// ---- the token ----------------------------------------------------------------------------
function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  if (state.stream) state.stream.abort();
  state.stream = null;
  showTokenForm(message);
}

function showTokenForm(message) {
  const view = $('view');
  view.replaceChildren($('token-form') || tokenFormTemplate);
  $('token-form').hidden = false;
  $('signout').hidden = true;
  $('kill-toggle').disabled = true;
  notice(message || '');
  $('token-input').focus();
}
let tokenFormTemplate = null;

// ---- kill switch (on every page) ----------------------------------------------------------
async function loadKill() {
  const data = await api('GET', '/v1/kill');
  const list = Array.isArray(data) ? data : data.switches || data.items || [];
  const global = list.find((s) => !s.agent_id && !s.tool_class);
  state.kill = !!(global ? global.on !== false : data.global);
  const box = $('kill');
  box.classList.toggle('on', state.kill);
  $('kill-state').textContent = state.kill
    ? 'Kill switch ON: no new wakes, mutating tools refused' + (global && global.reason ? ' (' + global.reason + ')' : '')
    : 'Kill switch off';
  const b = $('kill-toggle');
  b.textContent = state.kill ? 'Turn kill switch off' : 'Turn kill switch on';
  b.className = state.kill ? '' : 'danger';
  b.disabled = false;
}

function toggleKill() {
  const b = $('kill-toggle');
  const on = !state.kill;
  if (on && !confirm('Stop every agent: no new wakes, mutating tools refused?')) return;
  act(b, () => api('POST', '/v1/kill', { on, reason: 'web page' }).then(loadKill));
}

// ---- views --------------------------------------------------------------------------------
async function pendingByAgent() {
  const [approvals, memory] = await Promise.all([
    api('GET', '/v1/approvals?status=pending'), api('GET', '/v1/memory/pending')]);
  const count = {};
  for (const a of items(approvals)) count[a.agent_id] = (count[a.agent_id] || 0) + 1;
  for (const m of items(memory)) count[m.agent_id] = (count[m.agent_id] || 0) + 1;
  $('approvals-count').textContent = items(approvals).length || '';
  return count;
}
const items = (d) => (Array.isArray(d) ? d : (d && d.items) || []);

// The report's markdown, from GET /v1/agents/{id} ({agent, report, runtime, state}).
const reportText = (show) => (show && show.report && show.report.markdown) || '';
const headline = (show) =>
  reportText(show).split('\n').map((l) => l.replace(/^#+\s*/, '').trim()).find((l) => l) || '';
const runId = (run) => run.run_id || run.id;
// When the report was written, how sure its agent was and what it rests on, and whether it is
// stale (older than its scope's freshness: GET /v1/agents/{id} reports stale and stale_at).
function reportMeta(r) {
  if (!r || !r.markdown) return '';
  const parts = ['written ' + when(r.created_at)];
  if (typeof r.confidence === 'number') parts.push('confidence ' + Math.round(r.confidence * 100) + '%');
  if (r.sources && r.sources.length) parts.push('sources: ' + r.sources.join(', '));
  if (r.stale_at && !r.stale) parts.push('fresh until ' + when(r.stale_at));
  return el('p', { id: 'report-meta', class: 'muted' },
    r.stale ? [el('span', { class: 'badge stale' }, 'stale'), ' since ' + when(r.stale_at) + '; '] : '',
    parts.join('; '));
}

async function viewAgents(root) {
  const [list, pending] = await Promise.all([api('GET', '/v1/agents?limit=200'), pendingByAgent()]);
  const agents = items(list);
  for (const a of agents) agentNames[a.id] = a.name;
  const runs = await Promise.all(agents.map((a) =>
    api('GET', '/v1/runs?limit=1&agent=' + encodeURIComponent(a.id)).catch(() => null)));
  const shows = await Promise.all(agents.map((a) =>
    api('GET', '/v1/agents/' + encodeURIComponent(a.id)).catch(() => null)));
  const rows = agents.map((a, i) => {
    const last = items(runs[i])[0];
    return el('tr', { 'data-agent': a.id },
      el('td', {}, el('a', { href: '#/agents/' + encodeURIComponent(a.id) }, a.name || a.id)),
      el('td', {}, badge(a.lifecycle || a.status)),
      el('td', {}, headline(shows[i])),
      el('td', {}, last ? [badge(last.status), ' ', when(last.started_at || last.created_at), runError(last)]
        : el('span', { class: 'muted' }, 'none')),
      el('td', {}, pending[a.id] ? el('span', { class: 'badge pending' }, pending[a.id] + ' pending') : ''));
  });
  swap(root, el('h1', {}, 'Agents'),
    agents.length ? el('table', { id: 'agents' },
      el('thead', {}, el('tr', {}, ['Agent', 'Lifecycle', 'Report', 'Last run', 'Pending'].map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, rows))
      : el('p', { class: 'muted' }, 'No agents yet. Create one with `vigil agent create` or POST /v1/agents.'));
}

const agentNames = {};
// What happens after an answer (trial F13): the agent was woken to act on it, or acts at its
// next wake.
function resolvedText(r, agent) {
  const what = 'Approval ' + (r && r.status ? r.status : 'answered');
  if (!r || r.wake_run_key === undefined) return what + '.';
  return r.wake_run_key ? what + ': ' + agent + ' was woken to act on it.'
    : what + ': ' + agent + ' cannot be woken now; it acts on it at its next wake.';
}

function approvalRow(a) {
  const reason = el('input', { 'aria-label': 'Reason', placeholder: 'reason (optional)', size: 18,
    'data-keep': 'approval-reason:' + a.id });
  const resolve = (verb) => (ev) => act(ev.currentTarget, async () => {
    const r = await api('POST', '/v1/approvals/' + encodeURIComponent(a.id) + '/' + verb,
      reason.value ? { reason: reason.value } : {});
    say(resolvedText(r, agentNames[a.agent_id] || a.agent_id));
  });
  return el('tr', { 'data-approval': a.id },
    el('td', {}, el('a', { href: '#/agents/' + encodeURIComponent(a.agent_id) }, agentNames[a.agent_id] || a.agent_id)),
    el('td', {}, a.tool || ''),
    el('td', {}, el('pre', {}, text(a.preview && a.preview.arguments !== undefined ? a.preview.arguments : a.preview))),
    el('td', {}, badge(a.status), ' ', when(a.created_at)),
    el('td', {}, a.status === 'pending' ? el('div', { class: 'controls' }, reason,
      el('button', { type: 'button', onclick: resolve('approve') }, 'Approve'),
      el('button', { type: 'button', class: 'danger', onclick: resolve('reject') }, 'Reject'))
      : [text(a.resolved_by || ''), ' ', text(a.reason || '')]));
}

function approvalsTable(list, id, empty) {
  if (!list.length) return el('p', { class: 'muted', id: id + '-empty' }, empty || 'Nothing waiting.');
  return el('table', { id },
    el('thead', {}, el('tr', {}, ['Agent', 'Tool', 'Operation', 'Status', ''].map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, list.map(approvalRow)));
}

async function viewApprovals(root) {
  const [pending, all, memory, agents] = await Promise.all([api('GET', '/v1/approvals?status=pending'),
    api('GET', '/v1/approvals'), api('GET', '/v1/memory/pending'), api('GET', '/v1/agents?limit=1000')]);
  for (const a of items(agents)) agentNames[a.id] = a.name;
  $('approvals-count').textContent = items(pending).length || '';
  const resolved = items(all).filter((a) => a.status !== 'pending').slice(-20).reverse();
  swap(root, el('h1', {}, 'Approvals'),
    el('h2', {}, 'Tool calls waiting for a human'), approvalsTable(items(pending), 'approvals'),
    el('h2', {}, 'Memory changes waiting'), memoryPendingList(items(memory)),
    el('h2', {}, 'Recently resolved'), approvalsTable(resolved, 'approvals-resolved', 'No approval resolved yet.'));
}

function memoryPendingList(list) {
  if (!list.length) return el('p', { class: 'muted' }, 'No pending memory changes.');
  return el('ul', { id: 'memory-pending' }, list.map((m) => {
    const reason = el('input', { 'aria-label': 'Reason for rejecting', placeholder: 'reason (needed to reject)', size: 22,
      'data-keep': 'memory-reason:' + m.id });
    const url = '/v1/memory/pending/' + encodeURIComponent(m.id);
    return el('li', { class: 'card', 'data-pending': m.id },
      el('div', {}, el('strong', {}, m.label || ''), ' ', badge(m.op || 'change'), ' ',
        el('span', { class: 'muted' }, (agentNames[m.agent_id] || m.agent_id) + ' · ' + when(m.created_at))),
      el('div', {}, 'Proposed'), el('pre', {}, text(m.text)),
      m.old_content ? el('details', {}, el('summary', {}, 'Current content'), el('pre', {}, text(m.old_content))) : '',
      el('div', { class: 'controls' },
        el('button', { type: 'button', onclick: (e) => act(e.currentTarget, () => api('POST', url + '/approve', {})) }, 'Approve change'),
        reason,
        el('button', { type: 'button', class: 'danger', onclick: (e) => act(e.currentTarget, () => {
          if (!reason.value) throw new Error('Give a reason to reject a memory change: the agent is told it.');
          return api('POST', url + '/reject', { reason: reason.value });
        }) }, 'Reject change')));
  }));
}

// ---- agent detail -------------------------------------------------------------------------
function controls(agent) {
  const id = encodeURIComponent(agent.id);
  const msg = el('input', { id: 'wake-message', 'aria-label': 'Message to wake the agent with', placeholder: 'message (optional)' });
  const post = (verb, body) => (e) => act(e.currentTarget, () => api('POST', '/v1/agents/' + id + '/' + verb, body));
  return el('form', { class: 'controls card', id: 'controls', onsubmit: (e) => {
    e.preventDefault();
    const b = $('wake');
    act(b, async () => {
      const r = await api('POST', '/v1/agents/' + id + '/wake', msg.value ? { message: msg.value } : {});
      msg.value = '';
      notice('');
      return r;
    });
  } },
  el('button', { type: 'button', id: 'pause', onclick: post('pause', {}) }, 'Pause'),
  el('button', { type: 'button', id: 'resume', onclick: post('resume', {}) }, 'Resume'),
  msg, el('button', { type: 'submit', id: 'wake' }, 'Wake'),
  el('button', { type: 'button', id: 'destroy', class: 'danger', onclick: (e) => {
    if (confirm('Destroy this agent? It cannot be undone.')) post('destroy', { reason: 'web page' })(e);
  } }, 'Destroy'));
}

// Only what the lifecycle allows: Pause an active agent, Resume a dormant (paused) or new one;
// a destroyed one takes neither, nor a wake. Destroy asks first.
function lifecycleControls(lifecycle) {
  $('pause').disabled = lifecycle !== 'active';
  $('resume').disabled = lifecycle !== 'dormant' && lifecycle !== 'created';
  $('wake').disabled = lifecycle === 'destroyed';
  $('destroy').disabled = lifecycle === 'destroyed';
}

function toolCallItem(t) {
  const full = el('div', {});
  const id = t.tool_call_id || t.id;
  return el('li', { class: 'card', 'data-tool-call': id },
    el('div', {}, el('strong', {}, t.name || ''), ' ', badge(t.status), ' ', when(t.started_at), ' ',
      t.error_code ? el('span', { class: 'badge failed' }, t.error_code) : '', ' ',
      el('span', { class: 'muted' }, typeof t.duration_ms === 'number' ? t.duration_ms + ' ms' : '')),
    el('div', {}, 'Input'), el('pre', {}, text(t.input_preview !== undefined ? t.input_preview : t.input)),
    el('div', {}, 'Output'), el('pre', {}, text(t.output_preview !== undefined ? t.output_preview : t.output)),
    (t.input_truncated || t.output_truncated) ? el('button', { type: 'button', onclick: (e) => act(e.currentTarget, async () => {
      full.replaceChildren(el('pre', {}, text(await api('GET', '/v1/tool-calls/' + encodeURIComponent(id)))));
    }) }, 'Show in full') : '', full);
}

async function runMessages(run, box) {
  const [msgs, tools] = await Promise.all([
    api('GET', '/v1/runs/' + encodeURIComponent(runId(run)) + '/messages?limit=200'),
    api('GET', '/v1/runs/' + encodeURIComponent(runId(run)) + '/tools?limit=200')]);
  box.replaceChildren(
    el('ol', { class: 'messages' }, items(msgs).map((m) => el('li', {},
      el('strong', {}, m.role || ''), ' ', el('span', { class: 'muted' }, (m.type || '') + ' · ' + when(m.occurred_at)),
      el('pre', {}, text(m.preview)),
      m.truncated ? el('button', { type: 'button', onclick: (e) => {
        const b = e.currentTarget;
        act(b, async () => b.replaceWith(el('pre', {}, text(await api('GET', '/v1/messages/' + encodeURIComponent(m.record_id))))));
      } }, 'Show in full') : ''))),
    items(tools).length ? el('ul', { class: 'tools' }, items(tools).map(toolCallItem)) : '',
    el('button', { type: 'button', onclick: (e) => act(e.currentTarget, async () => {
      box.append(el('pre', {}, text(await api('GET', '/v1/runs/' + encodeURIComponent(runId(run)) + '/replay'))));
    }) }, 'Replay from the journal'));
}

// A run's controls, as `vigil runs cancel|rerun`: Cancel a queued or running run, Re-run an
// ended one (with another prompt when given); each asks first, as the kill switch does.
const ENDED = new Set(['completed', 'failed', 'interrupted', 'canceled', 'crashed']);
function runControls(run, origin) {
  const id = runId(run);
  const url = '/v1/runs/' + encodeURIComponent(id);
  // Only a wake's run can be cancelled or re-run: a chat turn is said to be one, with no
  // button that can only be refused (trial F20).
  if (origin === 'chat') {
    return el('span', { class: 'muted run-note', 'data-chat-turn': id },
      'Chat turn: only a wake\'s run can be cancelled or re-run.');
  }
  if (run.status === 'running' || run.status === 'queued') {
    return el('div', { class: 'controls run-controls' }, el('button', { type: 'button', class: 'danger',
      'data-cancel': id, onclick: (e) => {
        if (!confirm('Cancel this run? A queued run never starts; a running one stops before its next model call.')) return;
        act(e.currentTarget, async () => say((await api('POST', url + '/cancel', {})).message));
      } }, 'Cancel run'));
  }
  if (!ENDED.has(run.status)) return '';
  const prompt = el('input', { 'aria-label': 'Prompt for the re-run', placeholder: 'new prompt (optional)',
    'data-keep': 'rerun-prompt:' + id });
  return el('form', { class: 'controls run-controls', 'data-rerun': id, onsubmit: (e) => {
    e.preventDefault();
    if (!confirm('Run this again as a new run of the agent' + (prompt.value ? ' with the new prompt?' : ' with the same input?'))) return;
    act(e.currentTarget.querySelector('button'), async () => {
      const r = await api('POST', url + '/rerun', prompt.value ? { prompt: prompt.value } : {});
      prompt.value = '';
      say('Re-run queued as run key ' + r.run_key.slice(0, 16) + '.');
    });
  } }, prompt, el('button', { type: 'submit' }, 'Re-run'));
}

// Why a run failed or was interrupted (a budget spent, the provider's refusal), beside its badge
// (trial F15); a completed run has no error.
const runError = (run) => (run && run.error ? el('span', { class: 'run-error', 'data-run-error': '' }, run.error) : '');

// Where a run came from, by the agent's wake log (newest first, up to 200 entries): a run whose
// run key is in it was started by a wake; one that is not, while the log was read whole, is a
// chat turn (the daemon refuses to cancel or re-run those); otherwise it is not known.
function runOrigin(wakeLog) {
  const list = items(wakeLog), keys = new Set(list.map((w) => w.run_key));
  const whole = wakeLog !== null && list.length < WAKE_LOG_LIMIT;
  return (run) => (keys.has(run.run_key) ? 'wake' : whole ? 'chat' : 'unknown');
}
const WAKE_LOG_LIMIT = 200;

function runItem(run, origin) {
  const box = el('div', {});
  const id = runId(run);
  const d = el('details', { 'data-run': id, open: state.openRuns.has(id) },
    el('summary', {}, badge(run.status), runError(run), ' ', when(run.started_at), ' ',
      el('span', { class: 'muted' }, (run.wake_reason || '') + (run.tool_calls ? ' · ' + run.tool_calls + ' tool calls' : '')),
      ' ', run.summary_preview || ''),
    box);
  d.addEventListener('toggle', () => {
    if (d.open) { state.openRuns.add(id); runMessages(run, box).catch((e) => notice(e.message)); }
    else state.openRuns.delete(id);
  });
  if (d.open) runMessages(run, box).catch((e) => notice(e.message));
  return el('div', { class: 'run', 'data-run-row': id }, d, runControls(run, origin));
}

// A wake still queued has no run record yet: it is listed from the wake log above the runs, to
// be cancelled before it starts.
function queuedItem(w) {
  return el('div', { class: 'run', 'data-queued': w.run_key },
    el('div', { class: 'queued' }, badge('queued'), ' ', when(w.created_at), ' ',
      el('span', { class: 'muted' }, w.reason || ''), ' ', typeof w.seed_input === 'string' ? w.seed_input : ''),
    runControls({ run_id: w.run_key, status: 'queued' }));
}

async function recentToolCalls(runs) {
  const lists = await Promise.all(runs.slice(0, 10).map((r) =>
    api('GET', '/v1/runs/' + encodeURIComponent(runId(r)) + '/tools?limit=50').catch(() => null)));
  const all = lists.flatMap(items);
  return all.length ? el('ul', { id: 'tool-calls' }, all.map(toolCallItem)) : el('p', { class: 'muted' }, 'No tool calls yet.');
}

// Calls made outside runs (`vigil tool call`, the API's tool call), newest first.
function handCalls(list) {
  return el('ul', { id: 'hand-calls' }, list.map((c) => el('li', { class: 'card', 'data-operation': c.operation_id },
    el('div', {}, el('strong', {}, c.tool || ''), ' ', badge(c.error_code ? 'failed' : c.result_status || c.status), ' ',
      when(c.started_at), ' ', c.error_code ? el('span', { class: 'badge failed' }, c.error_code) : '', ' ',
      el('span', { class: 'muted' }, 'run key ' + (c.run_key || ''))),
    el('pre', {}, text(c.arguments_preview)))));
}

function memoryBlocks(list) {
  if (!list.length) return el('p', { class: 'muted' }, 'No memory blocks.');
  return el('ul', { id: 'memory' }, list.map((b) => el('li', { class: 'card' },
    el('strong', {}, b.label), ' ', el('span', { class: 'muted' }, [b.tier, b.permission].filter(Boolean).join(', ')),
    el('pre', {}, text(b.content !== undefined ? b.content : b.value)))));
}

// ---- lineage (GET /v1/agents/{id}/tree, as `vigil agent tree`) ------------------------------
const agentLink = (id, name) => (id ? el('a', { href: '#/agents/' + encodeURIComponent(id) }, name || agentNames[id] || id)
  : el('span', { class: 'muted' }, 'no agent'));
const goal = (request) => (request && (request.goal || request.input)) || '';

function childList(kids) {
  if (!kids || !kids.length) return '';
  return el('ul', { class: 'children' }, kids.map((k) => el('li', { 'data-child': k.child_agent },
    agentLink(k.child_agent, k.child_name), ' ', badge(k.status), ' ',
    el('span', { class: 'muted' }, 'depth ' + k.depth + ' · run ' + String(k.run_key || '').slice(0, 16)),
    goal(k.request) ? el('div', {}, goal(k.request)) : '', childList(k.children))));
}

function lineage(tree) {
  const up = tree.spawned_by || [], kids = tree.children || [], decisions = tree.decisions || [];
  if (!up.length && !kids.length && !decisions.length)
    return el('p', { class: 'muted', id: 'lineage' }, 'No spawns: no agent spawned this one, and it spawned none.');
  return el('div', { id: 'lineage' },
    up.length ? el('div', { id: 'spawned-by' }, el('h3', {}, 'Spawned by'), el('ul', {}, up.map((p) => el('li', {},
      agentLink(p.parent_agent, p.parent_name), ' ', badge(p.status), ' ',
      el('span', { class: 'muted' }, 'run ' + String(p.run_key || '').slice(0, 16)), goal(p.request) ? ' · ' + goal(p.request) : '')))) : '',
    kids.length ? el('div', { id: 'children' }, el('h3', {}, 'Children'), childList(kids)) : '',
    decisions.length ? el('div', {}, el('h3', {}, 'Spawn decisions'), el('table', { id: 'decisions' },
      el('thead', {}, el('tr', {}, ['Decision', 'Reason', 'Child', 'Goal', 'When'].map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, decisions.map((d) => el('tr', { 'data-decision': d.decision },
        el('td', {}, badge(d.decision)), el('td', {}, d.reason || ''), el('td', {}, agentLink(d.child_agent)),
        el('td', {}, goal(d.request)), el('td', {}, when(d.at_ms ? d.at_ms * 1000 : null))))))) : '');
}

// Today's budget use against the agent's limits (trial F15): "tokens 6000 / 5000" for each
// limited budget, the use alone for the others; budgets reset at the next UTC day.
function budgetLine(use, limits) {
  if (!use) return '';
  limits = limits || {};
  const parts = [['tokens', 'tokens', (v) => String(v)], ['cost_micros', 'cost_usd', (v) => '$' + (v / 1e6).toFixed(4), 'cost'],
    ['steps', 'steps', String], ['tool_calls', 'tool_calls', String, 'tool calls'], ['wall_ms', 'wall_ms', (v) => v + ' ms', 'wall time']]
    .filter(([k, lim]) => limits[lim] !== undefined || use[k])
    .map(([k, lim, fmt, label]) => {
      const limit = limits[lim] === undefined ? '' : ' / ' + (lim === 'cost_usd' ? '$' + Number(limits[lim]).toFixed(4) : fmt(limits[lim]));
      const spent = limits[lim] !== undefined && (lim === 'cost_usd' ? use[k] >= limits[lim] * 1e6 : use[k] >= limits[lim]);
      return (label || k) + ' ' + fmt(use[k] || 0) + limit + (spent ? ' (spent)' : '');
    });
  return (parts.length ? parts.join(', ') : 'nothing used') + (Object.keys(limits).length ? '' : '; no budget set');
}

async function agentData(show) {
  const agent = show.agent;
  const id = encodeURIComponent(agent.id);
  const [runs, memory, pending, approvals, queued, tree, byHand, wakeLog, budget] = await Promise.all([
    api('GET', '/v1/runs?limit=20&agent=' + id), api('GET', '/v1/agents/' + id + '/memory'),
    api('GET', '/v1/memory/pending?agent=' + id), api('GET', '/v1/approvals?status=pending&agent=' + id),
    api('GET', '/v1/wakes?status=queued&limit=50&agent=' + id), api('GET', '/v1/agents/' + id + '/tree'),
    api('GET', '/v1/agents/' + id + '/tool-calls?limit=20'),
    api('GET', '/v1/wakes?limit=' + WAKE_LOG_LIMIT + '&agent=' + id).catch(() => null),
    api('GET', '/v1/agents/' + id + '/budget').catch(() => null)]);
  const origin = runOrigin(wakeLog);
  const waiting = items(queued).slice().reverse(); // oldest first: the next to start on top
  const rt = show.runtime || {}, st = show.state || {};
  const activity = [['Lifecycle', agent.lifecycle + (agent.lifecycle_reason ? ' (' + agent.lifecycle_reason + ')' : '')],
    ['Run', rt.run_status + (rt.active_run_id ? ' ' + rt.active_run_id : '')],
    ['Last run started', when(rt.last_run_started_at)], ['Failure streak', rt.failure_streak],
    ['Last wake', when(st.last_wake_at)], ['Next wake', when(st.next_wake_at)],
    ['Sleeping until', when(st.sleep_until)], ['Wakes', st.wake_counter],
    ['Budget today', budgetLine(budget, (agent.config || {}).budgets)]];
  return [
    el('div', { class: 'grid' },
      el('section', { 'aria-labelledby': 'h-report' }, el('h2', { id: 'h-report' }, 'Report'),
        reportMeta(show.report), reportText(show) ? el('div', { id: 'report' }, markdown(reportText(show)))
          : el('p', { id: 'report', class: 'muted' }, 'No report yet.')),
      el('section', { 'aria-labelledby': 'h-activity' }, el('h2', { id: 'h-activity' }, 'Activity and state'),
        el('dl', { id: 'activity' }, activity.map(([k, v]) => [el('dt', {}, k), el('dd', {}, text(v) || '—')])),
        el('details', {}, el('summary', {}, 'Full state'), el('pre', {}, text({ runtime: show.runtime, state: show.state }))))),
    el('h2', {}, 'Waiting for approval'), approvalsTable(items(approvals), 'agent-approvals'),
    el('h2', {}, 'Runs'), items(runs).length || waiting.length
      ? el('div', { id: 'runs' }, waiting.map(queuedItem), items(runs).map((r) => runItem(r, origin(r)))) : el('p', { class: 'muted', id: 'runs' }, 'No runs yet.'),
    el('h2', {}, 'Tool calls'), await recentToolCalls(items(runs)),
    items(byHand).length ? el('div', {}, el('h3', {}, 'Made by hand (not by a run)'), handCalls(items(byHand))) : '',
    el('h2', {}, 'Lineage'), lineage(tree),
    el('h2', {}, 'Memory'), memoryBlocks(items(memory)),
    el('h2', {}, 'Pending memory changes'), memoryPendingList(items(pending))];
}

async function viewAgent(root, id) {
  const show = await api('GET', '/v1/agents/' + encodeURIComponent(id));
  const agent = show.agent;
  agentNames[agent.id] = agent.name;
  let head = $('agent-head');
  if (!head || head.dataset.agent !== agent.id) {
    head = el('div', { id: 'agent-head', 'data-agent': agent.id });
    root.replaceChildren(head, el('div', { id: 'agent-data' }));
    head.append(el('h1', {}), el('p', { class: 'muted' }), controls(agent));
  }
  head.querySelector('h1').replaceChildren(agent.name || agent.id, ' ', badge(agent.lifecycle || agent.status));
  head.querySelector('p').textContent = 'Agent ' + agent.id + (agent.kind ? ' · ' + agent.kind : '');
  lifecycleControls(agent.lifecycle || agent.status);
  swap($('agent-data'), ...await agentData(show));
}

// ---- the task graph (GET /v1/tasks, as `vigil task list`) ---------------------------------
// attention first: a task whose run completed with a call in doubt waits for a person.
const TASK_ORDER = ['attention', 'running', 'ready', 'pending', 'failed', 'done', 'cancelled'];

// What a task in attention waits for: the calls of its run a person must answer.
function inDoubtNote(t) {
  if (!t.in_doubt) return '';
  return el('div', { class: 'in-doubt' }, 'In doubt: ' + (t.in_doubt.calls || 0) + ' call(s) of run ' +
    String(t.in_doubt.run_key || '').slice(0, 16) + '; answer them with ', el('code', {}, 'vigil indoubt list'),
    ' and ', el('code', {}, 'vigil indoubt resolve'), '.');
}

async function viewTasks(root) {
  const [tasks, agents] = await Promise.all([api('GET', '/v1/tasks'), api('GET', '/v1/agents?limit=1000&all=1')]);
  for (const a of items(agents)) agentNames[a.id] = a.name;
  const list = items(tasks);
  const title = {};
  for (const t of list) title[t.id] = t.title;
  const edge = (ids) => (ids && ids.length ? el('ul', { class: 'edges' }, ids.map((i) => el('li', {}, title[i] || i))) : '—');
  const groups = TASK_ORDER.map((st) => [st, list.filter((t) => t.status === st)]).filter(([, g]) => g.length);
  swap(root, el('h1', {}, 'Tasks'),
    list.length ? el('p', { class: 'muted' }, list.length + ' tasks. A task is ready when every task it waits for is done; ',
      el('code', {}, 'vigil task dispatch'), ' starts the ready ones.') : '',
    ...(list.length ? groups.map(([st, g]) => el('section', { 'data-status': st },
      el('h2', {}, st[0].toUpperCase() + st.slice(1), ' ', el('span', { class: 'count' }, String(g.length))),
      el('table', { class: 'tasks' },
        el('thead', {}, el('tr', {}, ['Task', 'Status', 'Kind', 'Agent', 'Waits for', 'Blocks', 'Attempts'].map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, g.map((t) => el('tr', { 'data-task': t.id },
          el('td', {}, el('strong', {}, t.title), el('div', { class: 'muted' }, t.id), t.reason ? el('div', {}, t.reason) : '',
            t.status === 'attention' ? inDoubtNote(t) : ''),
          el('td', {}, badge(t.status)), el('td', {}, t.kind || 'any'),
          el('td', {}, t.agent ? agentLink(t.agent) : el('span', { class: 'muted' }, 'not dispatched')),
          el('td', {}, edge(t.blocked_by)), el('td', {}, edge(t.blocks)), el('td', {}, String(t.attempts || 0))))))))
      : [el('p', { class: 'muted', id: 'tasks-empty' }, 'No tasks yet. Add one with ', el('code', {}, 'vigil task add --title T'), '.')]));
}

// ---- routing and refresh ------------------------------------------------------------------
function route() {
  const h = location.hash.replace(/^#/, '') || '/agents';
  const m = h.match(/^\/agents\/([^/]+)$/);
  if (m) return { name: 'agent', id: decodeURIComponent(m[1]) };
  if (h === '/approvals') return { name: 'approvals' };
  if (h === '/tasks') return { name: 'tasks' };
  return { name: 'agents' };
}

let rendering = null;
async function render() {
  if (!token()) return showTokenForm();
  const r = route();
  const changed = !state.route || state.route.name !== r.name || state.route.id !== r.id;
  state.route = r;
  for (const [nav, on] of [['nav-agents', r.name === 'agents' || r.name === 'agent'],
    ['nav-approvals', r.name === 'approvals'], ['nav-tasks', r.name === 'tasks']]) {
    if (on) $(nav).setAttribute('aria-current', 'page');
    else $(nav).removeAttribute('aria-current');
  }
  const root = $('view');
  if (changed) root.replaceChildren(el('p', { class: 'muted' }, 'Loading…'));
  const focused = document.activeElement && document.activeElement.id;
  try {
    if (r.name === 'agent') await viewAgent(root, r.id);
    else if (r.name === 'approvals') await viewApprovals(root);
    else if (r.name === 'tasks') await viewTasks(root);
    else await viewAgents(root);
    if (focused && $(focused) && document.activeElement !== $(focused)) $(focused).focus();
    if (changed && !focused) {
      // A new view starts at the top, its heading below the bar (trial F14).
      root.focus({ preventScroll: true });
      window.scrollTo(0, 0);
    }
  } catch (e) {
    if (e.status === 404 && r.name === 'agent') notFound(root, e.message);
    else if (e.status !== 401) notice(e.message);
  }
}

// An agent that is not there (a mistyped link, one deleted meanwhile): said in the view, with
// the way back, rather than "Loading…" left standing.
function notFound(root, message) {
  notice('');
  root.replaceChildren(el('h1', {}, 'Agent not found'), el('p', { id: 'not-found' }, message),
    el('p', {}, el('a', { href: '#/agents' }, 'Back to the agents')));
}

// One render at a time; a refresh asked for during one runs after it.
function refresh() {
  clearTimeout(state.refreshTimer);
  state.refreshTimer = setTimeout(async () => {
    if (rendering) { await rendering; return refresh(); }
    rendering = render().finally(() => { rendering = null; });
  }, 150);
}

// ---- live events: fetch streaming (EventSource cannot send the Authorization header) -------
async function streamEvents() {
  const ctrl = new AbortController();
  state.stream = ctrl;
  const live = $('live');
  let wait = 1000;
  while (state.stream === ctrl && token()) {
    try {
      const headers = { Authorization: 'Bearer ' + token(), Accept: 'text/event-stream' };
      if (state.lastEventId) headers['Last-Event-ID'] = state.lastEventId;
      const res = await fetch('/v1/events', { headers, signal: ctrl.signal, cache: 'no-store' });
      if (res.status === 401) return signOut('The token was refused.');
      if (!res.ok || !res.body) throw new Error('HTTP ' + res.status);
      live.textContent = 'live';
      live.classList.add('on');
      wait = 1000;
      await readEvents(res.body.getReader());
    } catch (e) {
      if (ctrl.signal.aborted) return;
    }
    live.textContent = 'reconnecting';
    live.classList.remove('on');
    await new Promise((r) => setTimeout(r, wait));
    wait = Math.min(wait * 2, 15000);
  }
}

async function readEvents(reader) {
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const ev = { event: 'message', data: '' };
      for (const line of block.split('\n')) {
        const i = line.indexOf(':');
        if (i === 0) continue; // a comment (heartbeat)
        const k = i < 0 ? line : line.slice(0, i);
        const v = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
        if (k === 'id') state.lastEventId = v;
        else if (k === 'event') ev.event = v;
        else if (k === 'data') ev.data += (ev.data ? '\n' : '') + v;
      }
      if (block.replace(/^:.*$/gm, '').trim()) onEvent(ev);
    }
  }
}

function onEvent(ev) {
  if (ev.event === 'kill') loadKill().catch(() => {});
  refresh();
}

// ---- start --------------------------------------------------------------------------------
function start() {
  $('signout').hidden = false;
  loadKill().catch((e) => notice(e.message));
  if (!state.stream) streamEvents();
  state.route = null;
  refresh();
}

document.addEventListener('DOMContentLoaded', () => {
  tokenFormTemplate = $('token-form');
  tokenFormTemplate.addEventListener('submit', (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $('token-input').value.trim());
    $('token-input').value = '';
    tokenFormTemplate.remove();
    start();
  });
  $('signout').addEventListener('click', () => signOut('Token forgotten.'));
  $('kill-toggle').addEventListener('click', toggleKill);
  window.addEventListener('hashchange', refresh);
  window.addEventListener('resize', padUnderBar);
  padUnderBar();
  if (token()) { tokenFormTemplate.remove(); start(); } else showTokenForm();
});
