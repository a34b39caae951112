#!/usr/bin/python3
"""Data, tensor, pipeline, expert and context parallelism: per-rank memory and communication, and speed.

  bench/parallel.py [--build build] [--config PATH] [--runs 3] [--steps 3]
                    [--tables layout,speed,pipeline,stages,experts,context] [--micro-batches 4]
                    [--context-length 2048]

layout: compiles the real MindFormers pretrain_llama2_7b.yaml at full size
(compile only) with its own parallel_config (data_parallel 8) and as
model_parallel 8 (with and without vocab_emb_dp) and data_parallel 2 x
model_parallel 4 (--set), and prints,
from mfc's --report, what each rank holds (parameters, gradients, AdamW
state, train_step's arena) and what one train_step all-reduces, by grid
axis, next to Megatron-LM's formulas for the same layout:
  - tensor parallelism (Shoeybi et al. 2019; Narayanan et al. 2021): per
    layer two all-reduces of the b x s x h activations forward (after the
    attention output and the FFN down projection, g) and two backward (the
    gradients of the attention and FFN inputs, f), in the compute dtype;
  - data parallelism: one all-reduce of every gradient a rank holds (the
    parameters / model_parallel, in fp32: mfc casts gradients to fp32
    before averaging them), plus the loss; with the parallel optimizer
    (ZeRO-1, which the config enables) a reduce-scatter of the same fp32
    gradients and an all-gather of the updated weights in their dtype
    instead (Rajbhandari et al. 2020);
  - vocabulary parallelism (vocab_emb_dp: False): the embedding's
    all-reduce, the lm_head input's gradient, the cross-entropy's per-token
    statistics;
  - the scalars mfc adds: the loss (data parallel) and the global norm's
    sums of squares of gradients split over ranks, 4 bytes each.
  A ring all-reduce of n ranks sends 2 (n - 1) / n of the payload per rank,
  a reduce-scatter or all-gather (n - 1) / n.

speed: trains bench/configs/llama-100m.yaml (run_mode train, batch 2 x 256)
on one rank with 2 threads against 2 data-parallel ranks of batch 1 with
one thread each (mpirun), with gradient_aggregation_group's 4 buckets and
with one all-reduce a gradient, alternating within each run, and prints the
medians of time per step (after the first) and their ratios.

pipeline: trains llama-100m as pipeline_stage 2 (micro_batch_num 4, batch
1, one thread a rank; whole stages, with offset [1,-1], interleaved in 2
chunks, and zero_bubble_v) against one rank accumulating the same 4
micro-batches (1 and 2 threads), alternating; prints the medians and each stage's measured waiting
(mf-run's per-stage line) beside the schedule's bubble.

experts: trains bench/configs/mixtral-150m.yaml (8 experts, 2 per token,
TopkRouterV2's capacity, batch 2 x 256 global) on one rank with 2 threads,
as data_parallel 2 (every rank holds every expert) and as expert_parallel 2
(each rank holds 4 experts; the routed rows exchanged with MPI_Alltoallv),
one thread a rank, alternating; prints the medians of time per step and
each layout's per-rank trained parameters, gradients and AdamW state from
--report, and rank 0's peak RSS.

context: trains llama-100m on sequences of --context-length tokens (batch
1) on one rank (1 and 2 threads) and as context_parallel 2 (one thread a
rank) with each algorithm: colossalai_cp (every rank's keys and values
gathered) and ulysses_cp (positions traded for heads), alternating; prints
the medians of time per step, train_step's activation arena per rank from
--report (what context parallelism divides) and rank 0's peak RSS.

stages: compiles pretrain_llama2_70b_bf16_32p.yaml at full size (dp1 x mp4
x pp8, 256 micro-batches) and prints the activations a micro-batch in
flight keeps per layer (--report's saved values, by term) beside
Korthikanti et al.'s terms, and each stage's per-rank parameter,
gradient-sum and AdamW bytes from --report beside the count Megatron-LM's
theoretical_memory_usage formula makes for the same layout.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none",
          "-x", "OPENBLAS_NUM_THREADS=1"]
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def compile_report(build, config, binary, overrides):
    report = binary + ".json"
    args = [os.path.join(build, "bin", "mfc"), "compile", config, "-o", binary,
            "--report", report]
    for override in overrides:
        args += ["--set", override]
    subprocess.run(args, check=True, capture_output=True)
    with open(report) as f:
        return json.load(f)


def megatron(config, overrides, report):
    """Megatron-LM's and ZeRO's per-step payloads for this layout, in bytes,
    by (collective, grid axis)."""
    with open(config) as f:
        doc = yaml.safe_load(f)
    for override in overrides:
        key, value = override.split("=", 1)
        node = doc
        *path, last = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[last] = yaml.safe_load(value)
    model = doc["model"]["model_config"]
    parallel = doc.get("parallel_config", {})
    dp = parallel.get("data_parallel", 1) if doc.get("use_parallel") else 1
    tp = parallel.get("model_parallel", 1) if doc.get("use_parallel") else 1
    zero = dp > 1 and doc.get("parallel", {}).get("enable_parallel_optimizer", False)
    b = doc["runner_config"]["batch_size"]
    s, h, layers = model["seq_length"], model["hidden_size"], model["num_layers"]
    compute = DTYPE_BYTES[model.get("compute_dtype", "float16")]
    param_bytes = DTYPE_BYTES[model.get("param_init_type", "float32")]
    params = report["training_memory_bytes"]["trained_parameters"] // param_bytes  # per rank
    formulas = {}
    if tp > 1:
        # g and f per layer, forward and backward; the global norm's scalar
        # (over both axes when ZeRO splits the split gradients further).
        formulas[("all_reduce", "model_parallel")] = 4 * layers * b * s * h * compute
        if not parallel.get("vocab_emb_dp", True) and model["vocab_size"] % tp == 0:
            # Vocabulary parallelism: the embedding's partial lookup (g, in
            # the table's dtype), the lm_head's input gradient (f), and the
            # cross-entropy's per-token statistics in f64 (the maximum and
            # two sums forward, the maximum and a sum backward; Megatron
            # sends three f32 forward and keeps the softmax for backward).
            formulas[("all_reduce", "model_parallel")] += (
                b * s * h * param_bytes + b * s * h * compute + 5 * 8 * b * s)
        if zero:
            formulas[("all_reduce", "data_parallel x model_parallel")] = 4
        else:
            formulas[("all_reduce", "model_parallel")] += 4
    if dp > 1 and zero:
        # Every dimension of LLaMA-2 7B's blocks divides by these dp: all
        # state is sharded. The loss and the norm's scalar stay all-reduces.
        formulas[("reduce_scatter", "data_parallel")] = 4 * params
        formulas[("all_gather", "data_parallel")] = param_bytes * params
        formulas[("all_reduce", "data_parallel")] = 4 + 4
    elif dp > 1:
        formulas[("all_reduce", "data_parallel")] = 4 * params + 4
    return formulas


def layout_table(args, tmp):
    config = os.path.join(args.mindformers, "pretrain_llama2_7b.yaml")
    layouts = [("its own (dp 8)", []),
               ("dp 8, no ZeRO", ["parallel.enable_parallel_optimizer=False"]),
               ("tp 8", ["parallel_config.data_parallel=1", "parallel_config.model_parallel=8"]),
               ("tp 8, vocab", ["parallel_config.data_parallel=1", "parallel_config.model_parallel=8",
                                "parallel_config.vocab_emb_dp=False"]),
               ("dp 2 x tp 4", ["parallel_config.data_parallel=2", "parallel_config.model_parallel=4"])]
    print(f"pretrain_llama2_7b.yaml at full size, compiled only; per rank, one train_step")
    print(f"{'layout':16} {'params MB':>10} {'grads MB':>9} {'AdamW MB':>9} {'arena MB':>9}  "
          f"{'collective':15} {'axis':30} {'count':>5} {'payload MB':>11} {'formula MB':>11} "
          f"{'ring sent MB':>13}")
    for name, overrides in layouts:
        binary = os.path.join(tmp, re.sub(r"\W+", "_", name) + ".bin")
        report = compile_report(args.build, config, binary, overrides)
        memory = report["training_memory_bytes"]
        formulas = megatron(config, overrides, report)
        steps = {(c["collective"], c["axes"]): c
                 for c in report.get("parallel", {}).get("collectives", {}).get("train_step", [])}
        first = True
        for key in sorted(set(steps) | set(formulas)):
            c = steps.get(key, {"count": 0, "payload_bytes": 0, "ring_bytes_sent_per_rank": 0})
            formula = formulas.get(key, 0)
            head = (f"{name:16} {memory['trained_parameters'] / 1e6:10.1f} {memory['gradients'] / 1e6:9.1f} "
                    f"{memory['optimizer_state'] / 1e6:9.1f} {memory['activations_arena'] / 1e6:9.1f}"
                    if first else " " * 58)
            verdict = "equal" if c["payload_bytes"] == formula else "DIFFERENT"
            print(f"{head}  {key[0]:15} {key[1]:30} {c['count']:5d} {c['payload_bytes'] / 1e6:11.3f} "
                  f"{formula / 1e6:11.3f} {c['ring_bytes_sent_per_rank'] / 1e6:13.3f}  {verdict}")
            first = False


def docs_corpus(tmp):
    """This repository's docs as one text file: the training data."""
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w") as out:
        for name in sorted(os.listdir(os.path.join(ROOT, "docs"))):
            if name.endswith(".md"):
                with open(os.path.join(ROOT, "docs", name)) as f:
                    out.write(f.read())
    return corpus


