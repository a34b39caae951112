"""Writes a copy of a tokenizer.json with added tokens appended after its
largest id: each argument CONTENT:normalized or CONTENT:raw (matched in the
normalized text, or in the raw text).
Usage: add_tokens.py IN.json OUT.json CONTENT:normalized ..."""
import json
import sys

tokenizer = json.load(open(sys.argv[1], encoding="utf-8"))
next_id = 1 + max(list(tokenizer["model"]["vocab"].values()) +
                  [t["id"] for t in tokenizer["added_tokens"]])
for spec in sys.argv[3:]:
    content, how = spec.rsplit(":", 1)
    tokenizer["added_tokens"].append({
        "id": next_id, "content": content, "single_word": False, "lstrip": False,
        "rstrip": False, "normalized": how == "normalized", "special": False})
    next_id += 1
json.dump(tokenizer, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
