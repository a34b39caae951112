"""mf-serve for the serving tests: started on a free port, asked over HTTP,
stopped (and killed at exit if a check failed first)."""

import atexit
import http.client
import json
import os
import signal
import subprocess
import sys
import time

_RUNNING = []


@atexit.register
def _kill_running():
    # A server left running would hold the pipe to FileCheck open.
    for server in _RUNNING:
        if server.process.poll() is None:
            server.process.kill()


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


class MfServe:
    def __init__(self, mf_serve, model, work, name, *flags):
        port_file = os.path.join(work, name + ".port")
        if os.path.exists(port_file):
            os.remove(port_file)
        self.log = open(os.path.join(work, name + ".log"), "wb")
        self.process = subprocess.Popen(
            [mf_serve, model, "--init-weights", "--port", "0", "--port-file",
             port_file, *flags], stdout=subprocess.DEVNULL, stderr=self.log)
        _RUNNING.append(self)
        deadline = time.time() + 120
        while not os.path.exists(port_file):
            if self.process.poll() is not None or time.time() > deadline:
                fail("mf-serve did not start: " + open(self.log.name).read())
            time.sleep(0.05)
        self.port = int(open(port_file).read())

    def request(self, method, path, body=None, timeout=300):
        connection = http.client.HTTPConnection("127.0.0.1", self.port,
                                                timeout=timeout)
        payload = body if isinstance(body, (bytes, type(None))) else json.dumps(body)
        connection.request(method, path, payload,
                           {"Content-Type": "application/json"})
        response = connection.getresponse()
        data = response.read().decode("utf-8")
        connection.close()
        return response.status, data

    def complete(self, prompt, tokens):
        """A greedy completion's text."""
        status, body = self.request("POST", "/v1/completions", {
            "prompt": prompt, "max_tokens": tokens, "temperature": 0})
        if status != 200:
            fail("completion of %r: %d %s" % (prompt, status, body))
        return json.loads(body)["choices"][0]["text"]

    def metrics(self):
        _, text = self.request("GET", "/metrics")
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.split()
                values[name] = float(value)
        return values

    def rss_mb(self):
        for line in open("/proc/%d/status" % self.process.pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
        return 0.0

    def stop(self):
        """SIGTERM; the exit code and what the server wrote to stderr."""
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=60)
        self.log.close()
        return code, open(self.log.name).read()
