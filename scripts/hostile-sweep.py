#!/usr/bin/python3
"""Feeds mfc, mf-run and mf-tokenize hostile and mutated input, class by
class, and counts what each run did. A run may refuse its input (an exit
status the tool documents and a line with 'error:'), or, for a mutation that
may still be valid, run; it must never crash (a signal, a sanitizer report,
exit 70: an internal error), hang (no answer in --timeout seconds), accept
input it must refuse (exit 0 on a truncated file, a FIFO, ...), or fail
without saying why.

  scripts/hostile-sweep.py [--build DIR] [--count N] [--seed S] [--only CLASS,...]

--count scales the random cases of each class (default 40). Exits 1 when any
run crashed, hung, accepted silently or failed without an error; prints each
such case with its command. Not part of CI (it takes minutes); the tests in
test/e2e/hostile-*.test pin the cases it found.
"""
import argparse
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e", "Inputs"))
from corrupt import read_safetensors, seal, write_safetensors  # noqa: E402

CRASH_PATTERN = re.compile(r"AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|"
                           r"terminate called|Assertion .* failed|Segmentation fault|stack smashing")
# Values a mutation puts in place of a JSON or YAML node.
HOSTILE_VALUES = [None, -1, 0, 2**31, 2**63, -2**63, 1e308, -1e-308, float("nan"), "",
                  "x" * 70000, "\u0000", "\udcff", [], {}, [[[[[[[[]]]]]]]], True,
                  {"type": "Sequence"}, [-1, -1]]


class Case:
    def __init__(self, cls, name, argv, must_refuse):
        self.cls, self.name, self.argv = cls, name, argv
        self.must_refuse = must_refuse


