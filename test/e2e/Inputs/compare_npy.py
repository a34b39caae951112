"""Compares .npy files with the first: max |a - b| / max |a| within 1e-5."""
import sys

import numpy

expected = numpy.load(sys.argv[1])
scale = float(abs(expected).max())
for path in sys.argv[2:]:
    actual = numpy.load(path)
    if actual.shape != expected.shape:
        print(f"{path.rsplit('/', 1)[-1]}: shape {actual.shape}, expected {expected.shape}: MISMATCH")
        continue
    difference = float(abs(actual - expected).max()) / scale
    verdict = "OK" if difference <= 1e-5 else "MISMATCH"
    print(f"{path.rsplit('/', 1)[-1]}: max relative difference {difference:.3g}: {verdict}")
