"""Compares .npy files with the first: max |a - b| / max |a| within 1e-5
(--rtol R: within R)."""
import sys

import numpy

args = sys.argv[1:]
rtol = 1e-5
if "--rtol" in args:
    at = args.index("--rtol")
    rtol = float(args[at + 1])
    del args[at:at + 2]
expected = numpy.load(args[0])
scale = float(abs(expected).max())
for path in args[1:]:
    actual = numpy.load(path)
    if actual.shape != expected.shape:
        print(f"{path.rsplit('/', 1)[-1]}: shape {actual.shape}, expected {expected.shape}: MISMATCH")
        continue
    difference = float(abs(actual - expected).max()) / scale
    verdict = "OK" if difference <= rtol else "MISMATCH"
    print(f"{path.rsplit('/', 1)[-1]}: max relative difference {difference:.3g}: {verdict}")
