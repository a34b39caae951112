#!/usr/bin/python3
"""Predict speed and memory: Graph Mode, PyNative, PyTorch eager and ONNX Runtime, same weights.

  bench/predict.py [--build build] [--runs 5]

For examples/llama-tiny.yaml and bench/configs/llama-100m.yaml: compile,
write random weights, then over --runs runs (5x as many for the tiny
model, whose runs last milliseconds; each in a fresh process) time
  - mf-run --mode graph and --mode pynative (their own prefill/decode timers),
  - a PyTorch eager LLaMA with a KV cache (the same math as the reference),
  - prefill only: ONNX Runtime 1.20 (npm onnxruntime-node, all cores,
    graph optimizations 'all') on that PyTorch model exported to ONNX for
    the prompt's exact length, last position's logits (as mf-run's prefill),
  - llama.cpp (npm node-llama-cpp 3.22.1, its prebuilt CPU build, all
    cores) on the same weights as an f32 GGUF (bench/gguf.py), greedy,
and print medians of prefill and decode tokens/s with the ratios Graph /
PyNative, Graph / PyTorch, Graph / ORT and Graph / llama.cpp (> 1: Graph is
faster), the peak RSS of each,
how close Graph comes to this machine's limits, measured between the rounds
by mf-machine-limits (the best of them), and where Graph Mode's prefill
time goes, by kernel class, each against the GEMM peak:
  - decode: bytes read per token (every parameter once, plus the KV cache
    read by attention) x tokens/s, against STREAM-style copy bandwidth;
  - prefill: the prefill entry's FLOPs (mfc --report) / time, against the
    fp32 GEMM peak.
Everything uses every core of the machine.
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
NPM_DIR = os.environ.get("MFC_NPM_DIR", os.path.expanduser("~/.cache/mfc/npm"))
LLAMA_CPP_DIR = os.path.join(NPM_DIR, "llama-cpp")


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
            q, k = reference.rope(q, positions, cfg.inv_freq), reference.rope(k, positions, cfg.inv_freq)
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
            x = x + self.feed_forward(i, h)
        x = reference.rms_norm(x, w["model.norm.weight"], cfg.eps)
        head = w["model.embed_tokens.weight"] if cfg.tied else w["lm_head.weight"]
        return x[:, -1] @ head.T


    def feed_forward(self, i, h):
        w, p = self.w, f"model.layers.{i}."
        if self.cfg.routed(i):  # Hugging Face's loop over the chosen experts
            b, s, hidden = h.shape
            return reference.sparse_moe_block(self.cfg, w, p, h.reshape(b * s, hidden)) \
                .reshape(b, s, hidden)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        return (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T


class Prefill(torch.nn.Module):
    """The prefill as ONNX sees it: ids [1, L] -> the last position's logits."""

    def __init__(self, cfg, w):
        super().__init__()
        self.cfg, self.w = cfg, w

    def forward(self, ids):
        return CachedLlama(self.cfg, self.w).forward(ids, 0)


def export_onnx(config, weights, prompt_length, path):
    cfg = reference.Config(config)
    w = {n: t.float() for n, t in reference.load_safetensors(weights).items()}
    ids = torch.tensor([make_prompt(cfg, prompt_length)])
    torch.onnx.export(Prefill(cfg, w), (ids,), path, input_names=["input_ids"],
                      output_names=["logits"], opset_version=17)


def ort_measure(onnx_path, prompt):
    """(prefill t/s, peak RSS MB) of one ONNX Runtime process: the median of
    three runs after two warm-ups (as mf-run --repeat 3 after its first)."""
    run = subprocess.run(["node", os.path.join(HERE, "ort_prefill.js"), NPM_DIR, onnx_path,
                          ",".join(map(str, prompt)), str(os.cpu_count()), "3"],
                         capture_output=True, text=True, check=True)
    result = json.loads(run.stdout)
    return len(prompt) / statistics.median(result["seconds"]), result["rss_mb"]