class Sweep:
    def __init__(self, args):
        self.args = args
        self.bin = os.path.join(os.path.abspath(args.build), "bin")
        self.random = random.Random(args.seed)
        self.work = tempfile.mkdtemp(prefix="mfc-sweep-")
        self.cases = []
        self.counter = 0

    def path(self, name):
        self.counter += 1
        return os.path.join(self.work, f"{self.counter:05d}-{name}")

    def tool(self, name):
        return os.path.join(self.bin, name)

    def add(self, cls, name, argv, must_refuse):
        self.cases.append(Case(cls, name, argv, must_refuse))

    def write(self, suffix, data):
        path = self.path(suffix)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def truncations(self, cls, data, suffix, offsets, argv_of):
        """`data` cut at each offset: every copy must be refused."""
        for offset in offsets:
            self.add(cls, f"truncated at {offset}", argv_of(self.write(suffix, data[:offset])), True)

    def changed_bytes(self, cls, data, suffix, count, argv_of, must_refuse, begin=0, end=None,
                      flip_bit=False):
        """`count` copies of `data`, each with one byte in [begin, end)
        changed (one bit flipped, or a random value)."""
        for _ in range(count):
            offset = self.random.randrange(begin, len(data) if end is None else end)
            changed = bytearray(data)
            if flip_bit:
                changed[offset] ^= 1 << self.random.randrange(8)
            else:
                changed[offset] = self.random.randrange(256)
            what = "bit flipped" if flip_bit else "byte changed"
            self.add(cls, f"{what} at {offset}", argv_of(self.write(suffix, changed)), must_refuse)

    def run_setup(self, argv):
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    # The files every class starts from.
    def prepare(self):
        self.yaml = os.path.join(ROOT, "test", "Frontend", "llama-gqa.yaml")
        self.model = os.path.join(self.work, "model.bin")
        self.run_setup([self.tool("mfc"), "compile", self.yaml, "-o", self.model])
        self.weights = os.path.join(self.work, "w.safetensors")
        self.run_setup([self.tool("mf-run"), self.model, "--init-weights", "--input-ids", "1",
                        "--max-new-tokens", "0", "--save-weights", self.weights])
        self.ckpt = os.path.join(self.work, "w.ckpt")
        self.run_setup(["/usr/bin/python3", os.path.join(ROOT, "test", "e2e", "Inputs", "write_ckpt.py"),
                        self.weights, self.ckpt])
        self.run_args = ["--input-ids", "1,2,3", "--max-new-tokens", "2", "--threads", "1"]
        self.tokenizer = self.small_tokenizer()

    def small_tokenizer(self):
        npm = os.environ.get("MFC_NPM_DIR", os.path.expanduser("~/.cache/mfc/npm"))
        source = os.path.join(npm, "node_modules", "@lenml", "tokenizer-llama3", "models", "tokenizer.json")
        if not os.path.exists(source):
            return None
        tokenizer = json.load(open(source))
        model = tokenizer["model"]
        model["vocab"] = {t: i for t, i in model["vocab"].items() if i < 2000}
        def pair(m):
            return m.split(" ", 1) if isinstance(m, str) else m
        model["merges"] = [m for m in model["merges"]
                           if all(p in model["vocab"] for p in pair(m)) and "".join(pair(m)) in model["vocab"]]
        tokenizer["added_tokens"] = tokenizer["added_tokens"][:8]
        return tokenizer

    # --- model.bin ---------------------------------------------------------
    def executables(self):
        data = open(self.model, "rb").read()
        elf = data.find(b"\x7fELF")
        if elf < 4:
            sys.exit("hostile-sweep: the compiled model.bin has no kernel library")
        (elf_length,) = struct.unpack("<I", data[elf - 4:elf])
        run = lambda path: [self.tool("mf-run"), path, "--weights", self.weights] + self.run_args
        self.truncations("model.bin", data, "truncated.bin", [0, 1, 4, 8, 16, len(data) // 2, len(data) - 1]
                         + [self.random.randrange(len(data)) for _ in range(self.args.count // 2)], run)
        # The content checksum refuses every flip.
        self.changed_bytes("model.bin", data, "flipped.bin", self.args.count, run, True, flip_bit=True)
        # Flips sealed again (past the checksum) outside the kernel library:
        # the verifier and the loader's own checks must hold. A flip may
        # leave a valid program (a name's letter, a constant), so these may run.
        for _ in range(self.args.count * 2):
            offset = self.random.randrange(len(data))
            if elf - 4 <= offset < elf + elf_length:
                continue
            flipped = bytearray(data)
            flipped[offset] ^= 1 << self.random.randrange(8)
            try:  # a flip in the root offset or a vtable can stop seal() itself
                sealed = seal(flipped)
            except (SystemExit, Exception):
                continue
            mode = self.random.choice(["graph", "pynative"])
            self.add("model.bin (sealed)", f"bit flipped at {offset}, sealed, {mode}",
                     run(self.write("sealed.bin", sealed)) + ["--mode", mode], False)

    # --- weights -------------------------------------------------------------
    def safetensors(self):
        data = open(self.weights, "rb").read()
        header, body = read_safetensors(self.weights)
        names = sorted(k for k in header if k != "__metadata__")
        run = lambda path: [self.tool("mf-run"), self.model, "--weights", path] + self.run_args
        self.truncations("safetensors", data, "truncated.safetensors",
                         [0, 4, 8, 9, len(data) - len(body) - 1, len(data) - 1]
                         + [self.random.randrange(len(data)) for _ in range(self.args.count // 4)], run)
        for size in [0, 1, 2**32, 2**63 - 1, 2**64 - 1]:
            path = self.write("length.safetensors", struct.pack("<Q", size) + data[8:])
            self.add("safetensors", f"header length {size}", run(path), True)
        edits = {
            "dtype I64": lambda t: t.update(dtype="I64"),
            "dtype unknown": lambda t: t.update(dtype="Q4"),
            "shape empty": lambda t: t.update(shape=[]),
            "shape zero": lambda t: t.update(shape=[0] + t["shape"][1:]),
            "shape huge": lambda t: t.update(shape=[2**62, 2**62]),
            "shape negative": lambda t: t.update(shape=[-1] + t["shape"][1:]),
            "shape transposed": lambda t: t.update(shape=t["shape"][::-1] + [1]),
            "offsets reversed": lambda t: t.update(data_offsets=t["data_offsets"][::-1]),
            "offsets past the end": lambda t: t.update(data_offsets=[0, 2**62]),
            "offsets overlap": lambda t: t.update(data_offsets=[0, t["data_offsets"][1] - t["data_offsets"][0]]),
            "offsets not numbers": lambda t: t.update(data_offsets=["a", "b"]),
            "no dtype": lambda t: t.pop("dtype"),
        }
        for label, edit in edits.items():
            for name in self.random.sample(names, min(3, len(names))):
                mutated = json.loads(json.dumps(header))
                edit(mutated[name])
                path = self.path("edited.safetensors")
                write_safetensors(path, mutated, body)
                # An offset range that overlaps another but stays in the data
                # is a valid (aliased) file; the others must be refused.
                self.add("safetensors", f"{name}: {label}", run(path), label != "offsets overlap")
        for label, text in [("not JSON", b"{nope"), ("a list", b"[]"), ("metadata not strings",
                            json.dumps(dict(header, __metadata__={"a": 1})).encode()),
                            ("duplicate keys", b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                                               b'"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}')]:
            path = self.write("header.safetensors", struct.pack("<Q", len(text)) + text + body)
            # safetensors' metadata is strings to strings; one that is not
            # changes no tensor, so it may load.
            self.add("safetensors", f"header {label}", run(path), label != "metadata not strings")
        # A changed header byte may still be a valid header (a name's letter).
        self.changed_bytes("safetensors", data, "header-changed.safetensors", self.args.count, run, False,
                           begin=8, end=len(data) - len(body))

    def checkpoints(self):
        data = open(self.ckpt, "rb").read()
        run = lambda path: [self.tool("mf-run"), self.model, "--weights", path] + self.run_args
        self.truncations(".ckpt", data, "truncated.ckpt", [0, 1, 2, len(data) // 3, len(data) - 1]
                         + [self.random.randrange(len(data)) for _ in range(self.args.count // 4)], run)
        # A .ckpt has no checksum: a changed value byte loads.
        self.changed_bytes(".ckpt", data, "changed.ckpt", self.args.count, run, False)

    def sharded(self):
        folder = self.path("shards")
        self.run_setup(["/usr/bin/python3", os.path.join(ROOT, "test", "e2e", "Inputs", "shard_checkpoint.py"),
                        self.weights, folder, "3"])
        index_path = os.path.join(folder, "model.safetensors.index.json")
        index = json.load(open(index_path))
        names = sorted(index["weight_map"])
        files = sorted(set(index["weight_map"].values()))
        edits = {
            "a tensor in another shard": lambda m: m.update({names[0]: files[(files.index(m[names[0]]) + 1) % 3]}),
            "a shard that does not exist": lambda m: m.update({names[1]: "model-00009-of-00003.safetensors"}),
            "a tensor no shard holds": lambda m: m.update({"model.extra.weight": files[0]}),
            "a path outside the folder": lambda m: m.update({names[2]: "../w.safetensors"}),
            "an absolute path": lambda m: m.update({names[2]: "/etc/passwd"}),
            "a NUL in a name": lambda m: m.update({names[2]: files[0] + "\u0000x"}),
            "a tensor missing": lambda m: m.pop(names[3]),
            "not a file name": lambda m: m.update({names[0]: 7}),
        }
        for label, edit in edits.items():
            copy = self.path("shards")
            shutil.copytree(folder, copy)
            mutated = json.loads(json.dumps(index))
            edit(mutated["weight_map"])
            json.dump(mutated, open(os.path.join(copy, "model.safetensors.index.json"), "w"))
            self.add("sharded checkpoint", label, [self.tool("mf-run"), self.model, "--weights", copy]
                     + self.run_args, True)
        for label, text in [("index not JSON", "{"), ("no weight_map", "{}"), ("weight_map a list", '{"weight_map": []}')]:
            copy = self.path("shards")
            shutil.copytree(folder, copy)
            open(os.path.join(copy, "model.safetensors.index.json"), "w").write(text)
            self.add("sharded checkpoint", label, [self.tool("mf-run"), self.model, "--weights", copy]
                     + self.run_args, True)

    # --- tokenizers and chat templates ------------------------------------------
    def mutate_json(self, document):
        """Replaces one random node of a JSON document with a hostile value."""
        document = json.loads(json.dumps(document))
        parent, key, node = None, None, document
        for _ in range(self.random.randrange(1, 6)):
            if isinstance(node, dict) and node:
                key = self.random.choice(list(node))
            elif isinstance(node, list) and node:
                key = self.random.randrange(len(node))
            else:
                break
            parent, node = node, node[key]
        value = self.random.choice(HOSTILE_VALUES)
        if parent is None:
            return value
        parent[key] = value
        return document

    def tokenizers(self):
        if self.tokenizer is None:
            print("hostile-sweep: no @lenml tokenizers (scripts/install-deps.sh installs them): "
                  "tokenizer class skipped", file=sys.stderr)
            return
        text = "Hello, world!  123 \u4f60\u597d \U0001F600 " + "a" * 40 + "!"
        for _ in range(self.args.count * 3):
            path = self.path("tokenizer.json")
            with open(path, "w") as f:
                json.dump(self.mutate_json(self.tokenizer), f, allow_nan=True)
            self.add("tokenizer.json", "one node replaced", [self.tool("mf-tokenize"), path, "--encode", text,
                                                             "--add-special-tokens"], False)
        minimal = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}}
        hostile = {
            "an id near 2^30": {"model": {"type": "BPE", "vocab": {"a": 0, "b": 2**30 - 1}, "merges": []}},
            "an id of 2^40": {"model": {"type": "BPE", "vocab": {"a": 0, "b": 2**40}, "merges": []}},
            "a negative id": {"model": {"type": "BPE", "vocab": {"a": -5}, "merges": []}},
            "an added token id of 2^31": dict(minimal, added_tokens=[{"id": 2**31, "content": "<x>", "special": True}]),
            "a merge of unknown tokens": {"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["q z"]}},
            "Replace doubling 30 times": dict(minimal, normalizer={"type": "Sequence", "normalizers": [
                {"type": "Replace", "pattern": {"String": "a"}, "content": "aa"}] * 30}),
            "a Sequence 10000 deep": None,
            "a catastrophic Split regex": dict(minimal, pre_tokenizer={"type": "Split", "pattern": {
                "Regex": "(a+)+$"}, "behavior": "Isolated", "invert": False}),
            "an invalid regex": dict(minimal, pre_tokenizer={"type": "Split", "pattern": {"Regex": "(("},
                                                              "behavior": "Isolated", "invert": False}),
            "a Roberta id of -1": dict(minimal, post_processor={"type": "RobertaProcessing", "cls": ["<s>", -1],
                                                                 "sep": ["</s>", 1]}),
            "a Template id of 2^40": dict(minimal, post_processor={"type": "TemplateProcessing", "single": [
                {"SpecialToken": {"id": "<s>", "type_id": 0}}], "pair": [], "special_tokens": {
                "<s>": {"id": "<s>", "ids": [2**40], "tokens": ["<s>"]}}}),
            "an unknown model type": {"model": {"type": "Quantum"}},
            "no model": {},
        }
        for label, document in hostile.items():
            path = self.path("tokenizer.json")
            if document is None:
                depth = 10000
                open(path, "w").write('{"normalizer": ' + '{"type": "Sequence", "normalizers": [' * depth
                                      + '{"type": "Lowercase"}' + ']}' * depth
                                      + ', "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}')
            else:
                json.dump(document, open(path, "w"))
            # The catastrophic regex is a valid tokenizer: it must answer (a
            # match limit error or ids), not hang.
            self.add("tokenizer.json", label, [self.tool("mf-tokenize"), path, "--encode", text,
                                               "--add-special-tokens"], label != "a catastrophic Split regex")
        slow = self.path("slow")
        os.makedirs(slow)
        json.dump({"a": 0, "b": 1, "ab": 2}, open(os.path.join(slow, "vocab.json"), "w"))
        json.dump({"tokenizer_class": "GPT2Tokenizer"}, open(os.path.join(slow, "tokenizer_config.json"), "w"))
        open(os.path.join(slow, "merges.txt"), "wb").write(b"#version: 0.2\na b\n\xff b\n")
        self.add("tokenizer.json", "merges.txt not UTF-8", [self.tool("mf-tokenize"), slow, "--encode", "ab"], True)

    def chat_templates(self):
        chat = os.path.join(ROOT, "test", "e2e", "Inputs", "chat")
        messages = os.path.join(chat, "messages-basic.json")
        render = lambda path: [self.tool("mf-tokenize"), "--render-template", path, "--messages", messages]
        hostile = {
            "40 nested loops": "{% for i in range(2) %}" * 40 + "x" + "{% endfor %}" * 40,
            "a string doubled": "{% set ns = namespace(s='ab') %}{% for i in range(100) %}"
                                "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
            "range of 10^12": "{% for i in range(1000000000000) %}x{% endfor %}",
            "a string times 10^12": "{{ 'ab' * 1000000000000 }}",
            "integer overflow": "{{ 9223372036854775807 + 1 }}",
            "INT64_MIN // -1": "{{ (-9223372036854775807 - 1) // -1 }}",
            "division by zero": "{{ 1 // 0 }}",
            "modulo by zero": "{{ 1 % 0 }}",
            "a recursive macro": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
            "10000 nested parentheses": "{{ " + "(" * 10000 + "1" + ")" * 10000 + " }}",
            "10000 nested lists": "{{ " + "[" * 10000 + "]" * 10000 + " }}",
            "an unterminated block": "{% for m in messages %}x",
            "an unterminated expression": "{{ messages[0",
            "an unknown filter": "{{ messages | frobnicate }}",
            "a named escape": "{{ '\\N{DIGIT ONE}' }}",
            "an undefined call": "{{ nothing() }}",
            "raise_exception": "{{ raise_exception('refused') }}",
            "a huge format width": "{{ '%999999999d' | format(1) }}",
        }
        for label, text in hostile.items():
            path = self.path("template.jinja")
            open(path, "w").write(text)
            self.add("chat template", label, render(path), True)
        sources = [os.path.join(chat, name) for name in sorted(os.listdir(chat)) if name.endswith(".jinja")]
        for _ in range(self.args.count * 3):
            source = bytearray(open(self.random.choice(sources), "rb").read())
            for _ in range(self.random.randrange(1, 4)):
                what = self.random.randrange(3)
                at = self.random.randrange(len(source))
                if what == 0:
                    del source[at:at + self.random.randrange(1, 8)]
                elif what == 1:
                    source[at:at] = self.random.choice([b"{%", b"%}", b"{{", b"}}", b"(", b"[", b"'", b"\\",
                                                        b"for", b"endfor", b"|", b"~", b"*", b"\xff", b"\x00"])
                else:
                    source[at] = self.random.randrange(256)
            path = self.write("template.jinja", bytes(source))
            self.add("chat template", "bytes mutated", render(path), False)

    # --- configs and the compiler -----------------------------------------------
    def configs(self):
        import yaml
        base = yaml.safe_load(open(self.yaml))
        compile_to = lambda path: [self.tool("mfc"), "compile", path, "-o", self.path("out.bin")]
        for _ in range(self.args.count * 2):
            path = self.path("config.yaml")
            value = self.mutate_json(base)
            with open(path, "w") as f:
                yaml.safe_dump(value, f, allow_unicode=False)
            self.add("YAML config", "one node replaced", compile_to(path), False)
        laughs = "a: &a ['x','x','x','x','x','x','x','x','x','x']\n" + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},"
            f"*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n"
            for i in range(8))
        hostile = {
            "billion laughs": laughs + open(self.yaml).read(),
            "not YAML": "run_mode: [\n",
            "a list": "- 1\n- 2\n",
            "a scalar": "42\n",
            "empty": "",
            "tabs": "run_mode:\t'predict'\n\tmodel: 1\n",
            "a NUL": "run_mode: predict\u0000\n",
            "deep nesting": "a: " + "[" * 5000 + "]" * 5000 + "\n",
        }
        for label, text in hostile.items():
            path = self.path("config.yaml")
            open(path, "w").write(text)
            self.add("YAML config", label, compile_to(path), True)
        flags = [["--set", "model.model_config.num_layers=-1"], ["--set", "model.model_config.hidden_size=7"],
                 ["--set", "model.model_config.seq_length=99999999999"], ["--set", "nonsense"],
                 ["--set", "=1"], ["--set", "model.model_config.nothere=1"], ["--set", "run_mode=fly"],
                 ["--set", "model.model_config.vocab_size=0"], ["--set", "model.model_config.num_heads=0"],
                 ["--mode", "rocket"], ["--dump-ir-after=all"], ["-o"], ["--set"]]
        for flag in flags:
            self.add("compiler flags", " ".join(flag), [self.tool("mfc"), "compile", self.yaml,
                                                       "-o", self.path("out.bin")] + flag, True)

    def hf_folders(self):
        source = os.path.join(ROOT, "test", "Frontend", "Inputs")
        yaml_text = open(os.path.join(source, "predict_qwen3.yaml")).read()
        config = json.load(open(os.path.join(source, "qwen3-tiny", "config.json")))
        for _ in range(self.args.count * 2):
            folder = self.path("hf")
            os.makedirs(os.path.join(folder, "qwen3-tiny"))
            with open(os.path.join(folder, "qwen3-tiny", "config.json"), "w") as f:
                json.dump(self.mutate_json(config), f, allow_nan=True)
            open(os.path.join(folder, "predict.yaml"), "w").write(yaml_text)
            self.add("Hugging Face config.json", "one node replaced",
                     [self.tool("mfc"), "compile", os.path.join(folder, "predict.yaml"),
                      "-o", self.path("out.bin")], False)

    # --- files that are not files, ranks that disagree -----------------------------
    def fifos(self):
        fifo = os.path.join(self.work, "fifo")
        os.mkfifo(fifo)
        run = [self.tool("mf-run"), self.model, "--init-weights"] + self.run_args
        cases = {
            "model.bin": [self.tool("mf-run"), fifo, "--init-weights"] + self.run_args,
            "--weights": [self.tool("mf-run"), self.model, "--weights", fifo] + self.run_args,
            "--tokenizer": [self.tool("mf-run"), self.model, "--init-weights", "--tokenizer", fifo,
                            "--prompt", "ab", "--max-new-tokens", "1"],
            "--data": [self.tool("mf-run"), self.model, "--init-weights", "--task", "eval", "--data", fifo],
            "--save-weights": run + ["--save-weights", fifo],
            "--dump-logits": run + ["--dump-logits", fifo],
            "mfc's config": [self.tool("mfc"), "compile", fifo, "-o", self.path("out.bin")],
            "mfc's output": [self.tool("mfc"), "compile", self.yaml, "-o", fifo],
            "mf-tokenize's tokenizer": [self.tool("mf-tokenize"), fifo, "--encode", "ab"],
            "a chat template": [self.tool("mf-tokenize"), "--render-template", fifo, "--messages",
                                os.path.join(ROOT, "test", "e2e", "Inputs", "chat", "messages-basic.json")],
            "mf-tokenize's corpus": [self.tool("mf-tokenize"), os.path.join(ROOT, "test", "Frontend", "Inputs"),
                                     "--write-mftokens", fifo, self.path("out.mftokens")],
        }
        for label, argv in cases.items():
            self.add("FIFO as input or output", label, argv, True)

    def ranks(self):
        mpirun = shutil.which("mpirun")
        if mpirun is None:
            return
        tp = os.path.join(ROOT, "test", "e2e", "Inputs", "tp-llama.yaml")
        a, b = os.path.join(self.work, "a.bin"), os.path.join(self.work, "b.bin")
        self.run_setup([self.tool("mfc"), "compile", tp, "-o", a])
        self.run_setup([self.tool("mfc"), "compile", tp, "--set", "model.model_config.seq_length=32", "-o", b])
        flags = ["--init-weights", "--threads", "1", "--input-ids", "1,2", "--max-new-tokens", "2"]
        base = [mpirun, "--oversubscribe", "--allow-run-as-root", "-n", "1", self.tool("mf-run")]
        self.add("ranks that disagree", "two model.bin files", base + [a] + flags + [":", "-n", "1",
                 self.tool("mf-run"), b] + flags, True)
        self.add("ranks that disagree", "two --max-new-tokens", base + [a] + flags + [":", "-n", "1",
                 self.tool("mf-run"), a] + flags[:-1] + ["3"], True)
        self.add("ranks that disagree", "two --seed", base + [a] + flags + ["--seed", "1", ":", "-n", "1",
                 self.tool("mf-run"), a] + flags + ["--seed", "2"], True)

    # --- running ------------------------------------------------------------------
    def classify(self, case):
        try:
            result = subprocess.run(case.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    stdin=subprocess.DEVNULL, timeout=self.args.timeout,
                                    env=dict(os.environ, OMP_NUM_THREADS="1", OMPI_MCA_rmaps_base_oversubscribe="1"))
        except subprocess.TimeoutExpired:
            return "hang", ""
        stderr = result.stderr.decode(errors="replace")
        if result.returncode < 0 or result.returncode == 70 or CRASH_PATTERN.search(stderr):
            return "crash", stderr
        if result.returncode == 0:
            return ("silent" if case.must_refuse else "ran"), stderr
        # LLVM's command-line parser words its own refusals (mlir-opt's too).
        if not re.search(r"error:|Unknown command line argument|option: requires a value", stderr):
            return "unclear", stderr
        return "refused", stderr

    def run(self):
        classes = {"executables": self.executables, "safetensors": self.safetensors,
                   "checkpoints": self.checkpoints, "sharded": self.sharded, "tokenizers": self.tokenizers,
                   "chat": self.chat_templates, "configs": self.configs, "hf": self.hf_folders,
                   "fifos": self.fifos, "ranks": self.ranks}
        chosen = self.args.only.split(",") if self.args.only else list(classes)
        for name in chosen:
            if name not in classes:
                sys.exit(f"hostile-sweep: no class '{name}' (classes: {', '.join(classes)})")
        self.prepare()
        for name in chosen:
            classes[name]()
        table, bad = {}, []
        for number, case in enumerate(self.cases):
            outcome, stderr = self.classify(case)
            row = table.setdefault(case.cls, {k: 0 for k in ("refused", "ran", "crash", "hang", "silent", "unclear")})
            row[outcome] += 1
            if outcome not in ("refused", "ran"):
                bad.append((case, outcome, stderr))
            if (number + 1) % 100 == 0:
                print(f"hostile-sweep: {number + 1}/{len(self.cases)} runs", file=sys.stderr, flush=True)
        print(f"{'class':28} {'cases':>6} {'refused':>8} {'ran':>6} {'crash':>6} {'hang':>5} {'silent':>7} {'unclear':>8}")
        for cls, row in table.items():
            print(f"{cls:28} {sum(row.values()):6} {row['refused']:8} {row['ran']:6} {row['crash']:6} "
                  f"{row['hang']:5} {row['silent']:7} {row['unclear']:8}")
        for case, outcome, stderr in bad:
            print(f"\n{outcome}: {case.cls}: {case.name}\n  {' '.join(case.argv)}\n  "
                  + "\n  ".join(stderr.strip().splitlines()[-4:]))
        if bad:
            print(f"\nhostile-sweep: {len(bad)} of {len(self.cases)} runs crashed, hung, accepted silently or "
                  f"failed without an error; their files are in {self.work}")
            return 1
        print(f"hostile-sweep: {len(self.cases)} runs, none crashed, hung, accepted silently or failed "
              "without an error")
        shutil.rmtree(self.work)
        return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=30)
    parser.add_argument("--only", default="")
    sys.exit(Sweep(parser.parse_args()).run())


if __name__ == "__main__":
    main()
