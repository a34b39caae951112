#!/usr/bin/python3
"""Serving throughput: continuous batching against one request at a time.

  bench/serve.py [--build build] [--rounds 3] [--clients 8] [--requests 32]
                 [--shared-prefix N] [--pool-blocks B] [--no-peer]

Compiles bench/configs/llama-100m.yaml twice: with batch_size = --clients
(the server's slots) and with batch_size 1 (a server that runs one request
at a time), and starts mf-serve on each (random weights, Graph Mode, every
core). Each round sends the same --requests streamed completions (token-id
prompts of 16-64 tokens, 64 new tokens each, greedy) from --clients
concurrent clients to each server in turn (alternating, so a slow spell of
the machine hits both), and measures the generated tokens/s over the
round's wall time, each request's time to first token and its latency.
Prints medians over the rounds and the ratio batched / one-at-a-time.
A third server has the same slots on a paged KV cache (blocks of 16
positions, a pool of --pool-blocks, by default half the memory of the
batched server's cache rows), which finds the prompts' common prefix in
cached blocks: --shared-prefix N starts every prompt with the same N
tokens (a system prompt).
The same rounds also run through llama.cpp (npm node-llama-cpp, CPU build,
every core) on the same weights as an f32 GGUF (bench/gguf.py): the same
prompts from --clients sequences of one context, each taking the next
prompt when its last is done, in its own process with no HTTP in between
(so its figure has no server overhead that mf-serve's has).
"""
import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def compile_model(mfc, slots, out, pool_blocks=0):
    paged = (["--set", "model.model_config.block_size=16",
              "--set", "model.model_config.num_blocks=%d" % pool_blocks]
             if pool_blocks else [])
    subprocess.run([mfc, "compile", os.path.join(HERE, "configs", "llama-100m.yaml"),
                    "--set", "model.model_config.batch_size=%d" % slots,
                    "--prefill-lengths=16,32,64", *paged, "-o", out],
                   check=True, stderr=subprocess.DEVNULL)


def metric(port, name):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


class Server:
    def __init__(self, serve, model, work, name):
        self.port_file = os.path.join(work, name + ".port")
        self.process = subprocess.Popen(
            [serve, model, "--init-weights", "--port", "0", "--port-file",
             self.port_file], stderr=subprocess.DEVNULL)
        deadline = time.time() + 300
        while not os.path.exists(self.port_file):
            if self.process.poll() is not None or time.time() > deadline:
                sys.exit("mf-serve did not start for " + model)
            time.sleep(0.1)
        self.port = int(open(self.port_file).read())

    def stop(self):
        self.process.terminate()
        self.process.wait()


def stream_completion(port, prompt, tokens):
    """(seconds to the first token, seconds in all, tokens generated)."""
    start = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    connection.request("POST", "/v1/completions", json.dumps({
        "prompt": prompt, "max_tokens": tokens, "temperature": 0,
        "stream": True, "stream_options": {"include_usage": True}}),
        {"Content-Type": "application/json"})
    response = connection.getresponse()
    first, generated = None, 0
    for raw in response:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        if first is None and event["choices"]:
            first = time.perf_counter() - start
        if event.get("usage"):
            generated = event["usage"]["completion_tokens"]
    connection.close()
    return first, time.perf_counter() - start, generated