def llamacpp_measure(gguf, prompt, new_tokens):
    """(prefill t/s, decode t/s, peak RSS MB) of one llama.cpp process: the
    medians of three generations after a warm-up (as mf-run --repeat 3)."""
    run = subprocess.run(["node", os.path.join(HERE, "llamacpp_peer.js"), LLAMA_CPP_DIR, gguf,
                          ",".join(map(str, prompt)), str(new_tokens), str(os.cpu_count()), "3"],
                         capture_output=True, text=True, check=True)
    result = json.loads(run.stdout)
    return (len(prompt) / statistics.median(result["prefill_seconds"]),
            (new_tokens - 1) / statistics.median(result["decode_seconds"]), result["rss_mb"])


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


def mfrun_run(build, mode, binary, weights, prompt, new_tokens):
    """(prefill t/s, decode t/s, peak RSS MB) of one mf-run process: the
    medians of three generations in it (PyTorch's process warms up too)."""
    run = subprocess.run([os.path.join(build, "bin", "mf-run"), binary, "--mode", mode,
                          "--weights", weights, "--input-ids", ",".join(map(str, prompt)),
                          "--max-new-tokens", str(new_tokens), "--greedy", "--repeat", "3"],
                         capture_output=True, text=True, check=True)
    match = re.search(r"prefill \d+ tokens in [\d.]+ ms \(([\d.]+) tokens/s, entr(?:y|ies) ([\w+]+)\); "
                      r"decode \d+ tokens in [\d.]+ ms \(([\d.]+) tokens/s\).*peak RSS ([\d.]+) MB",
                      run.stderr)
    return float(match.group(1)), float(match.group(3)), float(match.group(4)), match.group(2)


def torch_child(config, weights, prompt_length, new_tokens):
    """Runs PyTorch in this (child) process and prints its numbers as JSON."""
    torch.set_num_threads(os.cpu_count())
    cfg = reference.Config(config)
    w = {n: t.float() for n, t in reference.load_safetensors(weights).items()}
    prompt = make_prompt(cfg, prompt_length)
    torch_run(cfg, w, prompt, 2)  # warm-up: PyTorch's first calls initialize lazily
    prefill, decode = torch_run(cfg, w, prompt, new_tokens)
    with open("/proc/self/status") as status:  # VmHWM: the peak RSS
        rss = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:")) / 1024
    print(json.dumps({"prefill": prefill, "decode": decode, "rss": rss}))


def torch_measure(config, weights, prompt_length, new_tokens):
    run = subprocess.run([sys.executable, __file__, "--torch-child", config, weights,
                          str(prompt_length), str(new_tokens)],
                         capture_output=True, text=True, check=True)
    result = json.loads(run.stdout)
    return result["prefill"], result["decode"], result["rss"]


def make_prompt(cfg, length):
    return [(7 * i + 3) % min(cfg.vocab, 256) for i in range(length)]


def compile_report(build, config, binary):
    """Compiles `config` to `binary`; returns its report (mfc --report)."""
    return subprocess.run([os.path.join(build, "bin", "mfc"), "compile", config, "-o", binary,
                           "--report=-"], capture_output=True, text=True, check=True).stdout


def entry_flops(report):
    """The FLOPs of each prefill entry in a report."""
    return {name: float(gflops) * 1e9 for name, gflops in
            re.findall(r"entry @(prefill(?:_\d+)?): \d+ ops, ([\d.e+-]+) GFLOP", report)}


def kernel_class(kind, weights):
    """The row a fusion group's time goes to in the kernel profile."""
    if kind == "attention":
        return "attention"
    if kind in ("norm", "elementwise"):
        return kind
    names = " ".join(weights)
    for part, label in (("q_proj", "matmul q"), ("k_proj", "matmul k, v"), ("v_proj", "matmul k, v"),
                        ("o_proj", "matmul o_proj"),
                        ("gate_proj", "matmul gate/up"), ("up_proj", "matmul gate/up"),
                        ("down_proj", "matmul down"), ("lm_head", "matmul lm_head"),
                        ("embed_tokens", "matmul lm_head")):
        if part in names:
            return label
    return "matmul other"


