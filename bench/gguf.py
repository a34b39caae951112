#!/usr/bin/python3
"""Writes a LLaMA model's safetensors weights as a GGUF file (v3, f32), so
llama.cpp (bench's peer, through npm node-llama-cpp) runs the same model on
the same weights; a Mixtral-shaped mixture of experts too.

  bench/gguf.py CONFIG.yaml WEIGHTS.safetensors OUT.gguf [--type f32|q8_0|q4_0]
               [--tokenizer tokenizer.json]

What llama.cpp's own converter (convert_hf_to_gguf.py) does for LLaMA, for
this one case: tensors under llama.cpp's names, each weight's dims in ggml's
order (innermost first), the q and k projections' rows permuted from Hugging
Face's rotate-half RoPE to llama.cpp's interleaved pairs, a tied lm_head left
out (llama.cpp then reads token_embd), and the vocabulary: a tokenizer.json's
tokens (SentencePiece style: '<0xNN>' byte tokens, '<s>', '</s>', '<unk>')
or, without one, placeholders (the benchmarks feed ids, not text).
A mixture of experts (every layer routed, Mixtral's names: MindFormers'
LLaMA with moe_config) is written as convert_hf_to_gguf.py writes Mixtral:
llama.expert_count and expert_used_count, the router as ffn_gate_inp and
each projection's experts stacked, [experts, out, in], as ffn_gate_exps,
ffn_up_exps and ffn_down_exps (llama.cpp's LLaMA renormalizes the chosen
experts' softmax weights, as norm_topk_prob does).
--type q8_0 / q4_0 store every matrix whose rows are whole blocks of 32 as
ggml's reference quantizers do (quantize_row_q8_0_ref: a block's scale
max|x| / 127, values rounded half away from zero; quantize_row_q4_0_ref: the
scale the value of largest magnitude / -8, values truncated from x / d +
8.5 and capped at 15, two a byte, element j in the low nibble and j + 16 in
the high), norms in f32: llama.cpp's Q8_0 and Q4_0 of the same weights.
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
GGML_F32, GGML_Q4_0, GGML_Q8_0 = 0, 2, 8
QUANT_BLOCK = 32
# llama.cpp's file types (llama_ftype): all f32, mostly Q4_0, mostly Q8_0.
FILE_TYPES = {"f32": (0, GGML_F32), "q4_0": (2, GGML_Q4_0), "q8_0": (7, GGML_Q8_0)}
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


def round_half_away(x):
    return numpy.sign(x) * numpy.floor(numpy.abs(x) + 0.5)


def quantize_q8_0(value):
    """[rows, K] f32 -> Q8_0 blocks: per 32 values an f16 scale, 32 int8."""
    blocks = value.reshape(value.shape[0], -1, QUANT_BLOCK)
    d = numpy.abs(blocks).max(axis=-1, keepdims=True) / 127.0
    inverse = numpy.divide(1.0, d, out=numpy.zeros_like(d), where=d != 0)
    q = round_half_away(blocks * inverse).astype(numpy.int8)
    out = numpy.empty(blocks.shape[:2], dtype=[("d", "<f2"), ("qs", "i1", QUANT_BLOCK)])
    out["d"], out["qs"] = d[..., 0], q
    return out.tobytes()


def quantize_q4_0(value):
    """[rows, K] f32 -> Q4_0 blocks: per 32 values an f16 scale, 16 bytes."""
    blocks = value.reshape(value.shape[0], -1, QUANT_BLOCK)
    at = numpy.abs(blocks).argmax(axis=-1)[..., None]  # the first of equals
    d = numpy.take_along_axis(blocks, at, axis=-1) / -8.0
    inverse = numpy.divide(1.0, d, out=numpy.zeros_like(d), where=d != 0)
    q = numpy.minimum(15, numpy.trunc(blocks * inverse + 8.5)).astype(numpy.uint8)
    out = numpy.empty(blocks.shape[:2], dtype=[("d", "<f2"), ("qs", "u1", QUANT_BLOCK // 2)])
    out["d"], out["qs"] = d[..., 0], q[..., :16] | (q[..., 16:] << 4)
    return out.tobytes()


def torch_equal(a, b):
    return a.shape == b.shape and bool((a == b).all())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("weights")
    parser.add_argument("out")
    parser.add_argument("--tokenizer")
    parser.add_argument("--type", choices=sorted(FILE_TYPES), default="f32")
    args = parser.parse_args()
    cfg = reference.Config(args.config)
    if cfg.gpt2 or cfg.qkv_bias or cfg.qk_norm:
        sys.exit("gguf.py: only plain LLaMA models (no biases, no q/k norms, not GPT-2)")
    experts = cfg.num_experts if cfg.num_experts > 1 else 0
    if experts and (not cfg.mixtral or cfg.shared_width or
                    not all(cfg.routed(layer) for layer in range(cfg.layers)) or
                    not cfg.norm_topk_prob or cfg.routed_scale != 1.0):
        sys.exit("gguf.py: only Mixtral-shaped mixtures of experts (every layer routed, "
                 "renormalized top-k, no shared expert)")
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
    if experts:
        for hf in ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
            del parts[hf]
        parts["block_sparse_moe.gate"] = "ffn_gate_inp"
    for layer in range(cfg.layers):
        for hf, gguf in parts.items():
            names[f"model.layers.{layer}.{hf}.weight"] = f"blk.{layer}.{gguf}.weight"
    # Each projection's experts stacked [experts, out, in].
    for layer in range(cfg.layers if experts else 0):
        for hf, gguf in (("w1", "ffn_gate_exps"), ("w3", "ffn_up_exps"), ("w2", "ffn_down_exps")):
            stack = f"model.layers.{layer}.block_sparse_moe.experts.{hf}"
            weights[stack] = numpy.stack([
                weights.pop(f"model.layers.{layer}.block_sparse_moe.experts.{e}.{hf}.weight")
                for e in range(experts)])
            names[stack] = f"blk.{layer}.{gguf}.weight"
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
    feed_forward = cfg.expert_width if experts else \
        weights["model.layers.0.mlp.gate_proj.weight"].shape[0]
    moe_keys = [pack_kv("llama.expert_count", UINT32, experts),
                pack_kv("llama.expert_used_count", UINT32, cfg.experts_per_token)] if experts else []
    metadata = [
        pack_kv("general.architecture", STRING, "llama"),
        pack_kv("general.name", STRING, os.path.splitext(os.path.basename(args.config))[0]),
        pack_kv("general.alignment", UINT32, ALIGNMENT),
        pack_kv("general.file_type", UINT32, FILE_TYPES[args.type][0]),
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
        *moe_keys,
        pack_kv("tokenizer.ggml.model", STRING, "llama"),
        pack_kv("tokenizer.ggml.tokens", ARRAY, tokens, STRING),
        pack_kv("tokenizer.ggml.scores", ARRAY, scores, FLOAT32),
        pack_kv("tokenizer.ggml.token_type", ARRAY, types, INT32),
        pack_kv("tokenizer.ggml.bos_token_id", UINT32, bos),
        pack_kv("tokenizer.ggml.eos_token_id", UINT32, min(cfg.eos)),
        pack_kv("tokenizer.ggml.unknown_token_id", UINT32, 0),
    ]
    # Each tensor's ggml type and bytes: matrices of whole 32-blocks
    # quantized as --type asks, the rest (norms, odd widths) f32.
    ggml_type = FILE_TYPES[args.type][1]
    stored = []
    for name, value in tensors:
        if ggml_type != GGML_F32 and value.ndim >= 2 and value.shape[-1] % QUANT_BLOCK == 0:
            quantize = quantize_q8_0 if ggml_type == GGML_Q8_0 else quantize_q4_0
            rows = value.reshape(-1, value.shape[-1])  # stacked experts: rows in order
            stored.append((name, value.shape, ggml_type, quantize(rows)))
        else:
            stored.append((name, value.shape, GGML_F32, value.tobytes()))
    infos, offset = [], 0
    for name, shape, kind, data in stored:
        dims = list(reversed(shape))  # ggml: innermost first
        infos.append(pack_string(name) + struct.pack("<I", len(dims))
                     + b"".join(struct.pack("<Q", d) for d in dims)
                     + struct.pack("<IQ", kind, offset))
        offset += (len(data) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
    with open(args.out, "wb") as out:
        out.write(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)))
        for item in metadata + infos:
            out.write(item)
        out.write(b"\0" * (-out.tell() % ALIGNMENT))
        for _, _, _, data in stored:
            out.write(data)
            out.write(b"\0" * (-len(data) % ALIGNMENT))
    quantized = sum(kind != GGML_F32 for _, _, kind, _ in stored)
    what = (f"{len(stored)} f32 tensors" if args.type == "f32" else
            f"{len(stored)} tensors ({quantized} {args.type}, {len(stored) - quantized} f32)")
    print(f"gguf.py: wrote {what} and {len(tokens)} tokens to {args.out}")


if __name__ == "__main__":
    main()
