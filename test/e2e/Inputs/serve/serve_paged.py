"""mf-serve on a paged KV cache against mf-run on the same model with a cache
row per slot.

Usage: serve_paged.py MFC_BIN PAGED_BIN ROWS_BIN WORKDIR PROMPTS

PAGED_BIN's pool holds one sequence's worth of blocks for 4 slots, so
concurrent requests share it: their prompts' common prefixes are found in
cached blocks, and sequences that outgrow it are preempted and recomputed.
Every greedy completion must equal `mf-run ROWS_BIN --prompt P` for it (no
token changed by paging, sharing or preemption), the metrics must show the
sharing and the preemptions, and every block must be free when the server
is idle again. Prints one line per check; exits 1 on the first failure.
"""

import concurrent.futures
import functools
import json
import os
import subprocess
import sys
import time

from mf_serve import MfServe, fail

MFC_BIN, PAGED, ROWS, WORK, PROMPTS_FILE = sys.argv[1:6]


@functools.lru_cache(maxsize=None)
def mf_run(prompt, tokens):
    out = subprocess.run(
        [os.path.join(MFC_BIN, "mf-run"), ROWS, "--init-weights", "--greedy",
         "--prompt", prompt, "--max-new-tokens", str(tokens)],
        capture_output=True, check=True)
    text = out.stdout.decode("utf-8")[:-1]  # mf-run ends with a newline
    if not text.startswith(prompt):
        fail("mf-run printed %r for %r" % (text, prompt))
    return text[len(prompt):]


def Server():
    return MfServe(os.path.join(MFC_BIN, "mf-serve"), PAGED, WORK, "paged")


def at_once(server, prompts, tokens):
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        return list(pool.map(lambda p: server.complete(p, tokens), prompts))


def check(server, what, prompts, tokens):
    expected = [mf_run(p, tokens) for p in prompts]
    got = at_once(server, prompts, tokens)
    for prompt, want, have in zip(prompts, expected, got):
        if want != have:
            fail("%s: %r gave %r, mf-run %r" % (what, prompt, have, want))
    print("%s: %d concurrent completions equal mf-run's" % (what, len(prompts)))


def main():
    prompts = []
    for line in open(PROMPTS_FILE, encoding="utf-8"):
        line = line.rstrip("\n")
        if line.strip():
            prompts.append(json.loads(line)["prompt"] if line.startswith("{")
                           else line)
    server = Server()
    metrics = server.metrics()
    print("pool: %d blocks, %d in use" % (metrics["mfserve_kv_blocks"],
                                         metrics["mfserve_kv_blocks_in_use"]))
    check(server, "prompts of different lengths", prompts, 12)

    # A system prompt the requests share: later ones find its blocks.
    system = ("You are a careful assistant. Answer in one short sentence, "
              "and say so when you do not know. ")
    before = server.metrics()["mfserve_prefix_cache_hit_tokens_total"]
    check(server, "one system prompt", [system + q for q in prompts[:4]], 8)
    check(server, "the same again", [system + q for q in prompts[:4]], 8)
    hits = server.metrics()["mfserve_prefix_cache_hit_tokens_total"] - before
    print("prefix cache: %s" % ("tokens found in cached blocks" if hits > 0
                                else "NO HITS"))

    # Four sequences that grow to most of the context each: the pool holds
    # one, so the newest are preempted and recompute their tokens.
    before = server.metrics()["mfserve_preemptions_total"]
    check(server, "long generations", ["A", "The sea", "你好", "1 2 3"], 100)
    preempted = server.metrics()["mfserve_preemptions_total"] - before
    print("preemption: %s" % ("sequences preempted and recomputed"
                              if preempted > 0 else "NONE"))

    # The last answer can reach the client before the engine's step that
    # made it has counted what it freed.
    deadline = time.time() + 30
    metrics = server.metrics()
    while (metrics["mfserve_kv_blocks_in_use"] or
           metrics["mfserve_slots_in_use"]) and time.time() < deadline:
        time.sleep(0.05)
        metrics = server.metrics()
    print("idle: %d blocks in use, %d slots in use" %
          (metrics["mfserve_kv_blocks_in_use"],
           metrics["mfserve_slots_in_use"]))
    print("stopped: exit %d" % server.stop()[0])


main()
