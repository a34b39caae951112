#!/usr/bin/env python3
"""Compiles every YAML of a MindFormers checkout and counts, by model
family, the configs mfc accepts, the ones it refuses (with the reason) and
the ones it crashes on (a signal, an internal error, a time-out).

  MINDFORMERS_DIR=~/mindformers python3 scripts/config-zoo.py [--build build]
      [--jobs 2] [--timeout 300] [--compile-to sharding] [--list]
      [--pretrained-model-dir DIR]

The YAMLs under configs/ and research/ are compiled as they are, full size,
to the `sharding` phase (the graph, partitioned for the config's
parallel_config where that is built: every key is read and checked, no
kernels are built). The family is the directory under configs/ or research/; the
architecture is the YAML's model.arch.type (or, in MindFormers' newest
configs, model_config.architectures). --list prints every file's outcome.
MindFormers' newest configs take the model from a Hugging Face folder's
config.json (pretrained_model_dir, a placeholder path in the checkout):
--pretrained-model-dir DIR compiles those with DIR as that folder."""
import argparse
import collections
import concurrent.futures
import os
import re
import subprocess
import sys

import yaml


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f)
    except Exception:  # noqa: BLE001 -- any YAML mfc must judge itself
        return None


def architecture(path):
    try:
        model = load(path)["model"]
        if model.get("arch"):
            return model["arch"]["type"]
        names = model["model_config"]["architectures"]
        return names[0] if isinstance(names, list) else names
    except Exception:  # noqa: BLE001
        return "(none)"


def compile_one(mfc, path, compile_to, timeout, pretrained_model_dir):
    command = [mfc, "compile", path, f"--compile-to={compile_to}", "-o", os.devnull]
    root = load(path)
    if pretrained_model_dir and isinstance(root, dict) and root.get("pretrained_model_dir"):
        command += ["--set", f"pretrained_model_dir={os.path.abspath(pretrained_model_dir)}"]
    try:
        run = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        return "crashed", f"time-out after {timeout} s"
    stderr = run.stderr.decode("utf-8", "replace")
    if run.returncode == 0:
        return "accepted", ""
    errors = [line for line in stderr.splitlines() if ": error: " in line]
    if run.returncode == 1 and errors:
        # The first error without its file:line:col, numbers kept.
        reason = errors[0].split(": error: ", 1)[1]
        reason = re.sub(r"'[^']*/(configs|research)/", "'", reason)
        return "refused", reason
    what = f"signal {-run.returncode}" if run.returncode < 0 else f"exit {run.returncode}"
    return "crashed", f"{what}: {stderr.strip().splitlines()[-1] if stderr.strip() else ''}"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--compile-to", default="sharding")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--pretrained-model-dir")
    args = parser.parse_args()
    root = os.environ.get("MINDFORMERS_DIR")
    if not root or not os.path.isdir(root):
        sys.exit("config-zoo: set MINDFORMERS_DIR to a MindFormers checkout")
    mfc = os.path.join(args.build, "bin", "mfc")
    paths = []
    for top in ("configs", "research"):
        for directory, _, files in os.walk(os.path.join(root, top)):
            paths += [os.path.join(directory, f) for f in files if f.endswith(".yaml")]
    paths.sort()
    print(f"config-zoo: {len(paths)} YAML files in {root}", file=sys.stderr)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        outcomes = list(pool.map(
            lambda p: compile_one(mfc, p, args.compile_to, args.timeout,
                                  args.pretrained_model_dir), paths))

    by_family = collections.defaultdict(collections.Counter)
    reasons = collections.Counter()
    by_arch = collections.defaultdict(collections.Counter)
    for path, (outcome, reason) in zip(paths, outcomes):
        relative = os.path.relpath(path, root)
        family = relative.split(os.sep)[1] if relative.count(os.sep) > 1 else "(top)"
        by_family[family][outcome] += 1
        by_arch[architecture(path)][outcome] += 1
        if outcome != "accepted":
            reasons[(outcome, re.sub(r"\d+", "N", reason)[:160])] += 1
        if args.list:
            print(f"{outcome:9} {relative}" + (f": {reason}" if reason else ""))

    total = collections.Counter(o for o, _ in outcomes)
    print(f"\n{'family':24} accepted refused crashed")
    for family in sorted(by_family):
        c = by_family[family]
        print(f"{family:24} {c['accepted']:8} {c['refused']:7} {c['crashed']:7}")
    print(f"{'total':24} {total['accepted']:8} {total['refused']:7} {total['crashed']:7}")
    print(f"\n{'architecture':32} accepted refused crashed")
    for arch in sorted(by_arch, key=lambda a: -sum(by_arch[a].values())):
        c = by_arch[arch]
        print(f"{arch:32} {c['accepted']:8} {c['refused']:7} {c['crashed']:7}")
    print("\nreasons (numbers as N):")
    for (outcome, reason), count in reasons.most_common():
        print(f"{count:4} {outcome}: {reason}")
    return 1 if total["crashed"] else 0


if __name__ == "__main__":
    sys.exit(main())
