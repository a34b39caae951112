"""Compares .npy files with the first: max |a - b| / max |a| within 1e-5
(--rtol R: within R). --closer-than C: instead, each file is closer to the
first than C is."""
import sys

import numpy

args = sys.argv[1:]
rtol = 1e-5
if "--rtol" in args:
    at = args.index("--rtol")
    rtol = float(args[at + 1])
    del args[at:at + 2]
closer_than = None
if "--closer-than" in args:
    at = args.index("--closer-than")
    closer_than = args[at + 1]
    del args[at:at + 2]
expected = numpy.load(args[0])
scale = float(abs(expected).max())
if closer_than is not None:
    rtol = float(abs(numpy.load(closer_than) - expected).max()) / scale
for path in args[1:]:
    actual = numpy.load(path)
    if actual.shape != expected.shape:
        print(f"{path.rsplit('/', 1)[-1]}: shape {actual.shape}, expected {expected.shape}: MISMATCH")
        continue
    difference = float(abs(actual - expected).max()) / scale
    if closer_than is not None:
        verdict = "closer: OK" if difference < rtol else "not closer: MISMATCH"
        print(f"{path.rsplit('/', 1)[-1]}: max relative difference {difference:.3g}, "
              f"{closer_than.rsplit('/', 1)[-1]}'s {rtol:.3g}: {verdict}")
        continue
    verdict = "OK" if difference <= rtol else "MISMATCH"
    print(f"{path.rsplit('/', 1)[-1]}: max relative difference {difference:.3g}: {verdict}")
