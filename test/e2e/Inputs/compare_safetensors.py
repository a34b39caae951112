"""Compares every tensor of safetensors files with the first's: |a - b| /
max |a| per tensor must be within 1e-5 (or --bound), or, with --noise FILE (the same
run's weights from the other mode: Graph Mode against PyNative), within
twice what that run differs from the first, where that is more: a tensor
whose AdamW updates amplify rounding (a small one, such as the key bias
under RoPE) is held to the agreement of the two single-rank modes, of
which each side of the comparison carries its own share."""
import argparse
import json
import struct

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
        if entry["dtype"] == "BF16":  # the high half of an f32
            bits = numpy.frombuffer(body[begin:end], numpy.uint16).astype(numpy.uint32) << 16
            tensors[name] = bits.view(numpy.float32).reshape(entry["shape"])
            continue
        tensors[name] = numpy.frombuffer(body[begin:end], DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return tensors


def differences(expected, actual):
    return {n: float(abs(actual[n].astype(numpy.float64) - expected[n]).max()) /
            max(float(abs(expected[n]).max()), 1e-30) for n in expected}


parser = argparse.ArgumentParser()
parser.add_argument("expected")
parser.add_argument("actual", nargs="+")
parser.add_argument("--noise")
parser.add_argument("--bound", type=float, default=1e-5,
                    help="the relative difference allowed (1e-5: f32 runs)")
parser.add_argument("--without", action="append", default=[],
                    help="leave out the tensors whose name starts with this "
                    "(state that only some of the runs keep)")
args = parser.parse_args()
expected = {n: t for n, t in read(args.expected).items()
            if not any(n.startswith(p) for p in args.without)}
bound = {n: args.bound for n in expected}
if args.noise:
    for n, d in differences(expected, read(args.noise)).items():
        bound[n] = max(bound[n], 2 * d)
for path in args.actual:
    actual = {n: t for n, t in read(path).items()
              if not any(n.startswith(p) for p in args.without)}
    name = path.rsplit('/', 1)[-1]
    if sorted(actual) != sorted(expected):
        print(f"{name}: other tensors: MISMATCH")
        continue
    found = differences(expected, actual)
    worst = max(found, key=lambda n: found[n] / bound[n])
    over = [n for n in found if found[n] > bound[n]]
    verdict = "OK" if not over else "MISMATCH in " + ", ".join(over)
    print(f"{name}: {len(expected)} tensors, worst relative difference "
          f"{max(found.values()):.3g} ({worst}: {found[worst]:.3g}, bound "
          f"{bound[worst]:.3g}): {verdict}")
