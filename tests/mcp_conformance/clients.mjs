// Official clients of package.json against the daemon run.py started, with
// its fixture tools (tools.d): the v2 client @modelcontextprotocol/client
// pinned to 2026-07-28 over Streamable HTTP (TE_MCP_URL) and over stdio
// (`toolexec --socket TE_SOCKET mcp`), then the MCP Inspector's --cli over
// HTTP. Environment: TOOLEXEC, TE_SOCKET, TE_MCP_URL. Exit 0 when every
// check passed.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';

const env = process.env;
let checks = 0;
const check = async (what, fn) => {
  try {
    await fn();
    checks++;
    console.log('ok', what);
  } catch (e) {
    console.error('FAILED', what, e);
    process.exitCode = 1;
  }
};

const transports = {
  http: () => new StreamableHTTPClientTransport(new URL(env.TE_MCP_URL)),
  stdio: () => new StdioClientTransport({
    command: env.TOOLEXEC, args: ['--socket', env.TE_SOCKET, 'mcp'], stderr: 'inherit',
  }),
};

for (const [kind, make] of Object.entries(transports)) {
  const client = new Client({ name: 'toolexecd-conformance-v2', version: '1' }, {
    capabilities: {},
    versionNegotiation: { mode: { pin: '2026-07-28' } },
  });
  await check(`v2 ${kind}: connects at 2026-07-28`, async () => {
    await client.connect(make());
  });
  await check(`v2 ${kind}: tools/list`, async () => {
    const r = await client.listTools();
    const names = r.tools.map((t) => t.name);
    for (const n of ['test_simple_text', 'test_error_handling', 'json_schema_2020_12_tool'])
      assert.ok(names.includes(n), n);
  });
  await check(`v2 ${kind}: tools/call, text`, async () => {
    const r = await client.callTool({ name: 'test_simple_text', arguments: {} });
    assert.equal(r.content[0].type, 'text');
    assert.match(r.content[0].text, /simple text response/);
  });
  await check(`v2 ${kind}: tools/call, a tool error is isError`, async () => {
    const r = await client.callTool({ name: 'test_error_handling', arguments: {} });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /intentionally returns an error/);
  });
  await check(`v2 ${kind}: tools/call, progress`, async () => {
    const seen = [];
    const r = await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, {
      onprogress: (p) => seen.push(p.progress),
    });
    assert.notEqual(r.isError, true);
    assert.ok(seen.length >= 1, 'progress seen: ' + JSON.stringify(seen));
  });
  await check(`v2 ${kind}: an unknown tool is a JSON-RPC error`, async () => {
    await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }));
  });
  await client.close();
}

// The Inspector's CLI mode, one method per run, over HTTP.
const inspector = (...args) => JSON.parse(execFileSync(
  'node_modules/.bin/mcp-inspector',
  ['--cli', env.TE_MCP_URL, '--transport', 'http', ...args],
  { encoding: 'utf8', timeout: 60000, stdio: ['ignore', 'pipe', 'inherit'] }));
await check('inspector --cli: tools/list', async () => {
  const r = inspector('--method', 'tools/list');
  assert.ok(r.tools.some((t) => t.name === 'test_simple_text'));
});
await check('inspector --cli: tools/call', async () => {
  const r = inspector('--method', 'tools/call', '--tool-name', 'test_simple_text');
  assert.match(r.content[0].text, /simple text response/);
});

console.log(`clients: ${checks} checks passed`);
