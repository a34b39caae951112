#!/usr/bin/env python3
"""Compiles every model YAML of a MindFormers checkout and counts, by model
family, the configs mfc accepts, the ones it refuses (with the reason) and
the ones it crashes on (a signal, an internal error, a time-out).

  MINDFORMERS_DIR=~/mindformers python3 scripts/config-zoo.py [--build build]
      [--jobs 2] [--timeout 300] [--compile-to sharding] [--list]
      [--pretrained-models DIR]

The YAMLs under configs/ and research/ are compiled as they are, full size,
to the `sharding` phase (the graph, partitioned for the config's
parallel_config where that is built: every key is read and checked, no
kernels are built). The family is the directory under configs/ or research/; the
architecture is the YAML's model.arch.type (or, in MindFormers' newest
configs, model_config.architectures). --list prints every file's outcome.
YAMLs without a `model` section (datasets, contexts, tools' settings) are
not model configs: counted apart, never as refusals.
MindFormers' newest configs take the model from a Hugging Face folder's
config.json (pretrained_model_dir, a placeholder path in the checkout):
--pretrained-models DIR holds one such folder per family, named as the
YAML's trainer.model_name or its directory (DIR/qwen3, DIR/qwen3_moe,
DIR/glm4_moe, ...); a config whose family has no folder there is counted
as "no folder", not compiled as another family's model."""
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


def family_folder(path, root, pretrained_models):
    """The Hugging Face folder for a YAML naming pretrained_model_dir: the
    one under `pretrained_models` named as its trainer.model_name or its
    directory, or None."""
    config = load(path) or {}
    names = []
    trainer = config.get("trainer") if isinstance(config, dict) else None
    if isinstance(trainer, dict) and trainer.get("model_name"):
        names.append(str(trainer["model_name"]))
    relative = os.path.relpath(path, root).split(os.sep)
    if len(relative) > 2:
        names.append(relative[1])
    for name in names:
        folder = os.path.join(pretrained_models, name)
        if os.path.isfile(os.path.join(folder, "config.json")):
            return os.path.abspath(folder)
    return None


def compile_one(mfc, root, path, compile_to, timeout, pretrained_models):
    config = load(path)
    if not isinstance(config, dict) or "model" not in config:
        return "not a model", ""
    command = [mfc, "compile", path, f"--compile-to={compile_to}", "-o", os.devnull]
    if config.get("pretrained_model_dir"):
        folder = family_folder(path, root, pretrained_models) if pretrained_models else None
        if not folder:
            return "no folder", "pretrained_model_dir: no Hugging Face folder for this family"
        command += ["--set", f"pretrained_model_dir={folder}"]
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
    parser.add_argument("--pretrained-models",
                        help="a folder of Hugging Face model folders, one per family")
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
            lambda p: compile_one(mfc, root, p, args.compile_to, args.timeout,
                                  args.pretrained_models), paths))

    by_family = collections.defaultdict(collections.Counter)
    reasons = collections.Counter()
    by_arch = collections.defaultdict(collections.Counter)
    for path, (outcome, reason) in zip(paths, outcomes):
        relative = os.path.relpath(path, root)
        family = relative.split(os.sep)[1] if relative.count(os.sep) > 1 else "(top)"
        by_family[family][outcome] += 1
        by_arch[architecture(path)][outcome] += 1
        if outcome in ("refused", "crashed"):
            reasons[(outcome, re.sub(r"\d+", "N", reason)[:160])] += 1
        if args.list:
            print(f"{outcome:9} {relative}" + (f": {reason}" if reason else ""))

    total = collections.Counter(o for o, _ in outcomes)
    columns = ("accepted", "refused", "crashed", "no folder")
    header = " ".join(f"{c:>9}" for c in columns)
    print(f"\n{'family':24} {header}")
    for family in sorted(by_family):
        c = by_family[family]
        if sum(c[k] for k in columns):
            print(f"{family:24} " + " ".join(f"{c[k]:9}" for k in columns))
    print(f"{'total':24} " + " ".join(f"{total[k]:9}" for k in columns))
    print(f"{total['not a model']} YAML files are not model configs (no model section)")
    print(f"\n{'architecture':32} {header}")
    for arch in sorted(by_arch, key=lambda a: -sum(by_arch[a].values())):
        c = by_arch[arch]
        if sum(c[k] for k in columns):
            print(f"{arch:32} " + " ".join(f"{c[k]:9}" for k in columns))
    print("\nreasons (numbers as N):")
    for (outcome, reason), count in reasons.most_common():
        print(f"{count:4} {outcome}: {reason}")
    return 1 if total["crashed"] else 0


if __name__ == "__main__":
    sys.exit(main())
