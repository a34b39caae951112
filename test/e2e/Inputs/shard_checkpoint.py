"""Splits a safetensors file into Hugging Face shards with an index:
OUT_DIR/model-0000K-of-0000N.safetensors and model.safetensors.index.json.
Usage: shard_checkpoint.py IN.safetensors OUT_DIR N"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "reference"))
from reference import load_safetensors, save_safetensors  # noqa: E402

source, out_dir, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
tensors = load_safetensors(source)
names = sorted(tensors)
os.makedirs(out_dir, exist_ok=True)
weight_map = {}
for shard in range(count):
    file = f"model-{shard + 1:05d}-of-{count:05d}.safetensors"
    part = {name: tensors[name] for name in names[shard::count]}
    save_safetensors(os.path.join(out_dir, file), part)
    weight_map.update({name: file for name in part})
with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as index:
    json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, index)
print(f"wrote {len(names)} tensors in {count} shards to {out_dir}")
