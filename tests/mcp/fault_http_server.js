#!/usr/bin/env node
// fault_http_server.js: a Streamable HTTP MCP server of vigil's own (revision 2025-11-25) for
// what real servers do only by accident. Listens on 127.0.0.1:$PORT at /mcp, says "listening
// on port N" on stderr when ready. initialize answers JSON with a session id; every other
// request answers an SSE stream (a priming event with empty data first). Tools:
//   ok       answers "ok: <n>" after a progress notification on the stream
//   cut      opens the stream, sends the priming event, then closes the connection
//   expire   answers, then forgets the session (the next request gets 404)
//   expire400 the same, but the next request gets what the TypeScript SDK's servers answer:
//            400 "Bad Request: No valid session ID provided" with id null
//   inits    answers how many sessions were initialized
//   announce adds the tool "extra" and announces notifications/tools/list_changed on the GET
//            stream (queued until a GET stream is open)
//   dropget  sends one more event on the GET stream and cuts it: answers that event's id
//   lastid   answers the Last-Event-ID of the GET that reconnected after dropget (waits for it)
//   conns    answers how many TCP connections the server accepted so far
//   hold     answers "held" and keeps its stream open for a minute (the specification's SHOULD
//            close after the response, not kept)
// The GET of /mcp with a session id is the server's own stream (`retry: 50`, events with ids).
// Authorization "Bearer wrong" is answered 401, "Bearer forbidden" 403.
'use strict';
const http = require('http');
let gone400 = new Set(), sessions = new Set(), inits = 0, calls = 0, next = 1;
let conns = 0, dropped = 0, getStream = null, queued = [], eventId = 0, gets = 0, lastGetId = null, waitGet = null;
const tools = ['ok', 'cut', 'expire', 'expire400', 'inits', 'announce', 'dropget', 'lastid', 'conns', 'hold'].map((n) => ({name: n, description: 'http fault ' + n,
  inputSchema: {type: 'object', properties: {}}}));
function sse(res, msgs, cut) {
  res.writeHead(200, {'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache'});
  res.write('id: 0\ndata: \n\n');
  if (cut) return setTimeout(() => res.socket.destroy(), 20);
  for (const m of msgs) res.write('event: message\ndata: ' + JSON.stringify(m) + '\n\n');
  res.end();
}
function onGet(req, res) {
  const sid = req.headers['mcp-session-id'];
  if (!sid || !sessions.has(sid)) { res.writeHead(404); return res.end(); }
  gets++;
  lastGetId = req.headers['last-event-id'] || null;
  res.writeHead(200, {'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache'});
  res.write('retry: 50\n\n');
  getStream = res;
  res.on('close', () => { if (getStream === res) getStream = null; });
  for (const m of queued.splice(0)) push(m);
  if (waitGet) { const w = waitGet; waitGet = null; w(); }
}
function push(m, then) { // one event on the GET stream, or queued until one is open
  if (!getStream) return queued.push(m);
  getStream.write('id: ev-' + ++eventId + '\nevent: message\ndata: ' + JSON.stringify(m) + '\n\n',
    then);
}
function handle(req, res, m) {
  const auth = req.headers['authorization'];
  if (auth === 'Bearer wrong' || auth === 'Bearer forbidden') {
    res.writeHead(auth === 'Bearer wrong' ? 401 : 403, {'Content-Type': 'text/plain'});
    return res.end('no');
  }
  const sid = req.headers['mcp-session-id'];
  if (m.method === 'initialize') {
    const s = 's' + next++;
    sessions.add(s);
    inits++;
    res.writeHead(200, {'Content-Type': 'application/json', 'Mcp-Session-Id': s});
    return res.end(JSON.stringify({jsonrpc: '2.0', id: m.id, result: {protocolVersion: '2025-11-25',
      capabilities: {tools: {}}, serverInfo: {name: 'fault-http', version: '1'}}}));
  }
  if (gone400.has(sid)) {
    res.writeHead(400, {'Content-Type': 'application/json'});
    return res.end(JSON.stringify({jsonrpc: '2.0', error: {code: -32000,
      message: 'Bad Request: No valid session ID provided'}, id: null}));
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
  if (name === 'expire400') {
    sessions.delete(sid);
    gone400.add(sid);
    return sse(res, [text('expired')]);
  }
  if (name === 'inits') return sse(res, [text('inits: ' + inits)]);
  if (name === 'conns') return sse(res, [text('conns: ' + conns)]);
  if (name === 'hold') {
    res.writeHead(200, {'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache'});
    res.write('event: message\ndata: ' + JSON.stringify(text('held')) + '\n\n');
    return setTimeout(() => res.end(), 60000);
  }
  if (name === 'announce') {
    if (!tools.find((t) => t.name === 'extra'))
      tools.push({name: 'extra', description: 'added later', inputSchema: {type: 'object'}});
    push({jsonrpc: '2.0', method: 'notifications/tools/list_changed'});
    return sse(res, [text('announced')]);
  }
  if (name === 'dropget') {
    if (!getStream) return sse(res, [text('no GET stream')]);
    const stream = getStream, before = gets;
    // cut once the event is on its way (a destroy right after the write could drop it)
    push({jsonrpc: '2.0', method: 'notifications/message', params: {level: 'info', data: 'bye'}},
      () => stream.socket.destroy());
    const id = 'ev-' + eventId;
    getStream = null;
    dropped = before;
    return sse(res, [text(id)]);
  }
  if (name === 'lastid') {
    const answer = () => sse(res, [text('last-event-id: ' + lastGetId)]);
    if (gets > dropped) return answer();
    waitGet = answer;
    return;
  }
  calls++;
  const tok = m.params._meta && m.params._meta.progressToken;
  return sse(res, [{jsonrpc: '2.0', method: 'notifications/progress',
    params: {progressToken: tok, progress: 1, total: 1}}, text('ok: ' + calls)]);
}
const server = http.createServer((req, res) => {
  if (req.method === 'GET') return onGet(req, res);
  let body = '';
  req.on('data', (d) => body += d);
  req.on('end', () => {
    let m;
    try { m = JSON.parse(body); } catch (e) { res.writeHead(400); return res.end(); }
    handle(req, res, m);
  });
});
server.on('connection', () => conns++);
server.listen(Number(process.env.PORT), '127.0.0.1', () =>
  process.stderr.write('listening on port ' + process.env.PORT + '\n'));
