// The official MCP TypeScript SDK's client (pinned in npm/package.json)
// driving `toolexec mcp` (stdio) against the real daemon, which serves the
// tools of @modelcontextprotocol/server-everything (an "mcp_server"
// definition, "instance": "call") as everything.TOOL:
// (tests/integration/test_mcp_server_everything.py): the server's tools
// listed with their schemas, a structured result checked by the SDK against
// the server's outputSchema, progress forwarded, the server's own error and
// the daemon's refusal of arguments the server's inputSchema does not take.
// Environment: TOOLEXEC, TE_SOCKET. Exit 0 when every check passed.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import assert from 'node:assert/strict';

const env = process.env;
const transport = new StdioClientTransport({
  command: env.TOOLEXEC, args: ['--socket', env.TE_SOCKET, 'mcp'], stderr: 'inherit',
});
const client = new Client({ name: 'toolexecd-everything', version: '1' }, { capabilities: {} });
let failed = 0;
const check = async (what, fn) => {
  try {
    await fn();
    console.log('ok', what);
  } catch (e) {
    console.error('FAILED', what, e);
    failed++;
  }
};
const text = (r) => r.content.map((c) => c.text).join('');

await client.connect(transport);
// What came over the pipe, in order, before the SDK's handlers: the SDK
// hands a notification to its handler a microtask later but a response
// at once, so a last progress that arrives in the same read as the
// response finds its handler gone (sdk shared/protocol.js). That race is
// the client's; what toolexec wrote is checked here.
const wire = [];
const onmessage = transport.onmessage;
transport.onmessage = (msg, extra) => {
  wire.push(msg);
  onmessage(msg, extra);
};

await check('tools/list: the server\'s tools as everything.TOOL, with their schemas', async () => {
  const { tools } = await client.listTools();
  const by = Object.fromEntries(tools.map((t) => [t.name, t]));
  for (const n of ['everything.echo', 'everything.get-sum', 'everything.get-structured-content',
    'everything.trigger-long-running-operation', 'everything.get-resource-reference'])
    assert.ok(by[n], n + ' listed among ' + Object.keys(by).join(' '));
  assert.equal(by.everything, undefined); // the listing tool is no client's
  const sc = by['everything.get-structured-content'];
  assert.deepEqual(sc.inputSchema.properties.location.enum, ['New York', 'Chicago', 'Los Angeles']);
  assert.deepEqual(sc.inputSchema.required, ['location']);
  assert.deepEqual(sc.outputSchema.required.sort(), ['conditions', 'humidity', 'temperature']);
  assert.equal(sc.annotations.readOnlyHint, true);
  assert.equal(by['everything.get-sum'].inputSchema.properties.a.type, 'number');
});

await check('call: text', async () => {
  const r = await client.callTool({ name: 'everything.echo', arguments: { message: 'hi' } });
  assert.equal(r.isError, false);
  assert.match(text(r), /hi/);
});

await check('call: a structured result, valid against the server\'s outputSchema', async () => {
  // the SDK's client validates structuredContent against the listed
  // outputSchema itself and fails the call when it does not match
  const r = await client.callTool({ name: 'everything.get-structured-content',
    arguments: { location: 'Chicago' } });
  assert.equal(r.isError, false);
  assert.deepEqual(r.structuredContent,
    { temperature: 36, conditions: 'Light rain / drizzle', humidity: 82 });
});

await check('call: progress forwarded', async () => {
  const seen = [];
  const r = await client.callTool(
    { name: 'everything.trigger-long-running-operation', arguments: { duration: 0.3, steps: 3 } },
    undefined, { onprogress: (p) => seen.push(p) });
  assert.equal(r.isError, false, text(r));
  const answer = wire.findIndex((m) => m.result && m.result.content &&
    /Long running operation completed/.test(text(m.result)));
  const sent = wire.slice(0, answer).filter((m) => m.method === 'notifications/progress');
  assert.deepEqual(sent.map((m) => m.params.progress), [1, 2, 3]);
  assert.deepEqual(sent.map((m) => m.params.total), [3, 3, 3]);
  // the SDK's own handler saw them in order (the last perhaps not, above)
  assert.deepEqual(seen.map((p) => p.progress), [1, 2, 3].slice(0, seen.length));
});

await check('call: the server\'s own error', async () => {
  const r = await client.callTool({ name: 'everything.get-resource-reference',
    arguments: { resourceType: 'Text', resourceId: 0 } });
  assert.equal(r.isError, true);
  assert.match(text(r), /Invalid resourceId: 0/);
});

await check('call: arguments its inputSchema refuses, refused before it runs', async () => {
  const r = await client.callTool({ name: 'everything.get-sum', arguments: { a: 'one', b: 2 } });
  assert.equal(r.isError, true);
  assert.match(text(r), /\/a: expected number/);
});

await client.close();
process.exitCode = failed ? 1 : 0;
