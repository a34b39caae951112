#!/usr/bin/python3
"""Writes a LLaMA model's safetensors weights as a GGUF file (v3, f32), so
llama.cpp (bench's peer, through npm node-llama-cpp) runs the same model on
the same weights.

  bench/gguf.py CONFIG.yaml WEIGHTS.safetensors OUT.gguf [--tokenizer tokenizer.json]

What llama.cpp's own converter (convert_hf_to_gguf.py) does for LLaMA, for
this one case: tensors under llama.cpp's names, each weight's dims in ggml's
order (innermost first), the q and k projections' rows permuted from Hugging
Face's rotate-half RoPE to llama.cpp's interleaved pairs, a tied lm_head left
out (llama.cpp then reads token_embd), and the vocabulary: a tokenizer.json's
tokens (SentencePiece style: '<0xNN>' byte tokens, '<s>', '</s>', '<unk>')
or, without one, placeholders (the benchmarks feed ids, not text).
"""
import argparse
import json
import os
import struct
import sys

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "test", "reference"))
import reference  # noqa: E402

# GGUF value types and ggml tensor types (ggml/include/gguf.h, ggml.h).
UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY = 4, 5, 6, 7, 8, 9
GGML_F32 = 0
ALIGNMENT = 32
# llama.cpp's token types.
NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6


def pack_string(text):
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def pack_value(kind, value):
    if kind == UINT32:
        return struct.pack("<I", value)
    if kind == INT32:
        return struct.pack("<i", value)
    if kind == FLOAT32:
        return struct.pack("<f", value)
    if kind == BOOL:
        return struct.pack("<?", value)
    if kind == STRING:
        return pack_string(value)
    raise ValueError(kind)


def pack_kv(key, kind, value, element=None):
    out = pack_string(key) + struct.pack("<I", kind)
    if kind == ARRAY:
        out += struct.pack("<IQ", element, len(value))
        out += b"".join(pack_value(element, v) for v in value)
    else:
        out += pack_value(kind, value)
    return out


