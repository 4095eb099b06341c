// An application instrumented with the OpenTelemetry JS SDK from npm: it handles a request that
// came with a trace context (traceparent and a tracestate of two vendors), opens its own span
// for it, and calls the model with the official openai SDK, the span's context propagated in
// the call's headers by the SDK's W3C propagator. Then a second request, whose context says
// "not sampled": its call carries that flag. The SDK exports the app's span over OTLP/HTTP
// (protobuf) to the URL given. Prints what each call sent, and the app's span, as JSON.
//   node otel_app.js PORT MODEL OTLP_URL   (NODE_EXTRA_CA_CERTS names the fixture's cert)
'use strict';
const path = require('path');
const nm = path.join(__dirname, '../../node/node_modules');
const api = require(path.join(nm, '@opentelemetry/api'));
const { W3CTraceContextPropagator, TraceState } = require(path.join(nm, '@opentelemetry/core'));
const { BasicTracerProvider, SimpleSpanProcessor } =
  require(path.join(nm, '@opentelemetry/sdk-trace-base'));
const { OTLPTraceExporter } = require(path.join(nm, '@opentelemetry/exporter-trace-otlp-proto'));
const { resourceFromAttributes } = require(path.join(nm, '@opentelemetry/resources'));
const OpenAI = require(path.join(nm, 'openai')).default;

const [port, model, otlpUrl] = process.argv.slice(2);
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'otel-app' }),
  spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: otlpUrl }))],
});
const tracer = provider.getTracer('otel-app');
const propagator = new W3CTraceContextPropagator();
const client = new OpenAI({ apiKey: 'sk-test-SECRET-otel', baseURL: `https://127.0.0.1:${port}/v1` });

// the context of a request the app received: a remote parent, sampled or not
function incoming(traceId, sampled) {
  return api.trace.setSpanContext(api.ROOT_CONTEXT, {
    traceId, spanId: 'a1b2c3d4e5f60718', isRemote: true,
    traceFlags: sampled ? api.TraceFlags.SAMPLED : api.TraceFlags.NONE,
    traceState: new TraceState('vendor1=alpha,vendor2=beta'),
  });
}

async function handle(traceId, sampled) {
  const span = tracer.startSpan('handle question', { kind: api.SpanKind.SERVER },
                                incoming(traceId, sampled));
  const headers = {};
  propagator.inject(api.trace.setSpan(api.ROOT_CONTEXT, span), headers, api.defaultTextMapSetter);
  const stream = await client.chat.completions.create(
    { model, stream: true, messages: [{ role: 'user', content: 'PROMPT-CANARY otel' }] },
    { headers });
  for await (const chunk of stream) void chunk;
  span.end();
  const c = span.spanContext();
  return { traceparent: headers.traceparent, tracestate: headers.tracestate || '',
           trace_id: c.traceId, span_id: c.spanId, sampled };
}

async function main() {
  const calls = [await handle('5e1f0c2d3b4a59687766554433221100', true),
                 await handle('6e1f0c2d3b4a59687766554433221100', false)];
  await provider.forceFlush();
  await provider.shutdown();
  console.log(JSON.stringify(calls));
}

main().catch((e) => { console.error(e); process.exit(1); });