def report_groups(report):
    """Each entry's fusion groups in a report, keyed by the path of their
    last op (the path a profile slice carries): (kind, weights read as
    panels)."""
    groups, entry, current = {}, None, None
    for line in report.splitlines():
        if line.startswith("entry @"):
            entry = line.split()[1][1:].rstrip(":")
            groups[entry] = {}
        elif not line.startswith(" "):  # the initializer's, or a summary
            entry, current = None, None
        elif (m := re.match(r"  group \d+ \((\w+), .*?(?:weights as panels: ([^)]*))?\):$", line)):
            current = (m.group(1), [w.strip() for w in (m.group(2) or "").split(",") if w.strip()])
        elif (m := re.match(r"    mf\.\w+ @ (\S+)", line)) and current and entry:
            groups[entry][m.group(1)] = current
    return groups


def weight_shapes(path):
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    return {name: info["shape"] for name, info in header.items() if name != "__metadata__"}


def kernel_profile(build, report, binary, weights, prompt, cfg, peak_gflops, tmp):
    """Graph Mode's prefill by kernel class: the last of three runs' slices
    (mf-run --profile), each class's share of the prefill and, for the
    matmuls and attention, its GFLOP/s against the GEMM peak."""
    trace = os.path.join(tmp, "trace.json")
    run = subprocess.run([os.path.join(build, "bin", "mf-run"), binary, "--mode", "graph",
                          "--weights", weights, "--input-ids", ",".join(map(str, prompt)),
                          "--max-new-tokens", "1", "--greedy", "--repeat", "3", "--profile", trace],
                         capture_output=True, text=True, check=True)
    entries = re.search(r"entr(?:y|ies) ([\w+]+)\)", run.stderr).group(1).split("+")
    groups = report_groups(report)
    shapes = weight_shapes(weights)
    events = [e for e in json.load(open(trace))["traceEvents"] if e.get("cat", "").startswith("prefill")]
    per_run = len(events) // 3
    rows = {}
    widths = {}
    for event in events[-per_run:]:
        entry = event["cat"]
        kind, panels = groups.get(entry, {}).get(event["args"].get("path", ""), ("library", []))
        path = event["args"].get("path", "")
        label = kernel_class(kind, panels) if event["name"].startswith("mfk_") else "library ops"
        if label.startswith("matmul") and "lm_head" in path:
            label = "matmul lm_head"  # a tied one reads the embedding, not as panels
        row = rows.setdefault(label, {"ms": 0.0, "flops": 0.0})
        row["ms"] += event["dur"] / 1e3
        width = widths.setdefault(entry, int(entry.rsplit("_", 1)[1]) if entry[-1].isdigit() else cfg.seq)
        if label == "matmul lm_head":  # the logits of one position a row
            row["flops"] += 2 * cfg.batch * cfg.vocab * cfg.hidden
        elif label.startswith("matmul"):
            row["flops"] += 2 * cfg.batch * width * sum(shapes[w][0] * shapes[w][1] for w in panels
                                                        if w in shapes)
    # Attention: causal over each chunk after what is cached before it.
    past = 0
    attention = 0.0
    for entry in entries:
        width = widths.get(entry, cfg.seq)
        attention += 4 * cfg.batch * cfg.heads * cfg.head_dim * (width * (width + 1) / 2 + past * width) \
            * cfg.layers
        past += width
    if "attention" in rows:
        rows["attention"]["flops"] = attention
    total = sum(r["ms"] for r in rows.values())
    lines = [f"  {'kernels':16} {'ms':>7} {'share':>6} {'GFLOP':>7} {'GFLOP/s':>8} {'of peak':>7}"]
    for label, row in sorted(rows.items(), key=lambda kv: -kv[1]["ms"]):
        rate = row["flops"] / (row["ms"] / 1e3) / 1e9 if row["flops"] and row["ms"] else 0
        lines.append(f"  {label:16} {row['ms']:7.2f} {100 * row['ms'] / total:5.1f}% "
                     + (f"{row['flops'] / 1e9:7.2f} {rate:8.1f} {100 * rate / peak_gflops:6.0f}%"
                        if rate else f"{'-':>7} {'-':>8} {'-':>7}"))
    lines.append(f"  {'total':16} {total:7.2f} (the sum of the slices; entries {'+'.join(entries)})")
    return lines


