"""Checks mf-run --chat's reply: the chat template rendered (mf-tokenize
--render-template, itself compared with jinja2 elsewhere), encoded without
special tokens, generated from with --input-ids, and the generated ids
decoded by Hugging Face's tokenizers must give the text mf-run printed.
Usage: check_chat.py BIN_DIR NODE_MODULES REFERENCE_JS TOKENIZER_DIR MODEL.BIN
           MESSAGES.json VARIABLES.json REPLY_FILE MAX_NEW_TOKENS"""
import json
import subprocess
import sys

(bin_dir, node_modules, reference, folder, model, messages, variables, reply_file,
 max_new) = sys.argv[1:]
rendered = subprocess.run([f"{bin_dir}/mf-tokenize", "--render-template",
                           f"{folder}/tokenizer_config.json", "--messages", messages,
                           "--variables", variables], check=True, capture_output=True).stdout
strings = reply_file + ".prompt.jsonl"
with open(strings, "w", encoding="utf-8") as f:
    f.write(json.dumps(rendered.decode("utf-8")) + "\n")
lines = subprocess.run([f"{bin_dir}/mf-tokenize", folder, "--json-lines", strings],
                       check=True, capture_output=True).stdout.decode()
prompt = lines.split("\t")[0]
run = subprocess.run([f"{bin_dir}/mf-run", model, "--init-weights", "--input-ids", prompt, "--max-new-tokens",
                      max_new], check=True, capture_output=True).stdout.decode()
generated = run.split(":", 1)[1].split()
expected = subprocess.run(["node", reference, node_modules, f"{folder}/tokenizer.json",
                           "--decode", ",".join(generated)],
                          check=True, capture_output=True).stdout.decode("utf-8")
reply = open(reply_file, encoding="utf-8").read()
if reply != expected + "\n":
    print(f"reply {reply!r}\nexpected {expected!r}")
    sys.exit(1)
print(f"{len(prompt.split(','))} prompt tokens from the template, {len(generated)} generated: "
      f"the reply equals Hugging Face's decode")
