"""Rewrites a safetensors file with one tensor replaced, for hostile-input
tests: `edit_safetensors.py IN OUT NAME EXPR`, EXPR a Python expression of
`t` (the tensor, torch) giving its replacement."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "reference"))
import reference  # noqa: E402

source, target, name, expression = sys.argv[1:5]
tensors = reference.load_safetensors(source)
tensors[name] = eval(expression, {"torch": torch}, {"t": tensors[name]})
reference.save_safetensors(target, tensors)
