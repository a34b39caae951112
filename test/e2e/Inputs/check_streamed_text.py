"""Checks mf-run's streamed text against Hugging Face's decode of the same
ids: the prompt's ids (mf-tokenize --encode --add-special-tokens) and the
generated ones (mf-run --input-ids ..., "ids: 1 2 3"), special tokens
skipped.
Usage: check_streamed_text.py NODE_MODULES TOKENIZER_JSON REFERENCE_JS
           PROMPT_IDS_FILE GENERATED_IDS_FILE STREAMED_TEXT_FILE"""
import subprocess
import sys

node_modules, tokenizer, reference, prompt_file, generated_file, text_file = sys.argv[1:]
prompt = [int(i) for i in open(prompt_file).read().strip().split(",")]
generated = [int(i) for i in open(generated_file).read().split(":", 1)[1].split()]
expected = subprocess.run(
    ["node", reference, node_modules, tokenizer, "--decode",
     ",".join(map(str, prompt + generated))],
    check=True, capture_output=True).stdout.decode("utf-8")
streamed = open(text_file, encoding="utf-8").read()
if streamed != expected + "\n":
    print(f"streamed {streamed!r}\nexpected {expected!r}")
    sys.exit(1)
print(f"{len(prompt)} prompt and {len(generated)} generated tokens: the "
      f"streamed text equals Hugging Face's decode")
