"""Compares every tensor of safetensors files with the first's: the largest
|a - b| / max |a| over the tensors must be within the tolerance (1e-5)."""
import json
import struct
import sys

import numpy

DTYPES = {"F32": numpy.float32, "F16": numpy.float16}


def read(path):
    with open(path, "rb") as file:
        data = file.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    body = data[8 + length:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        tensors[name] = numpy.frombuffer(body[begin:end], DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return tensors


expected = read(sys.argv[1])
for path in sys.argv[2:]:
    actual = read(path)
    if sorted(actual) != sorted(expected):
        print(f"{path.rsplit('/', 1)[-1]}: other tensors: MISMATCH")
        continue
    worst = max(float(abs(actual[n].astype(numpy.float64) - expected[n]).max()) /
                max(float(abs(expected[n]).max()), 1e-30) for n in expected)
    verdict = "OK" if worst <= 1e-5 else "MISMATCH"
    print(f"{path.rsplit('/', 1)[-1]}: {len(expected)} tensors, worst relative difference {worst:.3g}: {verdict}")
