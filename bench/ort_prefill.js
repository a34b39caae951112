// ONNX Runtime's prefill, for bench/predict.py: loads MODEL.onnx (input
// "input_ids" int64 [1, L], output "logits"), runs it twice to warm up, then
// RUNS times, and prints {"seconds": [...], "rss_mb": N} as JSON.
//   node ort_prefill.js NPM_DIR MODEL.onnx IDS THREADS RUNS
const path = require("path");
const fs = require("fs");
const [npmDir, model, idsText, threads, runs] = process.argv.slice(2);
const ort = require(path.join(npmDir, "node_modules", "onnxruntime-node"));

(async () => {
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    graphOptimizationLevel: "all",
    executionMode: "sequential",
  });
  const ids = idsText.split(",").map((id) => BigInt(id));
  const feeds = { input_ids: new ort.Tensor("int64", BigInt64Array.from(ids), [1, ids.length]) };
  for (let i = 0; i < 2; i++) {
    await session.run(feeds);
  }
  const seconds = [];
  for (let i = 0; i < Number(runs); i++) {
    const start = process.hrtime.bigint();
    await session.run(feeds);
    seconds.push(Number(process.hrtime.bigint() - start) / 1e9);
  }
  const status = fs.readFileSync("/proc/self/status", "utf8");
  const rss = Number(/VmHWM:\s+(\d+)/.exec(status)[1]) / 1024;
  console.log(JSON.stringify({ seconds, rss_mb: rss }));
})();
