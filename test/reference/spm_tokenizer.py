"""SentencePiece's own Python binding (Debian's python3-sentencepiece) on a
JSON-lines file of strings: per line the ids (no BOS) and, after a tab,
their decoded text as JSON -- the format of `mf-tokenize --json-lines`.
As Hugging Face's (legacy) LlamaTokenizer does, the model's control and
unknown pieces written in the text (<s>, </s>, <unk>) are their ids, and
the text between them is encoded run by run.
Usage: spm_tokenizer.py MODEL strings.jsonl"""
import json
import re
import sys

import sentencepiece

processor = sentencepiece.SentencePieceProcessor(model_file=sys.argv[1])
specials = {processor.id_to_piece(i): i for i in range(processor.get_piece_size())
            if processor.is_control(i) or processor.is_unknown(i)}
specials.pop("", None)
pattern = re.compile("|".join(re.escape(p) for p in sorted(specials, key=len, reverse=True)))


def encode(text):
    ids, start = [], 0
    for match in pattern.finditer(text) if specials else ():
        if match.start() > start:
            ids += processor.encode(text[start:match.start()])
        ids.append(specials[match.group()])
        start = match.end()
    if start < len(text):
        ids += processor.encode(text[start:])
    return ids


for line in open(sys.argv[2], encoding="utf-8"):
    ids = encode(json.loads(line))
    print(",".join(map(str, ids)) + "\t" + json.dumps(processor.decode(ids), ensure_ascii=False))
