"""Writes the "slow" files of a tokenizer.json (vocab.json, merges.txt and,
unless --no-config, a tokenizer_config.json with tokenizer_class and
added_tokens_decoder) into OUT_DIR, as Hugging Face's GPT2Tokenizer and
Qwen2Tokenizer read them; with --gpt2-json also a tokenizer.json of the same
vocabulary with GPT-2's pre-tokenization, for the reference.
Usage: slow_tokenizer_files.py TOKENIZER_JSON OUT_DIR CLASS [--no-config] [--gpt2-json]"""
import json
import os
import sys

source, out, tokenizer_class = sys.argv[1:4]
os.makedirs(out, exist_ok=True)
tokenizer = json.load(open(source, encoding="utf-8"))
model = tokenizer["model"]
with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
    json.dump(model["vocab"], f, ensure_ascii=False)
with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
    f.write("#version: 0.2\n")
    for merge in model["merges"]:
        f.write((merge if isinstance(merge, str) else " ".join(merge)) + "\n")
if "--no-config" not in sys.argv:
    decoder = {str(t["id"]): {k: v for k, v in t.items() if k != "id"}
               for t in tokenizer["added_tokens"]}
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_class": tokenizer_class, "added_tokens_decoder": decoder}, f,
                  ensure_ascii=False)
if "--gpt2-json" in sys.argv:
    tokenizer["normalizer"] = None
    tokenizer["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False,
                                  "trim_offsets": True, "use_regex": True}
    tokenizer["post_processor"] = None
    tokenizer["decoder"] = {"type": "ByteLevel", "add_prefix_space": False,
                            "trim_offsets": True, "use_regex": True}
    model["ignore_merges"] = False
    with open(os.path.join(out, "gpt2-tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
