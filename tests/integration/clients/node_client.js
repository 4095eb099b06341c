// Real node clients for the integration tests: global fetch (undici), the https module, and
// the official OpenAI and Anthropic SDKs. TLS is node's own embedded OpenSSL.
// usage: node node_client.js MODE PORT MODEL   (NODE_EXTRA_CA_CERTS names the fixture's cert;
//        GO_AHEAD=FILE: send nothing before FILE exists, so a test can wait for the tracer
//        to say its probes are on this process's binary)
'use strict';
const path = require('path');
const https = require('https');

const [mode, port, model] = process.argv.slice(2);
const base = `https://127.0.0.1:${port}`;
const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-test-SECRET-node' };
const prompt = [{ role: 'user', content: 'PROMPT-CANARY from node' }];

// The client's own clock (process.hrtime is CLOCK_MONOTONIC): when it sent the request and
// when its code first saw generated text. The test checks tokenscope's times lie between
// what the server did and what the client saw.
const times = { start_ns: null, first_ns: null };
const now = () => process.hrtime.bigint().toString();
const FIRST_TOKEN = 'tok0_0'; // the fixture's first generated text
const sawText = (text) => { if (!times.first_ns && text.includes(FIRST_TOKEN)) times.first_ns = now(); };

const fs = require('fs');

async function goAhead(file) {
  while (file && !fs.existsSync(file))
    await new Promise((resolve) => setTimeout(resolve, 10));
}

async function main() {
  await goAhead(process.env.GO_AHEAD);
  times.start_ns = now();
  if (mode === 'fetch') {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST', headers,
      body: JSON.stringify({ model, stream: true, messages: prompt, stream_options: { include_usage: true } }),
    });
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      sawText(dec.decode(value, { stream: true }));
    }
  } else if (mode === 'https') {
    await new Promise((resolve, reject) => {
      const req = https.request(`${base}/api/generate`, { method: 'POST', headers }, (res) => {
        res.on('data', (d) => sawText(d.toString()));
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
    for await (const chunk of stream) sawText(chunk.choices[0]?.delta?.content || '');
  } else if (mode === 'anthropic') {
    const Anthropic = require(path.join(__dirname, '../../node/node_modules/@anthropic-ai/sdk')).default;
    const client = new Anthropic({ apiKey: 'sk-ant-test-SECRET', baseURL: base });
    const stream = client.messages.stream({ model, max_tokens: 64, messages: prompt });
    stream.on('text', sawText);
    await stream.finalMessage();
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
}

main().then(() => console.log(JSON.stringify(times)))
  .catch((e) => { console.error(e); process.exit(1); });
