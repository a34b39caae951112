"""Checks an `mfc plan-parallel --report=X.json` search against the compiler.

Every candidate compiled at full size must have the step time its probes
predicted (the same FLOPs and collectives, within 2%) and a planned
peak within `--peak-tolerance` of the prediction; fitting candidates come
first, by step time; and the best one, compiled with `mfc compile` and its
`settings`, must plan each stage as the search's full-size compile did
(the report's per-stage parameters, gradients, optimizer state, kept
activations and arenas, summed the way the search sums them)."""

import argparse
import json
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("plan")
    parser.add_argument("--mfc", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--peak-tolerance", type=float, default=0.02)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    plan = json.load(open(args.plan))
    candidates = plan["candidates"]
    if not candidates or not candidates[0]["fits"]:
        sys.exit("no fitting candidate")
    fits = [c["fits"] for c in candidates]
    if fits != sorted(fits, reverse=True):
        sys.exit("fitting candidates are not listed first")
    times = [c["compiled"]["step_seconds"] if "compiled" in c else c["predicted"]["step_seconds"]
             for c in candidates if c["fits"]]
    if times != sorted(times):
        sys.exit("fitting candidates are not in step-time order: %s" % times)
    compiled = [c for c in candidates if "compiled" in c]
    if not compiled:
        sys.exit("nothing compiled at full size")
    worst = 0.0
    for c in compiled:
        p, x = c["predicted"], c["compiled"]
        if abs(p["step_seconds"] - x["step_seconds"]) > 0.02 * x["step_seconds"]:
            sys.exit("step time predicted %g, compiled %g" % (p["step_seconds"], x["step_seconds"]))
        for a, b in zip(p["stage_peak_bytes"], x["stage_peak_bytes"]):
            worst = max(worst, abs(a - b) / b)
    if worst > args.peak_tolerance:
        sys.exit("a stage's predicted peak is %.1f%% off its compiled plan" % (100 * worst))
    best = candidates[0]
    command = [args.mfc, "compile", args.config, "--compile-to=memory-plan",
               "-o", "/dev/null", "--report=" + args.out]
    for setting in args.set + best["settings"]:
        command += ["--set", setting]
    subprocess.run(command, check=True, stderr=subprocess.DEVNULL)
    report = json.load(open(args.out))
    arenas = {e["name"]: e.get("arena_bytes", 0) for e in report["entries"]}
    stages = report.get("parallel", {}).get("stages")
    if stages:
        peaks = []
        for index, stage in enumerate(stages):
            prefix = "stage%d_" % index
            run = sum(v for k, v in arenas.items() if k.startswith(prefix) and not k.endswith("forward_backward"))
            peaks.append(stage["parameter_bytes_per_rank"] + stage["gradient_bytes_per_rank"]
                         + stage["optimizer_bytes_per_rank"] + stage["kept_bytes"] + run)
        if peaks != best["compiled"]["stage_peak_bytes"]:
            sys.exit("mfc compile plans %s, the search %s" % (peaks, best["compiled"]["stage_peak_bytes"]))
    print("ok: %d candidates, %d compiled at full size, peaks within %.2f%%, best %s"
          % (len(candidates), len(compiled), 100 * worst, " ".join(best["settings"][1:5])))


main()
