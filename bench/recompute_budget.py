#!/usr/bin/python3
"""--memory-budget's search against the true optimum of the same choices.

  bench/recompute_budget.py [--build build] [--points 12] [--layers 4]

For test/Frontend/llama-gqa.yaml trained at sequence length 512 with
--layers layers, compiles with --memory-budget at --points budgets spread
between the full-recompute and the no-recompute peaks, once with the
default search (prefix: the first layers whole, the next selective) and
once with --memory-budget-search=exhaustive (every assignment of none /
selective / full to the layers: 3^layers plans). Prints, per budget, the
recomputed FLOPs (share of the step) each found and the gap: how many more
FLOPs the default recomputes than the optimum. Both read the planner's real
arena for every plan.
"""
import argparse
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def compile_report(build, layers, extra, report):
    run = subprocess.run(
        [os.path.join(build, "bin", "mfc"), "compile",
         os.path.join(ROOT, "test", "Frontend", "llama-gqa.yaml"),
         "--set", "run_mode=train", "--set", "model.model_config.seq_length=512",
         "--set", f"model.model_config.num_layers={layers}",
         "--report", report, "-o", os.devnull] + extra,
        capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(run.stderr)
    with open(report) as f:
        data = json.load(f)
    step = next(e for e in data["entries"] if e["name"] == "train_step")
    recomputed = step.get("recomputed", {}).get("flops", 0)
    return data.get("recompute", {}), recomputed, step["flops"]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--points", type=int, default=12)
    parser.add_argument("--layers", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        full, _, _ = compile_report(args.build, args.layers,
                                    ["--set", "recompute_config.recompute=True"], report)
        lo, hi = full["peak_bytes"], full["peak_bytes_without"]
        print(f"{args.layers} layers: peak {hi / 1e6:.3f} MB without recompute, "
              f"{lo / 1e6:.3f} MB recomputing every layer whole")
        print(f"{'budget MB':>10} {'prefix':>26} {'exhaustive':>26} {'gap':>7}")
        gaps = []
        for i in range(args.points):
            budget = lo + (hi - lo) * i / (args.points - 1)
            cells = []
            for search in ("prefix", "exhaustive"):
                summary, flops, total = compile_report(
                    args.build, args.layers,
                    [f"--memory-budget={int(budget)}B",
                     f"--memory-budget-search={search}"], report)
                cells.append((flops, total, summary["plans_compiled"],
                              summary["peak_bytes"], " ".join(
                                  c[0] for c in summary["layers"])))
            (pf, pt, pn, pp, pl), (ef, et, en, ep, el) = cells
            gap = (pf - ef) / ef if ef else 0.0
            gaps.append(gap)
            print(f"{budget / 1e6:10.3f} {100 * pf / pt:6.2f}% {pl:>9} {pn:3d} plans "
                  f"{100 * ef / et:6.2f}% {el:>9} {en:3d} plans {100 * gap:6.1f}%")
        print(f"largest gap {100 * max(gaps):.1f}%, mean {100 * sum(gaps) / len(gaps):.1f}% "
              f"(recomputed FLOPs of the default search over the optimum's; "
              f"layers: n none, s selective, f full)")


if __name__ == "__main__":
    main()
