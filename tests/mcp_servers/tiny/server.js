#!/usr/bin/env node
// A tiny MCP server (stdio, 2025-11-25, no dependencies): one tool, hello,
// that greets its argument and says where it runs from (its own path: the
// install directory toolexec mcp-add chose) and which node runs it.
'use strict';
const readline = require('node:readline');

const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
const TOOLS = [{
  name: 'hello', description: 'Greet someone',
  inputSchema: { type: 'object', properties: { who: { type: 'string' } }, required: ['who'] },
}];

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line);
  if (m.method === 'initialize')
    send({ jsonrpc: '2.0', id: m.id, result: {
      protocolVersion: '2025-11-25', capabilities: { tools: {} },
      serverInfo: { name: 'te-tiny-mcp', version: '1.0.0' } } });
  else if (m.method === 'tools/list')
    send({ jsonrpc: '2.0', id: m.id, result: { tools: TOOLS } });
  else if (m.method === 'tools/call')
    send({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: JSON.stringify({
      hello: m.params.arguments.who, from: __filename, node: process.execPath }) }] } });
  else if (m.id !== undefined)
    send({ jsonrpc: '2.0', id: m.id, result: {} });
});
