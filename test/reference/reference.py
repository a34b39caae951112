#!/usr/bin/python3
"""An independent PyTorch reference for mfc's end-to-end tests.

It reads the same MindFormers YAML and the same safetensors file as mf-run,
builds the model with plain torch ops (Hugging Face conventions: rotate-half
RoPE, repeat_kv for grouped-query attention, GPT-2's tanh GELU and Conv1D
layout), and compares mf-run's outputs with its own.

  reference.py make-weights CONFIG OUT.safetensors [--seed S] [--std X] [--dtype float32|bfloat16|float16]
  reference.py logits CONFIG WEIGHTS --input-ids 1,2,3 --actual LOGITS.npy [--rtol R --atol A]
  reference.py generate CONFIG WEIGHTS --input-ids 1,2,3 --new-tokens N --actual "ids: 4 5 6"
  reference.py loss CONFIG WEIGHTS --data FILE --actual "eval: ... loss X ..." [--rtol R]

Each check prints what it compared and the worst error, and exits 1 when the
tolerance is exceeded.
"""
import argparse
import json
import math
import os
import re
import struct
import sys

import numpy as np
import torch
import torch.utils.checkpoint
import yaml

torch.set_grad_enabled(False)
torch.set_num_threads(1)

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


# ---------------------------------------------------------------- config

