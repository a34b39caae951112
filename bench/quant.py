#!/usr/bin/python3
"""Quantization: accuracy and speed of W8A16, W4A16, W8A8 and SmoothQuant against f32 and llama.cpp.

  bench/quant.py [--build build] [--steps 200] [--runs 5] [--config CONFIG]
                 [--weights TRAINED.safetensors]

Accuracy needs a model that has learned something, so the bench trains one:
--config (default bench/configs/llama-100m.yaml, a byte-level vocabulary
here) is trained with mf-run for --steps AdamW steps on this repository's
docs but every tenth file, from the deterministic init, and its weights
saved (or --weights names weights trained so before, to measure again
without training). Each variant is then evaluated (mf-run --task eval, compiled with
run_mode eval) on the held-out files, which the training never read:

  f32          the trained weights
  W8A16        quantization_config {quant_method: rtn, weight_dtype: int8},
               modules_to_not_convert [lm_head]: quantized at load
  W8A16 all    the same with modules_to_not_convert [] (the tied lm_head,
               the embedding table, quantized too)
  W4A16 g32    quantization_config {quant_method: ptq, weight_dtype: int4,
               weight_quant_granularity: per_group, group_size: 32}, lm_head
               float
  W4A16 all    the same with the tied table int4 too
  W8A8         quantization_config {quant_method: ptq, weight_dtype: int8,
               activation_dtype: int8, act_quant_granularity: per_token}:
               int8 weights per row and each product's rows quantized per
               token at run time (int8 dot products), lm_head float
  W8A8 all     the same with the tied table int8 too
  SQ           quantization_config {quant_method: smooth_quant, weight_dtype:
               int8, activation_dtype: int8, outliers_suppression: smooth}:
               golden-stick's SmoothQuant (alpha 0.5), the activations'
               static scales from mf-run --task calibrate of the float model
               on the first --calibration-bytes of the training text, lm_head
               float
  SQ no smooth the same without smoothing (quant_method ptq, per_tensor
               activations): static int8 activations alone
  ggml Q8_0    the weights quantized to ggml's Q8_0 / Q4_0 blocks (32
  ggml Q4_0    values, an f16 scale; bench/gguf.py's reference quantizers),
               dequantized and evaluated by the f32 model: the weights
               llama.cpp would compute with (its dot products also round
               the activations to 8 bits, which this does not: W8A8 does)

and prints perplexity and its change against f32.

Speed: the predict config (the same model, run_mode predict) compiled f32
and quantized and run alternately in fresh processes, --runs rounds, the same
192-token prompt and 32 new tokens (mf-run --repeat 3 each): medians of
prefill and decode tokens/s and peak RSS, quantized/f32 ratios, and each
decode's bytes read per token (every parameter an entry reads once), the
read rate that makes, and the decode rate the copy bandwidth
mf-machine-limits measures would allow (a read-only stream runs faster
than a copy, which reads and writes: decode can pass that bound). With
node and the npm node-llama-cpp peer installed (scripts/install-peers.sh),
llama.cpp runs the trained weights as Q8_0 and Q4_0 GGUFs (bench/gguf.py)
in the same alternating rounds (bench/predict.py's llamacpp_measure), and
the ratios against it are printed: W8A8 and W8A16 against Q8_0, W4A16
against Q4_0.
"""
import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "reference"))
import gguf  # noqa: E402  (bench/gguf.py: ggml's reference quantizers)
import predict  # noqa: E402  (bench/predict.py: the llama.cpp peer's runner)
import numpy  # noqa: E402
import reference  # noqa: E402
import torch  # noqa: E402

def rtn(not_convert):
    return ("model.model_config.quantization_config={quant_method: rtn, weight_dtype: int8, "
            "activation_dtype: None, kvcache_dtype: None, outliers_suppression: None, "
            f"modules_to_not_convert: [{not_convert}]}}")


def ptq_w8a8(not_convert):
    return ("model.model_config.quantization_config={quant_method: ptq, weight_dtype: int8, "
            "activation_dtype: int8, act_quant_granularity: per_token, "
            f"modules_to_not_convert: [{not_convert}]}}")


def smooth_quant(smooth):
    method = ("quant_method: smooth_quant, outliers_suppression: smooth" if smooth
              else "quant_method: ptq, act_quant_granularity: per_tensor")
    return (f"model.model_config.quantization_config={{{method}, weight_dtype: int8, "
            "activation_dtype: int8, modules_to_not_convert: [lm_head]}")


