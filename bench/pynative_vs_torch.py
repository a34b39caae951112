#!/usr/bin/python3
"""PyNative prefill and decode tokens/s next to PyTorch eager, same weights.

  bench/pynative_vs_torch.py [--build build] [--runs 5]

For each config: compile, write random weights, then time
  - mf-run --mode pynative (its own prefill/decode timers), and
  - a PyTorch eager LLaMA with a KV cache (the same math as the reference),
over --runs runs, and print medians and the ratio mf-run / PyTorch (> 1 means
mf-run is faster). Both use every core of the machine.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

# This workplace pins OPENBLAS_CORETYPE for old OpenBLAS builds; it slows
# both sides. Measure without it (mf-run and PyTorch alike): re-exec once.
if os.environ.get("OPENBLAS_CORETYPE") or os.environ.get("OPENBLAS_L2_SIZE"):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "reference"))
import reference  # noqa: E402

torch.set_grad_enabled(False)


class CachedLlama:
    """PyTorch eager LLaMA with a KV cache, as a PyTorch user would write it."""

    def __init__(self, cfg, w):
        self.cfg, self.w = cfg, w
        self.keys = [None] * cfg.layers
        self.values = [None] * cfg.layers

    def forward(self, ids, start):
        cfg, w = self.cfg, self.w
        b, s = ids.shape
        x = w["model.embed_tokens.weight"][ids]
        positions = torch.arange(start, start + s)
        for i in range(cfg.layers):
            p = f"model.layers.{i}."
            h = reference.rms_norm(x, w[p + "input_layernorm.weight"], cfg.eps)
            q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(b, s, cfg.heads, cfg.head_dim)
            k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(b, s, cfg.kv_heads, cfg.head_dim)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(b, s, cfg.kv_heads, cfg.head_dim)
            q, k = reference.rope(q, positions, cfg.theta), reference.rope(k, positions, cfg.theta)
            if start:
                k = torch.cat([self.keys[i], k], dim=1)
                v = torch.cat([self.values[i], v], dim=1)
            self.keys[i], self.values[i] = k, v
            group = cfg.heads // cfg.kv_heads
            qt = q.transpose(1, 2)
            kt = k.repeat_interleave(group, dim=2).transpose(1, 2)
            vt = v.repeat_interleave(group, dim=2).transpose(1, 2)
            scores = qt @ kt.transpose(-1, -2) / cfg.head_dim ** 0.5
            if s > 1:  # prefill from position 0: the usual causal mask
                mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
                scores = scores.masked_fill(mask, float("-inf"))
            a = torch.softmax(scores, dim=-1) @ vt
            x = x + a.transpose(1, 2).reshape(b, s, cfg.hidden) @ w[p + "self_attn.o_proj.weight"].T
            h = reference.rms_norm(x, w[p + "post_attention_layernorm.weight"], cfg.eps)
            gate = h @ w[p + "mlp.gate_proj.weight"].T
            up = h @ w[p + "mlp.up_proj.weight"].T
            x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
        x = reference.rms_norm(x, w["model.norm.weight"], cfg.eps)
        head = w["model.embed_tokens.weight"] if cfg.tied else w["lm_head.weight"]
        return x[:, -1] @ head.T


def torch_run(cfg, w, prompt, new_tokens):
    model = CachedLlama(cfg, w)
    ids = torch.tensor([prompt])
    t0 = time.perf_counter()
    logits = model.forward(ids, 0)
    t1 = time.perf_counter()
    token = int(logits[0].argmax())
    for step in range(new_tokens - 1):
        logits = model.forward(torch.tensor([[token]]), len(prompt) + step)
        token = int(logits[0].argmax())
    t2 = time.perf_counter()
    return len(prompt) / (t1 - t0), (new_tokens - 1) / (t2 - t1)


def mfrun_run(build, binary, weights, prompt, new_tokens):
    run = subprocess.run([os.path.join(build, "bin", "mf-run"), binary, "--mode", "pynative",
                          "--weights", weights, "--input-ids", ",".join(map(str, prompt)),
                          "--max-new-tokens", str(new_tokens), "--greedy"],
                         capture_output=True, text=True, check=True)
    match = re.search(r"prefill \d+ tokens in [\d.]+ ms \(([\d.]+) tokens/s\); decode \d+ tokens "
                      r"in [\d.]+ ms \(([\d.]+) tokens/s\)", run.stderr)
    return float(match.group(1)), float(match.group(2))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count())
    configs = [("llama-tiny", os.path.join(ROOT, "examples", "llama-tiny.yaml"), 96, 32),
               ("llama-100m", os.path.join(HERE, "configs", "llama-100m.yaml"), 192, 32)]
    print(f"{'model':12} {'phase':8} {'mf-run pynative':>16} {'pytorch eager':>14} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, config, prompt_length, new_tokens in configs:
            binary = os.path.join(tmp, name + ".bin")
            weights = os.path.join(tmp, name + ".safetensors")
            subprocess.run([os.path.join(args.build, "bin", "mfc"), "compile", config, "-o", binary],
                           check=True)
            subprocess.run([sys.executable, os.path.join(ROOT, "test", "reference", "reference.py"),
                            "make-weights", config, weights, "--std", "0.02"],
                           check=True, capture_output=True)
            cfg = reference.Config(config)
            w = {n: t.float() for n, t in reference.load_safetensors(weights).items()}
            prompt = [(7 * i + 3) % min(cfg.vocab, 256) for i in range(prompt_length)]
            ours = [mfrun_run(args.build, binary, weights, prompt, new_tokens) for _ in range(args.runs)]
            theirs = [torch_run(cfg, w, prompt, new_tokens) for _ in range(args.runs)]
            for index, phase in enumerate(["prefill", "decode"]):
                a = statistics.median(r[index] for r in ours)
                b = statistics.median(r[index] for r in theirs)
                print(f"{name:12} {phase:8} {a:13.1f} t/s {b:11.1f} t/s {a / b:6.2f}x")
    print(f"medians of {args.runs} runs; prefill tokens/s counts prompt tokens "
          f"(mf-run's prefill computes all seq_length positions)")


if __name__ == "__main__":
    main()
