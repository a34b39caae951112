#!/usr/bin/env bash
# The bundled example end to end: compile examples/llama-tiny.yaml, look at
# what the compiler made, and run it.
set -euo pipefail

build_dir=${1:-build}
bin="$build_dir/bin"
out="$build_dir/demo"
mkdir -p "$out"

echo "== mfc compile examples/llama-tiny.yaml -o $out/llama-tiny.bin"
"$bin/mfc" compile examples/llama-tiny.yaml -o "$out/llama-tiny.bin" \
  --report="$out/report.txt" --memory-plan-svg="$out/memory-plan.svg"
echo "   what the compiler decided (fusion groups, memory plan): $out/report.txt"
sed -n 1,12p "$out/report.txt"
"$bin/mfc" compile examples/llama-tiny.yaml --compile-to=mf \
  --dump-ir-dir="$out/ir" -o "$out/llama-tiny.mf.mlir"
echo "   the mf IR: $out/llama-tiny.mf.mlir (after every phase: $out/ir/)"
echo "== mfc compile on from a dumped phase: the same model.bin, byte for byte"
"$bin/mfc" compile examples/llama-tiny.yaml --dump-ir-dir="$out/ir-all" \
  -o "$out/llama-tiny.again.bin" 2>/dev/null
"$bin/mfc" compile "$out/ir-all/05-recompute.mlir" -o "$out/llama-tiny.resumed.bin" 2>/dev/null
cmp "$out/llama-tiny.again.bin" "$out/llama-tiny.resumed.bin" &&
  echo "   $out/ir-all/05-recompute.mlir -> the same bytes as the whole compile"

echo "== cost of every entry point before fusion (mf-opt --mf-print-cost)"
"$bin/mf-opt" "$out/llama-tiny.mf.mlir" --mf-print-cost -o /dev/null

echo "== mf-run --dump (the executable)"
"$bin/mf-run" "$out/llama-tiny.bin" --dump | sed -n 1,3p

echo "== mf-run: generate 48 bytes after a prompt (PyNative, KV cache)"
echo "   The weights are the deterministic init (seed 0): untrained, so the"
echo "   text is noise; the training section below fixes that."
"$bin/mf-run" "$out/llama-tiny.bin" --mode pynative --init-weights --prompt "Once upon a time" \
  --max-new-tokens 48 --save-weights "$out/llama-tiny.safetensors"

echo "== Graph Mode: native kernels from the executable, checked against PyNative"
"$bin/mf-run" "$out/llama-tiny.bin" --mode graph --weights "$out/llama-tiny.safetensors" \
  --prompt "Once upon a time" --max-new-tokens 48
"$bin/mf-run" "$out/llama-tiny.bin" --weights "$out/llama-tiny.safetensors" --check

echo "== the same, sampled (top-k 20, temperature 0.8), from the saved weights"
"$bin/mf-run" "$out/llama-tiny.bin" --mode pynative --weights "$out/llama-tiny.safetensors" \
  --prompt "Once upon a time" --max-new-tokens 48 --do-sample --top-k 20 --temperature 0.8 --seed 7

echo "== Training: the same YAML with run_mode train (AdamW, warmup + cosine,"
echo "   clipping from its optimizer / lr_schedule / runner_wrapper sections),"
echo "   600 steps of 4 x 128 bytes of this repository's docs, in Graph Mode"
cat README.md docs/*.md > "$out/corpus.txt"
"$bin/mfc" compile examples/llama-tiny.yaml --set run_mode=train -o "$out/llama-tiny-train.bin" \
  --report="$out/train-report.txt"
"$bin/mf-run" "$out/llama-tiny-train.bin" --init-weights --data "$out/corpus.txt" --steps 600 \
  --save-every 300 --save-weights "$out/llama-tiny-trained.safetensors"
echo "   checkpoints (parameters + optimizer state + step + data position):"
echo "   $out/llama-tiny-trained.step300.safetensors, $out/llama-tiny-trained.safetensors"

echo "== generate from the trained weights (greedy with a repetition penalty, then sampled)"
"$bin/mf-run" "$out/llama-tiny.bin" --weights "$out/llama-tiny-trained.safetensors" \
  --prompt "The compiler " --max-new-tokens 80 --repetition-penalty 1.3
"$bin/mf-run" "$out/llama-tiny.bin" --weights "$out/llama-tiny-trained.safetensors" \
  --prompt "The compiler " --max-new-tokens 80 --do-sample --top-k 8 --temperature 0.6 --seed 3

echo "== Serving: the trained model with 4 slots behind an OpenAI-style API"
echo "   (mf-serve; docs/serving.md), asked by 4 clients at once"
"$bin/mfc" compile examples/llama-tiny.yaml --set model.model_config.batch_size=4 \
  -o "$out/llama-tiny-serve.bin" 2>/dev/null
rm -f "$out/port"
"$bin/mf-serve" "$out/llama-tiny-serve.bin" --weights "$out/llama-tiny-trained.safetensors" \
  --port 0 --port-file "$out/port" &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$out/port" ] && break; sleep 0.1; done
port=$(cat "$out/port")
clients=()
for prompt in "The compiler " "Graph Mode " "A YAML key " "The runtime "; do
  curl -s "http://127.0.0.1:$port/v1/completions" -d "{\"prompt\": \"$prompt\", \"max_tokens\": 40, \"temperature\": 0, \"repetition_penalty\": 1.3}" \
    > "$out/reply-${prompt// /_}.json" &
  clients+=($!)
done
wait "${clients[@]}"
for prompt in "The compiler " "Graph Mode " "A YAML key " "The runtime "; do
  /usr/bin/python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(repr(sys.argv[2] + r["choices"][0]["text"]))' \
    "$out/reply-${prompt// /_}.json" "$prompt"
done
curl -s "http://127.0.0.1:$port/metrics" | grep -E "^mfserve_(requests_finished|generation_tokens)_total"
kill -TERM $server && wait $server
trap - EXIT
