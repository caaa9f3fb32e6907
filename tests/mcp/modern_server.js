#!/usr/bin/env node
// modern_server.js: a small stdio MCP server of vigil's own that speaks only revision
// 2026-07-28 (no npm server does yet): it answers server/discover, refuses initialize as an
// unknown method, and refuses any request whose params._meta lacks the protocol version
// (-32022, as the revision says). Every result has resultType. Tools:
//   echo      answers "echo: <message>"
//   methods   answers the methods it received so far, in order
//   ask       answers resultType input_required (a question for the client)
//   grow      adds a tool "grown" and, to a client that asked with subscriptions/listen,
//             announces notifications/tools/list_changed tagged with its subscription id
// subscriptions/listen is acknowledged (notifications/subscriptions/acknowledged) and kept
// open: it is never answered while the server runs.
'use strict';
const V = '2026-07-28', K = 'io.modelcontextprotocol/';
let buf = '';
const seen = [];
let listening = null; // the id of the open subscriptions/listen request
const out = (m) => process.stdout.write(JSON.stringify(m) + '\n');
const err = (id, code, message, data) => out({jsonrpc: '2.0', id, error: {code, message, data}});
const tools = ['echo', 'methods', 'ask', 'grow'].map((n) => ({
  name: n, description: 'modern tool ' + n,
  inputSchema: {type: 'object', properties: n === 'echo' ? {message: {type: 'string'}} : {}},
  annotations: {readOnlyHint: true},
}));
function call(id, p) {
  const done = (t) => out({jsonrpc: '2.0', id, result: {resultType: 'complete',
    content: [{type: 'text', text: t}]}});
  if (p.name === 'echo') return done('echo: ' + (p.arguments || {}).message);
  if (p.name === 'grow') {
    tools.push({name: 'grown', description: 'grown later', inputSchema: {type: 'object'},
      annotations: {readOnlyHint: true}});
    if (listening !== null) // before the answer, so the client has read it by then
      out({jsonrpc: '2.0', method: 'notifications/tools/list_changed',
        params: {_meta: {[K + 'subscriptionId']: listening}}});
    return done('grown');
  }
  if (p.name === 'grown') return done('I am new');
  if (p.name === 'methods') return done(seen.join(','));
  if (p.name === 'ask') return out({jsonrpc: '2.0', id, result: {resultType: 'input_required',
    inputRequests: {q: {method: 'elicitation/create', params: {message: 'who?',
      requestedSchema: {type: 'object', properties: {}}}}}, requestState: 'x'}});
  return err(id, -32602, 'Unknown tool: ' + p.name);
}
function handle(m) {
  if (!m.method || m.id === undefined) return;
  seen.push(m.method);
  const meta = (m.params && m.params._meta) || {};
  if (m.method === 'initialize') return err(m.id, -32601, 'Method not found');
  if (meta[K + 'protocolVersion'] !== V)
    return err(m.id, -32022, 'Unsupported protocol version', {supported: [V],
      requested: meta[K + 'protocolVersion']});
  if (m.method === 'server/discover')
    return out({jsonrpc: '2.0', id: m.id, result: {resultType: 'complete', supportedVersions: [V],
      capabilities: {tools: {}}, _meta: {[K + 'serverInfo']: {name: 'modern', version: '1'}},
      ttlMs: 3600000, cacheScope: 'public'}});
  if (m.method === 'tools/list')
    return out({jsonrpc: '2.0', id: m.id, result: {resultType: 'complete', tools, ttlMs: 60000}});
  if (m.method === 'tools/call') return call(m.id, m.params);
  if (m.method === 'subscriptions/listen') {
    listening = m.id;
    return out({jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged',
      params: {_meta: {[K + 'subscriptionId']: m.id}, notifications: m.params.notifications}});
  }
  err(m.id, -32601, 'Method not found');
}
process.stdin.on('data', (d) => {
  buf += d;
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    try { handle(JSON.parse(line)); } catch (e) { /* like the SDK: no reply */ }
  }
});
process.stdin.on('end', () => process.exit(0));
