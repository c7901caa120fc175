// Drives `ringfence mcp` (stdio) or `ringfence serve`'s /mcp (Streamable HTTP)
// with an official MCP TypeScript client, and prints what each step saw as
// one JSON object per line, for tests/integration/mcp_test.cc to check.
//
//   node mcp_client.mjs --sdk v1|v2 --transport stdio --command PATH ARG...
//   node mcp_client.mjs --sdk v1|v2 --transport http --url URL --token TOKEN
//
// v1: @modelcontextprotocol/sdk (protocol 2025-11-25, initialize handshake);
// v2: @modelcontextprotocol/client pinned to 2026-07-28 (server/discover).
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.join(here, 'npm', 'node_modules');
const args = process.argv.slice(2);
const opt = (name) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : undefined; };
const sdk = opt('--sdk'), transportKind = opt('--transport');
const say = (step, value) => console.log(JSON.stringify({ step, ...value }));

async function load(spec) { return import(path.join(modules, spec)); }

let client, transport;
if (sdk === 'v1') {
  const { Client } = await load('@modelcontextprotocol/sdk/dist/esm/client/index.js');
  client = new Client({ name: 'ringfence-test-v1', version: '1.0.0' });
  if (transportKind === 'stdio') {
    const { StdioClientTransport } = await load('@modelcontextprotocol/sdk/dist/esm/client/stdio.js');
    const cmd = args.slice(args.indexOf('--command') + 1);
    transport = new StdioClientTransport({ command: cmd[0], args: cmd.slice(1), stderr: 'inherit' });
  } else {
    const { StreamableHTTPClientTransport } = await load('@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.js');
    transport = new StreamableHTTPClientTransport(new URL(opt('--url')), {
      requestInit: { headers: { Authorization: `Bearer ${opt('--token')}` } } });
  }
} else {
  const require = createRequire(path.join(modules, 'x.js'));
  const clientPkg = await import(require.resolve('@modelcontextprotocol/client'));
  client = new clientPkg.Client({ name: 'ringfence-test-v2', version: '1.0.0' },
                                { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  if (transportKind === 'stdio') {
    const stdio = await import(require.resolve('@modelcontextprotocol/client/stdio'));
    const cmd = args.slice(args.indexOf('--command') + 1);
    transport = new stdio.StdioClientTransport({ command: cmd[0], args: cmd.slice(1), stderr: 'inherit' });
  } else {
    transport = new clientPkg.StreamableHTTPClientTransport(new URL(opt('--url')), {
      requestInit: { headers: { Authorization: `Bearer ${opt('--token')}` } } });
  }
}

const text = (r) => (r.content || []).map((c) => c.text).join('');
try {
  await client.connect(transport);
  say('connected', { version: client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion ?? null,
                     server: client.getServerVersion?.() ?? null });
  const tools = await client.listTools();
  say('tools', { names: tools.tools.map((t) => t.name).sort(),
                 schemas_ok: tools.tools.every((t) => t.inputSchema && t.inputSchema.type === 'object') });
  const made = await client.callTool({ name: 'sandbox_create', arguments: { limits: { memory: '256m' } } });
  const id = made.structuredContent?.sandbox_id;
  say('create', { isError: !!made.isError, id, memory: made.structuredContent?.spec?.limits?.memory });
  const ran = await client.callTool({ name: 'sandbox_exec',
    arguments: { sandbox_id: id, cmd: 'echo hello from $(id -u); echo oops >&2; exit 4' } });
  say('exec', { isError: !!ran.isError, structured: ran.structuredContent, text: text(ran) });
  const wrote = await client.callTool({ name: 'sandbox_file_write',
    arguments: { sandbox_id: id, path: '/workspace/note.txt', content: 'written by MCP\n' } });
  say('write', { isError: !!wrote.isError, text: text(wrote) });
  const read = await client.callTool({ name: 'sandbox_file_read', arguments: { sandbox_id: id, path: '/workspace/note.txt' } });
  say('read', { isError: !!read.isError, text: text(read) });
  const listed = await client.callTool({ name: 'sandbox_file_list', arguments: { sandbox_id: id, path: '/workspace' } });
  say('list', { isError: !!listed.isError, names: (listed.structuredContent?.entries || []).map((e) => e.name) });
  // A background process (issue 41): started, read until its line, signalled.
  // The client checks each answer against the tool's outputSchema.
  const bg = await client.callTool({ name: 'sandbox_process_start',
    arguments: { sandbox_id: id, cmd: 'echo up; read line; echo got-$line; sleep 1000', stdin: true, tag: 'srv' } });
  const pid = bg.structuredContent?.pid;
  say('process_start', { isError: !!bg.isError, pid, state: bg.structuredContent?.state });
  await client.callTool({ name: 'sandbox_process_input', arguments: { sandbox_id: id, pid, data: 'x\n' } });
  let seen = '', next = 0;
  for (let i = 0; i < 50 && !seen.includes('got-x'); i++) {
    const r = await client.callTool({ name: 'sandbox_process_output', arguments: { sandbox_id: id, pid, from: next, wait_ms: 1000 } });
    seen += r.structuredContent?.stdout ?? '';
    next = r.structuredContent?.next ?? next;
  }
  const plist = await client.callTool({ name: 'sandbox_process_list', arguments: { sandbox_id: id } });
  const killed = await client.callTool({ name: 'sandbox_process_signal', arguments: { sandbox_id: id, pid, signal: 'TERM' } });
  let end = null;
  for (let i = 0; i < 50 && !end; i++) {
    const r = await client.callTool({ name: 'sandbox_process_output', arguments: { sandbox_id: id, pid, from: 'now', wait_ms: 1000 } });
    if (r.structuredContent?.ended) end = r.structuredContent.process;
  }
  say('process', { seen, tags: (plist.structuredContent?.processes || []).map((p) => p.tag),
                   killed: !killed.isError, state: end?.state, exit_code: end?.exit_code });
  // A watch (issue 41): a background process changes the directory while the tool waits.
  await client.callTool({ name: 'sandbox_file_mkdir', arguments: { sandbox_id: id, path: '/workspace/watched' } });
  await client.callTool({ name: 'sandbox_process_start',
    arguments: { sandbox_id: id, cmd: 'sleep 0.5; echo hi > /workspace/watched/new.txt' } });
  const watched = await client.callTool({ name: 'sandbox_file_watch',
    arguments: { sandbox_id: id, path: '/workspace/watched', wait_ms: 20000 } });
  say('watch', { isError: !!watched.isError, events: watched.structuredContent?.events, text: text(watched) });
  // A server inside, asked through the port tool (issue 41).
  await client.callTool({ name: 'sandbox_process_start',
    arguments: { sandbox_id: id, cmd: 'mkdir -p /tmp/www && echo served > /tmp/www/x.txt && exec python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp/www' } });
  let fetched = null;
  for (let i = 0; i < 100; i++) {
    fetched = await client.callTool({ name: 'sandbox_port_fetch', arguments: { sandbox_id: id, port: 8000, path: '/x.txt' } });
    if (!fetched.isError) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  say('port', { isError: !!fetched.isError, status: fetched.structuredContent?.status, body: fetched.structuredContent?.body, text: text(fetched) });
  const portList = await client.callTool({ name: 'sandbox_ports', arguments: { sandbox_id: id } });
  say('ports', { isError: !!portList.isError, ports: portList.structuredContent?.ports, text: text(portList) });
  const code = await client.callTool({ name: 'run_code',
    arguments: { language: 'python', code: 'import os\nprint(sum(range(10)), os.getuid() != 0)\n' } });
  say('run_code', { isError: !!code.isError, stdout: code.structuredContent?.stdout });
  const bad = await client.callTool({ name: 'sandbox_exec', arguments: { sandbox_id: 'rf-000000000000', cmd: 'true' } });
  say('unknown_sandbox', { isError: !!bad.isError, text: text(bad) });
  const badArg = await client.callTool({ name: 'sandbox_exec', arguments: { sandbox_id: id, cmd: 'true', sudo: true } });
  say('unknown_argument', { isError: !!badArg.isError, text: text(badArg) });
  try {
    await client.callTool({ name: 'approve_credential', arguments: {} });
    say('unknown_tool', { threw: false });
  } catch (e) {
    say('unknown_tool', { threw: true, message: String(e.message) });
  }
  const gone = await client.callTool({ name: 'sandbox_destroy', arguments: { sandbox_id: id } });
  say('destroy', { isError: !!gone.isError, text: text(gone) });
  if (transportKind === 'http') {
    // Volumes (issue 41): serve's, each answer checked against its outputSchema.
    const vol = await client.callTool({ name: 'volume_create', arguments: { name: 'notes', size: '32m' } });
    const vols = await client.callTool({ name: 'volume_list', arguments: {} });
    const withVol = await client.callTool({ name: 'sandbox_create',
      arguments: { volumes: [{ name: 'notes', path: '/var/agent/state' }] } });
    const vid = withVol.structuredContent?.sandbox_id;
    const put = await client.callTool({ name: 'sandbox_exec',
      arguments: { sandbox_id: vid, cmd: 'echo kept > /var/agent/state/n && cat /var/agent/state/n' } });
    await client.callTool({ name: 'sandbox_destroy', arguments: { sandbox_id: vid } });
    const del = await client.callTool({ name: 'volume_delete', arguments: { name: 'notes' } });
    say('volumes', { created: vol.structuredContent?.size_bytes, listed: (vols.structuredContent?.volumes || []).map((v) => v.name),
                     stdout: put.structuredContent?.stdout, deleted: del.structuredContent?.deleted, errors: [vol, vols, withVol, put, del].filter((r) => r.isError).map(text) });
  }
  await client.close();
  say('done', {});
} catch (e) {
  say('error', { message: String(e && e.stack || e) });
  process.exitCode = 1;
  try { await client.close(); } catch {}
}
