"""Starts mf-serve on a model.bin and checks it as clients use it.

Usage: serve_session.py MFC_BIN NODE_MODULES MODEL_BIN WORKDIR PROMPTS EXPECTED

Greedy outputs must equal `mf-run`'s for the same prompt (EXPECTED: what
`mf-run --prompts-file PROMPTS --greedy --max-new-tokens 12` printed, which
compare_batch.py checks against runs of one prompt each), through OpenAI's
own Node client (completions and chat, streamed and not) and through one
client per prompt at once (batching must not change a token). Hostile requests get 4xx answers that name the field, a client that
leaves mid-stream frees its slot, a full queue answers 503, and the server
keeps serving throughout. Prints one line per check; exits 1 on the first
failure.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time

from mf_serve import MfServe, fail

MFC_BIN, NODE_MODULES, MODEL, WORK, PROMPTS_FILE, EXPECTED = sys.argv[1:7]
MF_RUN = os.path.join(MFC_BIN, "mf-run")
MF_SERVE = os.path.join(MFC_BIN, "mf-serve")

PROMPTS = []
for line in open(PROMPTS_FILE, encoding="utf-8"):
    line = line.rstrip("\n")
    if line.strip():
        PROMPTS.append(json.loads(line)["prompt"] if line.startswith("{") else line)
CHAT = "Hello, who are you?"


def mf_run(*args):
    out = subprocess.run([MF_RUN, MODEL, "--init-weights", "--greedy", *args],
                         capture_output=True, check=True)
    return out.stdout.decode("utf-8")


def Server(*flags):
    return MfServe(MF_SERVE, MODEL, WORK, "serve", *flags)


def main():
    lines = open(EXPECTED, encoding="utf-8").read().split("\n")[:len(PROMPTS)]
    expected = {}
    for prompt, line in zip(PROMPTS, lines):
        if not line.startswith(prompt):
            fail("mf-run printed %r for the prompt %r" % (line, prompt))
        expected[prompt] = line[len(prompt):]
    chat_expected = mf_run("--chat", CHAT, "--max-new-tokens", "10")[:-1]

    server = Server()
    model = json.loads(server.request("GET", "/v1/models")[1])["data"][0]["id"]

    # OpenAI's client: completions and chat, streamed and not.
    client = subprocess.run(
        ["node", os.path.join(os.path.dirname(__file__), "openai_client.js"),
         NODE_MODULES, "http://127.0.0.1:%d/v1" % server.port, model,
         PROMPTS[0], CHAT], capture_output=True, timeout=300)
    if client.returncode != 0:
        fail("the openai client failed: " + client.stderr.decode())
    got = json.loads(client.stdout)
    for key in ("completion", "completionStreamed"):
        if got[key] != expected[PROMPTS[0]]:
            fail("openai %s %r != mf-run's %r" % (key, got[key], expected[PROMPTS[0]]))
    for key in ("chat", "chatStreamed"):
        if got[key] != chat_expected:
            fail("openai %s %r != mf-run --chat's %r" % (key, got[key], chat_expected))
    print("openai client: models %s; completion, streamed completion, chat "
          "and streamed chat equal mf-run's (finish %s/%s, role %s)"
          % (got["models"], got["completionFinish"],
             got["completionStreamFinish"], got["chatRole"]))
    print("openai client, unknown role: " + got["badRole"])

    # A client per prompt at once, prompts of different lengths, 4 slots.
    idle_rss = server.rss_mb()
    results = {}

    def worker(prompt):
        results[prompt] = server.complete(prompt, 12)

    threads = [threading.Thread(target=worker, args=(p,)) for p in PROMPTS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    differing = [p for p in PROMPTS if results.get(p) != expected[p]]
    if differing:
        fail("batched completions differ from single runs: %r" % [
            (p, results.get(p), expected[p]) for p in differing])
    print("%d concurrent completions equal their single mf-run runs"
          % len(PROMPTS))

    # Sampling: the same seed gives the same text; requests without one are
    # seeded apart (--seed plus their number).
    sampled = [server.request("POST", "/v1/completions", dict(
        {"prompt": PROMPTS[0], "max_tokens": 12, "temperature": 1.0}, **seed))
        for seed in ({"seed": 5}, {"seed": 5}, {}, {})]
    texts = [json.loads(body)["choices"][0]["text"] for _, body in sampled]
    print("sampled: seed 5 twice %s, no seed twice %s" % (
        "equal" if texts[0] == texts[1] else "DIFFER",
        "differ" if texts[2] != texts[3] else "EQUAL"))

    # n choices: choice i is seeded seed + i, so seed 5's n = 2 are the
    # single requests seeded 5 and 6; greedy ones are all alike.
    status, body = server.request("POST", "/v1/completions", {
        "prompt": PROMPTS[0], "max_tokens": 12, "temperature": 1.0, "seed": 6})
    seed6 = json.loads(body)["choices"][0]["text"]
    status, body = server.request("POST", "/v1/completions", {
        "prompt": PROMPTS[0], "max_tokens": 12, "temperature": 1.0, "seed": 5,
        "n": 2})
    two = json.loads(body)
    status, body = server.request("POST", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": CHAT}], "max_tokens": 10,
        "temperature": 0, "n": 3})
    three = json.loads(body)
    chats = [c["message"]["content"] for c in three["choices"]]
    print("n = 2, seed 5: choices %s, equal to seeds 5 and 6: %s; usage %d "
          "completion tokens; greedy chat n = 3: %s" % (
              [c["index"] for c in two["choices"]],
              [c["text"] for c in two["choices"]] == [texts[0], seed6],
              two["usage"]["completion_tokens"],
              "alike, equal mf-run's" if chats == [chat_expected] * 3
              else "DIFFER: %r" % chats))
    # Streamed, the n choices come as chunks by index, each joining to the
    # text it has unstreamed; the usage counts them all.
    status, body = server.request("POST", "/v1/completions", {
        "prompt": PROMPTS[0], "max_tokens": 12, "temperature": 1.0, "seed": 5,
        "n": 2, "stream": True, "stream_options": {"include_usage": True}})
    joined, finishes, usage = ["", ""], [None, None], None
    for line in body.split("\n"):
        if line.startswith("data: {"):
            event = json.loads(line[6:])
            usage = event.get("usage") or usage
            for c in event["choices"]:
                joined[c["index"]] += c["text"]
                finishes[c["index"]] = c["finish_reason"] or finishes[c["index"]]
    print("n = 2 streamed: %s, finish %s, usage %d completion tokens" % (
        "equal to unstreamed" if joined == [c["text"] for c in two["choices"]]
        else "DIFFER: %r" % joined, "/".join(map(str, finishes)),
        usage["completion_tokens"] if usage else -1))

    # OpenAI's penalties (over the generated tokens) and logit_bias change
    # the greedy text as mf-run's flags do; a bias of 100 on one id makes
    # it every token.
    penalties = {"presence_penalty": 1.5, "frequency_penalty": 2.0}
    status, body = server.request("POST", "/v1/completions", dict(
        {"prompt": PROMPTS[0], "max_tokens": 12, "temperature": 0}, **penalties))
    penalized = json.loads(body)["choices"][0]["text"] if status == 200 else body
    wanted = mf_run("--prompt", PROMPTS[0], "--max-new-tokens", "12",
                    "--presence-penalty", "1.5", "--frequency-penalty", "2.0")
    wanted = wanted[len(PROMPTS[0]):].rstrip("\n")
    if penalized != wanted:
        fail("penalized completion %r != mf-run's %r" % (penalized, wanted))
    status, body = server.request("POST", "/v1/completions", {
        "prompt": PROMPTS[0], "max_tokens": 4, "temperature": 0,
        "logit_bias": {"9707": 100}})
    biased = json.loads(body)["choices"][0]["text"] if status == 200 else body
    print("penalties: equal mf-run's (%s); logit_bias 100 on 9707: %r"
          % ("differ from unpenalized" if penalized != expected[PROMPTS[0]]
             else "SAME AS UNPENALIZED", biased))

    # Log-probabilities: the greedy token is its step's best alternative,
    # and each equals the log-softmax of mf-run's logits of that step
    # (--dump-step-logits, f32; within 1e-4).
    status, body = server.request("POST", "/v1/completions", {
        "prompt": PROMPTS[0], "max_tokens": 6, "temperature": 0, "logprobs": 3})
    lp = json.loads(body)["choices"][0]
    steps = os.path.join(WORK, "logprob-steps.npy")
    mf_run("--prompt", PROMPTS[0], "--max-new-tokens", "6",
           "--dump-step-logits", steps)
    import numpy
    logits = numpy.load(steps).astype(numpy.float64).reshape(6, -1)
    best = logits.max(axis=1, keepdims=True)
    logsoftmax = logits - best - numpy.log(numpy.exp(logits - best).sum(axis=1, keepdims=True))
    expected_lp = logsoftmax.max(axis=1)
    got_lp = numpy.array(lp["logprobs"]["token_logprobs"])
    tops_ok = all(max(top, key=top.get) == token and abs(top[token] - value) < 1e-6
                  for top, token, value in zip(lp["logprobs"]["top_logprobs"],
                                               lp["logprobs"]["tokens"], got_lp))
    status, body = server.request("POST", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": CHAT}], "max_tokens": 4,
        "temperature": 0, "logprobs": True, "top_logprobs": 2})
    content = json.loads(body)["choices"][0]["logprobs"]["content"]
    # Streamed, the chunks carry the same tokens and values.
    status, body = server.request("POST", "/v1/completions", {
        "prompt": PROMPTS[0], "max_tokens": 6, "temperature": 0, "logprobs": 3,
        "stream": True})
    streamed_tokens, streamed_values = [], []
    for line in body.split("\n"):
        if line.startswith("data: {"):
            for c in json.loads(line[6:])["choices"]:
                if c.get("logprobs"):
                    streamed_tokens += c["logprobs"]["tokens"]
                    streamed_values += c["logprobs"]["token_logprobs"]
    print("streamed logprobs equal: %s" % (
        streamed_tokens == lp["logprobs"]["tokens"]
        and streamed_values == lp["logprobs"]["token_logprobs"]))
    print("logprobs: %d tokens joining to the text: %s; best alternatives: %s; "
          "equal mf-run's log-softmax: %s; chat: %d tokens, %d alternatives each"
          % (len(got_lp), "".join(lp["logprobs"]["tokens"]) == lp["text"], tops_ok,
             bool(numpy.abs(got_lp - expected_lp).max() < 1e-4), len(content),
             len(content[0]["top_logprobs"])))

    # Hostile requests: a 4xx that names the problem, and the server goes on.
    long_prompt = " ".join(["word"] * 400)
    cases = [
        ("malformed JSON", b"{bad", None),
        ("unknown field", {"prompt": "hi", "max_token": 3}, None),
        ("n = 17", {"prompt": "hi", "n": 17}, None),
        ("logprobs 6", {"prompt": "hi", "logprobs": 6}, None),
        ("top_logprobs alone", {"messages": [{"role": "user", "content": "hi"}],
                                "top_logprobs": 2}, "/v1/chat/completions"),
        ("10^6 tokens", {"prompt": "hi", "max_tokens": 1000000}, None),
        ("over-long prompt", {"prompt": long_prompt}, None),
        ("unknown role", {"messages": [{"role": "wizard", "content": "hi"}]},
         "/v1/chat/completions"),
        ("wrong model", {"model": "gpt-4", "prompt": "hi"}, None),
        ("temperature 5", {"prompt": "hi", "temperature": 5}, None),
        ("top_k 2^64 - 1", {"prompt": "hi", "top_k": 2**64 - 1}, None),
        ("presence_penalty 3", {"prompt": "hi", "presence_penalty": 3}, None),
        ("logit_bias past the vocabulary",
         {"prompt": "hi", "logit_bias": {"999999": 1}}, None),
        ("logit_bias not an id", {"prompt": "hi", "logit_bias": {"x1": 1}}, None),
        ("logit_bias 01", {"prompt": "hi", "logit_bias": {"01": 1}}, None),
    ]
    for name, body, path in cases:
        status, text = server.request("POST", path or "/v1/completions", body)
        message = json.loads(text)["error"]["message"]
        print("%s: %d %s" % (name, status, message))
    status, _ = server.request("GET", "/health")
    print("after the hostile requests: health %d" % status)

    # A client that leaves mid-stream frees its slot at once.
    before = server.metrics()["mfserve_requests_cancelled_total"]
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 100,
                       "temperature": 0, "stream": True})
    raw = socket.create_connection(("127.0.0.1", server.port))
    raw.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                 "application/json\r\nContent-Length: %d\r\n\r\n%s"
                 % (len(body), body)).encode())
    received = b""
    while b"data: " not in received:
        received += raw.recv(4096)
    raw.close()
    deadline = time.time() + 30
    while True:
        metrics = server.metrics()
        if (metrics["mfserve_requests_cancelled_total"] > before and
                metrics["mfserve_slots_in_use"] == 0):
            break
        if time.time() > deadline:
            fail("a client that left mid-stream still holds a slot: %r" % metrics)
        time.sleep(0.05)
    print("a client that left mid-stream: its request cancelled, %d slots in use"
          % metrics["mfserve_slots_in_use"])
    print("memory: idle %.0f MB, after the load %.0f MB" % (idle_rss, server.rss_mb()))
    code, log = server.stop()
    print("stopped: exit %d, %s" % (code, log.strip().splitlines()[-1]))

    # A queue of 16: 64 clients at once get answers, some of them 503.
    server = Server("--max-waiting", "16")
    statuses = []

    def quick():
        try:
            statuses.append(server.request("POST", "/v1/completions", {
                "prompt": "hi", "max_tokens": 4, "temperature": 0})[0])
        except OSError as error:  # no answer at all: the check below says so
            statuses.append("%s: %s" % (type(error).__name__, error))

    threads = [threading.Thread(target=quick) for _ in range(64)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    answered = {code: statuses.count(code) for code in sorted(set(statuses), key=str)}
    if set(answered) - {200, 503} or len(statuses) != 64:
        fail("a full queue: %r" % answered)
    print("64 clients on a queue of 16: every one answered (%s)" %
          ", ".join("%d x %d" % (n, c) for c, n in answered.items()))
    print("after: health %d" % server.request("GET", "/health")[0])
    server.stop()


main()