def round_summary(generated, wall, ttfts, latencies):
    """A round's figures: generated tokens/s, time to first token p50,
    latency p50 and p99."""
    first, latency = sorted(ttfts), sorted(latencies)
    return {"tokens_per_s": generated / wall, "ttft_p50": first[len(first) // 2],
            "latency_p50": latency[len(latency) // 2],
            "latency_p99": latency[min(len(latency) - 1, int(0.99 * len(latency)))]}


def run_round(port, prompts, tokens, clients):
    results = []
    queue = list(prompts)
    lock = threading.Lock()

    def client():
        while True:
            with lock:
                if not queue:
                    return
                prompt = queue.pop()
            result = stream_completion(port, prompt, tokens)
            with lock:
                results.append(result)

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    return round_summary(sum(r[2] for r in results), wall, [r[0] for r in results],
                         [r[1] for r in results])


def llamacpp_round(gguf, prompts_path, tokens, sequences):
    npm = os.environ.get("MFC_NPM_DIR", os.path.expanduser("~/.cache/mfc/npm"))
    run = subprocess.run(["node", os.path.join(HERE, "llamacpp_batch.js"), os.path.join(npm, "llama-cpp"),
                          gguf, prompts_path, str(tokens), str(os.cpu_count()), str(sequences), "1"],
                         capture_output=True, text=True, check=True)
    result = json.loads(run.stdout.splitlines()[-1])
    return round_summary(result["generated"], result["seconds"], [t["ttft"] for t in result["timings"]],
                         [t["latency"] for t in result["timings"]])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--shared-prefix", type=int, default=0)
    parser.add_argument("--pool-blocks", type=int, default=0)
    parser.add_argument("--no-peer", action="store_true",
                        help="skip llama.cpp")
    args = parser.parse_args()
    # llama-100m's context is 256: half of the batched server's cache rows.
    pool_blocks = args.pool_blocks or args.clients * 256 // 16 // 2
    mfc = os.path.join(args.build, "bin", "mfc")
    serve = os.path.join(args.build, "bin", "mf-serve")
    rng = random.Random(0)
    prefix = [rng.randrange(3, 32000) for _ in range(args.shared_prefix)]
    prompts = [prefix + [rng.randrange(3, 32000)
                         for _ in range(rng.randrange(16, 65))]
               for _ in range(args.requests)]
    with tempfile.TemporaryDirectory() as work:
        batched_bin = os.path.join(work, "batched.bin")
        paged_bin = os.path.join(work, "paged.bin")
        single_bin = os.path.join(work, "single.bin")
        compile_model(mfc, args.clients, batched_bin)
        compile_model(mfc, args.clients, paged_bin, pool_blocks)
        compile_model(mfc, 1, single_bin)
        # The servers' weights (--init-weights), for llama.cpp as GGUF.
        weights = os.path.join(work, "w.safetensors")
        gguf = os.path.join(work, "w.gguf")
        subprocess.run([os.path.join(args.build, "bin", "mf-run"), single_bin, "--init-weights",
                        "--input-ids", "1", "--max-new-tokens", "0", "--save-weights", weights],
                       check=True, capture_output=True)
        subprocess.run([sys.executable, os.path.join(HERE, "gguf.py"),
                        os.path.join(HERE, "configs", "llama-100m.yaml"), weights, gguf],
                       check=True, capture_output=True)
        prompts_path = os.path.join(work, "prompts.json")
        with open(prompts_path, "w") as f:
            json.dump(prompts, f)
        paged = "batched, paged"
        sides = {"batched": Server(serve, batched_bin, work, "batched"),
                 paged: Server(serve, paged_bin, work, "paged"),
                 "one at a time": Server(serve, single_bin, work, "single")}
        try:
            for server in sides.values():  # warm: weights paged in, panels packed
                run_round(server.port, prompts[:2], 4, 2)
            peer = "llama.cpp, %d seq." % args.clients
            rounds = {name: [] for name in list(sides) + ([] if args.no_peer else [peer])}
            for _ in range(args.rounds):
                for name, server in sides.items():
                    rounds[name].append(
                        run_round(server.port, prompts, args.tokens, args.clients))
                if not args.no_peer:
                    rounds[peer].append(llamacpp_round(gguf, prompts_path, args.tokens, args.clients))
            pool = {key: metric(sides[paged].port, "mfserve_" + key)
                    for key in ("kv_blocks", "prefix_cache_hit_tokens_total",
                                "preemptions_total", "prompt_tokens_total")}
        finally:
            for server in sides.values():
                server.stop()
    print("llama-100m (fp32, Graph Mode), %d requests of %d tokens from %d "
          "clients%s, medians of %d rounds:"
          % (args.requests, args.tokens, args.clients,
             ", prompts sharing their first %d tokens" % args.shared_prefix
             if args.shared_prefix else "", args.rounds))
    # f32 keys and values of 12 layers, 4 KV heads of 64.
    position_bytes = 12 * 2 * 4 * 64 * 4
    print("  KV cache: batched %.1f MB (%d rows of 256), paged %.1f MB (%d "
          "blocks of 16)" % (args.clients * 256 * position_bytes / 1e6,
                             args.clients, pool["kv_blocks"] * 16 *
                             position_bytes / 1e6, pool["kv_blocks"]))
    print("  paged: %d prompt tokens found in cached blocks, %d computed; "
          "%d preemptions" % (pool["prefix_cache_hit_tokens_total"],
                              pool["prompt_tokens_total"],
                              pool["preemptions_total"]))
    medians = {}
    for name, results in rounds.items():
        medians[name] = {key: statistics.median(r[key] for r in results)
                         for key in results[0]}
        m = medians[name]
        print("  %-18s %7.1f tokens/s  time to first token p50 %6.0f ms  "
              "latency p50 %6.0f ms, p99 %6.0f ms"
              % (name, m["tokens_per_s"], 1e3 * m["ttft_p50"],
                 1e3 * m["latency_p50"], 1e3 * m["latency_p99"]))
    print("  batched / one at a time: %.2fx tokens/s" %
          (medians["batched"]["tokens_per_s"] /
           medians["one at a time"]["tokens_per_s"]))
    print("  batched, paged / batched: %.2fx tokens/s, time to first token "
          "p50 %.2fx" % (medians[paged]["tokens_per_s"] /
                         medians["batched"]["tokens_per_s"],
                         medians[paged]["ttft_p50"] /
                         medians["batched"]["ttft_p50"]))
    if not args.no_peer:
        print("  batched / %s: %.2fx tokens/s" %
              (peer, medians["batched"]["tokens_per_s"] / medians[peer]["tokens_per_s"]))


if __name__ == "__main__":
    main()