def ptq_int4(group, not_convert):
    return ("model.model_config.quantization_config={quant_method: ptq, weight_dtype: int4, "
            f"weight_quant_granularity: per_group, group_size: {group}, activation_dtype: None, "
            f"modules_to_not_convert: [{not_convert}]}}")


# (name, what it is, --set, Linear names left float, bits, group):
# MindFormers' RTN config keeps lm_head float; with nothing excluded the
# tied table is quantized too.
VARIANTS = [("W8A16", "RTN int8, per row", rtn("lm_head"), ["lm_head"], 8, 0),
            ("W8A16 all", "RTN int8, per row", rtn(""), [], 8, 0),
            ("W4A16 g32", "int4, groups of 32", ptq_int4(32, "lm_head"), ["lm_head"], 4, 32),
            ("W4A16 all", "int4, groups of 32", ptq_int4(32, ""), [], 4, 32),
            ("W8A8", "int8 rows per token", ptq_w8a8("lm_head"), ["lm_head"], 8, 0),
            ("W8A8 all", "int8 rows per token", ptq_w8a8(""), [], 8, 0),
            ("SQ", "SmoothQuant, static int8 rows", smooth_quant(True), ["lm_head"], 8, 0),
            ("SQ no smooth", "static int8 rows", smooth_quant(False), ["lm_head"], 8, 0)]
# The variants whose weights need the calibration's activation ranges.
CALIBRATED = {"SQ", "SQ no smooth"}
# llama.cpp's formats each mfc format is compared with.
PEER_OF = {"W8A16": "Q8_0", "W8A16 all": "Q8_0", "W4A16 g32": "Q4_0", "W4A16 all": "Q4_0",
           "W8A8": "Q8_0", "W8A8 all": "Q8_0", "SQ": "Q8_0", "SQ no smooth": "Q8_0"}


def run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"quant.py: {' '.join(args[:3])} ... failed:\n{result.stderr[-2000:]}")
    return result


def compile_model(build, config, binary, *sets):
    args = [os.path.join(build, "bin", "mfc"), "compile", config, "-o", binary,
            "--report", binary + ".json"]
    for assignment in sets:
        args += ["--set", assignment]
    run(args)
    with open(binary + ".json") as f:
        return json.load(f)


def corpora(tmp):
    """(training text, held-out text): the docs, every tenth file held out."""
    names = ["README.md"] + [os.path.join("docs", n)
                             for n in sorted(os.listdir(os.path.join(ROOT, "docs")))
                             if n.endswith(".md")]
    train, held = os.path.join(tmp, "train.txt"), os.path.join(tmp, "heldout.txt")
    with open(train, "wb") as t, open(held, "wb") as h:
        for i, name in enumerate(names):
            with open(os.path.join(ROOT, name), "rb") as f:
                (h if i % 10 == 9 else t).write(f.read())
    return train, held


def ggml_roundtrip(weights, kind, out):
    """The weights as ggml's Q8_0 / Q4_0 blocks hold them: every 2-D weight
    whose rows split into 32-value blocks, quantized and dequantized."""
    tensors = {name: t for name, t in reference.load_safetensors(weights).items()
               if not name.startswith("optimizer.")}
    for name, t in tensors.items():
        if t.dim() != 2 or t.shape[1] % gguf.QUANT_BLOCK:
            continue
        value = t.float().numpy()
        raw = (gguf.quantize_q8_0 if kind == "q8_0" else gguf.quantize_q4_0)(value)
        if kind == "q8_0":
            blocks = numpy.frombuffer(raw, dtype=[("d", "<f2"), ("qs", "i1", 32)])
            values = blocks["qs"].astype(numpy.float32)
        else:
            blocks = numpy.frombuffer(raw, dtype=[("d", "<f2"), ("qs", "u1", 16)])
            low, high = blocks["qs"] & 15, blocks["qs"] >> 4
            values = numpy.concatenate([low, high], axis=1).astype(numpy.float32) - 8
        values *= blocks["d"].astype(numpy.float32)[:, None]
        tensors[name] = torch.from_numpy(values.reshape(value.shape)).to(t.dtype)
    reference.save_safetensors(out, tensors)


