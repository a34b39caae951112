// What bench's llama.cpp peers share: node-llama-cpp (its prebuilt CPU
// build, never compiled here) from NPM_DIR, a GGUF model on the CPU, one
// context; and the peak RSS they report.
const path = require("path");
const fs = require("fs");
const { pathToFileURL } = require("url");

/// Loads `model` and creates a context with `contextOptions`; returns
/// { context, dispose }.
async function openContext(npmDir, model, contextOptions) {
  const entry = path.join(npmDir, "node_modules", "node-llama-cpp", "dist", "index.js");
  const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  const loaded = await llama.loadModel({ modelPath: model, gpuLayers: 0 });
  const context = await loaded.createContext(contextOptions);
  return {
    context,
    dispose: async () => {
      await context.dispose();
      await loaded.dispose();
      await llama.dispose();
    },
  };
}

function peakRssMb() {
  const status = fs.readFileSync("/proc/self/status", "utf8");
  return Number(/VmHWM:\s+(\d+)/.exec(status)[1]) / 1024;
}

module.exports = { openContext, peakRssMb };
