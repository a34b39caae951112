"""Checks that byte-level tokenizers decode their ids back to the input.
Usage: tokenizer_roundtrip.py strings.jsonl (OUTPUT NFC|none)...
where OUTPUT is `mf-tokenize --json-lines` output (ids, tab, JSON text)."""
import json
import sys
import unicodedata

strings = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
for output, normalization in zip(sys.argv[2::2], sys.argv[3::2]):
    same = 0
    for text, line in zip(strings, open(output, encoding="utf-8")):
        decoded = json.loads(line.rstrip("\n").split("\t", 1)[1])
        expected = unicodedata.normalize("NFC", text) if normalization == "NFC" else text
        if decoded == expected:
            same += 1
        else:
            print(f"{output}: {text!r} decodes to {decoded!r}")
    print(f"{same} of {len(strings)} strings decode back to their input")
