"""mf-serve on a model whose loading needs a calibration (an int8 KV cache,
SmoothQuant) against mf-run on the same model and ranges.

Usage: serve_calibrated.py MFC_BIN MODEL RANGES WORKDIR

Three greedy completions, served concurrently, must equal `mf-run MODEL
--calibration RANGES --prompt P`; without --calibration the server must
refuse to start, saying why. Prints one line per check.
"""

import concurrent.futures
import os
import subprocess
import sys

from mf_serve import MfServe, fail

MFC_BIN, MODEL, RANGES, WORK = sys.argv[1:5]
PROMPTS = ["The int8 cache", "Quantized keys and values", "A"]


def mf_run(prompt, tokens):
    out = subprocess.run(
        [os.path.join(MFC_BIN, "mf-run"), MODEL, "--init-weights", "--calibration", RANGES,
         "--greedy", "--prompt", prompt, "--max-new-tokens", str(tokens)],
        capture_output=True, check=True)
    return out.stdout.decode("utf-8", "replace")[:-1][len(prompt):]


server = MfServe(os.path.join(MFC_BIN, "mf-serve"), MODEL, WORK, "calibrated",
                 "--calibration", RANGES)
with concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as pool:
    served = list(pool.map(lambda p: server.complete(p, 12), PROMPTS))
for prompt, text in zip(PROMPTS, served):
    if text != mf_run(prompt, 12):
        fail("served %r for %r, mf-run %r" % (text, prompt, mf_run(prompt, 12)))
print("%d concurrent completions equal mf-run's" % len(PROMPTS))
server.stop()

refused = subprocess.run(
    [os.path.join(MFC_BIN, "mf-serve"), MODEL, "--init-weights", "--port", "0"],
    capture_output=True)
if refused.returncode == 0:
    fail("mf-serve started without the calibration")
print(refused.stderr.decode("utf-8").strip().splitlines()[-1])
