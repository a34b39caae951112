"""SentencePiece's own Python binding (Debian's python3-sentencepiece) on a
JSON-lines file of strings: per line the ids (no BOS) and, after a tab,
their decoded text as JSON -- the format of `mf-tokenize --json-lines`.
Usage: spm_tokenizer.py MODEL strings.jsonl"""
import json
import sys

import sentencepiece

processor = sentencepiece.SentencePieceProcessor(model_file=sys.argv[1])
for line in open(sys.argv[2], encoding="utf-8"):
    ids = processor.encode(json.loads(line))
    print(",".join(map(str, ids)) + "\t" + json.dumps(processor.decode(ids), ensure_ascii=False))