class Config:
    """The keys of model_config that change the math, with MindFormers' defaults."""

    def __init__(self, path, overrides=()):
        with open(path) as f:
            root = yaml.safe_load(f)
        for assignment in overrides:
            key, value = assignment.split("=", 1)
            node = root
            parts = key.split(".")
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = yaml.safe_load(value)
        model = root["model"]
        cfg = model["model_config"]
        arch = (model.get("arch") or {}).get("type")
        if arch is None:
            cfg = hugging_face_model_config(path, root, cfg)
        self.gpt2 = arch == "GPT2LMHeadModel"
        # MindFormers' gelu is MindSpore's GELU(approximate=True); fast_gelu
        # is MindSpore's FastGeLU, x * sigmoid(1.702 x).
        self.hidden_act = cfg.get("hidden_act", "gelu")
        self.run_mode = root["run_mode"]
        self.hidden = cfg["hidden_size"]
        self.layers = cfg["num_layers"]
        self.heads = cfg["num_heads"]
        self.kv_heads = cfg.get("n_kv_heads") or self.heads
        self.vocab = cfg["vocab_size"]
        self.seq = cfg.get("seq_length", 4096)
        self.batch = cfg.get("batch_size", 1)
        if self.run_mode != "predict":
            self.batch = root.get("runner_config", {}).get("batch_size", self.batch)
        self.head_dim = cfg.get("head_dim") or self.hidden // self.heads
        self.qk_norm = bool(cfg.get("qk_layernorm", False))
        self.fp32_residual = bool(cfg.get("fp32_residual_connection", False))
        self.eps = cfg.get("rms_norm_eps", 1e-5)
        self.ln_eps = cfg.get("layernorm_epsilon", 1e-5)
        self.theta = float(cfg.get("theta", 10000.0))
        self.inv_freq = rope_frequencies(self.theta, self.head_dim,
                                         cfg.get("extend_method", "None"),
                                         cfg.get("scaling_factor"))
        self.qkv_bias = bool(cfg.get("qkv_has_bias", False))
        self.tied = bool(cfg.get("tie_word_embeddings", False)) or self.gpt2
        self.param_dtype = DTYPES[cfg.get("param_init_type", "float32")]
        self.compute_dtype = DTYPES[cfg.get("compute_dtype",
                                            "float16" if arch else "bfloat16")]
        self.ignore_index = cfg.get("ignore_token_id", -100)
        self.pad = cfg.get("pad_token_id", 0)
        eos = cfg.get("eos_token_id", 2)
        self.eos = set(eos if isinstance(eos, list) else [eos])
        if self.gpt2:
            self.ffn = cfg.get("expand_ratio", 4) * self.hidden
        elif cfg.get("intermediate_size"):
            self.ffn = cfg["intermediate_size"]
        else:
            # MindFormers' LlamaFeedForward: scale 4*hidden by
            # ffn_dim_multiplier + 0.01, then take 2/3.
            h = 4 * self.hidden
            if cfg.get("ffn_dim_multiplier"):
                h = int((cfg["ffn_dim_multiplier"] + 0.01) * h)
            h = int(2 * h / 3)
            m = cfg.get("multiple_of", 256)
            self.ffn = m * ((h + m - 1) // m)
        # Mixture of experts (Hugging Face's Qwen3-MoE and Mixtral configs,
        # with transformers' defaults).
        self.mixtral = cfg.get("model_type") == "mixtral"
        qwen2_moe = cfg.get("model_type") == "qwen2_moe"
        qwen_moe = qwen2_moe or cfg.get("model_type") == "qwen3_moe"
        self.num_experts = cfg.get("num_local_experts", 8) if self.mixtral else \
            cfg.get("num_experts", 60 if qwen2_moe else 128) if qwen_moe else 0
        self.experts_per_token = cfg.get("num_experts_per_tok",
                                         2 if self.mixtral else 4 if qwen2_moe else 8)
        self.expert_width = self.ffn if self.mixtral else \
            cfg.get("moe_intermediate_size", 1408 if qwen2_moe else 768)
        self.shared_width = cfg.get("shared_expert_intermediate_size", 5632) if qwen2_moe else 0
        self.shared_gated = True
        self.norm_topk_prob = True if self.mixtral else bool(cfg.get("norm_topk_prob", False))
        self.sparse_step = cfg.get("decoder_sparse_step", 1)
        self.dense_layers = cfg.get("mlp_only_layers") or []
        # transformers adds router_aux_loss_coef times the load-balancing
        # loss to the loss when output_router_logits asks.
        self.aux_coef = cfg.get("router_aux_loss_coef", 0.001) \
            if qwen_moe or self.mixtral else 0.0
        if not cfg.get("output_router_logits", False):
            self.aux_coef = 0.0
        self.router_logits = []  # each routed layer's, while aux_coef asks
        self.norm_eps, self.routed_scale, self.scale_normalized = 0.0, 1.0, True
        self.capacity, self.sequence_drop = 0, False
        moe = root.get("moe_config") or {}
        if moe.get("expert_num", 1) > 1:
            # MindFormers r1.5.0's LLaMA with moe_config: MoEInfer under
            # use_past (predict), else MoEV2 with TopkRouterV2 and a capacity.
            self.mixtral = True
            self.num_experts = moe["expert_num"]
            self.experts_per_token = moe.get("num_experts_chosen", 1)
            self.expert_width = self.ffn
            self.norm_topk_prob = moe.get("norm_topk_prob", True) and self.experts_per_token > 1
            self.norm_eps = 1e-9
            self.routed_scale = moe.get("routed_scaling_factor", 1.0)
            self.scale_normalized = self.run_mode != "predict"
            factor = moe.get("capacity_factor", 1.1)
            if self.run_mode != "predict" and factor > 0:
                tokens = self.batch * self.seq
                self.capacity = min(math.ceil(self.experts_per_token * tokens * factor /
                                              self.num_experts), tokens)
            self.sequence_drop = bool(moe.get("enable_sdrop", False))
            # LlamaFeedForwardWithMoE (MindFormers' Qwen2-MoE, Hugging
            # Face's Qwen2-MoE names): a shared expert beside the routed.
            shared = moe.get("shared_expert_num", 0)
            if shared:
                self.mixtral = False
                self.shared_width = int(self.ffn * shared)
                self.shared_gated = bool(moe.get("use_shared_expert_gating", False))
        # Training: mf-run's defaults where the YAML is silent.
        opt = root.get("optimizer") or {}
        self.optimizer = opt.get("type", "AdamW")
        betas = opt.get("betas", [opt.get("beta1", 0.9), opt.get("beta2", 0.999)])
        self.betas = (float(betas[0]), float(betas[1]))
        self.adam_eps = float(opt.get("eps", 1e-8))
        self.weight_decay = float(opt.get("weight_decay", 0.0))
        lr = root.get("lr_schedule") or {}
        self.lr = float(lr.get("learning_rate", opt.get("learning_rate", 1e-5)))
        self.lr_type = lr.get("type", "constant").lower()
        self.lr_end = float(lr.get("lr_end", 0.0))
        self.warmup_steps = int(lr.get("warmup_steps", 0))
        self.warmup_ratio = float(lr.get("warmup_ratio", 0.0))
        self.warmup_lr_init = float(lr.get("warmup_lr_init", 0.0))
        self.total_steps = int(lr.get("total_steps", -1))
        self.power = float(lr.get("power", 1.0))
        wrapper = root.get("runner_wrapper") or {}
        self.clip = bool(wrapper.get("use_clip_grad", False))
        self.max_grad_norm = float(wrapper.get("max_grad_norm", 1.0))
        self.accumulation = int((root.get("runner_config") or {}).get(
            "gradient_accumulation_steps", 1))
        pet = cfg.get("pet_config") or {}
        self.lora_rank = int(pet.get("lora_rank", 8))
        self.lora_scale = float(pet.get("lora_alpha", 16)) / self.lora_rank
        self.lora_pattern = re.compile("^(" + pet["target_modules"] + ")$") \
            if pet.get("pet_type") == "lora" else None

    def parameter_shapes_qk_norm(self, shapes, p):
        if self.qk_norm:
            shapes[p + "self_attn.q_norm.weight"] = (self.head_dim,)
            shapes[p + "self_attn.k_norm.weight"] = (self.head_dim,)

    def routed(self, layer):
        return (self.num_experts > 1 and (layer + 1) % self.sparse_step == 0
                and layer not in self.dense_layers)

    def lora_targets(self, path):
        return self.lora_pattern is not None and self.lora_pattern.match(path) is not None

    def learning_rate(self, step, run_steps):
        """Linear warmup, then cosine / linear / polynomial decay to lr_end."""
        total = self.total_steps if self.total_steps > 0 else run_steps
        warmup = self.warmup_steps or int(self.warmup_ratio * total)
        if step < warmup:
            return self.warmup_lr_init + (self.lr - self.warmup_lr_init) * step / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        if "cosine" in self.lr_type:
            return self.lr_end + 0.5 * (self.lr - self.lr_end) * (1 + math.cos(math.pi * progress))
        if "linear" in self.lr_type:
            return self.lr + (self.lr_end - self.lr) * progress
        if "polynomial" in self.lr_type:
            return (self.lr - self.lr_end) * (1 - progress) ** self.power + self.lr_end
        return self.lr

    def parameter_shapes(self):
        """Hugging Face names and shapes of every parameter."""
        shapes = {}
        h, d = self.hidden, self.head_dim
        if self.gpt2:
            shapes["transformer.wte.weight"] = (self.vocab, h)
            shapes["transformer.wpe.weight"] = (self.seq, h)
            for i in range(self.layers):
                p = f"transformer.h.{i}."
                for ln in ("ln_1", "ln_2"):
                    shapes[p + ln + ".weight"] = (h,)
                    shapes[p + ln + ".bias"] = (h,)
                shapes[p + "attn.c_attn.weight"] = (h, 3 * h)
                shapes[p + "attn.c_attn.bias"] = (3 * h,)
                shapes[p + "attn.c_proj.weight"] = (h, h)
                shapes[p + "attn.c_proj.bias"] = (h,)
                shapes[p + "mlp.c_fc.weight"] = (h, self.ffn)
                shapes[p + "mlp.c_fc.bias"] = (self.ffn,)
                shapes[p + "mlp.c_proj.weight"] = (self.ffn, h)
                shapes[p + "mlp.c_proj.bias"] = (h,)
                for name, (inp, out, _) in gpt2_lora_sites(self, i).items():
                    shapes[p + name + ".lora_A.weight"] = (self.lora_rank, inp)
                    shapes[p + name + ".lora_B.weight"] = (out, self.lora_rank)
            shapes["transformer.ln_f.weight"] = (h,)
            shapes["transformer.ln_f.bias"] = (h,)
            return shapes
        shapes["model.embed_tokens.weight"] = (self.vocab, h)
        for i in range(self.layers):
            p = f"model.layers.{i}."
            shapes[p + "input_layernorm.weight"] = (h,)
            shapes[p + "self_attn.q_proj.weight"] = (self.heads * d, h)
            shapes[p + "self_attn.k_proj.weight"] = (self.kv_heads * d, h)
            shapes[p + "self_attn.v_proj.weight"] = (self.kv_heads * d, h)
            if self.qkv_bias:
                shapes[p + "self_attn.q_proj.bias"] = (self.heads * d,)
                shapes[p + "self_attn.k_proj.bias"] = (self.kv_heads * d,)
                shapes[p + "self_attn.v_proj.bias"] = (self.kv_heads * d,)
            self.parameter_shapes_qk_norm(shapes, p)
            shapes[p + "self_attn.o_proj.weight"] = (h, self.heads * d)
            shapes[p + "post_attention_layernorm.weight"] = (h,)
            if self.routed(i):
                block = p + ("block_sparse_moe." if self.mixtral else "mlp.")
                shapes[block + "gate.weight"] = (self.num_experts, h)
                names = ("w1", "w3", "w2") if self.mixtral else \
                    ("gate_proj", "up_proj", "down_proj")
                for e in range(self.num_experts):
                    q = f"{block}experts.{e}."
                    shapes[q + names[0] + ".weight"] = (self.expert_width, h)
                    shapes[q + names[1] + ".weight"] = (self.expert_width, h)
                    shapes[q + names[2] + ".weight"] = (h, self.expert_width)
                if self.shared_width:
                    q = p + "mlp.shared_expert."
                    shapes[q + "gate_proj.weight"] = (self.shared_width, h)
                    shapes[q + "up_proj.weight"] = (self.shared_width, h)
                    shapes[q + "down_proj.weight"] = (h, self.shared_width)
                    if self.shared_gated:
                        shapes[p + "mlp.shared_expert_gate.weight"] = (1, h)
                continue
            shapes[p + "mlp.gate_proj.weight"] = (self.ffn, h)
            shapes[p + "mlp.up_proj.weight"] = (self.ffn, h)
            shapes[p + "mlp.down_proj.weight"] = (h, self.ffn)
            for name, path in MF_PROJECTIONS.items():
                if self.lora_targets(p + path):
                    out, inp = shapes[p + name + ".weight"]
                    shapes[p + name + ".lora_A.weight"] = (self.lora_rank, inp)
                    shapes[p + name + ".lora_B.weight"] = (out, self.lora_rank)
        shapes["model.norm.weight"] = (h,)
        if not self.tied:
            shapes["lm_head.weight"] = (self.vocab, h)
        return shapes


# Other spellings of model_config keys, as Hugging Face and MindFormers'
# transformer configs write them.
SPELLINGS = {"num_kv_heads": "n_kv_heads", "num_key_value_heads": "n_kv_heads",
             "num_query_groups": "n_kv_heads", "num_hidden_layers": "num_layers",
             "num_attention_heads": "num_heads", "rope_theta": "theta",
             "kv_channels": "head_dim", "ffn_hidden_size": "intermediate_size",
             "params_dtype": "param_init_type",
             "layernorm_compute_dtype": "layernorm_compute_type",
             "softmax_compute_dtype": "softmax_compute_type",
             "add_qkv_bias": "qkv_has_bias", "attention_bias": "qkv_has_bias",
             "use_qk_norm": "qk_layernorm", "use_cache": "use_past"}


def hugging_face_model_config(path, root, yaml_cfg):
    """MindFormers' newest configs: config.json (and generation_config.json)
    of pretrained_model_dir, the YAML's keys winning; keys renamed to
    MindFormers' spellings and the model family's fixed settings added."""
    merged = {}
    folder = root.get("pretrained_model_dir")
    if folder:
        folder = os.path.join(os.path.dirname(os.path.abspath(path)), folder)
        with open(os.path.join(folder, "config.json")) as f:
            merged.update(json.load(f))
        generation = os.path.join(folder, "generation_config.json")
        if os.path.exists(generation):
            with open(generation) as f:
                merged.update({k: v for k, v in json.load(f).items()
                               if k in ("eos_token_id", "bos_token_id", "pad_token_id")})
    merged.update(yaml_cfg)
    cfg = {SPELLINGS.get(k, k): v for k, v in merged.items()}
    model_type = cfg.get("model_type")
    if model_type is None:
        architecture = cfg["architectures"][0]
        model_type = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2",
                      "Qwen3ForCausalLM": "qwen3", "Qwen2MoeForCausalLM": "qwen2_moe",
                      "Qwen3MoeForCausalLM": "qwen3_moe",
                      "MixtralForCausalLM": "mixtral"}[architecture]
        cfg["model_type"] = model_type
    cfg.setdefault("qkv_has_bias", model_type in ("qwen2", "qwen2_moe"))
    cfg.setdefault("qk_layernorm", model_type in ("qwen3", "qwen3_moe"))
    scaling = cfg.get("rope_scaling")
    if scaling:
        kind = scaling.get("rope_type", scaling.get("type"))
        if kind in ("llama3", "linear"):
            cfg["extend_method"] = "LLAMA3" if kind == "llama3" else "linear"
            cfg["scaling_factor"] = scaling
    return cfg


