// The official MCP TypeScript SDK's client (pinned in package.json) driving
// `toolexec mcp` against the real daemon started by run.py, over stdio, or
// over Streamable HTTP when TE_MCP_URL names a `toolexec mcp --listen`:
// list, call, error, timeout, cancel (worker confirmed gone), progress,
// list_changed after a reload, structured content, an unknown tool,
// ask_user through elicitation.
// Environment: TOOLEXEC, TE_SOCKET, TE_DAEMON_PID, TE_TOOLS_DIR,
// TE_TESTWORKER, TE_SLOW_TOKEN, TE_FLAG_DIR, TE_MCP_URL (optional). Exit 0
// when every check passed.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema, ElicitRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

const env = process.env;
const mode = env.TE_MCP_URL ? 'http' : 'stdio';
const newTransport = () => env.TE_MCP_URL
  ? new StreamableHTTPClientTransport(new URL(env.TE_MCP_URL))
  : new StdioClientTransport({
    command: env.TOOLEXEC, args: ['--socket', env.TE_SOCKET, 'mcp'], stderr: 'inherit',
  });
const transport = newTransport();
const client = new Client({ name: 'toolexecd-interop', version: '1' }, { capabilities: {} });
let checks = 0;
const check = async (what, fn) => {
  try {
    await fn();
    checks++;
    console.log('ok', mode, what);
  } catch (e) {
    console.error('FAILED', mode, what, e);
    process.exitCode = 1;
  }
};
// Wait for cond() (no fixed sleeps standing in for synchronisation).
const until = async (cond, what, ms = 10000) => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, 10));
  }
};
const pidsWithToken = (token) =>
  fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
    try {
      return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(token);
    } catch {
      return false;
    }
  });
const text = (r) => r.content[0].text;

await client.connect(transport);

await check('server info and capabilities', async () => {
  assert.equal(client.getServerVersion().name, 'toolexec');
  assert.equal(client.getServerCapabilities().tools.listChanged, true);
});

let listed;
await check('tools/list (every tool valid for the SDK, metadata carried)', async () => {
  listed = await client.listTools();
  const names = listed.tools.map((t) => t.name);
  for (const n of ['echo', 'fail', 'untyped', 'slow', 'progress', 'structured', 'fs.read'])
    assert.ok(names.includes(n), n);
  const s = listed.tools.find((t) => t.name === 'structured');
  assert.equal(s.title, 'Structured');
  assert.equal(s.annotations.readOnlyHint, true);
  assert.equal(s.outputSchema.type, 'object');
});

await check('call: ok', async () => {
  const r = await client.callTool({ name: 'echo', arguments: { x: 1 } });
  assert.equal(r.isError, false);
  assert.deepEqual(JSON.parse(text(r)), { x: 1 });
});

await check('call: a tool error is a result with isError', async () => {
  const r = await client.callTool({ name: 'fail', arguments: {} });
  assert.equal(r.isError, true);
  assert.match(text(r), /boom/);
});

await check('call: timeout', async () => {
  const r = await client.callTool({ name: 'quick_timeout', arguments: {} });
  assert.equal(r.isError, true);
  assert.match(text(r), /timeout/);
});

await check('call: an unknown tool is a JSON-RPC error', async () => {
  await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }), (e) => {
    assert.ok(e instanceof McpError, String(e));
    assert.equal(e.code, -32602);
    return true;
  });
});

await check('call: structured content, validated by the SDK against outputSchema', async () => {
  const r = await client.callTool({ name: 'structured', arguments: { value: { n: 3 } } });
  assert.deepEqual(r.structuredContent, { n: 3 });
});

await check('call: progress notifications', async () => {
  // The worker waits for flag after its progress: the SDK runs notification
  // handlers a microtask late and drops progress whose response came first.
  const flag = path.join(env.TE_FLAG_DIR, 'progress-go');
  const seen = [];
  const r = await client.callTool({ name: 'progress', arguments: { steps: 3, path: flag } },
    undefined, {
      onprogress: (p) => {
        seen.push(p);
        if (seen.length === 3) fs.writeFileSync(flag, '');
      },
      resetTimeoutOnProgress: true,
    });
  assert.equal(r.isError, false);
  assert.deepEqual(seen.map((p) => [p.progress, p.total, p.message]),
    [[1, 3, 'step 1'], [2, 3, 'step 2'], [3, 3, 'step 3']]);
});

await check('cancel: the worker is gone', async () => {
  const ac = new AbortController();
  const p = client.callTool({ name: 'slow', arguments: {} }, undefined, { signal: ac.signal });
  await until(() => pidsWithToken(env.TE_SLOW_TOKEN).length > 0, 'the slow worker');
  ac.abort('test cancels');
  await assert.rejects(p);
  await until(() => pidsWithToken(env.TE_SLOW_TOKEN).length === 0, 'the worker to go');
});

await check('list_changed after a reload', async () => {
  let changed = false;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed = true; });
  // a tool of its own per transport: each run changes the list
  const name = 'added_' + mode;
  const def = { name, description: 'added by the test', command: [env.TE_TESTWORKER, 'echo'] };
  const file = path.join(env.TE_TOOLS_DIR, name + '.json');
  fs.writeFileSync(file, JSON.stringify(def), { mode: 0o644 });
  fs.chmodSync(file, 0o644);
  process.kill(Number(env.TE_DAEMON_PID), 'SIGHUP');
  await until(() => changed, 'notifications/tools/list_changed');
  const after = await client.listTools();
  assert.ok(after.tools.some((t) => t.name === name));
});

await client.close();

// ask_user: a client with the elicitation capability is asked the question.
await check('ask_user through elicitation/create', async () => {
  const c2 = new Client({ name: 'toolexecd-interop-elicit', version: '1' },
    { capabilities: { elicitation: {} } });
  let asked;
  c2.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked = req.params.message;
    return { action: 'accept', content: { answer: 'Paris' } };
  });
  await c2.connect(newTransport());
  const r = await c2.callTool({ name: 'ask', arguments: { question: 'which city?' } });
  assert.equal(asked, 'which city?');
  assert.equal(r.isError, false);
  assert.match(text(r), /The user answered: Paris/);
  await c2.close();
});

console.log(`${mode}: ${checks} checks passed`);
