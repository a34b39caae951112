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
