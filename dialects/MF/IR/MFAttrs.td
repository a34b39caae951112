//===- MFAttrs.td - mf enums and attributes ----------------*- tablegen -*-===//

#ifndef MF_ATTRS_TD
#define MF_ATTRS_TD

include "dialects/MF/IR/MFBase.td"
include "mlir/IR/EnumAttr.td"

// Enums are written out by name in op formats: `init = normal`.

def MF_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how GELU is computed", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"tanh", 1>
    ]> {
  let cppNamespace = "::mlir::mf";
}

def MF_ParameterInit : I32EnumAttr<"ParameterInit",
    "how a parameter is initialized when no checkpoint provides it", [
      I32EnumAttrCase<"zeros", 0>,
      I32EnumAttrCase<"ones", 1>,
      I32EnumAttrCase<"normal", 2>,
      // Uniform in +-1/sqrt(fan_in) (fan_in: the last dimension):
      // MindSpore's HeUniform(negative_slope=sqrt(5)), which MindFormers'
      // LoRA gives lora_a, as PEFT's kaiming_uniform_(a=sqrt(5)).
      I32EnumAttrCase<"he_uniform", 3>
    ]> {
  let cppNamespace = "::mlir::mf";
}

def MF_FusionKind : I32EnumAttr<"FusionKind",
    "the fusion rule that formed an mf.fusion region, which decides its kernel", [
      I32EnumAttrCase<"elementwise", 0>,
      I32EnumAttrCase<"matmul", 1>,
      I32EnumAttrCase<"matmul_epilogue", 2>,
      I32EnumAttrCase<"norm", 3>,
      I32EnumAttrCase<"attention", 4>,
      I32EnumAttrCase<"attention_grad", 5>
    ]> {
  let cppNamespace = "::mlir::mf";
}

//===----------------------------------------------------------------------===//
// Module settings: the frontend's contract with the training passes and
// the writer, verified by the dialect (MFDialect::verifyOperationAttribute).
//===----------------------------------------------------------------------===//

def MF_RunMode : I32EnumAttr<"RunMode",
    "what the module is compiled for (MindFormers' run_mode)", [
      I32EnumAttrCase<"predict", 0>,
      I32EnumAttrCase<"train", 1>,
      I32EnumAttrCase<"finetune", 2>,
      I32EnumAttrCase<"eval", 3>
    ]> {
  let cppNamespace = "::mlir::mf";
  let genSpecializedAttr = 0;
}

/// `module attributes {mf.run_mode = #mf.run_mode<train>}`
def MF_RunModeAttr : EnumAttr<MF_Dialect, MF_RunMode, "run_mode"> {
  let assemblyFormat = "`<` $value `>`";
}

def MF_EntryRole : I32EnumAttr<"EntryRole",
    "what an entry function computes, which its signature and name follow", [
      // Predict: the logits of a prompt's last token per batch row, with or
      // without the KV cache (its tokens: the ids' second dimension).
      I32EnumAttrCase<"prefill", 0>,
      // One batch row's prefill into its row of the batched cache (serving).
      I32EnumAttrCase<"prefill_row", 1>,
      I32EnumAttrCase<"decode", 2>,
      // Every position's logits, no cache.
      I32EnumAttrCase<"logits", 3>,
      I32EnumAttrCase<"forward_loss", 4>,
      I32EnumAttrCase<"forward_backward", 5>,
      I32EnumAttrCase<"accumulate_gradients", 6>,
      I32EnumAttrCase<"train_step", 7>,
      // A pipeline stage's (mf.stage, and mf.chunk when interleaved).
      I32EnumAttrCase<"stage_forward", 8>,
      I32EnumAttrCase<"stage_forward_backward", 9>,
      I32EnumAttrCase<"stage_accumulate_gradients", 10>,
      I32EnumAttrCase<"stage_input_gradients", 11>,
      I32EnumAttrCase<"stage_weight_gradients", 12>,
      I32EnumAttrCase<"stage_train_step", 13>
    ]> {
  let cppNamespace = "::mlir::mf";
  let genSpecializedAttr = 0;
}

/// `func.func @decode(...) attributes {mf.entry_role = #mf.entry_role<decode>}`
def MF_EntryRoleAttr : EnumAttr<MF_Dialect, MF_EntryRole, "entry_role"> {
  let assemblyFormat = "`<` $value `>`";
}

