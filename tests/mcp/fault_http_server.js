#!/usr/bin/env node
// fault_http_server.js: a Streamable HTTP MCP server of vigil's own (revision 2025-11-25) for
// what real servers do only by accident. Listens on 127.0.0.1:$PORT at /mcp, says "listening
// on port N" on stderr when ready. initialize answers JSON with a session id; every other
// request answers an SSE stream (a priming event with empty data first). Tools:
//   ok       answers "ok: <n>" after a progress notification on the stream
//   cut      opens the stream, sends the priming event, then closes the connection
//   expire   answers, then forgets the session (the next request gets 404)
//   inits    answers how many sessions were initialized
'use strict';
const http = require('http');
let sessions = new Set(), inits = 0, calls = 0, next = 1;
const tools = ['ok', 'cut', 'expire', 'inits'].map((n) => ({name: n, description: 'http fault ' + n,
  inputSchema: {type: 'object', properties: {}}}));
function sse(res, msgs, cut) {
  res.writeHead(200, {'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache'});
  res.write('id: 0\ndata: \n\n');
  if (cut) return setTimeout(() => res.socket.destroy(), 20);
  for (const m of msgs) res.write('event: message\ndata: ' + JSON.stringify(m) + '\n\n');
  res.end();
}
function handle(req, res, m) {
  const sid = req.headers['mcp-session-id'];
  if (m.method === 'initialize') {
    const s = 's' + next++;
    sessions.add(s);
    inits++;
    res.writeHead(200, {'Content-Type': 'application/json', 'Mcp-Session-Id': s});
    return res.end(JSON.stringify({jsonrpc: '2.0', id: m.id, result: {protocolVersion: '2025-11-25',
      capabilities: {tools: {}}, serverInfo: {name: 'fault-http', version: '1'}}}));
  }
  if (!sid || !sessions.has(sid)) {
    res.writeHead(404, {'Content-Type': 'application/json'});
    return res.end(JSON.stringify({jsonrpc: '2.0', id: null,
      error: {code: -32001, message: 'Session not found'}}));
  }
  if (m.id === undefined) { res.writeHead(202); return res.end(); }
  const reply = (result) => ({jsonrpc: '2.0', id: m.id, result});
  const text = (t) => reply({content: [{type: 'text', text: t}]});
  if (m.method === 'tools/list') return sse(res, [reply({tools})]);
  if (m.method !== 'tools/call')
    return sse(res, [{jsonrpc: '2.0', id: m.id, error: {code: -32601, message: 'Method not found'}}]);
  const name = m.params.name;
  if (name === 'cut') return sse(res, [], true);
  if (name === 'expire') { sessions.delete(sid); return sse(res, [text('expired')]); }
  if (name === 'inits') return sse(res, [text('inits: ' + inits)]);
  calls++;
  const tok = m.params._meta && m.params._meta.progressToken;
  return sse(res, [{jsonrpc: '2.0', method: 'notifications/progress',
    params: {progressToken: tok, progress: 1, total: 1}}, text('ok: ' + calls)]);
}
const server = http.createServer((req, res) => {
  let body = '';
  req.on('data', (d) => body += d);
  req.on('end', () => {
    let m;
    try { m = JSON.parse(body); } catch (e) { res.writeHead(400); return res.end(); }
    handle(req, res, m);
  });
});
server.listen(Number(process.env.PORT), '127.0.0.1', () =>
  process.stderr.write('listening on port ' + process.env.PORT + '\n'));
