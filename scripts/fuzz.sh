#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, runtime only) and fuzzes each loader
# for SECONDS seconds from a seed corpus of real files. Not part of CI.
#   scripts/fuzz.sh [SECONDS]     default 60 per target
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}

if ! command -v clang++-14 >/dev/null || [ ! -e /usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a ]; then
  apt-get install -y -q clang-14 libclang-rt-14-dev
fi

cmake -G Ninja -S . -B build-fuzz -DMFC_RUNTIME_ONLY=ON -DMFC_BUILD_FUZZERS=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined"
cmake --build build-fuzz

# Seeds: executables and weights made by the normal build.
make build >/dev/null
corpus=build-fuzz/corpus
mkdir -p "$corpus/executable" "$corpus/safetensors"
for config in examples/llama-tiny.yaml test/Frontend/gpt2.yaml test/Frontend/qwen-bias-tied.yaml \
    test/Frontend/train-adamw.yaml test/Frontend/lora.yaml; do
  name=$(basename "$config" .yaml)
  build/bin/mfc compile "$config" --set model.model_config.num_layers=1 -o "$corpus/executable/$name.bin"
  /usr/bin/python3 test/reference/reference.py make-weights "$config" "$corpus/safetensors/$name.safetensors" \
    --set model.model_config.num_layers=1 >/dev/null
done
# f32 parameters computed in f16: values derived from the weights (offset -2).
build/bin/mfc compile test/Frontend/gpt2.yaml --set model.model_config.num_layers=1 \
  --set model.model_config.compute_dtype=float16 -o "$corpus/executable/gpt2-fp16.bin"

for target in ExecutableFuzzer SafetensorsFuzzer; do
  dir=$corpus/$( [ "$target" = ExecutableFuzzer ] && echo executable || echo safetensors )
  echo "== $target for ${seconds}s"
  build-fuzz/bin/$target "$dir" -max_total_time="$seconds" -max_len=262144 -rss_limit_mb=4096 2>&1 | tail -3
done
