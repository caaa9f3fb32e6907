#!/usr/bin/env node
// modern_server.js: a small stdio MCP server of vigil's own that speaks only revision
// 2026-07-28 (no npm server does yet): it answers server/discover, refuses initialize as an
// unknown method, and refuses any request whose params._meta lacks the protocol version
// (-32022, as the revision says). Every result has resultType. Tools:
//   echo      answers "echo: <message>"
//   methods   answers the methods it received so far, in order
//   ask       multi-round-trip (input_required): first asks elicitation/create "q", then,
//             given its answer, roots/list "r" (the first answer carried in requestState),
//             then answers "q=<answer of q> r=<answer of r>"
//   sample    asks sampling/createMessage (which vigil cannot give)
//   grow      adds a tool "grown" and, to a client that asked with subscriptions/listen,
//             announces notifications/tools/list_changed tagged with its subscription id
// subscriptions/listen is acknowledged (notifications/subscriptions/acknowledged) and kept
// open: it is never answered while the server runs.
// With PORT set it serves Streamable HTTP on 127.0.0.1:PORT (path /mcp, "listening on port N"
// on stderr) instead of stdio: every request answers one JSON body, except subscriptions/listen,
// whose answer is an SSE stream kept open (the acknowledgement, then the change notifications,
// those made before it arrived first).
'use strict';
const V = '2026-07-28', K = 'io.modelcontextprotocol/';
let buf = '';
const seen = [];
let listening = null; // the id of the open subscriptions/listen request
let out = (m) => process.stdout.write(JSON.stringify(m) + '\n');
let stream = null; // HTTP: the open subscriptions/listen stream
const pending = []; // HTTP: announcements made before the client's listen arrived
const sendOnStream = (text) => stream ? stream(text) : pending.push(text);
const err = (id, code, message, data) => out({jsonrpc: '2.0', id, error: {code, message, data}});
const tools = ['echo', 'methods', 'ask', 'grow', 'sample'].map((n) => ({
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
    const note = {jsonrpc: '2.0', method: 'notifications/tools/list_changed',
      params: {_meta: {[K + 'subscriptionId']: listening}}};
    if (process.env.PORT) sendOnStream('event: message\ndata: ' + JSON.stringify(note) + '\n\n');
    else if (listening !== null) out(note); // before the answer: the client has read it by then
    return done('grown');
  }
  if (p.name === 'grown') return done('I am new');
  if (p.name === 'methods') return done(seen.join(','));
  const ask = (inputRequests, requestState) => out({jsonrpc: '2.0', id,
    result: {resultType: 'input_required', inputRequests, requestState}});
  const ir = p.inputResponses || {};
  if (p.name === 'ask' && !p.requestState)
    return ask({q: {method: 'elicitation/create', params: {message: 'who?',
      requestedSchema: {type: 'object', properties: {name: {type: 'string'}}}}}}, 'round1');
  if (p.name === 'ask' && p.requestState === 'round1')
    return ask({r: {method: 'roots/list', params: {}}}, JSON.stringify({q: ir.q}));
  if (p.name === 'ask')
    return done('q=' + JSON.stringify(JSON.parse(p.requestState).q) + ' r=' + JSON.stringify(ir.r));
  if (p.name === 'sample')
    return ask({s: {method: 'sampling/createMessage', params: {messages: [{role: 'user',
      content: {type: 'text', text: 'capital of France?'}}], maxTokens: 10}}}, 'sampling');
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
function serveHttp(port) {
  require('http').createServer((req, res) => {
    let body = '';
    req.on('data', (d) => body += d);
    req.on('end', () => {
      let m;
      try { m = JSON.parse(body); } catch (e) { res.writeHead(400); return res.end(); }
      if (m.id === undefined) { res.writeHead(202); return res.end(); }
      if (m.method === 'subscriptions/listen' && req.headers['mcp-method'] === m.method) {
        res.writeHead(200, {'Content-Type': 'text/event-stream'});
        stream = (text) => res.write(text);
        res.on('close', () => { stream = null; });
        out = (msg) => res.write('event: message\ndata: ' + JSON.stringify(msg) + '\n\n');
        handle(m);
        for (const text of pending.splice(0)) stream(text);
        return;
      }
      out = (msg) => { res.writeHead(200, {'Content-Type': 'application/json'});
        res.end(JSON.stringify(msg)); };
      if (req.headers['mcp-method'] !== m.method)
        return err(m.id, -32020, 'Mcp-Method header does not match the body');
      handle(m);
    });
  }).listen(Number(port), '127.0.0.1', () =>
    process.stderr.write('listening on port ' + port + '\n'));
}
if (process.env.PORT) { serveHttp(process.env.PORT); return; }
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
