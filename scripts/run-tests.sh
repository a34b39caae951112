#!/usr/bin/env bash
# Runs every test (lit regression tests and the GoogleTest unit tests, both
# through lit) and ends with one summary line: "tests: N passed, N failed".
set -uo pipefail

build_dir=${1:-build}
lit=${LIT:-/usr/lib/llvm-22/bin/lit}
results="$build_dir/test-results.xml"
# What install-deps.sh installs is required: without it the tests needing it
# would be UNSUPPORTED and the run green (lit.cfg.py refuses to start).
# llama.cpp's prebuilt binary (install-deps) is for x86-64 only.
llama_cpp=$([ "$(uname -m)" = x86_64 ] && echo ,llama-cpp)
export MFC_REQUIRE_FEATURES="${MFC_REQUIRE_FEATURES-torch,mpi,hf-tokenizers,openai-client$llama_cpp}"

"$lit" -sv --xunit-xml-output "$results" "$build_dir/test" "$build_dir/test/unit"
status=$?

python3 - "$results" <<'PY'
import sys
import xml.etree.ElementTree as ET

root = ET.parse(sys.argv[1]).getroot()
cases = root.iter("testcase")
passed = failed = skipped = 0
for case in cases:
    if case.find("failure") is not None or case.find("error") is not None:
        failed += 1
    elif case.find("skipped") is not None:
        skipped += 1
    else:
        passed += 1
print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
for case in root.iter("testcase"):
    skip = case.find("skipped")
    if skip is not None:
        print(f"  skipped: {case.get('classname')}.{case.get('name')}: "
              f"{skip.get('message', '')}")
PY
exit $status