def rope_permute(weight, heads):
    """Hugging Face's q/k rows (each head's first half then second half of the
    rotated pairs) in llama.cpp's order (the pairs interleaved), as
    convert_hf_to_gguf.py's LlamaModel.permute."""
    rows = weight.shape[0]
    return (weight.reshape(heads, 2, rows // heads // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


def vocabulary(cfg, tokenizer_path):
    if tokenizer_path is None:
        # llama.cpp looks the byte tokens up (the line feed's, at least).
        tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(min(256, cfg.vocab - 3))]
        tokens += [f"t{i}" for i in range(len(tokens), cfg.vocab)]
    else:
        vocab = json.load(open(tokenizer_path))["model"]["vocab"]
        tokens = [None] * cfg.vocab
        for token, index in vocab.items():
            if index < cfg.vocab:
                tokens[index] = token
        tokens = [t if t is not None else f"<unused{i}>" for i, t in enumerate(tokens)]
    types = []
    for token in tokens:
        if token == "<unk>":
            types.append(UNKNOWN)
        elif token in ("<s>", "</s>"):
            types.append(CONTROL)
        elif len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
            types.append(BYTE)
        else:
            types.append(NORMAL)
    scores = [-float(i) for i in range(len(tokens))]
    return tokens, scores, types


def torch_equal(a, b):
    return a.shape == b.shape and bool((a == b).all())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("weights")
    parser.add_argument("out")
    parser.add_argument("--tokenizer")
    args = parser.parse_args()
    cfg = reference.Config(args.config)
    if cfg.gpt2 or cfg.qkv_bias or cfg.qk_norm:
        sys.exit("gguf.py: only plain LLaMA models (no biases, no q/k norms, not GPT-2)")
    scaled = not torch_equal(cfg.inv_freq, reference.rope_frequencies(cfg.theta, cfg.head_dim, "None", None))
    if scaled:
        sys.exit("gguf.py: RoPE scaling (extend_method, scaling_factor) is not written; "
                 "only plain RoPE models")
    weights = {name: tensor.float().numpy() for name, tensor in
               reference.load_safetensors(args.weights).items()}

    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    parts = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    for layer in range(cfg.layers):
        for hf, gguf in parts.items():
            names[f"model.layers.{layer}.{hf}.weight"] = f"blk.{layer}.{gguf}.weight"
    tensors = []
    for hf, gguf in names.items():
        if hf not in weights:
            if hf == "lm_head.weight" and cfg.tied:
                continue
            sys.exit(f"gguf.py: {args.weights} has no '{hf}'")
        value = numpy.ascontiguousarray(weights[hf], dtype=numpy.float32)
        if hf.endswith("q_proj.weight"):
            value = rope_permute(value, cfg.heads)
        elif hf.endswith("k_proj.weight"):
            value = rope_permute(value, cfg.kv_heads)
        tensors.append((gguf, numpy.ascontiguousarray(value)))

    tokens, scores, types = vocabulary(cfg, args.tokenizer)
    bos = reference.yaml.safe_load(open(args.config))["model"]["model_config"].get("bos_token_id", 1)
    feed_forward = weights["model.layers.0.mlp.gate_proj.weight"].shape[0]
    metadata = [
        pack_kv("general.architecture", STRING, "llama"),
        pack_kv("general.name", STRING, os.path.splitext(os.path.basename(args.config))[0]),
        pack_kv("general.alignment", UINT32, ALIGNMENT),
        pack_kv("general.file_type", UINT32, 0),  # all f32
        pack_kv("llama.context_length", UINT32, cfg.seq),
        pack_kv("llama.embedding_length", UINT32, cfg.hidden),
        pack_kv("llama.block_count", UINT32, cfg.layers),
        pack_kv("llama.feed_forward_length", UINT32, feed_forward),
        pack_kv("llama.rope.dimension_count", UINT32, cfg.head_dim),
        pack_kv("llama.attention.key_length", UINT32, cfg.head_dim),
        pack_kv("llama.attention.value_length", UINT32, cfg.head_dim),
        pack_kv("llama.attention.head_count", UINT32, cfg.heads),
        pack_kv("llama.attention.head_count_kv", UINT32, cfg.kv_heads),
        pack_kv("llama.attention.layer_norm_rms_epsilon", FLOAT32, cfg.eps),
        pack_kv("llama.rope.freq_base", FLOAT32, cfg.theta),
        pack_kv("llama.vocab_size", UINT32, cfg.vocab),
        pack_kv("tokenizer.ggml.model", STRING, "llama"),
        pack_kv("tokenizer.ggml.tokens", ARRAY, tokens, STRING),
        pack_kv("tokenizer.ggml.scores", ARRAY, scores, FLOAT32),
        pack_kv("tokenizer.ggml.token_type", ARRAY, types, INT32),
        pack_kv("tokenizer.ggml.bos_token_id", UINT32, bos),
        pack_kv("tokenizer.ggml.eos_token_id", UINT32, min(cfg.eos)),
        pack_kv("tokenizer.ggml.unknown_token_id", UINT32, 0),
    ]
    infos, offset = [], 0
    for name, value in tensors:
        dims = list(reversed(value.shape))  # ggml: innermost first
        infos.append(pack_string(name) + struct.pack("<I", len(dims))
                     + b"".join(struct.pack("<Q", d) for d in dims)
                     + struct.pack("<IQ", GGML_F32, offset))
        offset += (value.nbytes + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
    with open(args.out, "wb") as out:
        out.write(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)))
        for item in metadata + infos:
            out.write(item)
        out.write(b"\0" * (-out.tell() % ALIGNMENT))
        for _, value in tensors:
            out.write(value.tobytes())
            out.write(b"\0" * (-value.nbytes % ALIGNMENT))
    print(f"gguf.py: wrote {len(tensors)} f32 tensors and {len(tokens)} tokens to {args.out}")


if __name__ == "__main__":
    main()