# ---------------------------------------------------------------- safetensors

ST_DTYPES = {"F32": (np.float32, torch.float32), "F16": (np.float16, torch.float16),
             "BF16": (None, torch.bfloat16), "I8": (np.int8, torch.int8)}


def save_safetensors(path, tensors, metadata=None):
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name, tensor in tensors.items():
        if tensor.dtype == torch.bfloat16:
            raw = tensor.contiguous().view(torch.int16).numpy().tobytes()
            tag = "BF16"
        else:
            raw = tensor.contiguous().numpy().tobytes()
            tag = {torch.float32: "F32", torch.float16: "F16", torch.int8: "I8"}[tensor.dtype]
        header[name] = {"dtype": tag, "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    base = 8 + size
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = data[base + begin:base + end]
        if info["dtype"] == "BF16":
            t = torch.frombuffer(bytearray(raw), dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.from_numpy(np.frombuffer(raw, dtype=ST_DTYPES[info["dtype"]][0]).copy())
        tensors[name] = t.reshape(info["shape"])
    return tensors


# ---------------------------------------------------------------- quantization

def rtn_int8(weight, dtype):
    """Golden-stick's RTN of an [N, K] weight (MindFormers' quant_method rtn):
    per row, scale = 2 max|w| / 255 in `dtype` (the compute dtype), q =
    clamp(round-half-even(w / scale), -128, 127). Returns (q, scale)."""
    w = weight.to(dtype).float()  # the weight as the compute dtype holds it
    scale = (2.0 * w.abs().amax(dim=1) / 255.0).to(dtype).float()
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.clamp(torch.round(w / safe[:, None]), -128, 127)
    q = torch.where(scale[:, None] > 0, q, torch.zeros_like(q))
    return q.to(torch.int8), scale.to(dtype)


def rtn_int4(weight, dtype, group):
    """Golden-stick's min-max int4 quantizer of an [N, K] weight per group
    of `group` columns (MindFormers' weight-only ptq, weight_dtype int4):
    scale = 2 max|w| / 15 per row and group in `dtype`, q =
    clamp(round-half-even(w / scale), -8, 7). Returns (q [N, K], scale
    [N, K / group])."""
    w = weight.to(dtype).float()
    n, k = w.shape
    blocks = w.reshape(n, k // group, group)
    scale = (2.0 * blocks.abs().amax(dim=2) / 15.0).to(dtype).float()
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.clamp(torch.round(blocks / safe[:, :, None]), -8, 7)
    q = torch.where(scale[:, :, None] > 0, q, torch.zeros_like(q))
    return q.reshape(n, k).to(torch.int8), scale.to(dtype)


def quantized_linear_names(w, exclude):
    """The Linear weights mf-quantize-weights quantizes: the 2-D
    projections (and an untied lm_head) whose name holds none of `exclude`."""
    names = [name for name, t in w.items()
             if t.dim() == 2 and (name.endswith("proj.weight") or name == "lm_head.weight")
             and not any(part in name for part in exclude)]
    # A tied embedding table is the lm_head too: quantized unless lm_head
    # is excluded (its lookups read the quantized rows).
    if ("lm_head.weight" not in w and "model.embed_tokens.weight" in w
            and not any(part in "lm_head.weight" or part in "model.embed_tokens.weight"
                        for part in exclude)):
        names.append("model.embed_tokens.weight")
    return names


def apply_rtn_int8(w, exclude, dtype):
    """The weights as a W8A16 model computes with them: each quantized
    weight replaced by q * scale."""
    for name in quantized_linear_names(w, exclude):
        q, scale = rtn_int8(w[name], dtype)
        w[name] = (q.float() * scale.float()[:, None]).to(w[name].dtype)
    return w


def apply_rtn_int4(w, exclude, dtype, group):
    """The same for a W4A16 model (int4, scales per group of columns)."""
    for name in quantized_linear_names(w, exclude):
        q, scale = rtn_int4(w[name], dtype, group)
        n, k = q.shape
        value = q.float().reshape(n, k // group, group) * scale.float()[:, :, None]
        w[name] = value.reshape(n, k).to(w[name].dtype)
    return w


# The weights whose products quantize their rows per token (W8A8:
# --w8a8), filled by apply_w8a8.
INT8_ROWS = set()
# With --tp-ranks T: the row-parallel projections (o_proj, down_proj) quantize
# each rank's block of K / T channels of a token with its own scale, as a
# row-parallel rank does (golden-stick's DynamicQuantCell on its block).
ROW_PARALLEL_BLOCKS = 1


def row_parallel(name):
    return name.endswith("o_proj.weight") or name.endswith("down_proj.weight")


def quantize_per_token(x):
    """MindSpore's DynamicQuant (golden-stick's W8A8, act_quant_granularity
    per_token) as mf.dynamic_quantize computes it: per row, scale = max|x| /
    127 in x's dtype, q = clamp(round-half-even(x / scale), -128, 127); the
    rows the matmul then multiplies, q * scale, in x's dtype."""
    dtype = x.dtype
    x32 = x.float()
    scale = (x32.abs().amax(dim=-1, keepdim=True) / 127.0).to(dtype).float()
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.clamp(torch.round(x32 / safe), -128, 127)
    q = torch.where(scale > 0, q, torch.zeros_like(q))
    return (q * scale).to(dtype)


# The weights whose products quantize their rows with calibrated static
# scales (SmoothQuant: --smooth-quant), by name: (input scales [K], zero
# point, bias [N], the weight's f32 values), filled by apply_smooth_quant.
STATIC_ROWS = {}


def times_weight(x, name, weight):
    """x @ weight.T, the rows quantized per token first when `name` is a
    W8A8 weight, or with its static scales and zero point (and the bias
    that corrects for it added) when it is a SmoothQuant one."""
    if name in STATIC_ROWS:
        # The int8 product in f32 (the weight's f32 values), then in x's
        # dtype with the bias.
        scales, zero_point, bias, weight32 = STATIC_ROWS[name]
        q = torch.clamp(torch.round(x.float() / scales.float() + zero_point), -128, 127)
        return (q @ weight32.T).to(x.dtype) + bias
    if name in INT8_ROWS:
        blocks = ROW_PARALLEL_BLOCKS if row_parallel(name) else 1
        shape = x.shape
        x = quantize_per_token(x.reshape(*shape[:-1], blocks, shape[-1] // blocks))
        x = x.reshape(shape)
    return x @ weight.T


def apply_smooth_quant(w, exclude, dtype, calibration, alpha):
    """Golden-stick's SmoothQuant from the activation ranges `calibration`
    holds (mf-run --task calibrate), as docs/quantization.md writes it: the
    smoothing factors s = max|x|^alpha / max|W|^(1 - alpha) per input
    channel (1 where either is 0, at least 1e-5; none for alpha < 0), the
    activations' per-tensor asymmetric scale and zero point after smoothing,
    the smoothed weight (in `dtype`) quantized per row as RTN, its scales
    times the activations' (f32), and the bias -zp * scale * sum(q)."""
    ranges = load_safetensors(calibration)
    for name in quantized_linear_names(w, exclude):
        low, high = ranges[name + ".input_min"].float(), ranges[name + ".input_max"].float()
        weight = w[name].to(dtype).float()
        if alpha >= 0:
            activation = torch.maximum(low.abs(), high.abs())
            numerator = activation.pow(alpha)
            denominator = weight.abs().amax(dim=0).pow(1.0 - alpha)
            smooth = torch.where((numerator == 0) | (denominator == 0), torch.ones_like(numerator),
                                 torch.clamp(numerator / denominator, min=1e-5))
        else:
            smooth = torch.ones_like(low)
        lo = min(0.0, float((low / smooth).min().double()))
        hi = max(0.0, float((high / smooth).max().double()))
        scale, zero_point = 1.0, 0.0
        if hi != lo:
            scale = (hi - lo) / 255.0
            zero_point = float(min(max(round(-128.0 - lo / scale), -128), 127))
        scale32 = torch.tensor(scale, dtype=torch.float32)
        input_scales = (scale32 * smooth).to(dtype)
        q, row_scale = rtn_int8((weight * smooth).to(dtype), dtype)
        combined = scale32 * row_scale.float()
        bias = (-zero_point * q.double().sum(dim=1) * combined.double()).to(dtype)
        STATIC_ROWS[name] = (input_scales, zero_point, bias, q.float() * combined[:, None])
    return w


# An int8 KV cache's scales by layer: (key scales, value scales), each
# [kv_heads, head_dim] (--kv-int8), filled by load_kv_scales.
KV_SCALES = {}


def load_kv_scales(calibration, dtype, layers):
    """Golden-stick's symmetric per-channel KV-cache scales from the ranges
    `calibration` holds for each attention's keys and values (mfc's
    `<attention path>.key` / `.value`): max(|min|, |max|) * 2 / 255 in f64,
    in `dtype`; 1 for a channel that was always 0."""
    ranges = load_safetensors(calibration)
    for i in range(layers):
        scales = []
        for what in ("key", "value"):
            name = f"model.layers.{i}.attention.attention_core.{what}"
            low, high = ranges[name + ".input_min"].double(), ranges[name + ".input_max"].double()
            largest = torch.maximum(low.abs(), high.abs())
            scale = torch.where(largest > 0, largest * 2.0 / 255.0, torch.ones_like(largest))
            scales.append(scale.to(torch.float32).to(dtype))
        KV_SCALES[i] = tuple(scales)


def through_int8_cache(x, scales):
    """Keys or values [b, s, kv_heads, head_dim] as an int8 cache holds and
    gives them back: q = clamp(round-half-even(x / scale), -128, 127) in f32,
    read as q * scale in f32."""
    s = scales.float().reshape(-1)
    shape = x.shape
    x32 = x.float().reshape(shape[0], shape[1], -1)
    q = torch.clamp(torch.round(x32 / s), -128, 127)
    return (q * s).reshape(shape)


def apply_w8a8(w, exclude, dtype):
    """W8A8 (per-token activations): the weights as W8A16, and their
    products' rows quantized per token."""
    INT8_ROWS.update(quantized_linear_names(w, exclude))
    return apply_rtn_int8(w, exclude, dtype)


# ---------------------------------------------------------------- models

def rms_norm(x, w, eps):
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return w.float() * x32


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_frequencies(theta, dim, extend_method, scaling_factor):
    """RoPE's inverse frequencies with MindFormers' context extensions
    (its FreqsMgr): NTK raises theta, PI divides positions by the factor,
    linear divides the frequencies, LLAMA3 divides the low ones and ramps."""
    if extend_method == "NTK":
        theta *= scaling_factor
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    if extend_method == "PI":
        inv_freq = inv_freq / scaling_factor
    elif extend_method == "linear":
        inv_freq = inv_freq / scaling_factor["factor"]
    elif extend_method == "LLAMA3":
        factor = scaling_factor["factor"]
        low, high = scaling_factor["low_freq_factor"], scaling_factor["high_freq_factor"]
        old = scaling_factor["original_max_position_embeddings"]
        scaled = []
        for freq in inv_freq.tolist():
            wavelen = 2 * math.pi / freq
            if wavelen < old / high:
                scaled.append(freq)
            elif wavelen > old / low:
                scaled.append(freq / factor)
            else:
                smooth = (old / wavelen - low) / (high - low)
                scaled.append((1 - smooth) * freq / factor + smooth * freq)
        inv_freq = torch.tensor(scaled, dtype=torch.float64)
    return inv_freq.float()


def rope(x, positions, inv_freq):
    # x: [batch, seq, heads, dim]; positions: [seq]
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]
    x32 = x.float()
    return x32 * cos + rotate_half(x32) * sin


def causal_attention(q, k, v):
    # q: [b, s, h, d]; k, v: [b, s, kvh, d]
    group = q.shape[2] // k.shape[2]
    k = k.repeat_interleave(group, dim=2)
    v = v.repeat_interleave(group, dim=2)
    q, k, v = (t.transpose(1, 2).float() for t in (q, k, v))
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = q.shape[2]
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2)


# MindFormers' module paths of the LLaMA projections, which pet_config's
# target_modules regex matches.
MF_PROJECTIONS = {"self_attn.q_proj": "attention.wq", "self_attn.k_proj": "attention.wk",
                  "self_attn.v_proj": "attention.wv", "self_attn.o_proj": "attention.wo",
                  "mlp.gate_proj": "feed_forward.w1", "mlp.down_proj": "feed_forward.w2",
                  "mlp.up_proj": "feed_forward.w3"}


def llama_layer(cfg, w, i, x, positions):
    c = cfg.compute_dtype
    b, s = x.shape[0], x.shape[1]
    p = f"model.layers.{i}."

    def linear(inp, name, bias=False):
        out = times_weight(inp.to(c), p + name + ".weight", w[p + name + ".weight"].to(c))
        if bias:
            out = out + w[p + name + ".bias"].to(c)
        if cfg.lora_targets(f"model.layers.{i}." + MF_PROJECTIONS[name]):
            a, bb = w[p + name + ".lora_A.weight"].to(c), w[p + name + ".lora_B.weight"].to(c)
            out = out + cfg.lora_scale * ((inp.to(c) @ a.T) @ bb.T)
        return out

    h = rms_norm(x, w[p + "input_layernorm.weight"], cfg.eps).to(c)
    q = linear(h, "self_attn.q_proj", cfg.qkv_bias).reshape(b, s, cfg.heads, cfg.head_dim)
    k = linear(h, "self_attn.k_proj", cfg.qkv_bias).reshape(b, s, cfg.kv_heads, cfg.head_dim)
    v = linear(h, "self_attn.v_proj", cfg.qkv_bias).reshape(b, s, cfg.kv_heads, cfg.head_dim)
    if cfg.qk_norm:  # Qwen3: each head's query and key normalized
        q = rms_norm(q, w[p + "self_attn.q_norm.weight"], cfg.eps).to(c)
        k = rms_norm(k, w[p + "self_attn.k_norm.weight"], cfg.eps).to(c)
    q = rope(q, positions, cfg.inv_freq).to(c)
    k = rope(k, positions, cfg.inv_freq).to(c)
    if i in KV_SCALES:  # the attention reads what an int8 cache holds
        k = through_int8_cache(k, KV_SCALES[i][0])
        v = through_int8_cache(v, KV_SCALES[i][1])
    a = causal_attention(q, k, v).to(c).reshape(b, s, cfg.heads * cfg.head_dim)
    x = x + linear(a, "self_attn.o_proj")
    h = rms_norm(x, w[p + "post_attention_layernorm.weight"], cfg.eps).to(c)
    if cfg.routed(i):
        return x + sparse_moe_block(cfg, w, p, h.reshape(b * s, -1)).reshape(b, s, -1)
    gate, up = linear(h, "mlp.gate_proj"), linear(h, "mlp.up_proj")
    return x + linear((torch.nn.functional.silu(gate.float()) * up.float()).to(c), "mlp.down_proj")


def sparse_moe_block(cfg, w, p, h):
    """Hugging Face's Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock: a
    softmax router in float32, top-k (renormalized when norm_topk_prob),
    then each expert over the tokens that chose it, weighted, summed."""
    c = cfg.compute_dtype
    block = p + ("block_sparse_moe." if cfg.mixtral else "mlp.")
    names = ("w1", "w3", "w2") if cfg.mixtral else ("gate_proj", "up_proj", "down_proj")
    logits = h.to(c) @ w[block + "gate.weight"].to(c).T
    if cfg.aux_coef:
        cfg.router_logits.append(logits)
    probs = torch.softmax(logits.float(), dim=1)
    weights, chosen = torch.topk(probs, cfg.experts_per_token, dim=-1)
    if cfg.norm_topk_prob:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + cfg.norm_eps)
    if cfg.scale_normalized or not cfg.norm_topk_prob:
        weights = weights * cfg.routed_scale
    if cfg.capacity:
        # MindFormers' TopkRouterV2: an expert keeps its first `capacity`
        # (token, choice) pairs in priority order (token order with
        # enable_sdrop, else every first choice before any second); a
        # dropped pair contributes nothing, the others keep their weight.
        tokens, k = chosen.shape
        order = [(t, j) for t in range(tokens) for j in range(k)] if cfg.sequence_drop \
            else [(t, j) for j in range(k) for t in range(tokens)]
        taken, keep = [0] * cfg.num_experts, torch.ones(tokens, k)
        for t, j in order:
            e = int(chosen[t, j])
            if taken[e] >= cfg.capacity:
                keep[t, j] = 0
            taken[e] += 1
        weights = weights * keep
    weights = weights.to(c)
    out = torch.zeros_like(h, dtype=torch.float32)
    for e in range(cfg.num_experts):
        token, slot = torch.where(chosen == e)
        if token.numel() == 0:
            continue
        x = h[token].to(c)
        expert = lambda name: w[f"{block}experts.{e}.{name}.weight"].to(c)
        y = (torch.nn.functional.silu((x @ expert(names[0]).T).float()) *
             (x @ expert(names[1]).T).float()).to(c) @ expert(names[2]).T
        out.index_add_(0, token, (y * weights[token, slot, None]).float())
    out = out.to(c)
    if cfg.shared_width:  # Qwen2-MoE: a shared expert behind a sigmoid gate
        x = h.to(c)
        q = p + "mlp.shared_expert."
        shared = (torch.nn.functional.silu((x @ w[q + "gate_proj.weight"].to(c).T).float()) *
                  (x @ w[q + "up_proj.weight"].to(c).T).float()).to(c) @ \
            w[q + "down_proj.weight"].to(c).T
        if cfg.shared_gated:
            shared = torch.sigmoid(x @ w[p + "mlp.shared_expert_gate.weight"].to(c).T) * shared
        out = out + shared
    return out


def load_balancing_loss(cfg):
    """transformers' load_balancing_loss_func (Mixtral, Qwen3-MoE) over the
    router logits of every routed layer since the last call, without an
    attention mask: E * sum over choices and experts of the share of tokens
    routed there times the mean router probability."""
    logits = torch.cat(cfg.router_logits, dim=0)
    cfg.router_logits.clear()
    probs = torch.softmax(logits.float(), dim=-1)
    _, chosen = torch.topk(probs, cfg.experts_per_token, dim=-1)
    mask = torch.nn.functional.one_hot(chosen, cfg.num_experts).float()
    return torch.sum(mask.mean(dim=0) * probs.mean(dim=0)[None, :]) * cfg.num_experts


def llama_logits(cfg, w, ids, checkpoint=False):
    """checkpoint: each layer under torch.utils.checkpoint (its input kept,
    the rest recomputed in the backward), as full recompute does."""
    c = cfg.compute_dtype
    x = w["model.embed_tokens.weight"][ids].to(torch.float32 if cfg.fp32_residual else c)
    positions = torch.arange(ids.shape[1])
    for i in range(cfg.layers):
        if checkpoint:
            x = torch.utils.checkpoint.checkpoint(llama_layer, cfg, w, i, x, positions,
                                                  use_reentrant=False)
        else:
            x = llama_layer(cfg, w, i, x, positions)
    x = rms_norm(x, w["model.norm.weight"], cfg.eps).to(c)
    head = "model.embed_tokens.weight" if cfg.tied else "lm_head.weight"
    return times_weight(x, head, w[head].to(c)).float()


def layer_norm(x, weight, bias, eps):
    return torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), weight.float(),
                                          bias.float(), eps)


def gpt2_lora_sites(cfg, i):
    """GPT-2's LoRA adapters of layer i that target_modules selects, by
    Hugging Face path or MindFormers' module name (dense1-3 are q, k, v of
    the fused c_attn): {name: (in, out, q/k/v index or None)}."""
    h, mf = cfg.hidden, f"backbone.blocks.{i}."
    sites = {"attn.c_attn": (h, 3 * h, None, None),
             "attn.c_attn.q": (h, h, 0, mf + "attention.dense1"),
             "attn.c_attn.k": (h, h, 1, mf + "attention.dense2"),
             "attn.c_attn.v": (h, h, 2, mf + "attention.dense3"),
             "attn.c_proj": (h, h, None, mf + "attention.projection"),
             "mlp.c_fc": (h, cfg.ffn, None, mf + "output.mapping"),
             "mlp.c_proj": (cfg.ffn, h, None, mf + "output.projection")}
    hf = f"transformer.h.{i}."
    return {name: (inp, out, part) for name, (inp, out, part, alias) in sites.items()
            if (part is None and cfg.lora_targets(hf + name))
            or (alias is not None and cfg.lora_targets(alias))}


def gpt2_logits(cfg, w, ids):
    c = cfg.compute_dtype
    b, s = ids.shape
    x = (w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][torch.arange(s)][None]).to(c)
    for i in range(cfg.layers):
        p = f"transformer.h.{i}."
        sites = gpt2_lora_sites(cfg, i)

        def lora(inp, name):
            a, bb = w[p + name + ".lora_A.weight"].to(c), w[p + name + ".lora_B.weight"].to(c)
            return cfg.lora_scale * ((inp.to(c) @ a.T) @ bb.T)

        def conv1d(inp, name):
            out = inp.to(c) @ w[p + name + ".weight"].to(c) + w[p + name + ".bias"].to(c)
            return out + lora(inp, name) if name in sites else out

        h = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], cfg.ln_eps).to(c)
        qkv = list(conv1d(h, "attn.c_attn").split(cfg.hidden, dim=-1))
        for index, name in enumerate(("attn.c_attn.q", "attn.c_attn.k", "attn.c_attn.v")):
            if name in sites:
                qkv[index] = qkv[index] + lora(h, name)
        q, k, v = (t.reshape(b, s, cfg.heads, cfg.head_dim) for t in qkv)
        a = causal_attention(q, k, v).to(c).reshape(b, s, cfg.heads * cfg.head_dim)
        x = x + conv1d(a, "attn.c_proj")
        h = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], cfg.ln_eps).to(c)
        expanded = conv1d(h, "mlp.c_fc").float()
        if cfg.hidden_act == "fast_gelu":
            m = (expanded * torch.sigmoid(1.702 * expanded)).to(c)
        else:
            m = torch.nn.functional.gelu(expanded, approximate="tanh").to(c)
        x = x + conv1d(m, "mlp.c_proj")
    x = layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], cfg.ln_eps).to(c)
    return (x @ w["transformer.wte.weight"].to(c).T).float()


