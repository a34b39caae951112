// llama.cpp (npm node-llama-cpp, its prebuilt CPU binary) generating from
// token ids, for bench/predict.py: greedy, RUNS times after one warm-up,
// each from an empty KV cache. Prints JSON: per run the seconds to the
// first new token (the prefill and its logits) and for the NEW - 1 tokens
// after it, the last run's tokens, the peak RSS.
//   node llamacpp_peer.js NPM_DIR MODEL.gguf IDS NEW THREADS RUNS
const path = require("path");
const fs = require("fs");
const { pathToFileURL } = require("url");
const [npmDir, model, idsText, newTokens, threads, runs] = process.argv.slice(2);

(async () => {
  const entry = path.join(npmDir, "node_modules", "node-llama-cpp", "dist", "index.js");
  const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  const loaded = await llama.loadModel({ modelPath: model, gpuLayers: 0 });
  const prompt = idsText.split(",").map(Number);
  const context = await loaded.createContext({
    contextSize: prompt.length + Number(newTokens) + 8,
    batchSize: prompt.length,
    threads: Number(threads),
    sequences: 1,
  });
  const sequence = context.getSequence();
  const result = { prefill_seconds: [], decode_seconds: [], tokens: [] };
  for (let run = 0; run <= Number(runs); run++) {
    await sequence.clearHistory();
    const tokens = [];
    const start = process.hrtime.bigint();
    let first = start;
    for await (const token of sequence.evaluate(prompt, { temperature: 0 })) {
      if (tokens.length === 0) {
        first = process.hrtime.bigint();
      }
      tokens.push(token);
      if (tokens.length === Number(newTokens)) {
        break;
      }
    }
    const end = process.hrtime.bigint();
    if (run > 0) { // run 0 warms up
      result.prefill_seconds.push(Number(first - start) / 1e9);
      result.decode_seconds.push(Number(end - first) / 1e9);
      result.tokens = tokens;
    }
  }
  const status = fs.readFileSync("/proc/self/status", "utf8");
  result.rss_mb = Number(/VmHWM:\s+(\d+)/.exec(status)[1]) / 1024;
  console.log(JSON.stringify(result));
  await context.dispose();
  await loaded.dispose();
  await llama.dispose();
})();
