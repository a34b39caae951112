#!/usr/bin/python3
"""The int8 KV cache (kvcache_dtype: int8) against the float one: memory, decode speed, agreement.

  bench/kv_cache.py [--build build] [--steps 150] [--runs 5] [--config CONFIG]
                    [--weights TRAINED.safetensors] [--keep-weights OUT]
                    [--prompts 8]

The model (--config, default bench/configs/llama-100m.yaml) is trained for
--steps AdamW steps on the docs as bench/quant.py trains it (or --weights
names weights trained before; --keep-weights saves them there). Two predict models of it are compiled: the
float KV cache, and an int8 one with every Linear left float
(modules_to_not_convert naming them all), so that only the cache differs.
The int8 cache's scales come from mf-run --task calibrate of the float
model (mfc --calibration-model) on the start of the training text.

Agreement: for --prompts windows of 64 held-out tokens, both models decode
64 tokens greedily; printed are the tokens both produce before the first
difference (of 64, summed), and the largest difference of a step's logits
while the prefixes agree, relative to that step's largest logit.

Memory and speed: the caches' bytes (mfc --report), and, alternating the two
models in fresh processes for --runs rounds, a 192-token prompt and 48 new
tokens (the cache's last positions: the attention reads the most there):
medians of decode tokens/s and their ratio.
"""
import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import quant  # noqa: E402  (the training, corpora and run helpers)

import numpy  # noqa: E402

# MindFormers' names of LLaMA's Linears and the lm_head: left float, so
# that the models differ in the cache alone.
EVERY_LINEAR = "[wq, wk, wv, wo, w1, w2, w3, lm_head, q_proj, k_proj, v_proj, o_proj, " \
               "gate_proj, up_proj, down_proj]"
INT8_CACHE = ("model.model_config.quantization_config={quant_method: rtn, kvcache_dtype: int8, "
              f"modules_to_not_convert: {EVERY_LINEAR}}}")


def decode(build, binary, weights, prompt, new_tokens, extra=(), dump=None):
    args = [os.path.join(build, "bin", "mf-run"), binary, "--mode", "graph", "--weights",
            weights, "--input-ids", ",".join(map(str, prompt)), "--max-new-tokens",
            str(new_tokens), "--greedy", *extra]
    if dump:
        args += ["--dump-step-logits", dump]
    result = quant.run(args)
    ids = [int(t) for t in result.stdout.split("ids:")[-1].split()]
    rate = re.search(r"decode \d+ tokens in [\d.]+ ms \(([\d.]+) tokens/s", result.stderr)
    return ids, float(rate.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(quant.ROOT, "build"))
    parser.add_argument("--config", default=os.path.join(HERE, "configs", "llama-100m.yaml"))
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--weights", help="weights trained before (skips the training)")
    parser.add_argument("--keep-weights", help="where to keep the weights it trains")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    mfrun = os.path.join(build, "bin", "mf-run")

    with tempfile.TemporaryDirectory() as tmp:
        train_text, held_text = quant.corpora(tmp)
        trained = os.path.abspath(args.weights) if args.weights else \
            os.path.join(tmp, "trained.safetensors")
        if not args.weights:
            train_bin = os.path.join(tmp, "train.bin")
            quant.compile_model(build, args.config, train_bin, "run_mode=train")
            out = quant.run([mfrun, train_bin, "--data", train_text, "--steps", str(args.steps),
                             "--save-weights", trained]).stderr
            last = re.findall(r"loss ([\d.]+)", out)
            print(f"trained {os.path.basename(args.config)} for {args.steps} steps "
                  f"(last loss {last[-1] if last else '?'})")
            if args.keep_weights:
                shutil.copyfile(trained, args.keep_weights)

        calibration_text = os.path.join(tmp, "calibration.txt")
        with open(train_text, "rb") as f, open(calibration_text, "wb") as out:
            out.write(f.read(65536))
        float_bin = os.path.join(tmp, "calibrate.bin")
        quant.run([os.path.join(build, "bin", "mfc"), "compile", args.config, "-o", float_bin,
                   "--calibration-model", "--set", "run_mode=predict", "--set", INT8_CACHE])
        ranges = os.path.join(tmp, "ranges.safetensors")
        quant.run([mfrun, float_bin, "--weights", trained, "--task", "calibrate", "--data",
                   calibration_text, "--save-calibration", ranges])

        models = {}
        for name, sets in (("float", ["run_mode=predict"]),
                           ("int8", ["run_mode=predict", INT8_CACHE])):
            binary = os.path.join(tmp, f"{name}.bin")
            report = quant.compile_model(build, args.config, binary, *sets)
            models[name] = (binary, report["kv_cache"]["bytes"])
        extra = {"float": [], "int8": ["--calibration", ranges]}
        print(f"KV cache: float {models['float'][1] / 1e6:.2f} MB, int8 "
              f"{models['int8'][1] / 1e6:.2f} MB "
              f"({models['int8'][1] / models['float'][1]:.3f}x)")

        with open(held_text, "rb") as f:
            held = list(f.read())
        agreed, worst = 0, 0.0
        for p in range(args.prompts):
            prompt = held[p * 512:p * 512 + 64]
            outputs = {}
            for name in models:
                dump = os.path.join(tmp, f"{name}-{p}.npy")
                ids, _ = decode(build, models[name][0], trained, prompt, 64, extra[name], dump)
                outputs[name] = (ids, numpy.load(dump))
            same = 0
            while (same < 64 and same < len(outputs["float"][0]) and
                   same < len(outputs["int8"][0]) and
                   outputs["float"][0][same] == outputs["int8"][0][same]):
                same += 1
            agreed += same
            steps = min(same + 1, len(outputs["float"][1]), len(outputs["int8"][1]))
            for s in range(steps):  # the steps whose prefixes agree
                a, b = outputs["float"][1][s], outputs["int8"][1][s]
                worst = max(worst, float(abs(a - b).max() / abs(a).max()))
        print(f"agreement: {agreed} of {64 * args.prompts} greedy tokens before the first "
              f"difference; largest step-logit difference while the prefixes agree "
              f"{worst:.2e} of the step's largest logit")

        prompt = held[:192]
        rates = {name: [] for name in models}
        for _ in range(args.runs):
            for name in models:  # alternating, fresh processes
                rates[name].append(decode(build, models[name][0], trained, prompt, 48,
                                          extra[name])[1])
        medians = {name: statistics.median(r) for name, r in rates.items()}
        print(f"decode at positions 192-240 ({args.runs} alternating rounds, medians): "
              f"float {medians['float']:.1f} tokens/s, int8 {medians['int8']:.1f} tokens/s "
              f"({medians['int8'] / medians['float']:.3f}x)")


if __name__ == "__main__":
    main()
