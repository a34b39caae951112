#!/usr/bin/python3
"""Checks that runtime/'s folders form the one-way stack docs/runtime.md
describes: a file includes headers of its own folder and of folders below
it, never above. Prints each include that goes up; exits 1 if any does.

  scripts/check-runtime-layers.py [RUNTIME_DIR]
"""
import os
import re
import sys

# Each folder and the folders it may include (besides itself).
BELOW = {
    "base": [],
    "format": ["base"],
    "hal": ["base", "format"],
    "kernels": ["base", "format", "hal"],
    "io": ["base", "format", "hal", "kernels"],
    "exec": ["base", "format", "hal", "kernels", "io"],
    "text": ["base"],
    "session": ["base", "format", "hal", "kernels", "io", "exec", "text"],
}

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "runtime")
include = re.compile(r'#include "runtime/([A-Za-z]+)[/.]')
upward = 0
files = 0
for folder, allowed in BELOW.items():
    directory = os.path.join(root, folder)
    for name in sorted(os.listdir(directory)):
        if not name.endswith((".h", ".cpp")):
            continue
        files += 1
        for number, line in enumerate(open(os.path.join(directory, name)), 1):
            match = include.match(line)
            if match and match.group(1) not in BELOW:  # runtime/Foo.h: no layer
                print(f"runtime/{folder}/{name}:{number}: includes {line.split()[1]}, "
                      f"outside the layers")
                upward += 1
            elif match and match.group(1) != folder and match.group(1) not in allowed:
                print(f"runtime/{folder}/{name}:{number}: includes runtime/{match.group(1)}/, "
                      f"a layer {folder}/ may not use (it may use: {', '.join(allowed) or 'nothing'})")
                upward += 1
unknown = sorted(set(os.listdir(root)) - set(BELOW) - {"CMakeLists.txt"})
for name in unknown:
    print(f"runtime/{name}: not in a layer; put it in one of {', '.join(BELOW)}")
print(f"{files} files in {len(BELOW)} layers: {upward} upward includes, {len(unknown)} files outside the layers")
sys.exit(1 if upward or unknown else 0)
