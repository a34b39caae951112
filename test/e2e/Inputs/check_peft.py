"""Checks a PEFT adapter folder written by mf-run --save-weights against
PEFT's own conventions: adapter_config.json (peft_type LORA, r, lora_alpha,
target_modules) and adapter_model.safetensors whose names are
base_model.model.<module>.lora_A/B.weight; then applies PEFT's merge,
W + lora_alpha / r * B @ A, to the base weights and compares it with
mf-run --merge-lora's file (f32, max abs difference 1e-6).

  check_peft.py FOLDER BASE.safetensors MERGED.safetensors R ALPHA MODULE...
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "reference"))
from reference import load_safetensors  # noqa: E402

folder, base_path, merged_path = sys.argv[1:4]
rank, alpha = int(sys.argv[4]), float(sys.argv[5])
modules = sorted(sys.argv[6:])
with open(os.path.join(folder, "adapter_config.json")) as f:
    config = json.load(f)
problems = []
for key, want in (("peft_type", "LORA"), ("task_type", "CAUSAL_LM"), ("r", rank),
                  ("lora_alpha", alpha), ("target_modules", modules), ("bias", "none")):
    if config.get(key) != want:
        problems.append(f"adapter_config.json {key} = {config.get(key)!r}, expected {want!r}")
adapters = load_safetensors(os.path.join(folder, "adapter_model.safetensors"))
prefix = "base_model.model."
base = load_safetensors(base_path)
merged = dict(base)
pairs = 0
for name, a in adapters.items():
    if not name.startswith(prefix) or not name.endswith((".lora_A.weight", ".lora_B.weight")):
        problems.append(f"tensor {name!r} is not named as PEFT names adapters")
        continue
    if not name.endswith(".lora_A.weight"):
        continue
    module = name[len(prefix):-len(".lora_A.weight")]
    b = adapters[prefix + module + ".lora_B.weight"]
    if a.shape[0] != rank or b.shape[1] != rank:
        problems.append(f"{module}: A {tuple(a.shape)}, B {tuple(b.shape)} for r = {rank}")
    weight = module + ".weight"
    merged[weight] = base[weight] + alpha / rank * (b @ a)
    pairs += 1
expected = load_safetensors(merged_path)
worst = max(float((merged[k] - expected[k]).abs().max()) for k in expected)
if worst > 1e-6:
    problems.append(f"PEFT's merge differs from mf-run --merge-lora by {worst:.3g}")
print("\n".join(problems) if problems else f"PEFT folder: {pairs} adapter pairs, merge max abs diff {worst:.2g}: OK")
