"""Prints BASE.yaml with the maps of PART.yaml merged into it (PART's
values win), for tests that vary a few keys of a config.
Usage: merge_yaml.py BASE.yaml PART.yaml"""
import sys

import yaml


def merge(base, part):
    for key, value in part.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


with open(sys.argv[1]) as base, open(sys.argv[2]) as part:
    print(yaml.safe_dump(merge(yaml.safe_load(base), yaml.safe_load(part)), sort_keys=False))
