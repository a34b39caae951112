#!/usr/bin/python3
"""Train-step speed and peak memory: Graph Mode, PyNative and PyTorch eager.

  bench/train.py [--build build] [--runs 3] [--steps 6]

For examples/llama-tiny.yaml (batch 4 x 128) and bench/configs/llama-100m.yaml
(batch 1 x 256), compiled with run_mode train: each run, in a fresh process,
trains --steps AdamW steps on this repository's docs from the same weights;
mf-run reports its time per step after the first (which also touches every
page of the arena and optimizer state) and peak RSS, and PyTorch eager runs
the same model, loss, backward, clipping and torch.optim.AdamW, timed after
one warm-up step alike. Prints medians and the ratios Graph / PyTorch (speed: > 1 is
faster; memory: < 1 is leaner) and Graph / PyNative.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

if os.environ.get("OPENBLAS_CORETYPE") or os.environ.get("OPENBLAS_L2_SIZE"):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def torch_child(config, weights, corpus, steps):
    """PyTorch in this (child) process: ms per step and peak RSS, as JSON."""
    import torch
    sys.path.insert(0, os.path.join(ROOT, "test", "reference"))
    import reference
    torch.set_grad_enabled(True)  # the reference module turns it off
    torch.set_num_threads(os.cpu_count())
    cfg = reference.Config(config, ["run_mode=train"])
    w = {n: t.float().requires_grad_(True) for n, t in reference.load_safetensors(weights).items()}
    params = list(w.values())
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.adam_eps,
                                  weight_decay=cfg.weight_decay)
    with open(corpus, "rb") as f:
        tokens = list(f.read())
    per_batch = cfg.batch * cfg.seq
    times = []
    for step in range(steps + 1):
        start = time.perf_counter()
        chunk = torch.tensor(tokens[step * per_batch:step * per_batch + per_batch + 1])
        ids = chunk[:-1].reshape(cfg.batch, cfg.seq)
        labels = chunk[1:].reshape(cfg.batch, cfg.seq)
        optimizer.zero_grad()
        logits = reference.logits_of(cfg, w, ids)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab), labels.reshape(-1))
        loss.backward()
        if cfg.clip:
            torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
        optimizer.step()
        times.append(time.perf_counter() - start)
    with open("/proc/self/status") as status:
        rss = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:")) / 1024
    print(json.dumps({"ms": 1e3 * statistics.mean(times[1:]), "rss": rss}))


def mfrun(build, mode, binary, weights, corpus, steps):
    run = subprocess.run([os.path.join(build, "bin", "mf-run"), binary, "--mode", mode,
                          "--weights", weights, "--data", corpus, "--steps", str(steps)],
                         capture_output=True, text=True, check=True)
    # The steps after the first, as the PyTorch side measures (its first
    # step warms up; mf-run's first also touches the arena's pages).
    match = re.search(r"\(([\d.]+) ms/step.*?(?:, ([\d.]+) ms/step after the first)?\); "
                      r"peak RSS ([\d.]+) MB", run.stderr)
    return float(match.group(2) or match.group(1)), float(match.group(3))


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--torch-child":
        torch_child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    configs = [("llama-tiny", os.path.join(ROOT, "examples", "llama-tiny.yaml")),
               ("llama-100m", os.path.join(HERE, "configs", "llama-100m.yaml"))]
    print(f"{'model':11} {'graph':>16} {'pynative':>16} {'pytorch':>16} "
          f"{'speed g/pt':>10} {'mem g/pt':>8} {'speed g/pn':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "wb") as out:
            for name in ["README.md"] + sorted(os.listdir(os.path.join(ROOT, "docs"))):
                path = os.path.join(ROOT, name) if name == "README.md" else \
                    os.path.join(ROOT, "docs", name)
                if path.endswith(".md"):
                    out.write(open(path, "rb").read())
        for name, config in configs:
            binary = os.path.join(tmp, name + ".bin")
            weights = os.path.join(tmp, name + ".safetensors")
            subprocess.run([os.path.join(args.build, "bin", "mfc"), "compile", config,
                            "--set", "run_mode=train", "-o", binary],
                           check=True, capture_output=True)
            subprocess.run([sys.executable, os.path.join(ROOT, "test", "reference", "reference.py"),
                            "make-weights", config, weights, "--std", "0.02",
                            "--set", "run_mode=train"], check=True, capture_output=True)
            results = {"graph": [], "pynative": [], "pytorch": []}
            for _ in range(args.runs):
                for mode in ("graph", "pynative"):
                    results[mode].append(mfrun(args.build, mode, binary, weights, corpus,
                                               args.steps))
                child = subprocess.run([sys.executable, __file__, "--torch-child", config,
                                        weights, corpus, str(args.steps)],
                                       capture_output=True, text=True, check=True)
                r = json.loads(child.stdout)
                results["pytorch"].append((r["ms"], r["rss"]))
            med = {k: [statistics.median(x[i] for x in v) for i in range(2)]
                   for k, v in results.items()}
            g, p, t = med["graph"], med["pynative"], med["pytorch"]
            cell = lambda m: f"{m[0]:7.1f}ms {m[1]:5.0f}MB"
            print(f"{name:11} {cell(g):>16} {cell(p):>16} {cell(t):>16} "
                  f"{t[0] / g[0]:9.2f}x {g[1] / t[1]:7.2f}x {p[0] / g[0]:9.2f}x")
    print(f"medians of {args.runs} runs of {args.steps} steps, each in a fresh process; "
          f"time per train step after the first (forward, backward, clipping, AdamW), "
          f"peak RSS of the process")


if __name__ == "__main__":
    main()
