#!/usr/bin/python3
"""Train-step speed and peak memory: Graph Mode, PyNative and PyTorch eager.

  bench/train.py [--build build] [--runs 3] [--steps 6] [--tables speed,recompute]

For examples/llama-tiny.yaml (batch 4 x 128) and bench/configs/llama-100m.yaml
(batch 1 x 256), and with --models mixtral-150m bench/configs/mixtral-150m.yaml
(8 experts, 2 a token, TopkRouterV2's capacity; PyTorch runs the reference's
loop over each expert's tokens), compiled with run_mode train: each run, in a fresh process,
trains --steps AdamW steps on this repository's docs from the same weights;
mf-run reports its time per step after the first (which also touches every
page of the arena and optimizer state) and peak RSS, and PyTorch eager runs
the same model, loss, backward, clipping and torch.optim.AdamW, timed after
one warm-up step alike. Prints medians and the ratios Graph / PyTorch (speed: > 1 is
faster; memory: < 1 is leaner) and Graph / PyNative.

The recompute table trains bench/configs/llama-100m.yaml at sequence length
--recompute-seq (1024: activations dominate) in Graph Mode with no recompute,
select_recompute: True, recompute: True, and --memory-budget at the midpoint
of the full and no-recompute planned peaks, next to PyTorch eager without
and with torch.utils.checkpoint on every layer; the variants alternate
within each run. Besides time and peak RSS it prints mfc's planned step peak
and the activation memory (forward_backward's arena, whose results, the
gradients, lie outside it), and for
full recompute that memory against what it must keep: the layer inputs plus
one layer's working set, measured as full recompute's activations of the same
model with one layer, plus (num_layers - 1) layer inputs.
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
sys.path.insert(0, os.path.join(ROOT, "test", "reference"))


def torch_child(config, weights, corpus, steps, overrides=(), checkpoint=False):
    """PyTorch in this (child) process: ms per step and peak RSS, as JSON."""
    import torch
    import reference
    torch.set_grad_enabled(True)  # the reference module turns it off
    torch.set_num_threads(os.cpu_count())
    cfg = reference.Config(config, ["run_mode=train"] + list(overrides))
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
        logits = reference.logits_of(cfg, w, ids, checkpoint)
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


def torch_run(config, weights, corpus, steps, overrides=(), checkpoint=False):
    child = subprocess.run([sys.executable, __file__, "--torch-child", config, weights, corpus,
                            str(steps), json.dumps({"overrides": list(overrides),
                                                    "checkpoint": checkpoint})],
                           capture_output=True, text=True, check=True)
    r = json.loads(child.stdout)
    return r["ms"], r["rss"]


def compile_train(build, config, binary, overrides, extra=()):
    """Compiles for training; returns the --report JSON."""
    report = binary + ".json"
    args = [os.path.join(build, "bin", "mfc"), "compile", config, "--set", "run_mode=train",
            "-o", binary, "--report", report] + list(extra)
    for override in overrides:
        args += ["--set", override]
    subprocess.run(args, check=True, capture_output=True)
    with open(report) as f:
        return json.load(f)


def activation_bytes(report):
    """forward_backward's arena: what the forward keeps for the backward and
    the backward's temporaries (its results, the gradients, are outside)."""
    entry = next(e for e in report["entries"] if e["name"] == "forward_backward")
    return entry["arena_bytes"]


def planned_peak(report):
    memory = report["training_memory_bytes"]
    return (memory["trained_parameters"] + memory["frozen_parameters"] +
            memory["optimizer_state"] + memory["activations_arena"])


