// llama.cpp (npm node-llama-cpp, its prebuilt CPU binary) generating from
// token ids, for bench/predict.py: greedy, RUNS times after one warm-up,
// each from an empty KV cache. Prints JSON: per run the seconds to the
// first new token (the prefill and its logits) and for the NEW - 1 tokens
// after it, the last run's tokens, the peak RSS.
//   node llamacpp_peer.js NPM_DIR MODEL.gguf IDS NEW THREADS RUNS
const { openContext, peakRssMb } = require("./llamacpp.js");
const [npmDir, model, idsText, newTokens, threads, runs] = process.argv.slice(2);

(async () => {
  const prompt = idsText.split(",").map(Number);
  const { context, dispose } = await openContext(npmDir, model, {
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
  result.rss_mb = peakRssMb();
  console.log(JSON.stringify(result));
  await dispose();
})();