def parameter_bytes(build, binary):
    run = subprocess.run([os.path.join(build, "bin", "mf-run"), binary, "--dump"],
                         capture_output=True, text=True, check=True)
    return int(re.search(r"parameters: \d+ tensors, (\d+) values", run.stdout).group(1)) * 4


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--torch-child":
        torch_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--models", default="llama-tiny,llama-100m",
                        help="which of llama-tiny, llama-100m to run")
    parser.add_argument("--llama-cpp-types", default="f32",
                        help="llama.cpp's GGUF types, e.g. f32,q8_0,q4_0 (bench/gguf.py --type): "
                             "the quantized ones on lines of their own")
    args = parser.parse_args()
    llama_types = args.llama_cpp_types.split(",")
    if "f32" not in llama_types:
        sys.exit("predict.py: --llama-cpp-types must include f32")
    # The machine's limits, measured again between the rounds: the best of
    # all (one measurement can fall in a slow spell and read it as the peak).
    limits = {}

    def measure_limits():
        now = json.loads(subprocess.run([os.path.join(args.build, "bin", "mf-machine-limits")],
                                        capture_output=True, text=True, check=True).stdout)
        for key, value in now.items():
            limits[key] = max(limits.get(key, value), value)

    measure_limits()
    print(f"machine: {limits['threads']} threads (limits: best of mf-machine-limits runs between "
          f"the rounds, below)")
    # (name, config, prompt tokens, new tokens, runs): a tiny run lasts a
    # few milliseconds, so a process's luck (which core, what the other
    # tenant does) moves it by a third; five times the runs steady its
    # median.
    configs = [("llama-tiny", os.path.join(ROOT, "examples", "llama-tiny.yaml"), 32, 96,
                5 * args.runs),
               ("llama-100m", os.path.join(HERE, "configs", "llama-100m.yaml"), 192, 32,
                args.runs)]
    for folder, package in ((NPM_DIR, "onnxruntime-node"), (LLAMA_CPP_DIR, "node-llama-cpp")):
        if not os.path.isdir(os.path.join(folder, "node_modules", package)):
            sys.exit(f"predict.py: no {package} in {folder} (scripts/install-deps.sh installs it)")
    configs = [c for c in configs if c[0] in args.models.split(",")]
    header = (f"{'model':11} {'phase':8} {'graph':>11} {'pynative':>11} {'pytorch':>11} "
              f"{'ort':>11} {'llama.cpp':>11} {'g/pynative':>10} {'g/pytorch':>9} {'g/ort':>6} "
              f"{'g/llama.cpp':>11}")
    print(header)
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, config, prompt_length, new_tokens, runs in configs:
            binary = os.path.join(tmp, name + ".bin")
            weights = os.path.join(tmp, name + ".safetensors")
            report = compile_report(args.build, config, binary)
            flops_of = entry_flops(report)
            subprocess.run([sys.executable, os.path.join(ROOT, "test", "reference", "reference.py"),
                            "make-weights", config, weights, "--std", "0.02"],
                           check=True, capture_output=True)
            cfg = reference.Config(config)
            prompt = make_prompt(cfg, prompt_length)
            onnx_path = os.path.join(tmp, name + ".onnx")
            export_onnx(config, weights, prompt_length, onnx_path)
            ggufs = {}
            for kind in llama_types:
                ggufs[kind] = os.path.join(tmp, f"{name}-{kind}.gguf")
                subprocess.run([sys.executable, os.path.join(HERE, "gguf.py"), config, weights,
                                ggufs[kind], "--type", kind], check=True, capture_output=True)
            gguf_path = ggufs["f32"]
            results = {"graph": [], "pynative": [], "pytorch": [], "ort": [], "llama.cpp": []}
            results.update({f"llama.cpp {kind}": [] for kind in llama_types if kind != "f32"})
            for _ in range(runs):  # interleaved, so drift hits all alike
                for mode in ("graph", "pynative"):
                    results[mode].append(mfrun_run(args.build, mode, binary, weights, prompt,
                                                   new_tokens))
                results["pytorch"].append(torch_measure(config, weights, prompt_length,
                                                        new_tokens))
                prefill, rss = ort_measure(onnx_path, prompt)
                results["ort"].append((prefill, float("nan"), rss))
                results["llama.cpp"].append(llamacpp_measure(gguf_path, prompt, new_tokens))
                for kind in llama_types:
                    if kind != "f32":
                        results[f"llama.cpp {kind}"].append(
                            llamacpp_measure(ggufs[kind], prompt, new_tokens))
                measure_limits()
            med = {k: [statistics.median(r[i] for r in v) for i in range(3)]
                   for k, v in results.items()}
            for index, phase in enumerate(["prefill", "decode"]):
                g, p, t, o, c = (med[k][index] for k in ("graph", "pynative", "pytorch", "ort", "llama.cpp"))
                ort = f"{o:7.1f} t/s" if phase == "prefill" else f"{'-':>11}"
                ort_ratio = f"{g / o:5.2f}x" if phase == "prefill" else f"{'-':>6}"
                print(f"{name:11} {phase:8} {g:7.1f} t/s {p:7.1f} t/s {t:7.1f} t/s {ort} {c:7.1f} t/s "
                      f"{g / p:9.2f}x {g / t:8.2f}x {ort_ratio} {g / c:10.2f}x", flush=True)
            for kind in llama_types:
                if kind != "f32":
                    c = med[f"llama.cpp {kind}"]
                    print(f"{name:11} llama.cpp {kind}: prefill {c[0]:.1f} t/s (graph f32 "
                          f"{med['graph'][0] / c[0]:.2f}x), decode {c[1]:.1f} t/s (graph f32 "
                          f"{med['graph'][1] / c[1]:.2f}x), peak RSS {c[2]:.0f} MB", flush=True)
            # Decode reads every parameter once per token and the KV cache
            # up to the current position (half of the generated span on
            # average, bounded by the cache's full length).
            kv_bytes = 2 * cfg.layers * (prompt_length + new_tokens / 2) * cfg.kv_heads * \
                cfg.head_dim * 4
            decode_bytes = parameter_bytes(args.build, binary) + kv_bytes
            decode_gbs = decode_bytes * med["graph"][1] / 1e9
            # mf-run's prefill runs every position of the entries it takes
            # (static shapes; the chunks mf-run names) through the layers:
            # their FLOPs count them all.
            entries = results["graph"][0][3]
            prefill_flops = sum(flops_of[e] for e in entries.split("+"))
            prefill_gflops = prefill_flops / (prompt_length / med["graph"][0]) / 1e9
            notes.append(
                f"{name}: prefill through {entries}; graph decode reads {decode_bytes / 1e6:.1f} MB/token = "
                f"{decode_gbs:.1f} GB/s, {100 * decode_gbs / limits['copy_gbs']:.0f}% of copy "
                f"bandwidth; prefill {prefill_gflops:.1f} GFLOP/s, "
                f"{100 * prefill_gflops / limits['sgemm_gflops']:.0f}% of GEMM peak; "
                f"peak RSS graph {med['graph'][2]:.0f} MB, pynative {med['pynative'][2]:.0f} MB, "
                f"pytorch {med['pytorch'][2]:.0f} MB, ort {med['ort'][2]:.0f} MB, "
                f"llama.cpp {med['llama.cpp'][2]:.0f} MB")
            notes.extend([f"{name}: Graph Mode prefill by kernel class (last of 3 runs, --profile):"]
                         + kernel_profile(args.build, report, binary, weights, prompt, cfg,
                                          limits["sgemm_gflops"], tmp))
    print(f"limits: copy bandwidth {limits['copy_gbs']:.1f} GB/s, fp32 GEMM peak "
          f"{limits['sgemm_gflops']:.0f} GFLOP/s (OpenBLAS 2048^3, all threads)")
    for note in notes:
        print(note)
    print(f"medians of {5 * args.runs} (llama-tiny) and {args.runs} (llama-100m) runs, each in a "
          f"fresh process; prefill tokens/s counts prompt tokens (mf-run's prefill runs all "
          f"positions of the prefill entries it chunks the prompt into through the layers, "
          f"the lm_head at the last prompt position)")


if __name__ == "__main__":
    main()
