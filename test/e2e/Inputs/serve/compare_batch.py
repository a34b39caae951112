"""A batch against its prompts run one at a time.

Usage: compare_batch.py MF_RUN MODEL PROMPTS_FILE BATCH_TEXT BATCH_LOGITS WORKDIR

Runs `mf-run MODEL --prompt P` for each prompt of PROMPTS_FILE (lines, or
JSONL objects with "prompt"; blank lines skipped), greedy, 12 new tokens,
and checks that the batch printed the same lines and picked every token
from the same logits (f32, max abs difference <= 1e-5).
"""

import json
import os
import subprocess
import sys

import numpy as np

mf_run, model, prompts_file, batch_text, batch_logits, work = sys.argv[1:7]
prompts = []
for line in open(prompts_file, encoding="utf-8"):
    line = line.rstrip("\n")
    if line.strip():
        prompts.append(json.loads(line)["prompt"] if line.startswith("{") else line)
lines, logits = [], []
for index, prompt in enumerate(prompts):
    path = os.path.join(work, "single.%d.npy" % index)
    out = subprocess.run([mf_run, model, "--init-weights", "--greedy",
                          "--prompt", prompt, "--max-new-tokens", "12",
                          "--dump-step-logits", path],
                         capture_output=True, check=True)
    lines.append(out.stdout.decode("utf-8"))
    logits.append(np.load(path))
batch = open(batch_text, encoding="utf-8").read()
if batch != "".join(lines):
    print("FAIL: the batch printed\n%s\nalone:\n%s" % (batch, "".join(lines)))
    sys.exit(1)
single = np.concatenate(logits)
together = np.load(batch_logits)
if together.shape != single.shape:
    print("FAIL: %s logits in the batch, %s alone" % (together.shape, single.shape))
    sys.exit(1)
difference = float(np.abs(together - single).max())
print("%d prompts: the batch prints what each prints alone; %d steps' logits "
      "%s (max abs difference %.3g)" % (len(prompts), single.shape[0],
                                        "equal" if difference <= 1e-5 else "DIFFER",
                                        difference))
