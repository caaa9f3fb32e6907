// The MCP TypeScript SDK's client (the reference implementation, revision 2025-11-25) calling a
// tool on vigil's /mcp with progress (tests/cli/test_mcp_http_progress.sh): it sends a progress
// token, reads the answer's server-sent event stream and hands each notifications/progress to
// onprogress. Usage: node mcp_progress_client.mjs SDK_DIR URL TOKEN TOOL MESSAGE.
// Prints one JSON object: {"progress": [...], "result": {...}}.
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const [sdk, url, token, tool, message] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(path.join(sdk, 'dist/esm', p)).href);
const { Client } = await load('client/index.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: 'vigil-progress-test', version: '1' });
await client.connect(transport);
const progress = [];
const result = await client.callTool({ name: tool, arguments: { message } }, undefined, {
  onprogress: (p) => progress.push(p),
});
console.log(JSON.stringify({ progress, result }));
await client.close();
