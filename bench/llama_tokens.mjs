// `make bench`: llama.cpp's throughput, for tokenscope's cost on its steps. node-llama-cpp's
// CPU llama.cpp on the tests' tiny model (one thread), a context of 4 sequences, 4 greedy
// completions at once of TOKENS tokens each, for ROUNDS rounds; prints generated tokens per
// second over all of them.
//
//   node bench/llama_tokens.mjs MODEL.gguf [TOKENS] [ROUNDS]
const {getLlama, LlamaCompletion} = await import(
    new URL("../tests/node/node_modules/node-llama-cpp/dist/index.js", import.meta.url));

const [model_path, tokens = "200", rounds = "3"] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", skipDownload: true, maxThreads: 1,
                              logLevel: "error"});
const model = await llama.loadModel({modelPath: model_path});
const context = await model.createContext({sequences: 4, contextSize: 4096, threads: 1});
const seqs = Array.from({length: 4}, () => context.getSequence());
let generated = 0;
const t0 = process.hrtime.bigint();
for (let r = 0; r < Number(rounds); r++) {
    await Promise.all(seqs.map(async (seq, i) => {
        await seq.clearHistory();
        const completion = new LlamaCompletion({contextSequence: seq});
        await completion.generateCompletion(`hello world the model ${r} ${i}`, {
            maxTokens: Number(tokens), temperature: 0, onToken: (t) => (generated += t.length)});
    }));
}
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
console.log((generated / seconds).toFixed(1));
process.exit(0);
