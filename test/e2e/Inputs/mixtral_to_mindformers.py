"""Rewrites a Hugging Face Mixtral checkpoint in MindFormers' names, as
r1.5.0's research/mixtral/convert_weight.py writes it (without use_gmm):
each layer's experts stacked, feed_forward.ffn.w1/w2/w3 [experts, out, in],
the router as feed_forward.router.dense, attention and norms renamed.

  mixtral_to_mindformers.py IN.safetensors OUT.safetensors"""
import os
import re
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "reference"))
import reference  # noqa: E402

RENAMES = [(".block_sparse_moe.gate.", ".feed_forward.router.dense."),
           (".self_attn.q_proj.", ".attention.wq."), (".self_attn.k_proj.", ".attention.wk."),
           (".self_attn.v_proj.", ".attention.wv."), (".self_attn.o_proj.", ".attention.wo."),
           (".input_layernorm.", ".attention_norm."), (".post_attention_layernorm.", ".ffn_norm."),
           ("embed_tokens.weight", "tok_embeddings.embedding_weight")]

tensors, stacks = {}, {}
for name, value in reference.load_safetensors(sys.argv[1]).items():
    expert = re.match(r"(model\.layers\.\d+)\.block_sparse_moe\.experts\.(\d+)\.(w[123])\.weight$",
                      name)
    if expert:
        stack = f"{expert[1]}.feed_forward.ffn.{expert[3]}.weight"
        stacks.setdefault(stack, {})[int(expert[2])] = value
        continue
    for old, new in RENAMES:
        name = name.replace(old, new)
    tensors[name] = value
for name, experts in stacks.items():
    tensors[name] = torch.stack([experts[e] for e in sorted(experts)])
reference.save_safetensors(sys.argv[2], tensors)