def perplexity(build, binary, weights, data, extra=()):
    text = run([os.path.join(build, "bin", "mf-run"), binary, "--task", "eval",
                "--weights", weights, "--data", data, *extra]).stdout
    return float(re.search(r"perplexity ([\d.]+)", text).group(1))


def generate(build, binary, weights, prompt, new_tokens, extra=()):
    """(prefill t/s, decode t/s, peak RSS MB): medians of mf-run --repeat 3."""
    err = run([os.path.join(build, "bin", "mf-run"), binary, "--mode", "graph", "--weights",
               weights, "--input-ids", ",".join(map(str, prompt)), "--max-new-tokens",
               str(new_tokens), "--greedy", "--repeat", "3", *extra]).stderr
    m = re.search(r"prefill \d+ tokens in [\d.]+ ms \(([\d.]+) tokens/s.*?decode \d+ tokens in "
                  r"[\d.]+ ms \(([\d.]+) tokens/s\).*peak RSS ([\d.]+) MB", err)
    return float(m.group(1)), float(m.group(2)), float(m.group(3))


def decode_bytes(weights, not_convert, bits=8, group=0):
    """Bytes a decode step reads of the weights: every parameter once (a
    quantized Linear's int8 or int4 values and f32 scales, per row or per
    `group`; `not_convert` None: none is), but an untied embedding table,
    of which it reads one row."""
    tensors = {name: t for name, t in reference.load_safetensors(weights).items()
               if not name.startswith("optimizer.")}  # a training checkpoint's state
    linear = (set(reference.quantized_linear_names(tensors, not_convert))
              if not_convert is not None else set())
    tied = "lm_head.weight" not in tensors
    total = 0
    for name, t in tensors.items():
        if name == "model.embed_tokens.weight" and not tied:
            continue
        if name in linear:
            total += t.numel() * bits // 8 + 4 * (t.numel() // group if group else t.shape[0])
        else:
            total += t.numel() * t.element_size()
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--config", default=os.path.join(HERE, "configs", "llama-100m.yaml"))
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--weights", help="weights trained before (skips the training)")
    parser.add_argument("--calibration-bytes", type=int, default=65536,
                        help="SmoothQuant's calibration: this much of the training text")
    args = parser.parse_args()
    build = os.path.abspath(args.build)

    with tempfile.TemporaryDirectory() as tmp:
        train_text, held_text = corpora(tmp)
        trained = os.path.join(tmp, "trained.safetensors")
        if args.weights:
            trained = os.path.abspath(args.weights)
            print(f"weights {trained} (trained before); held-out text: "
                  f"{os.path.getsize(held_text)} bytes")
        else:
            train_bin = os.path.join(tmp, "train.bin")
            compile_model(build, args.config, train_bin, "run_mode=train")
            out = run([os.path.join(build, "bin", "mf-run"), train_bin, "--data", train_text,
                       "--steps", str(args.steps), "--save-weights", trained]).stderr
            last = re.findall(r"loss ([\d.]+)", out)
            print(f"trained {os.path.basename(args.config)} for {args.steps} steps on the docs "
                  f"(last training loss {last[-1] if last else '?'}); held-out text: "
                  f"{os.path.getsize(held_text)} bytes")

        # SmoothQuant's activation ranges: the float model (mfc
        # --calibration-model) over the start of the training text.
        calibration_text = os.path.join(tmp, "calibration.txt")
        with open(train_text, "rb") as f, open(calibration_text, "wb") as out:
            out.write(f.read(args.calibration_bytes))
        float_bin = os.path.join(tmp, "calibrate.bin")
        run([os.path.join(build, "bin", "mfc"), "compile", args.config, "-o", float_bin,
             "--calibration-model", "--set", "run_mode=predict", "--set", smooth_quant(True)])
        ranges = os.path.join(tmp, "ranges.safetensors")
        out = run([os.path.join(build, "bin", "mf-run"), float_bin, "--weights", trained,
                   "--task", "calibrate", "--data", calibration_text, "--save-calibration",
                   ranges]).stderr
        print(out.strip().splitlines()[-1])
        extra = {name: ["--calibration", ranges] for name in CALIBRATED}

        eval_f32 = os.path.join(tmp, "eval.bin")
        compile_model(build, args.config, eval_f32, "run_mode=eval")
        rows = [("f32", perplexity(build, eval_f32, trained, held_text))]
        for name, what, setting, _, _, _ in VARIANTS:
            binary = os.path.join(tmp, f"eval-{len(rows)}.bin")
            compile_model(build, args.config, binary, "run_mode=eval", setting)
            rows.append((f"{name} ({what})",
                         perplexity(build, binary, trained, held_text, extra.get(name, ()))))
        for kind in ("q8_0", "q4_0"):
            weights = os.path.join(tmp, f"{kind}.safetensors")
            ggml_roundtrip(trained, kind, weights)
            rows.append((f"ggml {kind.upper()} weights",
                         perplexity(build, eval_f32, weights, held_text)))
        base = rows[0][1]
        print(f"\n{'weights':44} {'perplexity':>10} {'vs f32':>8}")
        for name, ppl in rows:
            print(f"{name:44} {ppl:10.4f} {100 * (ppl / base - 1):+7.2f}%")

        limits = json.loads(run([os.path.join(build, "bin", "mf-machine-limits")]).stdout)
        binaries = {"f32": os.path.join(tmp, "predict.bin")}
        compile_model(build, args.config, binaries["f32"], "run_mode=predict", "context.mode=0")
        for name, _, setting, _, _, _ in VARIANTS:
            binaries[name] = os.path.join(tmp, f"predict-{len(binaries)}.bin")
            compile_model(build, args.config, binaries[name], "run_mode=predict",
                          "context.mode=0", setting)
        cfg = reference.Config(args.config)
        prompt = [(7 * i + 3) % min(cfg.vocab, 256) for i in range(192)]
        peers = {}
        if shutil.which("node") and os.path.isdir(predict.LLAMA_CPP_DIR):
            for kind in ("q8_0", "q4_0"):
                peers[f"llama.cpp {kind.upper()}"] = os.path.join(tmp, f"{kind}.gguf")
                run([sys.executable, os.path.join(HERE, "gguf.py"), args.config, trained,
                     peers[f"llama.cpp {kind.upper()}"], "--type", kind])
        else:
            print("(no node or node-llama-cpp: llama.cpp not measured; "
                  "scripts/install-peers.sh installs them)")
        results = {name: [] for name in list(binaries) + list(peers)}
        for _ in range(args.runs):  # alternating: drift hits all alike
            for name, gguf_path in peers.items():
                results[name].append(predict.llamacpp_measure(gguf_path, prompt, 32))
            for name, binary in binaries.items():
                results[name].append(generate(build, binary, trained, prompt, 32,
                                              extra.get(name, ())))
                current = json.loads(run([os.path.join(build, "bin", "mf-machine-limits")]).stdout)
                limits["copy_gbs"] = max(limits["copy_gbs"], current["copy_gbs"])
        print(f"\nspeed: medians of {args.runs} alternating runs, 192-token prompt, 32 new "
              f"tokens, {limits['threads']} threads; copy bandwidth {limits['copy_gbs']:.1f} GB/s "
              f"(best of mf-machine-limits between the runs)")
        print(f"{'weights':12} {'prefill t/s':>12} {'decode t/s':>11} {'RSS MB':>8} "
              f"{'decode MB/token':>16} {'read GB/s':>10} {'copy-bound t/s':>15}")
        medians = {}
        layout = {name: (kept, bits, group) for name, _, _, kept, bits, group in VARIANTS}
        for name in results:
            prefill, decode, rss = (statistics.median(r[i] for r in results[name])
                                    for i in range(3))
            medians[name] = (prefill, decode, rss)
            if name in peers:
                print(f"{name:16} {prefill:6.1f} {decode:11.1f} {rss:8.1f}")
                continue
            read = decode_bytes(trained, *layout.get(name, (None,)))
            print(f"{name:12} {prefill:12.1f} {decode:11.1f} {rss:8.1f} {read / 1e6:16.1f} "
                  f"{decode * read / 1e9:10.1f} {limits['copy_gbs'] * 1e9 / read:15.0f}")
        pf, df, rf = medians["f32"]
        for name, *_ in VARIANTS:
            pq, dq, rq = medians[name]
            line = (f"{name} / f32: prefill {pq / pf:.2f}x, decode {dq / df:.2f}x, peak RSS "
                    f"{rq / rf:.2f}x")
            peer = f"llama.cpp {PEER_OF[name]}"
            if peer in medians:
                pp, dp, _ = medians[peer]
                line += f"; / {peer}: prefill {pq / pp:.2f}x, decode {dq / dp:.2f}x"
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
