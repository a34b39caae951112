"""mf-serve on a tensor-parallel model under mpirun, against mf-run.

Usage: serve_tp.py WORKDIR EXPECTED PROMPT... -- MPIRUN_COMMAND...

Starts MPIRUN_COMMAND (an `mpirun -n 2 mf-serve ... --port 0 --port-file
WORKDIR/port`), sends the prompts at once (greedy, 8 tokens) and checks each
completion against EXPECTED (what `mf-run --prompt P` printed for each,
one line each: the prompt, then the completion). Stops the server with
SIGTERM and reports how every rank ended.
"""

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time

split = sys.argv.index("--")
work, expected_file, prompts = sys.argv[1], sys.argv[2], sys.argv[3:split]
command = sys.argv[split + 1:]
port_file = os.path.join(work, "port")
if os.path.exists(port_file):
    os.remove(port_file)
log = open(os.path.join(work, "serve-tp.log"), "wb")
server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log,
                          start_new_session=True)


def rank_zero():
    """The pid of the mf-serve that mpirun started as rank 0."""
    for pid in os.listdir("/proc"):
        try:
            environ = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
            cmdline = open("/proc/%s/cmdline" % pid, "rb").read()
        except OSError:
            continue
        if (b"mf-serve" in cmdline and port_file.encode() in cmdline and
                b"OMPI_COMM_WORLD_RANK=0" in environ):
            return int(pid)
    return None
deadline = time.time() + 120
while not os.path.exists(port_file):
    if server.poll() is not None or time.time() > deadline:
        print("FAIL: mf-serve did not start: " + open(log.name).read())
        sys.exit(1)
    time.sleep(0.05)
port = int(open(port_file).read())
expected = open(expected_file, encoding="utf-8").read().split("\n")
results = {}


def complete(prompt):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    connection.request("POST", "/v1/completions", json.dumps(
        {"prompt": prompt, "max_tokens": 8, "temperature": 0}))
    response = connection.getresponse()
    results[prompt] = (response.status, json.loads(response.read()))


threads = [threading.Thread(target=complete, args=(p,)) for p in prompts]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
equal = 0
for prompt, line in zip(prompts, expected):
    status, body = results[prompt]
    text = body["choices"][0]["text"] if status == 200 else body
    if status == 200 and line == prompt + text:
        equal += 1
    else:
        print("FAIL: %r: %r, mf-run printed %r" % (prompt, text, line))
# SIGTERM to rank 0, as a user stops the server: it tells the other ranks.
leader = rank_zero()
if leader is None:
    print("FAIL: no rank 0 mf-serve")
    os.killpg(server.pid, signal.SIGKILL)
    sys.exit(1)
os.kill(leader, signal.SIGTERM)
try:
    code = server.wait(timeout=60)
except subprocess.TimeoutExpired:
    os.killpg(server.pid, signal.SIGKILL)
    code = "killed after 60 s"
log.close()
print("%d of %d concurrent completions on 2 ranks equal mf-run's; the server "
      "exits %s" % (equal, len(prompts), code))
print(open(log.name).read().strip().splitlines()[-1])
