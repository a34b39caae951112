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

echo "== cost of every entry point before fusion (mf-opt --mf-print-cost)"
"$bin/mf-opt" "$out/llama-tiny.mf.mlir" --mf-print-cost -o /dev/null

echo "== mf-run --dump (the executable)"
"$bin/mf-run" "$out/llama-tiny.bin" --dump | sed -n 1,3p

echo "== mf-run: generate 48 bytes after a prompt (PyNative, KV cache)"
echo "   The weights are the deterministic init (seed 0): the model is"
echo "   untrained, so the text is noise until training lands."
"$bin/mf-run" "$out/llama-tiny.bin" --mode pynative --prompt "Once upon a time" \
  --max-new-tokens 48 --save-weights "$out/llama-tiny.safetensors"

echo "== Graph Mode: native kernels from the executable, checked against PyNative"
"$bin/mf-run" "$out/llama-tiny.bin" --mode graph --weights "$out/llama-tiny.safetensors" \
  --prompt "Once upon a time" --max-new-tokens 48
"$bin/mf-run" "$out/llama-tiny.bin" --weights "$out/llama-tiny.safetensors" --check

echo "== the same, sampled (top-k 20, temperature 0.8), from the saved weights"
"$bin/mf-run" "$out/llama-tiny.bin" --mode pynative --weights "$out/llama-tiny.safetensors" \
  --prompt "Once upon a time" --max-new-tokens 48 --do-sample --top-k 20 --temperature 0.8 --seed 7
