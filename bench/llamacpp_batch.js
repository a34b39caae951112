// llama.cpp (npm node-llama-cpp) serving a queue of token-id prompts from
// SEQUENCES sequences of one context, for bench/serve.py: each sequence
// takes the next prompt when its last is done (greedy, NEW tokens each);
// node-llama-cpp decodes what the sequences have pending in one batch. After
// a warm-up, ROUNDS times: prints one JSON line a round with the wall
// seconds, the tokens generated, and each request's time to first token
// and latency.
//   node llamacpp_batch.js NPM_DIR MODEL.gguf PROMPTS.json NEW THREADS SEQUENCES ROUNDS
const fs = require("fs");
const { openContext } = require("./llamacpp.js");
const [npmDir, model, promptsPath, newTokens, threads, sequenceCount, rounds] = process.argv.slice(2);

async function serve(sequences, prompts, tokensEach) {
  const queue = prompts.map((prompt, index) => ({ prompt, index }));
  const timings = [];
  let generated = 0;
  const start = process.hrtime.bigint();
  const worker = async (sequence) => {
    for (let job = queue.shift(); job; job = queue.shift()) {
      await sequence.clearHistory();
      const begin = process.hrtime.bigint();
      let first = null;
      let count = 0;
      for await (const token of sequence.evaluate(job.prompt, { temperature: 0 })) {
        void token;
        first = first ?? process.hrtime.bigint();
        if (++count === tokensEach) {
          break;
        }
      }
      generated += count;
      const end = process.hrtime.bigint();
      timings.push({ ttft: Number((first ?? end) - begin) / 1e9, latency: Number(end - begin) / 1e9 });
    }
  };
  await Promise.all(sequences.map(worker));
  return { seconds: Number(process.hrtime.bigint() - start) / 1e9, generated, timings };
}

(async () => {
  const prompts = JSON.parse(fs.readFileSync(promptsPath, "utf8"));
  const longest = Math.max(...prompts.map((p) => p.length));
  const { context, dispose } = await openContext(npmDir, model, {
    contextSize: Number(sequenceCount) * (longest + Number(newTokens) + 8),
    sequences: Number(sequenceCount),
    threads: Number(threads),
  });
  const each = [];
  for (let i = 0; i < Number(sequenceCount); i++) {
    each.push(context.getSequence());
  }
  await serve(each, prompts.slice(0, 2), 2); // warm-up
  for (let round = 0; round < Number(rounds); round++) {
    console.log(JSON.stringify(await serve(each, prompts, Number(newTokens))));
  }
  await dispose();
})();
