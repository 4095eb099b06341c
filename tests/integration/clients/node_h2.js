// node's own HTTP/2 client (node:http2) over TLS: one streamed chat completion per model on
// one session, then prints {"start_ns", "first_ns"} of the last one (process.hrtime is
// CLOCK_MONOTONIC), like node_client.js.
//   node node_h2.js PORT CA MODEL...
const http2 = require('node:http2');
const fs = require('node:fs');

const [port, ca, ...models] = process.argv.slice(2);
const session = http2.connect(`https://127.0.0.1:${port}`, { ca: fs.readFileSync(ca) });

function one(model) {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    let first = null;
    const req = session.request({
      ':method': 'POST', ':path': '/v1/chat/completions',
      'content-type': 'application/json', authorization: 'Bearer sk-test-SECRET-node-h2',
    });
    req.on('response', (h) => { if (h[':status'] !== 200) reject(new Error(`status ${h[':status']}`)); });
    req.on('data', () => { if (first === null) first = process.hrtime.bigint(); });
    req.on('end', () => resolve({ start_ns: start.toString(), first_ns: String(first) }));
    req.on('error', reject);
    req.end(JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: 'PROMPT-CANARY' }] }));
  });
}

(async () => {
  let last;
  for (const m of models) last = await one(m);
  session.close();
  console.log(JSON.stringify(last));
})().catch((e) => { console.error(e); process.exit(1); });
