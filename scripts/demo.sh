#!/usr/bin/env bash
# The bundled example end to end, as far as the toolchain goes today:
# compile examples/llama-tiny.yaml to the mf graph and report its cost.
set -euo pipefail

build_dir=${1:-build}
bin="$build_dir/bin"
out="$build_dir/demo"
mkdir -p "$out"

echo "== mfc compile examples/llama-tiny.yaml --compile-to=mf"
"$bin/mfc" compile examples/llama-tiny.yaml --compile-to=mf \
  --dump-ir-dir="$out/ir" -o "$out/llama-tiny.mf.mlir"
echo "   wrote $out/llama-tiny.mf.mlir (IR after every phase in $out/ir/)"

echo "== the same model, 4 layers instead of 2 (--set)"
"$bin/mfc" compile examples/llama-tiny.yaml --compile-to=mf \
  --set model.model_config.num_layers=4 -o "$out/llama-tiny-4l.mf.mlir"
grep -c "mf.parameter" "$out/llama-tiny-4l.mf.mlir" | sed 's/^/   parameters: /'

echo "== cost of every entry point (mf-opt --mf-print-cost)"
"$bin/mf-opt" "$out/llama-tiny.mf.mlir" --mf-print-cost -o /dev/null

echo
echo "The executable format and the runtime (mf-run) are not built yet:"
echo "'mfc compile examples/llama-tiny.yaml -o model.bin' says so plainly."