def logits_of(cfg, w, ids, checkpoint=False):
    if cfg.gpt2:
        assert not checkpoint, "per-layer checkpointing is written for LLaMA"
        return gpt2_logits(cfg, w, ids)
    return llama_logits(cfg, w, ids, checkpoint)


# ---------------------------------------------------------------- commands

def load_npy(path):
    return torch.from_numpy(np.load(path))


def report(what, actual, expected, rtol, atol):
    diff = (actual - expected).abs()
    allowed = atol + rtol * expected.abs()
    worst = (diff - allowed).max().item()
    print(f"{what}: shape {tuple(actual.shape)}, max abs error {diff.max().item():.3e}, "
          f"max |expected| {expected.abs().max().item():.3e}, rtol {rtol}, atol {atol}: "
          + ("OK" if worst <= 0 else "MISMATCH"))
    return worst <= 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["make-weights", "logits", "generate", "loss", "grads",
                                            "train"])
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("config")
    parser.add_argument("weights")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--std", type=float, default=0.1)
    parser.add_argument("--dtype", choices=list(DTYPES))
    parser.add_argument("--input-ids")
    parser.add_argument("--new-tokens", type=int, default=0)
    parser.add_argument("--data")
    parser.add_argument("--actual")
    parser.add_argument("--step-logits")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("--rtn-int8", action="store_true",
                        help="compute with the Linear weights RTN-quantized to int8 (W8A16)")
    parser.add_argument("--rtn-int4", type=int, metavar="GROUP",
                        help="compute with the Linear weights quantized to int4 in groups of "
                             "GROUP columns (W4A16)")
    parser.add_argument("--w8a8", action="store_true",
                        help="compute with the Linear weights RTN-quantized to int8 and "
                             "their rows quantized per token (W8A8)")
    parser.add_argument("--tp-ranks", type=int, default=1, metavar="T",
                        help="with --w8a8: the row-parallel projections quantize each "
                             "of T blocks of a token's channels per token (T "
                             "tensor-parallel ranks)")
    parser.add_argument("--smooth-quant", metavar="CALIBRATION",
                        help="compute as SmoothQuant with the activation ranges of this file "
                             "(mf-run --task calibrate's)")
    parser.add_argument("--smooth-alpha", type=float, default=0.5,
                        help="with --smooth-quant: the migration strength (negative: no "
                             "smoothing)")
    parser.add_argument("--kv-int8", metavar="CALIBRATION",
                        help="compute with an int8 KV cache whose scales come from the ranges "
                             "of this file (mf-run --task calibrate's)")
    parser.add_argument("--not-convert", action="append", default=[],
                        help="with --rtn-int8/--rtn-int4/--w8a8: weights whose name contains this "
                             "stay float")
    args = parser.parse_args()
    cfg = Config(args.config, args.overrides)

    if args.command == "make-weights":
        generator = torch.Generator().manual_seed(args.seed)
        dtype = DTYPES[args.dtype] if args.dtype else cfg.param_dtype
        tensors = {}
        for name, shape in cfg.parameter_shapes().items():
            if name.endswith("norm.weight") or ".ln_" in name and name.endswith("weight"):
                t = 1.0 + 0.1 * torch.randn(shape, generator=generator)
            else:
                t = args.std * torch.randn(shape, generator=generator)
            tensors[name] = t.to(dtype)
        save_safetensors(args.weights, tensors)
        print(f"wrote {len(tensors)} tensors to {args.weights}")
        return 0

    w = load_safetensors(args.weights)
    w = {name: t.to(cfg.param_dtype) for name, t in w.items()}
    if args.rtn_int8:
        w = apply_rtn_int8(w, args.not_convert, cfg.compute_dtype)
    if args.rtn_int4:
        w = apply_rtn_int4(w, args.not_convert, cfg.compute_dtype, args.rtn_int4)
    global ROW_PARALLEL_BLOCKS
    ROW_PARALLEL_BLOCKS = args.tp_ranks
    if args.w8a8:
        w = apply_w8a8(w, args.not_convert, cfg.compute_dtype)
    if args.smooth_quant:
        w = apply_smooth_quant(w, args.not_convert, cfg.compute_dtype, args.smooth_quant,
                               args.smooth_alpha)
    if args.kv_int8:
        load_kv_scales(args.kv_int8, cfg.compute_dtype, cfg.layers)
    if args.command == "logits":
        ids = torch.tensor([[int(t) for t in args.input_ids.split(",")]] * cfg.batch)
        expected = logits_of(cfg, w, ids)
        return 0 if report("prefill logits", load_npy(args.actual), expected, args.rtol, args.atol) else 1

    if args.command == "generate":
        # Greedy decoding that recomputes the whole prefix at every step.
        ids = [int(t) for t in args.input_ids.split(",")]
        expected, rows = [], []
        for _ in range(args.new_tokens):
            row = logits_of(cfg, w, torch.tensor([ids]))[0, -1]
            rows.append(row)
            expected.append(int(row.argmax()))
            ids.append(expected[-1])
            if expected[-1] in cfg.eos:
                break
        actual = [int(t) for t in re.findall(r"-?\d+", args.actual.split("ids:", 1)[1])]
        ok = actual == expected
        print(f"greedy tokens: expected {expected}, got {actual}: " + ("OK" if ok else "MISMATCH"))
        if args.step_logits:
            ok &= report("logits of every step (KV cache vs recomputed prefix)",
                         load_npy(args.step_logits), torch.stack(rows), args.rtol, args.atol)
        return 0 if ok else 1

    if args.command == "loss":
        with open(args.data, "rb") as f:
            tokens = list(f.read())
        seq = cfg.seq
        windows = (len(tokens) - 1) // seq
        total, count = 0.0, 0
        for start in range(windows):
            chunk = torch.tensor(tokens[start * seq:start * seq + seq + 1])
            logits = logits_of(cfg, w, chunk[None, :-1])[0]
            loss = torch.nn.functional.cross_entropy(logits, chunk[1:], reduction="sum",
                                                     ignore_index=cfg.ignore_index)
            total += loss.item()
            count += seq
        expected = total / count
        actual = float(re.search(r"loss ([-+0-9.eE]+)", args.actual).group(1))
        ok = abs(actual - expected) <= args.atol + args.rtol * abs(expected)
        print(f"eval loss: expected {expected:.6f}, got {actual:.6f}: " + ("OK" if ok else "MISMATCH"))
        return 0 if ok else 1

    if args.command == "grads":
        # The batch mf-run builds from --input-ids: the sequence in every row,
        # padded, labels shifted by one with the padding ignored.
        sequence = [int(t) for t in args.input_ids.split(",")]
        ids = sequence[:cfg.seq] + [cfg.pad] * (cfg.seq - min(cfg.seq, len(sequence)))
        labels = sequence[1:cfg.seq + 1]
        labels += [cfg.ignore_index] * (cfg.seq - len(labels))
        ids = torch.tensor([ids] * cfg.batch)
        labels = torch.tensor([labels] * cfg.batch)
        torch.set_grad_enabled(True)
        for t in w.values():
            t.requires_grad_(True)
        logits = logits_of(cfg, w, ids)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab).float(),
                                                 labels.reshape(-1),
                                                 ignore_index=cfg.ignore_index)
        if getattr(cfg, "aux_coef", 0.0):
            loss = loss + cfg.aux_coef * load_balancing_loss(cfg)
        loss.backward()
        actual = load_safetensors(args.actual)
        ok = report("loss", actual.pop("__loss__").float().reshape(()), loss.detach(),
                    args.rtol, args.atol)
        worst_name, worst = "", 0.0
        trained = {n: t for n, t in w.items()
                   if cfg.lora_pattern is None or ".lora_" in n}
        for name, t in trained.items():
            expected = t.grad if t.grad is not None else torch.zeros_like(t)
            got = actual.pop(name).float()
            scale = expected.abs().max().item() or 1.0
            error = (got - expected.float()).abs().max().item() / scale
            if error > worst:
                worst_name, worst = name, error
            if error > args.rtol:
                print(f"gradient of {name}: max error {error:.3e} of its largest "
                      f"entry {scale:.3e}: MISMATCH")
                ok = False
        if actual:
            print(f"unexpected gradients: {sorted(actual)}: MISMATCH")
            ok = False
        print(f"gradients of {len(trained)} parameters: worst max error / max |gradient| "
              f"{worst:.3e} ({worst_name}), rtol {args.rtol}: " + ("OK" if ok else "MISMATCH"))
        return 0 if ok else 1

    if args.command == "train":
        # mf-run's batches: consecutive windows of batch x seq (+1) tokens of
        # the data, wrapping at its end; accumulated micro-batches averaged;
        # clipping, the schedule, then the optimizer.
        with open(args.data, "rb") as f:
            tokens = list(f.read())
        per_batch = cfg.batch * cfg.seq
        torch.set_grad_enabled(True)
        # LoRA trains the adapters only; the base stays frozen.
        trained = {n: t for n, t in w.items() if cfg.lora_pattern is None or ".lora_" in n}
        params = [t.requires_grad_(True) for t in trained.values()]
        if cfg.optimizer == "AdamW":
            optimizer = torch.optim.AdamW(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.adam_eps,
                                          weight_decay=cfg.weight_decay)
        state = {id(p): (torch.zeros_like(p), torch.zeros_like(p)) for p in params}
        position = 0
        for step in range(args.steps):
            for p in params:
                p.grad = None
            for _ in range(cfg.accumulation):
                if position + per_batch + 1 > len(tokens):
                    position = 0
                chunk = torch.tensor(tokens[position:position + per_batch + 1])
                position += per_batch
                ids = chunk[:-1].reshape(cfg.batch, cfg.seq)
                labels = chunk[1:].reshape(cfg.batch, cfg.seq)
                logits = logits_of(cfg, w, ids)
                loss = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, cfg.vocab).float(), labels.reshape(-1),
                    ignore_index=cfg.ignore_index)
                if getattr(cfg, "aux_coef", 0.0):
                    loss = loss + cfg.aux_coef * load_balancing_loss(cfg)
                loss = loss / cfg.accumulation
                loss.backward()
            if cfg.clip:
                torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            lr = cfg.learning_rate(step, args.steps)
            with torch.no_grad():
                if cfg.optimizer == "AdamW":
                    optimizer.param_groups[0]["lr"] = lr
                    optimizer.step()
                else:  # MindSpore's AdamWeightDecay: no bias correction
                    b1, b2 = cfg.betas
                    for p in params:
                        m, v = state[id(p)]
                        m.mul_(b1).add_(p.grad, alpha=1 - b1)
                        v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                        p.sub_(lr * (m / (v.sqrt() + cfg.adam_eps) + cfg.weight_decay * p))
        actual = load_safetensors(args.actual)
        ok, worst, worst_name = True, 0.0, ""
        saved = {n for n in actual if not n.startswith("optimizer.")}
        if saved != set(trained):
            print(f"the checkpoint holds {sorted(saved ^ set(trained))[:4]} unexpectedly "
                  f"(it should hold the trained parameters): MISMATCH")
            ok = False
        for name, t in trained.items():
            got = actual[name].float()
            error = (got - t.detach()).abs().max().item() / (t.detach().abs().max().item() or 1.0)
            if error > worst:
                worst, worst_name = error, name
            ok &= error <= args.rtol
        print(f"{len(trained)} parameters after {args.steps} {cfg.optimizer} steps: worst max error / "
              f"max |parameter| {worst:.3e} ({worst_name}), rtol {args.rtol}: "
              + ("OK" if ok else "MISMATCH"))
        return 0 if ok else 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