def recompute_table(args, tmp, corpus):
    config = os.path.join(HERE, "configs", "llama-100m.yaml")
    seq = ["model.model_config.seq_length=%d" % args.recompute_seq]
    weights = os.path.join(tmp, "recompute.safetensors")
    subprocess.run([sys.executable, os.path.join(ROOT, "test", "reference", "reference.py"),
                    "make-weights", config, weights, "--std", "0.02",
                    "--set", "run_mode=train"] + sum((["--set", o] for o in seq), []),
                   check=True, capture_output=True)
    variants = [("none", [], []),
                ("selective", ["recompute_config.select_recompute=True"], []),
                ("full", ["recompute_config.recompute=True"], [])]
    reports, binaries = {}, {}
    for name, overrides, extra in variants:
        binaries[name] = os.path.join(tmp, f"recompute-{name}.bin")
        reports[name] = compile_train(args.build, config, binaries[name], seq + overrides, extra)
    budget = (planned_peak(reports["none"]) + planned_peak(reports["full"])) // 2
    binaries["budget"] = os.path.join(tmp, "recompute-budget.bin")
    reports["budget"] = compile_train(args.build, config, binaries["budget"], seq,
                                      [f"--memory-budget={budget}B"])
    one_layer = compile_train(args.build, config, os.path.join(tmp, "one-layer.bin"),
                              seq + ["recompute_config.recompute=True",
                                     "model.model_config.num_layers=1"])
    import reference
    spec = reference.Config(config, ["run_mode=train"] + seq)
    layer_input = spec.batch * spec.seq * spec.hidden * 4
    must_keep = activation_bytes(one_layer) + (spec.layers - 1) * layer_input

    rows = ["none", "selective", "full", "budget", "torch", "torch-ckpt"]
    results = {row: [] for row in rows}
    for _ in range(args.runs):
        for row in rows:
            if row.startswith("torch"):
                results[row].append(torch_run(config, weights, corpus, args.recompute_steps, seq,
                                              row == "torch-ckpt"))
            else:
                results[row].append(mfrun(args.build, "graph", binaries[row], weights, corpus,
                                          args.recompute_steps))
    med = {k: [statistics.median(x[i] for x in v) for i in range(2)] for k, v in results.items()}
    print(f"\nrecompute: llama-100m, batch {spec.batch} x seq {spec.seq}, Graph Mode; "
          f"budget {budget / 1e6:.1f} MB (midpoint of full and none)")
    print(f"{'variant':11} {'ms/step':>9} {'RSS MB':>7} {'planned MB':>10} {'activ. MB':>9} "
          f"{'time/none':>9} {'RSS/none':>8}")
    for row in rows:
        ms, rss = med[row]
        planned = activ = ""
        if row in reports:
            planned = f"{planned_peak(reports[row]) / 1e6:10.1f}"
            activ = f"{activation_bytes(reports[row]) / 1e6:9.1f}"
        base = med["torch" if row.startswith("torch") else "none"]
        print(f"{row:11} {ms:9.0f} {rss:7.0f} {planned:>10} {activ:>9} "
              f"{ms / base[0]:8.2f}x {rss / base[1]:7.2f}x")
    if "budget" in reports and "layers" in reports["budget"].get("recompute", {}):
        print("budget chose: " + " ".join(c[0] for c in reports["budget"]["recompute"]["layers"]) +
              " (n none, s selective, f full, per layer)")
    print(f"full recompute keeps {activation_bytes(reports['full']) / 1e6:.1f} MB of activations; "
          f"it must keep {must_keep / 1e6:.1f} MB (one layer's: {activation_bytes(one_layer) / 1e6:.1f} "
          f"MB, plus {spec.layers - 1} layer inputs of {layer_input / 1e6:.2f} MB): "
          f"{activation_bytes(reports['full']) / must_keep:.2f}x")
    print(f"graph full vs torch checkpoint: {med['torch-ckpt'][0] / med['full'][0]:.2f}x the speed "
          f"at {med['full'][1] / med['torch-ckpt'][1]:.2f}x the RSS; "
          f"medians of {args.runs} runs of {args.recompute_steps} steps")


def main():
    if len(sys.argv) == 7 and sys.argv[1] == "--torch-child":
        options = json.loads(sys.argv[6])
        torch_child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]),
                    options["overrides"], options["checkpoint"])
        return
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--tables", default="speed,recompute")
    parser.add_argument("--models", default="llama-tiny,llama-100m",
                        help="the speed table's models: llama-tiny, llama-100m, mixtral-150m")
    parser.add_argument("--recompute-seq", type=int, default=1024)
    parser.add_argument("--recompute-steps", type=int, default=3)
    args = parser.parse_args()
    tables = args.tables.split(",")
    # (name, YAML, --set overrides for training): MindFormers' LLaMA trains
    # a mixture of experts with TopkRouterV2 (and its capacity).
    known = {"llama-tiny": (os.path.join(ROOT, "examples", "llama-tiny.yaml"), ()),
             "llama-100m": (os.path.join(HERE, "configs", "llama-100m.yaml"), ()),
             "mixtral-150m": (os.path.join(HERE, "configs", "mixtral-150m.yaml"),
                              ("moe_config.routing_policy=TopkRouterV2",))}
    configs = [(name, *known[name]) for name in args.models.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "wb") as out:
            for name in ["README.md"] + sorted(os.listdir(os.path.join(ROOT, "docs"))):
                path = os.path.join(ROOT, name) if name == "README.md" else \
                    os.path.join(ROOT, "docs", name)
                if path.endswith(".md"):
                    out.write(open(path, "rb").read())
        if "speed" in tables:
            speed_table(args, tmp, corpus, configs)
        if "recompute" in tables:
            recompute_table(args, tmp, corpus)


def speed_table(args, tmp, corpus, configs):
    print(f"{'model':11} {'graph':>16} {'pynative':>16} {'pytorch':>16} "
          f"{'speed g/pt':>10} {'mem g/pt':>8} {'speed g/pn':>10}")
    for name, config, overrides in configs:
        binary = os.path.join(tmp, name + ".bin")
        weights = os.path.join(tmp, name + ".safetensors")
        sets = [arg for override in overrides for arg in ("--set", override)]
        subprocess.run([os.path.join(args.build, "bin", "mfc"), "compile", config,
                        "--set", "run_mode=train", "-o", binary] + sets,
                       check=True, capture_output=True)
        subprocess.run([sys.executable, os.path.join(ROOT, "test", "reference", "reference.py"),
                        "make-weights", config, weights, "--std", "0.02",
                        "--set", "run_mode=train"], check=True, capture_output=True)
        results = {"graph": [], "pynative": [], "pytorch": []}
        for _ in range(args.runs):
            for mode in ("graph", "pynative"):
                results[mode].append(mfrun(args.build, mode, binary, weights, corpus,
                                           args.steps))
            results["pytorch"].append(torch_run(config, weights, corpus, args.steps, overrides))
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