def MF_OptimizerKind : I32EnumAttr<"OptimizerKind",
    "MindFormers' AdamW variants", [
      I32EnumAttrCase<"AdamW", 0>,
      I32EnumAttrCase<"AdamWeightDecay", 1>,
      I32EnumAttrCase<"FP32StateAdamWeightDecay", 2>,
      I32EnumAttrCase<"FusedAdamWeightDecay", 3>
    ]> {
  let cppNamespace = "::mlir::mf";
  let genSpecializedAttr = 0;
}

def MF_OptimizerAttr : AttrDef<MF_Dialect, "Optimizer"> {
  let mnemonic = "optimizer";
  let summary = "a training module's optimizer and step settings";
  let description = [{
    The optimizer mf-train-step builds (AdamW with bias correction; the
    AdamWeightDecay variants without), its hyper-parameters, the gradient
    accumulation steps, the global-norm clip (absent: none), ZeRO-1
    (`parallel_optimizer`) and the data-parallel gradient buckets.

    ```mlir
    module attributes {mf.run_mode = #mf.run_mode<train>,
        mf.optimizer = #mf.optimizer<kind = AdamW, beta1 = 9.0e-01,
            beta2 = 9.5e-01, eps = 1.0e-08, weight_decay = 1.0e-01,
            gradient_accumulation_steps = 1, max_grad_norm = 1.0>}
    ```
  }];
  let parameters = (ins
    "::mlir::mf::OptimizerKind":$kind,
    "::mlir::FloatAttr":$beta1,
    "::mlir::FloatAttr":$beta2,
    "::mlir::FloatAttr":$eps,
    "::mlir::FloatAttr":$weight_decay,
    "int64_t":$gradient_accumulation_steps,
    OptionalParameter<"::mlir::FloatAttr">:$max_grad_norm,
    OptionalParameter<"::mlir::UnitAttr">:$parallel_optimizer,
    DefaultValuedParameter<"int64_t", "1">:$gradient_aggregation_group);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def MF_ModelFamily : I32EnumAttr<"ModelFamily",
    "how the runtime names a model's checkpoint tensors", [
      I32EnumAttrCase<"llama", 0>,
      I32EnumAttrCase<"gpt2", 1>
    ]> {
  let cppNamespace = "::mlir::mf";
  let genSpecializedAttr = 0;
}

def MF_ModelInfoAttr : AttrDef<MF_Dialect, "ModelInfo"> {
  let mnemonic = "model";
  let summary = "the model facts the runtime needs beyond the program";
  let description = [{
    What the frontend read from `model_config` (and the context's seed) that
    the runtime needs and the program does not say: how checkpoint tensors
    are named (`family`), the entries' batch and sequence, the head counts
    (a MindFormers checkpoint with `qkv_concat` interleaves wq/wk/wv per KV
    group), the compute dtype, a paged KV cache's blocks (0: one cache
    row per batch row), and with LoRA adapters their `lora_alpha /
    lora_rank` (merging and PEFT export need it, in predict too). The
    writer copies it into model.bin.

    ```mlir
    module attributes {mf.model = #mf.model<family = llama, seed = 0,
        batch_size = 1, seq_length = 64, vocab_size = 256, num_layers = 2,
        num_heads = 4, num_kv_heads = 2, compute_dtype = f32,
        use_past = true>}
    ```
  }];
  let parameters = (ins
    "::mlir::mf::ModelFamily":$family,
    "int64_t":$seed,
    "int64_t":$batch_size,
    "int64_t":$seq_length,
    "int64_t":$vocab_size,
    "int64_t":$num_layers,
    "int64_t":$num_heads,
    "int64_t":$num_kv_heads,
    "::mlir::Type":$compute_dtype,
    "::mlir::BoolAttr":$use_past,
    DefaultValuedParameter<"int64_t", "0">:$kv_block_size,
    DefaultValuedParameter<"int64_t", "0">:$kv_num_blocks,
    OptionalParameter<"::mlir::FloatAttr">:$lora_scale);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def MF_GenerationAttr : AttrDef<MF_Dialect, "Generation"> {
  let mnemonic = "generation";
  let summary = "a model's generation defaults and special token ids";
  let description = [{
    `model_config`'s generation settings, which mf-run and mf-serve use
    unless a flag or a request overrides them.

    ```mlir
    module attributes {mf.generation = #mf.generation<bos_token_id = 1,
        eos_token_ids = array<i64: 2>, pad_token_id = 0,
        ignore_token_id = -100, do_sample = false, top_k = 1,
        top_p = 1.0, temperature = 1.0, repetition_penalty = 1.0,
        max_decode_length = 512>}
    ```
  }];
  let parameters = (ins
    "int64_t":$bos_token_id,
    "::mlir::DenseI64ArrayAttr":$eos_token_ids,
    "int64_t":$pad_token_id,
    "int64_t":$ignore_token_id,
    "::mlir::BoolAttr":$do_sample,
    "int64_t":$top_k,
    "::mlir::FloatAttr":$top_p,
    "::mlir::FloatAttr":$temperature,
    "::mlir::FloatAttr":$repetition_penalty,
    "int64_t":$max_decode_length);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def MF_TokenizerAttr : AttrDef<MF_Dialect, "Tokenizer"> {
  let mnemonic = "tokenizer";
  let summary = "the tokenizer the config names";
  let description = [{
    `processor.tokenizer`: the tokenizer.json or Hugging Face folder (an
    absolute path), its class (how a vocab.json + merges.txt tokenizer
    splits text), and the chat template and special tokens for
    `mf-run --chat`. Each is left out when the config does not give it.
  }];
  let parameters = (ins
    OptionalParameter<"::mlir::StringAttr">:$path,
    OptionalParameter<"::mlir::StringAttr">:$class_name,
    OptionalParameter<"::mlir::StringAttr">:$chat_template,
    OptionalParameter<"::mlir::StringAttr">:$bos_token,
    OptionalParameter<"::mlir::StringAttr">:$eos_token);
  let assemblyFormat = "`<` struct(params) `>`";
}

def MF_TrainingAttr : AttrDef<MF_Dialect, "Training"> {
  let mnemonic = "training";
  let summary = "a training module's learning-rate schedule and run settings";
  let description = [{
    The runtime's side of training: the learning rate each step uses
    (`lr_schedule` as one of the four shapes mf-run implements: cosine,
    linear, polynomial or constant; warmup by steps, or by ratio when
    `warmup_steps` is 0; `total_steps` -1: the run's), the epochs over the
    data. The optimizer itself is `mf.optimizer`.
  }];
  let parameters = (ins
    "::mlir::FloatAttr":$learning_rate,
    "::mlir::StringAttr":$lr_schedule,
    "::mlir::FloatAttr":$lr_end,
    "int64_t":$warmup_steps,
    "::mlir::FloatAttr":$warmup_ratio,
    "::mlir::FloatAttr":$warmup_lr_init,
    "int64_t":$total_steps,
    "::mlir::FloatAttr":$power,
    "int64_t":$epochs);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Compile decisions: what the config asks of the compiler's phases, recorded
// by the frontend so that compiling resumes from any phase's IR (mfc compile
// x.mlir) with the config's choices. mfc builds each phase from them.
//===----------------------------------------------------------------------===//

def MF_QuantizeWeightsAttr : AttrDef<MF_Dialect, "QuantizeWeights"> {
  let mnemonic = "quantize_weights";
  let summary = "quantization_config's weight quantization (mf-quantize-weights)";
  let description = [{
    `bits` 8 or 4, one scale per row (`group_size` 0) or per group of
    columns, the activations ("none", "per-token" int8 rows, or
    "per-tensor" with calibrated scales), SmoothQuant's migration strength
    (absent: no smoothing) and `modules_to_not_convert` (`exclude`: model
    paths left in float).

    ```mlir
    module attributes {mf.quantize_weights = #mf.quantize_weights<bits = 4,
        group_size = 32, activations = "none">}
    ```
  }];
  let parameters = (ins
    "int64_t":$bits,
    DefaultValuedParameter<"int64_t", "0">:$group_size,
    "::mlir::StringAttr":$activations,
    OptionalParameter<"::mlir::FloatAttr">:$smooth_alpha,
    OptionalParameter<"::mlir::ArrayAttr">:$exclude);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def MF_RecomputeAttr : AttrDef<MF_Dialect, "Recompute"> {
  let mnemonic = "recompute";
  let summary = "what mf-recompute recomputes (recompute_config, or the "
                "--memory-budget search's choice)";
  let description = [{
    mf-recompute's `full` layers, `select` and `select_comm` op patterns and
    `exclude` patterns (model paths; see the pass), as the frontend derived
    them from `recompute_config`. Each list is left out when empty.

    ```mlir
    module attributes {mf.recompute = #mf.recompute<full = ["model.layers.0"]>}
    ```
  }];
  let parameters = (ins
    OptionalParameter<"::mlir::ArrayAttr">:$full,
    OptionalParameter<"::mlir::ArrayAttr">:$select,
    OptionalParameter<"::mlir::ArrayAttr">:$select_comm,
    OptionalParameter<"::mlir::ArrayAttr">:$exclude);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // MF_ATTRS_TD
