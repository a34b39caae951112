"""Writes a MindSpore checkpoint from a safetensors file, for the .ckpt
tests: MindFormers' parameter names (as its convert_weight.py renames
Hugging Face's), the protobuf wire format of mindspore's checkpoint.proto
encoded here by hand (an independent writer: the reader uses protobuf's
CodedInputStream), and optionally
  --qkv-concat HEADS KV_HEADS  wq/wk/wv fused into w_qkv per KV group and
                               w1/w3 into w_gate_hidden, as qkv_concat does
  --slice BYTES                tensors split into values of BYTES at most,
                               as MindSpore saves large tensors
  --trainer-state              Adam moments and step counters beside them
  --packed-dims                dims as a packed field
Usage: write_ckpt.py IN.safetensors OUT.ckpt [options]"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "reference"))
from reference import load_safetensors  # noqa: E402

RENAMES = [
    ("embed_tokens.weight", "tok_embeddings.embedding_weight"),
    (".self_attn.q_proj.", ".attention.wq."),
    (".self_attn.k_proj.", ".attention.wk."),
    (".self_attn.v_proj.", ".attention.wv."),
    (".self_attn.o_proj.", ".attention.wo."),
    (".mlp.gate_proj.", ".feed_forward.w1."),
    (".mlp.down_proj.", ".feed_forward.w2."),
    (".mlp.up_proj.", ".feed_forward.w3."),
    (".input_layernorm.", ".attention_norm."),
    (".post_attention_layernorm.", ".ffn_norm."),
    ("model.norm.", "model.norm_out."),
]
TYPES = {torch.float32: "Float32", torch.float16: "Float16", torch.bfloat16: "BFloat16",
         torch.int32: "Int32"}


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def length_delimited(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def value(tag, tensor, content, packed):
    dims = list(tensor.shape)
    if packed:
        dims_field = length_delimited(1, b"".join(varint(d) for d in dims))
    else:
        dims_field = b"".join(varint(1 << 3) + varint(d) for d in dims)
    proto = (dims_field + length_delimited(2, TYPES[tensor.dtype].encode())
             + length_delimited(3, content))
    return length_delimited(1, length_delimited(1, tag.encode()) + length_delimited(2, proto))


def content_of(tensor):
    return tensor.contiguous().view(torch.uint8).numpy().tobytes() if tensor.dim() else \
        tensor.reshape(1).view(torch.uint8).numpy().tobytes()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("source")
    parser.add_argument("out")
    parser.add_argument("--qkv-concat", nargs=2, type=int, metavar=("HEADS", "KV_HEADS"))
    parser.add_argument("--slice", type=int, default=0)
    parser.add_argument("--disagreeing-slice", action="store_true",
                        help="the first sliced tensor's second slice says "
                             "other dims (a hostile file)")
    parser.add_argument("--trainer-state", action="store_true")
    parser.add_argument("--packed-dims", action="store_true")
    args = parser.parse_args()
    tensors = {}
    for name, tensor in load_safetensors(args.source).items():
        for old, new in RENAMES:
            name = name.replace(old, new)
        tensors[name] = tensor
    if args.qkv_concat:
        heads, kv_heads = args.qkv_concat
        for name in [n for n in tensors if ".attention.wq." in n]:
            stem, suffix = name.split(".attention.wq.")
            q, k, v = (tensors.pop(f"{stem}.attention.w{p}.{suffix}") for p in "qkv")
            head_dim = k.shape[0] // kv_heads
            rest = q.shape[1:]
            groups = [q.reshape(kv_heads, -1, *rest), k.reshape(kv_heads, head_dim, *rest),
                      v.reshape(kv_heads, head_dim, *rest)]
            tensors[f"{stem}.attention.w_qkv.{suffix}"] = torch.cat(groups, 1).reshape(-1, *rest)
        for name in [n for n in tensors if ".feed_forward.w1." in n]:
            stem = name.split(".feed_forward.w1.")[0]
            gate = tensors.pop(name)
            up = tensors.pop(f"{stem}.feed_forward.w3.weight")
            tensors[f"{stem}.feed_forward.w_gate_hidden.weight"] = \
                torch.stack([gate, up], 1).reshape(-1, gate.shape[1])
    if args.trainer_state:
        for name in list(tensors):
            tensors["adam_m." + name] = torch.zeros_like(tensors[name], dtype=torch.float32)
        tensors["global_step"] = torch.tensor([7], dtype=torch.int32)
        tensors["loss_scale"] = torch.tensor([1.0])
    out = bytearray()
    disagree = args.disagreeing_slice
    for name, tensor in tensors.items():
        content = content_of(tensor)
        step = args.slice or len(content) or 1
        for index, start in enumerate(range(0, max(len(content), 1), step)):
            described = tensor
            if disagree and index == 1:
                described, disagree = tensor.reshape(-1), False
            out += value(name, described, content[start:start + step], args.packed_dims)
    with open(args.out, "wb") as f:
        f.write(out)
    print(f"wrote {len(tensors)} tensors to {args.out}")


if __name__ == "__main__":
    main()