def step_ms(stderr):
    match = re.search(r"\(([\d.]+) ms/step.*?(?:, ([\d.]+) ms/step after the first)?\); ", stderr)
    return float(match.group(2) or match.group(1))


def speed_table(args, tmp):
    config = os.path.join(HERE, "configs", "llama-100m.yaml")
    corpus = docs_corpus(tmp)
    common = ["run_mode=train", "runner_config.batch_size=2"]
    one = os.path.join(tmp, "one.bin")
    dp2 = os.path.join(tmp, "dp2.bin")
    compile_report(args.build, config, one, common)
    dp2_common = ["run_mode=train", "runner_config.batch_size=1", "use_parallel=True",
                  "parallel_config.data_parallel=2"]
    compile_report(args.build, config, dp2, dp2_common)
    # So many buckets that each holds about one gradient: an all-reduce a
    # tensor, against gradient_aggregation_group's default 4.
    unbucketed = os.path.join(tmp, "dp2-unbucketed.bin")
    compile_report(args.build, config, unbucketed,
                   dp2_common + ["parallel_config.gradient_aggregation_group=100000"])
    mfrun = os.path.join(args.build, "bin", "mf-run")
    # Graph Mode: llama-100m.yaml's context mode is 1 (PyNative).
    run = ["--mode", "graph", "--init-weights", "--data", corpus, "--steps", str(args.steps)]
    times = {"one rank, 2 threads": [], "dp2, 1 thread a rank": [],
             "dp2, a bucket a tensor": []}
    for _ in range(args.runs):
        r = subprocess.run([mfrun, one, "--threads", "2"] + run, capture_output=True, text=True, check=True)
        times["one rank, 2 threads"].append(step_ms(r.stderr))
        for name, binary in (("dp2, 1 thread a rank", dp2), ("dp2, a bucket a tensor", unbucketed)):
            r = subprocess.run(MPIRUN + ["-n", "2", mfrun, binary, "--threads", "1"] + run,
                               capture_output=True, text=True, check=True)
            times[name].append(step_ms(r.stderr))
    print(f"\nllama-100m train step, batch 2 x 256 (global), medians of {args.runs} alternating runs "
          f"of {args.steps} steps")
    medians = {k: statistics.median(v) for k, v in times.items()}
    for name, ms in medians.items():
        print(f"  {name:22} {ms:9.1f} ms/step   runs: {', '.join(f'{t:.0f}' for t in times[name])}")
    print(f"  dp2 / one rank: {medians['dp2, 1 thread a rank'] / medians['one rank, 2 threads']:.2f}x the time")
    print(f"  dp2 with 4 buckets / a bucket a tensor: "
          f"{medians['dp2, 1 thread a rank'] / medians['dp2, a bucket a tensor']:.2f}x the time")


