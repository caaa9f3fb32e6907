#!/usr/bin/env node
// fault_server.js: a small stdio MCP server of vigil's own for what real servers do only by
// accident. It speaks 2025-11-25 (initialize, tools/list in pages of 2, tools/call) and its
// tools misbehave on purpose:
//   ok        answers "ok: <n>" (n counts calls since start)
//   crash     exits (status 3) mid-call, before answering
//   hang      never answers; the test checks that notifications/cancelled arrives after
//   garbage   writes non-JSON lines, a response with an unknown id and a server ping (id 0),
//             then answers
//   huge      answers a 10 MB text result on one line
//   progress  sends notifications/progress for the call's token, then answers
//   cancelled answers whether a notifications/cancelled for a request arrived
//   quit      answers, then exits (status 0) at once
//   env       answers the names of its environment variables and the value of TOKEN
//   grow      (only with FAULT_GROW set) adds a tool "grown" and announces list_changed
//   methods   (not listed) answers the methods it received so far, in order
//   stuck     (not listed) blocks the server's only thread for 10 minutes: nothing, not even a
//             ping, is answered (a single-threaded server stuck in a call)
// The first tools/list answer is followed by notifications/tools/list_changed.
// How reference servers bend the specification, on demand: FAULT_VERSION answers initialize
// with that protocolVersion whatever was asked (everything answers 2025-11-25 to 2099-01-01);
// FAULT_STUCK_CURSOR answers every tools/list page with the same nextCursor (everything
// ignores a cursor it does not know).
// With FAULT_STARTS_FILE set it appends a line to that file each time it starts; with
// FAULT_CALLS_FILE set, the time (ms since the epoch) each tools/call arrives. With
// FAULT_TOOLS_FILE set to a file holding a JSON array of tool objects ({name, ...}), those
// tools are listed too, read at each start (as after an update of a real server); calling one
// answers "extra: NAME".
'use strict';
if (process.env.FAULT_STARTS_FILE) require('fs').appendFileSync(process.env.FAULT_STARTS_FILE, 'start\n');
const seen = [];
let afterPing = null, buf = '', calls = 0, cancelled = [], pingAnswered = false, listed = false;
const out = (m) => process.stdout.write(JSON.stringify(m) + '\n');
const names = ['ok', 'crash', 'hang', 'garbage', 'huge', 'progress', 'cancelled', 'env', 'quit'];
if (process.env.FAULT_GROW) names.push('grow');
const tool = (n) => ({
  name: n, description: 'fault tool ' + n,
  inputSchema: {type: 'object', properties: {}},
  annotations: n === 'ok' ? {readOnlyHint: true} : undefined,
});
const tools = names.map(tool);
const extraFile = process.env.FAULT_TOOLS_FILE;
const extra = extraFile && require('fs').existsSync(extraFile)
  ? JSON.parse(require('fs').readFileSync(extraFile, 'utf8')) : [];
for (const t of extra) tools.push(Object.assign({inputSchema: {type: 'object'}}, t));
function call(id, p) {
  calls++;
  if (process.env.FAULT_CALLS_FILE)
    require('fs').appendFileSync(process.env.FAULT_CALLS_FILE, Date.now() + '\n');
  const text = (t) => out({jsonrpc: '2.0', id, result: {content: [{type: 'text', text: t}]}});
  switch (p.name) {
    case 'ok': return text('ok: ' + calls);
    case 'crash': process.stderr.write('fault: crashing now\n'); return process.exit(3);
    case 'hang': return;
    case 'garbage':
      process.stdout.write('this is not json\n{"half":\n');
      out({jsonrpc: '2.0', id: 987654, result: {}});
      out({jsonrpc: '2.0', id: 0, method: 'ping'});
      // answered when the ping's answer arrives (a wait on the event, not a time: the client
      // may be slow under load), or after 10 s without it
      afterPing = () => text('after garbage, ping answered: ' + pingAnswered);
      return setTimeout(() => { if (afterPing) { afterPing(); afterPing = null; } }, 10000);
    case 'huge': return text('x'.repeat(10 * 1024 * 1024));
    case 'progress':
      out({jsonrpc: '2.0', method: 'notifications/progress',
        params: {progressToken: p._meta && p._meta.progressToken, progress: 1, total: 2}});
      return text('progress sent');
    case 'cancelled': return text('cancelled: ' + JSON.stringify(cancelled));
    case 'quit': text('bye'); return process.exit(0);
    case 'env': return text(JSON.stringify({names: Object.keys(process.env).sort(),
      token: process.env.TOKEN}));
  }
  if (p.name === 'grow' && process.env.FAULT_GROW) {
    tools.push(tool('grown'));
    text('grown');
    return out({jsonrpc: '2.0', method: 'notifications/tools/list_changed'});
  }
  if (p.name === 'grown' && tools.length > names.length) return text('I am new');
  if (p.name === 'methods') return text(seen.join(','));
  if (p.name === 'stuck') return Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 600000);
  if (extra.some((t) => t.name === p.name)) return text('extra: ' + p.name);
  out({jsonrpc: '2.0', id, result: {isError: true,
    content: [{type: 'text', text: 'Unknown tool: ' + p.name}]}});
}
function handle(m) {
  if (m.method) seen.push(m.method);
  if (m.id === 0 && !m.method) {
    pingAnswered = JSON.stringify(m.result) === '{}';
    if (afterPing) { afterPing(); afterPing = null; }
    return;
  }
  if (m.method === 'notifications/cancelled') { cancelled.push(m.params.requestId); return; }
  if (!m.method || m.id === undefined) return;
  if (m.method === 'initialize')
    return out({result: {protocolVersion: process.env.FAULT_VERSION || '2025-11-25', capabilities: {tools: {listChanged: true}},
      serverInfo: {name: 'fault', version: '1'}}, jsonrpc: '2.0', id: m.id});
  if (m.method === 'tools/list') {
    const start = m.params && m.params.cursor ? Number(m.params.cursor) : 0;
    const page = tools.slice(start, start + 2);
    const r = {tools: page};
    if (start + 2 < tools.length) r.nextCursor = String(start + 2);
    if (process.env.FAULT_STUCK_CURSOR) r.nextCursor = '0';
    out({jsonrpc: '2.0', id: m.id, result: r});
    if (!listed && !r.nextCursor) {
      listed = true;
      out({jsonrpc: '2.0', method: 'notifications/tools/list_changed'});
    }
    return;
  }
  if (m.method === 'tools/call') return call(m.id, m.params);
  out({jsonrpc: '2.0', id: m.id, error: {code: -32601, message: 'Method not found'}});
}
process.stdin.on('data', (d) => {
  buf += d;
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    let m;
    try { m = JSON.parse(line); } catch (e) { continue; } // like the SDK: no reply
    handle(m);
  }
});
process.stdin.on('end', () => { if (!process.env.FAULT_IGNORE_EOF) process.exit(0); });
process.on('SIGTERM', () => { if (!process.env.FAULT_IGNORE_TERM) process.exit(0); });
