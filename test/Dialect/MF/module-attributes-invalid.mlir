// RUN: mf-opt %s --split-input-file --verify-diagnostics
// The module's settings are verified attributes of the mf dialect.

// expected-error @+2 {{expected one of [AdamW, AdamWeightDecay, FP32StateAdamWeightDecay, FusedAdamWeightDecay] for MindFormers' AdamW variants, got: SGD}}
// expected-error @+1 {{failed to parse MF_OptimizerAttr parameter 'kind'}}
module attributes {mf.run_mode = #mf.run_mode<train>, mf.optimizer = #mf.optimizer<kind = SGD, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, gradient_accumulation_steps = 1>} {
}

// -----

// expected-error @+1 {{struct is missing required parameter: eps}}
module attributes {mf.run_mode = #mf.run_mode<train>, mf.optimizer = #mf.optimizer<kind = AdamW, beta1 = 0.9 : f64, beta2 = 0.999 : f64, weight_decay = 0.0 : f64, gradient_accumulation_steps = 1>} {
}

// -----

// expected-error @+1 {{optimizer beta1 must be in [0, 1), got 1}}
module attributes {mf.run_mode = #mf.run_mode<train>, mf.optimizer = #mf.optimizer<kind = AdamW, beta1 = 1.0 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, gradient_accumulation_steps = 1>} {
}

// -----

// expected-error @+1 {{optimizer gradient_accumulation_steps and gradient_aggregation_group must be at least 1}}
module attributes {mf.run_mode = #mf.run_mode<train>, mf.optimizer = #mf.optimizer<kind = AdamW, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, gradient_accumulation_steps = 1, gradient_aggregation_group = 0>} {
}

// -----

// expected-error @+1 {{optimizer max_grad_norm must be positive (leave it out for no clipping)}}
module attributes {mf.run_mode = #mf.run_mode<train>, mf.optimizer = #mf.optimizer<kind = AdamW, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, gradient_accumulation_steps = 1, max_grad_norm = 0.0 : f64>} {
}

// -----

// expected-error @+1 {{'mf.optimizer' belongs to a training module (mf.run_mode train or finetune)}}
module attributes {mf.run_mode = #mf.run_mode<predict>, mf.optimizer = #mf.optimizer<kind = AdamW, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, gradient_accumulation_steps = 1>} {
}

// -----

// expected-error @+1 {{'mf.run_mode' must be #mf.run_mode<...>, got "train"}}
module attributes {mf.run_mode = "train"} {
}

// -----

// expected-error @+2 {{expected ::mlir::mf::RunMode to be one of: predict, train, finetune, eval}}
// expected-error @+1 {{failed to parse MF_RunModeAttr parameter 'value'}}
module attributes {mf.run_mode = #mf.run_mode<serve>} {
}

// -----

module {
  // expected-error @+1 {{'mf.run_mode' belongs on the module}}
  func.func @f() attributes {mf.run_mode = #mf.run_mode<train>} {
    return
  }
}

// -----

// expected-error @+1 {{'mf.context_mode' must be 0 (graph) or 1 (pynative), got 2}}
module attributes {mf.context_mode = 2 : i64} {
}

// -----

// expected-error @+1 {{unknown attribute 'mf.runmode' of the mf dialect}}
module attributes {mf.runmode = #mf.run_mode<train>} {
}

// -----

module {
  // expected-error @+1 {{'mf.name' of an entry's argument must be a string}}
  func.func @f(%x: tensor<4xf32> {mf.name = 3 : i64}) {
    return
  }
}

// -----

module {
  // expected-error @+1 {{unknown result attribute 'mf.nme' of the mf dialect}}
  func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32> {mf.nme = "y"}) {
    return %x : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{'mf.pipeline_scheduler' must be "1f1b", "gpipe" or "zero_bubble_v"}}
module attributes {mf.pipeline_scheduler = "seqpipe"} {
}

// -----

// expected-error @+1 {{'mf.context_blocks' must be 1 or 2 runs of positions a rank}}
module attributes {mf.context_blocks = 3 : i64} {
}

// -----

// expected-error @+1 {{'mf.pipeline_chunks' above 1 (chunks a stage) is scheduled as interleaved 1F1B or zero_bubble_v; the module's scheduler is 'gpipe'}}
module attributes {mf.pipeline_scheduler = "gpipe", mf.pipeline_chunks = 2 : i64} {
}

// -----

// expected-error @+1 {{'mf.pipeline_chunks' must be a positive chunk count, got 0 : i64}}
module attributes {mf.pipeline_chunks = 0 : i64} {
}

