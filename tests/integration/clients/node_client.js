// Real node clients for the integration tests: global fetch (undici), the https module, and
// the official OpenAI and Anthropic SDKs. TLS is node's own embedded OpenSSL.
// usage: node node_client.js MODE PORT MODEL   (NODE_EXTRA_CA_CERTS names the fixture's cert)
'use strict';
const path = require('path');
const https = require('https');

const [mode, port, model] = process.argv.slice(2);
const base = `https://127.0.0.1:${port}`;
const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-test-SECRET-node' };
const prompt = [{ role: 'user', content: 'PROMPT-CANARY from node' }];

async function drain(stream) {
  let n = 0;
  for await (const _ of stream) n++;
  return n;
}

async function main() {
  if (mode === 'fetch') {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST', headers,
      body: JSON.stringify({ model, stream: true, messages: prompt, stream_options: { include_usage: true } }),
    });
    const reader = res.body.getReader();
    while (!(await reader.read()).done);
  } else if (mode === 'https') {
    await new Promise((resolve, reject) => {
      const req = https.request(`${base}/api/generate`, { method: 'POST', headers }, (res) => {
        res.on('data', () => {});
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.end(JSON.stringify({ model, prompt: 'PROMPT-CANARY' }));
    });
  } else if (mode === 'openai') {
    const OpenAI = require(path.join(__dirname, '../../node/node_modules/openai')).default;
    const client = new OpenAI({ apiKey: 'sk-test-SECRET-openai', baseURL: `${base}/v1` });
    const stream = await client.chat.completions.create({
      model, messages: prompt, stream: true, stream_options: { include_usage: true },
    });
    await drain(stream);
  } else if (mode === 'anthropic') {
    const Anthropic = require(path.join(__dirname, '../../node/node_modules/@anthropic-ai/sdk')).default;
    const client = new Anthropic({ apiKey: 'sk-ant-test-SECRET', baseURL: base });
    const stream = client.messages.stream({ model, max_tokens: 64, messages: prompt });
    await stream.finalMessage();
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