def pipeline_table(args, tmp):
    """pp2 against one rank on the same global batch: llama-100m, batch 1 x
    micro_batch_num 4 (one rank: gradient_accumulation_steps 4), one thread a
    rank; and each stage's measured waiting against 1F1B's bubble."""
    config = os.path.join(HERE, "configs", "llama-100m.yaml")
    corpus = os.path.join(tmp, "corpus.txt")
    if not os.path.exists(corpus):
        with open(corpus, "w") as out:
            for name in sorted(os.listdir(os.path.join(ROOT, "docs"))):
                if name.endswith(".md"):
                    with open(os.path.join(ROOT, "docs", name)) as f:
                        out.write(f.read())
    micro = args.micro_batches
    one = os.path.join(tmp, "pp-one.bin")
    pp2 = os.path.join(tmp, "pp2.bin")
    common = ["run_mode=train", "runner_config.batch_size=1"]
    compile_report(args.build, config, one, common + [f"runner_config.gradient_accumulation_steps={micro}"])
    compile_report(args.build, config, pp2, common + [
        "use_parallel=True", "parallel_config.pipeline_stage=2", f"parallel_config.micro_batch_num={micro}"])
    # MindFormers' offset moves a layer to the first stage: the last one
    # also runs the final norm, the lm_head and the loss.
    balanced = os.path.join(tmp, "pp2-offset.bin")
    compile_report(args.build, config, balanced, common + [
        "use_parallel=True", "parallel_config.pipeline_stage=2", f"parallel_config.micro_batch_num={micro}",
        "model.model_config.offset=[1,-1]"])
    # Interleaved stages: each stage's layers in 2 chunks, the bubble
    # (p-1)/(vm+p-1) for twice the messages.
    chunked = ["use_parallel=True", "parallel_config.pipeline_stage=2", f"parallel_config.micro_batch_num={micro}",
               "model.model_config.pp_interleave_num=2", "parallel.pipeline_config.pipeline_interleave=True"]
    interleaved = os.path.join(tmp, "pp2-interleaved.bin")
    bubbles = {"pp2 interleaved x2": compile_report(args.build, config, interleaved, common + chunked)}
    # ZB-V: the 2 chunks in a V, the weight gradients (W) apart from the
    # input gradients (B), filling the bubbles.
    zero_bubble = os.path.join(tmp, "pp2-zbv.bin")
    bubbles["pp2 zero_bubble_v"] = compile_report(args.build, config, zero_bubble, common + chunked + [
        "parallel.pipeline_config.pipeline_scheduler=zero_bubble_v"])
    bubbles = {name: 100 * report["parallel"]["pipeline"]["bubble_fraction"] for name, report in bubbles.items()}
    mfrun = os.path.join(args.build, "bin", "mf-run")
    # Graph Mode: llama-100m.yaml's context mode is 1 (PyNative).
    run = ["--mode", "graph", "--init-weights", "--data", corpus, "--steps", str(args.steps)]
    pipelined = (("pp2, 1 thread a rank", pp2), ("pp2 offset [1,-1]", balanced),
                 ("pp2 interleaved x2", interleaved), ("pp2 zero_bubble_v", zero_bubble))
    times = {"one rank, 1 thread": [], "one rank, 2 threads": []}
    times.update({name: [] for name, _ in pipelined})
    waits = {(name, stage): [] for name, _ in pipelined for stage in (0, 1)}
    for _ in range(args.runs):
        for threads in (1, 2):
            r = subprocess.run([mfrun, one, "--threads", str(threads)] + run,
                               capture_output=True, text=True, check=True)
            times[f"one rank, {threads} thread{'s' if threads > 1 else ''}"].append(step_ms(r.stderr))
        for name, binary in pipelined:
            r = subprocess.run(MPIRUN + ["-n", "2", mfrun, binary, "--threads", "1"] + run,
                               capture_output=True, text=True, check=True)
            times[name].append(step_ms(r.stderr))
            for stage, share in re.findall(r"pipeline stage (\d+) \(rank \d+\): .*?\(([\d.]+)% of its steps\)", r.stderr):
                waits[(name, int(stage))].append(float(share))
    print(f"\nllama-100m train step, batch 1 x {micro} micro-batches of 256 tokens, medians of "
          f"{args.runs} alternating runs of {args.steps} steps")
    medians = {k: statistics.median(v) for k, v in times.items()}
    for name, ms in medians.items():
        print(f"  {name:22} {ms:9.1f} ms/step   runs: {', '.join(f'{t:.0f}' for t in times[name])}")
    for name, _ in pipelined:
        print(f"  {name} / one rank of 1 thread: {medians[name] / medians['one rank, 1 thread']:.2f}x the time; "
              f"/ one rank of 2 threads: {medians[name] / medians['one rank, 2 threads']:.2f}x")
    for (name, stage), shares in waits.items():
        if shares:
            # (p-1)/(m+p-1), or as --report states it (interleaved:
            # (p-1)/(vm+p-1); ZB-V: simulated with F = B = W).
            bubble = bubbles.get(name, 100.0 * (2 - 1) / (micro + 2 - 1))
            print(f"  {name}: stage {stage} waits {statistics.median(shares):.1f}% of its steps "
                  f"(the schedule's bubble with equal stages: {bubble:.1f}%)")