// -----

module attributes {mf.pipeline_chunks = 2 : i64} {
  // expected-error @+1 {{'mf.chunk' must be a chunk index below the module's mf.pipeline_chunks (2), got 2 : i64}}
  func.func @stage0_chunk2_forward() attributes {mf.stage = 0 : i64, mf.chunk = 2 : i64} {
    return
  }
}

// -----

module attributes {mf.pipeline_chunks = 2 : i64} {
  // expected-error @+1 {{'mf.chunk' belongs on a pipeline stage's entry (with 'mf.stage')}}
  func.func @forward() attributes {mf.chunk = 0 : i64} {
    return
  }
}

// -----

// expected-error @+1 {{'mf.pipeline_scheduler' zero_bubble_v places 2 chunks a stage in a V; the module's mf.pipeline_chunks is 3}}
module attributes {mf.pipeline_scheduler = "zero_bubble_v", mf.pipeline_chunks = 3 : i64} {
}

// -----

// The runtime's settings (ModuleSettings.h) and the phases' decisions.

// expected-error @+1 {{model num_heads (6) must be a positive multiple of num_kv_heads (4)}}
module attributes {mf.model = #mf.model<family = llama, seed = 0, batch_size = 1, seq_length = 16, vocab_size = 256, num_layers = 2, num_heads = 6, num_kv_heads = 4, compute_dtype = f32, use_past = true>} {
}

// -----

// expected-error @+1 {{model compute_dtype must be f32, f16 or bf16, got 'i8'}}
module attributes {mf.model = #mf.model<family = llama, seed = 0, batch_size = 1, seq_length = 16, vocab_size = 256, num_layers = 2, num_heads = 4, num_kv_heads = 4, compute_dtype = i8, use_past = true>} {
}

// -----

// expected-error @+1 {{model kv_block_size and kv_num_blocks are both positive (a paged KV cache) or both 0}}
module attributes {mf.model = #mf.model<family = gpt2, seed = 0, batch_size = 1, seq_length = 16, vocab_size = 256, num_layers = 2, num_heads = 4, num_kv_heads = 4, compute_dtype = f32, use_past = true, kv_block_size = 16>} {
}

// -----

// expected-error @+1 {{model batch_size, seq_length, vocab_size and num_layers must be positive}}
module attributes {mf.model = #mf.model<family = llama, seed = 0, batch_size = 1, seq_length = 0, vocab_size = 256, num_layers = 2, num_heads = 4, num_kv_heads = 4, compute_dtype = f32, use_past = false>} {
}

// -----

// expected-error @+1 {{generation top_k must be non-negative and top_p in (0, 1]}}
module attributes {mf.generation = #mf.generation<bos_token_id = 1, eos_token_ids = [2], pad_token_id = 0, ignore_token_id = -100, do_sample = false, top_k = 1, top_p = 1.5 : f64, temperature = 1.0 : f64, repetition_penalty = 1.0 : f64, max_decode_length = 64>} {
}

// -----

// expected-error @+1 {{generation temperature, repetition_penalty and max_decode_length must be positive}}
module attributes {mf.generation = #mf.generation<bos_token_id = 1, eos_token_ids = [2], pad_token_id = 0, ignore_token_id = -100, do_sample = true, top_k = 1, top_p = 1.0 : f64, temperature = 0.0 : f64, repetition_penalty = 1.0 : f64, max_decode_length = 64>} {
}

// -----

// expected-error @+1 {{training lr_schedule must be cosine, linear, polynomial or constant, got "warmup"}}
module attributes {mf.run_mode = #mf.run_mode<train>, mf.training = #mf.training<learning_rate = 1.0e-4 : f64, lr_schedule = "warmup", lr_end = 0.0 : f64, warmup_steps = 0, warmup_ratio = 0.0 : f64, warmup_lr_init = 0.0 : f64, total_steps = -1, power = 1.0 : f64, epochs = 1>} {
}

// -----

// expected-error @+1 {{training warmup_steps must be non-negative, warmup_ratio in [0, 1], total_steps at least -1 (-1 or 0: the run's) and epochs positive}}
module attributes {mf.run_mode = #mf.run_mode<train>, mf.training = #mf.training<learning_rate = 1.0e-4 : f64, lr_schedule = "cosine", lr_end = 0.0 : f64, warmup_steps = 0, warmup_ratio = 2.0 : f64, warmup_lr_init = 0.0 : f64, total_steps = -1, power = 1.0 : f64, epochs = 1>} {
}

// -----

