// An agent's loop with the official openai SDK from npm, one conversation throughout: each
// turn asks, offers a tool, runs the tool the model calls, feeds its result back and keeps the
// model's answer; then, a while later, one call of a conversation of its own without tools. Prints what it sent, as JSON on stdout: per call its tools and whether it
// carried a tool's result, the finish reason it read, and when it began and ended
// (process.hrtime: CLOCK_MONOTONIC), so that the test can tell each record's call.
//   node agent_loop.js PORT MODEL TURNS   (NODE_EXTRA_CA_CERTS names the fixture's cert)
'use strict';
const path = require('path');
const OpenAI = require(path.join(__dirname, '../../node/node_modules/openai')).default;

const [port, model, turns] = process.argv.slice(2);
const client = new OpenAI({ apiKey: 'sk-test-SECRET-agent', baseURL: `https://127.0.0.1:${port}/v1` });
const tools = [{ type: 'function', function: { name: 'lookup', description: 'Looks a word up.',
                 parameters: { type: 'object', properties: { q: { type: 'string' } } } } }];
const now = () => process.hrtime.bigint().toString();
const calls = [];

async function call(messages, withTools) {
  const sent = { tools: withTools, tool_result: messages[messages.length - 1].role === 'tool',
                 start_ns: now() };
  const stream = await client.chat.completions.create({ model, messages: [...messages], stream: true,
                                                        ...(withTools ? { tools } : {}) });
  let finish = null, args = '', id = null, name = null, text = '';
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    for (const t of c.delta.tool_calls || []) {
      id = t.id || id;
      name = (t.function && t.function.name) || name;
      args += (t.function && t.function.arguments) || '';
    }
    text += c.delta.content || '';
    finish = c.finish_reason || finish;
  }
  calls.push({ ...sent, finish, end_ns: now() });
  return { finish, args, id, name, text };
}

async function main() {
  const messages = [];
  for (let t = 0; t < Number(turns); t++) {
    messages.push({ role: 'user', content: `PROMPT-CANARY turn ${t}` });
    const first = await call(messages, true);
    if (first.finish !== 'tool_calls') throw new Error(`turn ${t}: no tool call (${first.finish})`);
    const q = JSON.parse(first.args).q; // the tool runs here: its result is what the model asked
    messages.push({ role: 'assistant', content: null,
                    tool_calls: [{ id: first.id, type: 'function',
                                   function: { name: first.name, arguments: first.args } }] });
    messages.push({ role: 'tool', tool_call_id: first.id, content: `looked up ${q.length} chars` });
    await new Promise((resolve) => setTimeout(resolve, 20 * (t + 1))); // the program's own work
    const answer = await call(messages, true);
    messages.push({ role: 'assistant', content: answer.text });
  }
  await call([{ role: 'user', content: 'PROMPT-CANARY plain' }], false);
  console.log(JSON.stringify(calls));
}

main().catch((e) => { console.error(e); process.exit(1); });
