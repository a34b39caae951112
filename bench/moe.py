#!/usr/bin/python3
"""Mixture-of-experts predict speed: Graph Mode, PyNative and PyTorch eager.

  bench/moe.py [--build build] [--runs 5]

For bench/configs/mixtral-150m.yaml (8 experts, 2 per token, ~140M
parameters, ~48M active) and its dense twin (one SwiGLU as wide as the two
chosen experts: the same active parameters): compile, write random weights,
then over --runs rounds (each side in a fresh process, the sides alternating
so that another tenant's load hits all alike) time
  - mf-run --mode graph and --mode pynative on the MoE model,
  - a PyTorch eager model with a KV cache whose routed layers are Hugging
    Face's loop over the chosen experts (bench/predict.py's CachedLlama),
  - llama.cpp (npm node-llama-cpp, all cores) on the same weights as an f32
    GGUF (bench/gguf.py writes the experts as Mixtral's ffn_*_exps),
  - mf-run --mode graph on the dense twin,
and print medians of prefill and decode tokens/s, Graph / PyNative, Graph /
PyTorch, Graph / llama.cpp (> 1: Graph is faster) and the MoE's decode time
over the dense twin's (the issue's goal: within 1.3x).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import predict  # noqa: E402  (re-execs without OPENBLAS_CORETYPE, imports torch)
import yaml  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    config = os.path.join(HERE, "configs", "mixtral-150m.yaml")
    prompt_length, new_tokens = 128, 32
    with tempfile.TemporaryDirectory() as tmp:
        with open(config) as f:
            dense = yaml.safe_load(f)
        dense["moe_config"]["expert_num"] = 1
        dense["model"]["model_config"]["intermediate_size"] *= 2
        dense_config = os.path.join(tmp, "dense.yaml")
        with open(dense_config, "w") as f:
            yaml.safe_dump(dense, f)
        binaries, weights = {}, {}
        for name, path in (("moe", config), ("dense", dense_config)):
            binaries[name] = os.path.join(tmp, name + ".bin")
            weights[name] = os.path.join(tmp, name + ".safetensors")
            subprocess.run([os.path.join(args.build, "bin", "mfc"), "compile", path, "-o",
                            binaries[name]], check=True, capture_output=True)
            subprocess.run([sys.executable, os.path.join(ROOT, "test", "reference",
                                                         "reference.py"),
                            "make-weights", path, weights[name], "--std", "0.02"],
                           check=True, capture_output=True)
        gguf = os.path.join(tmp, "moe.gguf")
        subprocess.run([sys.executable, os.path.join(HERE, "gguf.py"), config, weights["moe"],
                        gguf], check=True, capture_output=True)
        cfg = predict.reference.Config(config)
        prompt = predict.make_prompt(cfg, prompt_length)
        results = {"graph": [], "pynative": [], "pytorch": [], "llama.cpp": [], "dense": []}
        for _ in range(args.runs):
            for mode in ("graph", "pynative"):
                results[mode].append(predict.mfrun_run(args.build, mode, binaries["moe"],
                                                       weights["moe"], prompt, new_tokens))
            results["pytorch"].append(predict.torch_measure(config, weights["moe"],
                                                            prompt_length, new_tokens))
            results["llama.cpp"].append(predict.llamacpp_measure(gguf, prompt, new_tokens))
            results["dense"].append(predict.mfrun_run(args.build, "graph", binaries["dense"],
                                                      weights["dense"], prompt, new_tokens))
        med = {k: [statistics.median(r[i] for r in v) for i in range(3)]
               for k, v in results.items()}
        print(f"{'phase':8} {'graph':>11} {'pynative':>11} {'pytorch':>11} {'llama.cpp':>11} "
              f"{'dense':>11} {'g/pynative':>10} {'g/pytorch':>9} {'g/llama.cpp':>11} "
              f"{'moe/dense time':>14}")
        for index, phase in enumerate(["prefill", "decode"]):
            g, p, t, l, d = (med[k][index] for k in ("graph", "pynative", "pytorch", "llama.cpp",
                                                      "dense"))
            print(f"{phase:8} {g:7.1f} t/s {p:7.1f} t/s {t:7.1f} t/s {l:7.1f} t/s {d:7.1f} t/s "
                  f"{g / p:9.2f}x {g / t:8.2f}x {g / l:10.2f}x {d / g:13.2f}x")
        print(f"peak RSS: graph {med['graph'][2]:.0f} MB, pynative {med['pynative'][2]:.0f} MB, "
              f"pytorch {med['pytorch'][2]:.0f} MB, llama.cpp {med['llama.cpp'][2]:.0f} MB, "
              f"dense graph {med['dense'][2]:.0f} MB")
        print(f"medians of {args.runs} rounds, each side in a fresh process; prompt "
              f"{prompt_length} tokens, {new_tokens} new")


if __name__ == "__main__":
    main()