// expected-error @+1 {{'mf.training' belongs to a training module (mf.run_mode train or finetune)}}
module attributes {mf.run_mode = #mf.run_mode<predict>, mf.training = #mf.training<learning_rate = 1.0e-4 : f64, lr_schedule = "cosine", lr_end = 0.0 : f64, warmup_steps = 0, warmup_ratio = 0.0 : f64, warmup_lr_init = 0.0 : f64, total_steps = -1, power = 1.0 : f64, epochs = 1>} {
}

// -----

// expected-error @+1 {{model lora_scale must be positive (leave it out without LoRA)}}
module attributes {mf.model = #mf.model<family = llama, seed = 0, batch_size = 1, seq_length = 16, vocab_size = 256, num_layers = 2, num_heads = 4, num_kv_heads = 4, compute_dtype = f32, use_past = true, lora_scale = 0.0 : f64>} {
}

// -----

// expected-error @+1 {{quantize_weights bits must be 8 or 4, got 2}}
module attributes {mf.quantize_weights = #mf.quantize_weights<bits = 2, activations = "none">} {
}

// -----

// expected-error @+1 {{quantize_weights group_size must be 0 (a scale a row) or positive, and positive for 4 bits}}
module attributes {mf.quantize_weights = #mf.quantize_weights<bits = 4, activations = "none">} {
}

// -----

// expected-error @+1 {{quantize_weights activations must be "none", "per-token" or "per-tensor", got "per-row"}}
module attributes {mf.quantize_weights = #mf.quantize_weights<bits = 8, activations = "per-row">} {
}

// -----

// expected-error @+1 {{quantize_weights smooth_alpha is SmoothQuant's migration strength in [0, 1], with activations "per-tensor"}}
module attributes {mf.quantize_weights = #mf.quantize_weights<bits = 8, activations = "per-token", smooth_alpha = 0.5 : f64>} {
}

// -----

// expected-error @+1 {{quantize_weights exclude must list model paths (strings)}}
module attributes {mf.quantize_weights = #mf.quantize_weights<bits = 8, activations = "none", exclude = [1]>} {
}

// -----

// expected-error @+1 {{recompute select must list patterns (strings)}}
module attributes {mf.recompute = #mf.recompute<select = [1]>} {
}

// -----

// expected-error @+1 {{'mf.sequence_parallel' must be a unit attribute, got true}}
module attributes {mf.sequence_parallel = true} {
}

// -----

// expected-error @+1 {{'mf.phase' must be a string, got 3 : i64}}
module attributes {mf.phase = 3} {
}

// -----

func.func @f() attributes {mf.tokenizer = #mf.tokenizer<path = "/t.json">} {
  // expected-error @-1 {{'mf.tokenizer' belongs on the module}}
  return
}

// -----

// expected-error @+1 {{'mf.model' must be #mf.model<...>, got "llama"}}
module attributes {mf.model = "llama"} {
}

// -----

// expected-error @+1 {{'mf.generation' must be #mf.generation<...>, got 1 : i64}}
module attributes {mf.generation = 1} {
}

// -----

// expected-error @+1 {{'mf.recompute' must be #mf.recompute<...>, got ["model.layers.0"]}}
module attributes {mf.recompute = ["model.layers.0"]} {
}

// -----

// expected-error @+1 {{'mf.quantize_weights' must be #mf.quantize_weights<...>, got 8 : i64}}
module attributes {mf.quantize_weights = 8} {
}

// -----

// expected-error @+1 {{'mf.load_checkpoint' must be a string, got 1 : i64}}
module attributes {mf.load_checkpoint = 1} {
}

// -----

// expected-error @+1 {{'mf.quantize_kv_cache' must be a unit attribute, got "int8"}}
module attributes {mf.quantize_kv_cache = "int8"} {
}

// -----

// expected-error @+1 {{'mf.entry_role' belongs on an entry function}}
module attributes {mf.entry_role = #mf.entry_role<decode>} {
}

// -----

// expected-error @+1 {{'mf.entry_role' must be #mf.entry_role<...>, got "decode"}}
func.func @decode() attributes {mf.entry_role = "decode"} {
  return
}

// -----

// expected-error @+1 {{'mf.entry_role' stage_forward is a pipeline stage's role: the entry needs 'mf.stage'}}
func.func @stage0_forward() attributes {mf.entry_role = #mf.entry_role<stage_forward>} {
  return
}

// -----

// expected-error @+1 {{'mf.entry_role' decode is not a pipeline stage's role, but the entry has 'mf.stage'}}
func.func @decode() attributes {mf.entry_role = #mf.entry_role<decode>, mf.stage = 0 : i64} {
  return
}