def ffn_width(model):
    """MindFormers' LLaMA FFN width (llama_layer.py): 4h times
    ffn_dim_multiplier + 0.01, two thirds of that, rounded up to multiple_of
    (or intermediate_size when given): 70B's 28672."""
    if model.get("intermediate_size"):
        return model["intermediate_size"]
    width = 4 * model["hidden_size"]
    if model.get("ffn_dim_multiplier"):
        width = int((model["ffn_dim_multiplier"] + 0.01) * width)
    width = 2 * width // 3
    multiple = model.get("multiple_of", 256)
    return multiple * ((width + multiple - 1) // multiple)


def stages_table(args, tmp):
    """The 70B config's pipeline stages as compiled (--report) beside the
    parameter count per stage that Megatron-LM's theoretical_memory_usage
    makes (its layer count for SwiGLU with grouped-query attention, the
    embedding on the first stage, the final norm and an untied lm_head on
    the last, split by model_parallel), at mfc's bytes per parameter."""
    config = os.path.join(args.mindformers, "pretrain_llama2_70b_bf16_32p.yaml")
    binary = os.path.join(tmp, "70b.bin")
    report = compile_report(args.build, config, binary, [])
    with open(config) as f:
        doc = yaml.safe_load(f)
    model, parallel = doc["model"]["model_config"], doc["parallel_config"]
    h, heads = model["hidden_size"], model["num_heads"]
    kv = model.get("n_kv_heads") or heads
    tp = parallel["model_parallel"]
    vocab = model["vocab_size"]
    vocab_split = tp if (not parallel.get("vocab_emb_dp", True) and vocab % tp == 0) else 1
    per_layer = (2 * h * h + 2 * h * (kv * h // heads) + 3 * h * ffn_width(model)) // tp + 2 * h
    param_bytes = DTYPE_BYTES[model.get("param_init_type", "float32")]
    stages = report["parallel"]["stages"]
    pipeline = report["parallel"]["pipeline"]
    print(f"\n{os.path.basename(config)} (full size, compile only): {len(stages)} stages, "
          f"{pipeline['micro_batches']} micro-batches, bubble {100 * pipeline['bubble_fraction']:.1f}%")
    print(f"  per rank, MB         parameters (formula)   gradient sums (formula)  AdamW m+v (formula)  "
          f"worst difference")
    for index, stage in enumerate(stages):
        first, last = stage["layers"]
        count = (last - first + 1) * per_layer
        if index == 0:
            count += vocab * h // vocab_split
        if index == len(stages) - 1:
            count += h + vocab * h // vocab_split
        expected = (count * param_bytes, count * 4, count * 8)
        actual = (stage["parameter_bytes_per_rank"], stage["gradient_bytes_per_rank"],
                  stage["optimizer_bytes_per_rank"])
        worst = max(abs(a - e) / e for a, e in zip(actual, expected))
        print(f"  stage {index} (layers {first}-{last}) "
              + "  ".join(f"{a / 1e6:9.1f} ({e / 1e6:9.1f})" for a, e in zip(actual, expected))
              + f"   {100 * worst:.3f}%")
    print("  (bf16 parameters, f32 gradient sums and AdamW m and v: 14 bytes a parameter;"
          " Megatron's formula counts 18 with its f32 main copy of the weights)")
    activations_table(doc, report)


# Korthikanti et al. 2022's activation terms for one layer, adapted to
# LLaMA (RMSNorm, grouped-query attention, SwiGLU, flash attention: no
# s x s scores kept) under tensor and sequence parallelism: each term
# (what mfc's saved values are classified as, and the width of the
# formula's 16-bit elements per token, split by t: the hidden size h, the
# keys' and values' width kv, or the FFN width f).
ACTIVATION_TERMS = (
    ("attention_norm input", "h"), ("QKV input", "h"), ("Q", "h"), ("K", "kv"), ("V", "kv"),
    ("attention output (wo input)", "h"), ("ffn_norm input", "h"), ("MLP input", "h"),
    ("gate (w1 output)", "f"), ("up (w3 output)", "f"), ("silu(gate)", "f"),
    ("silu(gate) * up (w2 input)", "f"),
)
# What MindFormers' select_recompute (feed_forward.mul and the w1
# activation) recomputes instead of keeping.
SELECTED_TERMS = ("silu(gate)", "silu(gate) * up (w2 input)")


def activation_term(value):
    """The term of ACTIVATION_TERMS a saved value of mfc's is, by the path
    and op that compute it."""
    # A norm's saved values: its input (in f32, the dtype it computes in),
    # and its output, the projections' input: gathered over the sequence,
    # or the shard that select_comm_recompute keeps to gather again.
    path, op = value["path"], value["op"]
    if path.endswith("_norm") and value["dtype"] != "f32":
        op = "output"
    # (A norm's input kept in the compute dtype is the residual sum before
    # it: the attention's for ffn_norm, the layer's output for the next
    # layer's attention_norm, counted with this layer.)
    rules = (("attention_norm", "output", "QKV input"), ("attention_norm", "", "attention_norm input"),
             ("ffn_add", "", "attention_norm input"), ("attention_add", "", "ffn_norm input"),
             ("ffn_norm", "output", "MLP input"), ("ffn_norm", "", "ffn_norm input"),
             ("rotary_embedding.q", "", "Q"), ("rotary_embedding.k", "", "K"), ("split_heads", "", "V"),
             ("attention_core", "", "attention output (wo input)"), ("feed_forward.w1", "", "gate (w1 output)"),
             ("feed_forward.w3", "", "up (w3 output)"), ("feed_forward.mul", "", "silu(gate) * up (w2 input)"))
    for part, kind, term in rules:
        if path.endswith(part) and kind in op:
            return term
    return "other"


def activations_table(doc, report):
    """Per layer, what a micro-batch in flight keeps on the 70B config's
    stage 1 (select_recompute on 4 of its 10 layers) beside Korthikanti et
    al.'s terms, term by term, for a layer kept whole and one under
    select_recompute; then each stage's kept bytes beside the formula's."""
    model, parallel = doc["model"]["model_config"], doc["parallel_config"]
    h, heads, s = model["hidden_size"], model["num_heads"], model["seq_length"]
    kv = (model.get("n_kv_heads") or heads) * (h // heads)
    f, t = ffn_width(model), parallel["model_parallel"]
    b = doc["runner_config"]["batch_size"]
    scale = 2 * s * b / t  # 16-bit bytes of one element a token, per rank
    stages = report["parallel"]["stages"]
    by_layer = {}
    for stage in stages:
        for value in stage["saved"]:
            match = re.search(r"\.layers\.(\d+)\.", value["path"])
            if match:
                layer = by_layer.setdefault(int(match.group(1)), {})
                term = activation_term(value)
                layer[term] = layer.get(term, 0) + value["bytes"]
    selected = {layer for layer, terms in by_layer.items() if "silu(gate) * up (w2 input)" not in terms}
    whole = min(set(by_layer) - selected)
    chosen = min(selected) if selected else whole
    print(f"\nactivations a micro-batch keeps per layer, per rank (MB; bf16, t={t} with sequence "
          f"parallelism), mfc's saved values against Korthikanti et al.'s terms (flash attention)")
    print(f"  {'term':30} {'formula':>9} {'layer ' + str(whole):>10} {'formula, select':>16} "
          f"{'layer ' + str(chosen) + ' (select)':>20}")
    totals = [0, 0, 0, 0]
    widths = {"h": h, "kv": kv, "f": f, "none": 0}
    for term, width in ACTIVATION_TERMS + (("other", "none"),):
        formula = widths[width] * scale
        formula_selected = 0 if term in SELECTED_TERMS else formula
        row = (formula, by_layer[whole].get(term, 0), formula_selected, by_layer[chosen].get(term, 0))
        totals = [a + r for a, r in zip(totals, row)]
        print(f"  {term:30} " + " ".join(f"{v / 1e6:{w}.1f}" for v, w in zip(row, (9, 10, 16, 20))))
    print(f"  {'per layer':30} " + " ".join(f"{v / 1e6:{w}.1f}" for v, w in zip(totals, (9, 10, 16, 20)))
          + f"   (mfc / formula: {totals[1] / totals[0]:.2f}x whole, {totals[3] / totals[2]:.2f}x select)")
    # Each stage: its layers' terms times the micro-batches in flight, and
    # the stage's input (the hidden states it receives, gathered).
    per_whole, per_selected = totals[0], totals[2]
    print("  per stage, MB: kept (formula: the layers' terms x in flight) ratio")
    for index, stage in enumerate(stages):
        first, last = stage["layers"]
        layers = range(first, last + 1)
        count_selected = sum(1 for layer in layers if layer in selected)
        formula = ((len(layers) - count_selected) * per_whole + count_selected * per_selected) \
            * stage["micro_batches_in_flight"]
        kept = stage["kept_bytes"]
        print(f"  stage {index} (layers {first}-{last}, {count_selected} select, "
              f"{stage['micro_batches_in_flight']} in flight): {kept / 1e6:9.1f} ({formula / 1e6:9.1f}) "
              + (f"{kept / formula:.2f}x" if formula else ""))


def peak_rss_mb(stderr):
    match = re.search(r"peak RSS ([\d.]+) MB", stderr)
    return float(match.group(1)) if match else float("nan")


def alternate(args, binaries, layouts, run):
    """Runs every layout (overrides, ranks, threads a rank) once a round
    for args.runs rounds; each one's times per step and rank 0's peak RSS."""
    mfrun = os.path.join(args.build, "bin", "mf-run")
    times = {name: [] for name in layouts}
    rss = {name: [] for name in layouts}
    for _ in range(args.runs):
        for name, (_, ranks, threads) in layouts.items():
            command = [mfrun, binaries[name], "--threads", str(threads)] + run
            if ranks > 1:
                command = MPIRUN + ["-n", str(ranks)] + command
            r = subprocess.run(command, capture_output=True, text=True, check=True)
            times[name].append(step_ms(r.stderr))
            rss[name].append(peak_rss_mb(r.stderr))
    return times, rss


def experts_table(args, tmp):
    config = os.path.join(HERE, "configs", "mixtral-150m.yaml")
    corpus = docs_corpus(tmp)
    # MindFormers' LLaMA trains a mixture of experts with TopkRouterV2.
    train = ["run_mode=train", "moe_config.routing_policy=TopkRouterV2"]
    parallel = ["runner_config.batch_size=1", "use_parallel=True",
                "parallel_config.data_parallel=2"]
    layouts = {
        "one rank, 2 threads": (train + ["runner_config.batch_size=2"], 1, 2),
        "dp2, 1 thread a rank": (train + parallel, 2, 1),
        "ep2, 1 thread a rank": (train + parallel + ["parallel_config.expert_parallel=2"], 2, 1),
    }
    binaries, held = {}, {}
    for name, (overrides, _, _) in layouts.items():
        binaries[name] = os.path.join(tmp, name.split(",")[0].replace(" ", "-") + ".bin")
        memory = compile_report(args.build, config, binaries[name], overrides)["training_memory_bytes"]
        held[name] = memory["trained_parameters"] + memory["gradients"] + memory["optimizer_state"]
    run = ["--mode", "graph", "--init-weights", "--data", corpus, "--steps", str(args.steps)]
    times, rss = alternate(args, binaries, layouts, run)
    print(f"\nmixtral-150m train step (8 experts, 2 a token, capacity), batch 2 x 256 (global), "
          f"medians of {args.runs} alternating runs of {args.steps} steps")
    medians = {k: statistics.median(v) for k, v in times.items()}
    for name in layouts:
        print(f"  {name:22} {medians[name]:9.1f} ms/step   per rank: weights, gradients and AdamW "
              f"state {held[name] / 1e6:8.1f} MB, rank 0's peak RSS {statistics.median(rss[name]):7.1f} MB"
              f"   runs: {', '.join(f'{t:.0f}' for t in times[name])}")
    one, dp, ep = (medians[n] for n in layouts)
    print(f"  ep2 / dp2: {ep / dp:.2f}x the time, {held['ep2, 1 thread a rank'] / held['dp2, 1 thread a rank']:.2f}x "
          f"the bytes held per rank; ep2 / one rank: {ep / one:.2f}x the time")


def context_table(args, tmp):
    config = os.path.join(HERE, "configs", "llama-100m.yaml")
    corpus = docs_corpus(tmp)
    train = ["run_mode=train", "runner_config.batch_size=1",
             f"model.model_config.seq_length={args.context_length}"]
    cp2 = train + ["use_parallel=True", "parallel_config.context_parallel=2"]
    layouts = {
        "one rank, 1 thread": (train, 1, 1),
        "one rank, 2 threads": (train, 1, 2),
        "cp2 colossalai_cp": (cp2, 2, 1),
        "cp2 ulysses_cp": (cp2 + ["parallel_config.context_parallel_algo=ulysses_cp"], 2, 1),
    }
    binaries, arena = {}, {}
    for name, (overrides, _, _) in layouts.items():
        binaries[name] = os.path.join(tmp, "context-" + re.sub(r"[^a-z0-9]+", "-", name) + ".bin")
        memory = compile_report(args.build, config, binaries[name], overrides)["training_memory_bytes"]
        arena[name] = memory["activations_arena"]
    run = ["--mode", "graph", "--init-weights", "--data", corpus, "--steps", str(args.steps)]
    times, rss = alternate(args, binaries, layouts, run)
    print(f"\nllama-100m train step, batch 1 x {args.context_length} tokens, medians of {args.runs} "
          f"alternating runs of {args.steps} steps")
    medians = {k: statistics.median(v) for k, v in times.items()}
    for name in layouts:
        print(f"  {name:22} {medians[name]:9.1f} ms/step   train_step arena per rank {arena[name] / 1e6:8.1f} MB, "
              f"rank 0's peak RSS {statistics.median(rss[name]):7.1f} MB   runs: "
              f"{', '.join(f'{t:.0f}' for t in times[name])}")
    for name in ("cp2 colossalai_cp", "cp2 ulysses_cp"):
        print(f"  {name} / one rank of 1 thread: {medians[name] / medians['one rank, 1 thread']:.2f}x the time, "
              f"{arena[name] / arena['one rank, 1 thread']:.2f}x the arena; / one rank of 2 threads: "
              f"{medians[name] / medians['one rank, 2 threads']:.2f}x the time")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--mindformers", default=os.path.join(ROOT, "..", "shared", "configs", "mindformers"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--tables", default="layout,speed,pipeline,stages,experts,context")
    parser.add_argument("--micro-batches", type=int, default=4)
    parser.add_argument("--context-length", type=int, default=2048)
    args = parser.parse_args()
    tables = args.tables.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        if "layout" in tables:
            layout_table(args, tmp)
        if "speed" in tables:
            speed_table(args, tmp)
        if "pipeline" in tables:
            pipeline_table(args, tmp)
        if "stages" in tables:
            stages_table(args, tmp)
        if "experts" in tables:
            experts_table(args, tmp)
        if "context" in tables:
            context_table(args, tmp)


if __name__ == "__main__":
    sys.exit(main())
