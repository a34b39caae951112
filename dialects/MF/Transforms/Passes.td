//===- Passes.td - mf dialect passes -----------------------*- tablegen -*-===//

#ifndef MF_TRANSFORMS_PASSES_TD
#define MF_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MFPrintCostPass : Pass<"mf-print-cost", "::mlir::ModuleOp"> {
  let summary = "Prints FLOPs and bytes per entry point and op kind";
  let description = [{
    Sums the `CostOpInterface` of every op in every function and prints a
    table per function (ops, FLOPs and bytes by op kind) to stdout, plus the
    parameter count and bytes of the module. With `per-op`, also prints every
    op with its model path. The IR is unchanged.

    ```
    $ mf-opt model.mlir --mf-print-cost -o /dev/null
    entry @prefill: 61 ops, 1.31 GFLOP, 18.4 MB moved
      op kind        count        FLOP       bytes
      mf.matmul         14  1288568832    12582912
      ...
    ```
  }];
  let options = [
    Option<"perOp", "per-op", "bool", /*default=*/"false",
           "Also list every op with its model path">
  ];
}

def MFQuantizeKvCachePass : Pass<"mf-quantize-kv-cache", "::mlir::ModuleOp"> {
  let summary = "KV caches stored as int8 with calibrated per-channel scales";
  let description = [{
    MindFormers' `kvcache_dtype: int8` (golden-stick's int8 KV cache,
    `kvcache_quant_granularity: per_channel`): every entry input that is a
    KV cache (what `mf.kv_cache_write` extends) becomes `i8`, the rows
    written into it `mf.quantize` of the new keys or values by a parameter
    of symmetric scales, one per KV head and channel (`<cache path>.key_scale`
    and `.value_scale`, [kv_heads, head_dim] in the compute dtype), and the
    attention that reads it takes the same scales (`kv_scales`). The scales
    are `calibrated_scales` of the ranges that calibration records for the
    attention's keys and values (`<attention path>.key`, `.value`): the
    runtime computes them at load (docs/quantization.md). Attention without
    a cache (training, the `logits` entry) is unchanged. A module that
    assigns parameters (training) is refused.

    ```mlir
    %c1 = mf.kv_cache_write %c0, %k, %pos : tensor<1x32x2x16xf32>, tensor<1x1x2x16xf32>
    // becomes (%c0 now tensor<1x32x2x16xi8>)
    %s = mf.param @model.layers.0.attention.kv_cache.key_scale : tensor<2x16xf32>
    %q = mf.quantize %k, %s : tensor<1x1x2x16xf32>, tensor<2x16xf32> -> tensor<1x1x2x16xi8>
    %c1 = mf.kv_cache_write %c0, %q, %pos : tensor<1x32x2x16xi8>, tensor<1x1x2x16xi8>
    ```
  }];
}

def MFQuantizeWeightsPass : Pass<"mf-quantize-weights", "::mlir::ModuleOp"> {
  let summary = "Linear weights stored as int8 or int4 with scales (RTN)";
  let description = [{
    Weight-only quantization as MindFormers' `quantization_config` asks
    (`quant_method: rtn`, `weight_dtype: int8`): every 2-D float parameter
    that is only ever multiplied by transposed (a Linear's [N, K] weight)
    and whose name contains none of `exclude` (`modules_to_not_convert`,
    matched as golden-stick does: a substring of the Hugging Face or the
    MindFormers name) becomes an `i8` parameter `quantized` by a new
    parameter `<name>_scale` of its float type, [N]; each read of it
    becomes `mf.dequantize` of the two, which the matmul kernels fuse.
    With `bits=4` the values are int4, two to a byte (`i8` [N, K / 2]),
    and with `group-size=G` the scales are [K / G, N], one per row and
    group of G columns (MindFormers' `ptq` with `weight_dtype: int4`,
    `weight_quant_granularity: per_group`).
    With `activations=per-token` (`ptq` with `activation_dtype: int8`,
    `act_quant_granularity: per_token`: W8A8) each such matmul's rows are
    quantized too: its left operand becomes `mf.dequantize` of
    `mf.dynamic_quantize` of it (one per distinct operand), which the
    kernels multiply as int8 dot products.
    With `activations=per-tensor` (`smooth_quant`, or `ptq` with
    `act_quant_granularity: per_tensor`) the weight is `calibrated`: each
    product's rows become `mf.cast` of `mf.quantize` of them by the
    parameters `<name>_input_scale` and `<name>_input_zero_point` ([K]),
    the weight's scales (f32) hold the activations' per-tensor scale too,
    and `<name>_bias` ([N]) is added to the product for the zero point;
    with `smooth-alpha` the runtime smooths the weight and the input scales
    with SmoothQuant's factors from the calibration's ranges.
    The runtime quantizes float checkpoints at load (docs/quantization.md).
    A module that assigns parameters (training) is refused: the weights
    would no longer be the checkpoint's.

    ```mlir
    mf.parameter @w : tensor<96x64xf32> init = normal {std = 0.02 : f64}
    %w = mf.param @w : tensor<96x64xf32>
    %y = mf.matmul %x, %w transpose_rhs : ...
    // becomes
    mf.parameter @w : tensor<96x64xi8> init = normal quantized(@w_scale) {std = 0.02 : f64}
    mf.parameter @w_scale : tensor<96xf32> init = ones
    %q = mf.param @w : tensor<96x64xi8>
    %s = mf.param @w_scale : tensor<96xf32>
    %w = mf.dequantize %q, %s : tensor<96x64xi8>, tensor<96xf32> -> tensor<96x64xf32>
    ```
  }];
  let options = [
    ListOption<"exclude", "exclude", "std::string",
               "Weights whose name contains one of these stay float">,
    Option<"bits", "bits", "int64_t", /*default=*/"8",
           "Bits a weight value takes: 8 (i8), or 4 (int4, two to a byte)">,
    Option<"groupSize", "group-size", "int64_t", /*default=*/"0",
           "Columns that share a scale (0: one scale per row)">,
    Option<"activations", "activations", "std::string", /*default=*/"\"none\"",
           "How the quantized weights' activations are multiplied: none (in "
           "float, W8A16/W4A16), per-token (int8, one scale per row: W8A8) "
           "or per-tensor (int8 with calibrated static scales and zero "
           "points: SmoothQuant)">,
    Option<"smoothAlpha", "smooth-alpha", "double", /*default=*/"-1.0",
           "With per-tensor activations: SmoothQuant's migration strength "
           "(golden-stick's alpha, 0.5 by default there); negative: no "
           "smoothing">
  ];
}

def MFPartitionPass : Pass<"mf-partition", "::mlir::ModuleOp"> {
  let summary = "Turns a graph with sharded parameters into one rank's program";
  let options = [
    Option<"sequenceParallel", "sequence-parallel", "bool", /*default=*/"false",
           "Split norms and residual adds along the sequence (reduce-scatter "
           "and all-gather instead of all-reduce)">
  ];
  let description = [{
    Tensor parallelism as Megatron-LM and MindFormers lay it out, derived
    from the parameters' `sharding` (the frontend splits `wq/wk/wv`, `w1/w3`
    and their biases by rows, `wo` and `w2` by columns): from each split
    parameter, a split is propagated forward through every op by the op's
    rule (elementwise ops keep it, `mf.reshape` moves it to the dimension
    with the same outer extent, `mf.attention` needs query, key and value
    split by heads, a matmul of a replicated input by a weight split along
    its output features is split along its last dimension). A matmul whose
    operands are both split along the contracted dimension yields partial
    sums: an `mf.all_reduce` over the split's grid axes follows it
    (Megatron's `g`). The replicated input of column-parallel matmuls goes
    through one `mf.replicate` (Megatron's `f`: the identity, whose gradient
    rule all-reduces the partial gradients each rank computes). Every
    split value then gets its per-rank type (its split dimension divided
    by the number of ranks), KV-cache arguments and results included, and
    the entries' signatures follow.

    An op that meets a split operand it has no rule for is an error at its
    location: the pass gathers only where sequence parallelism's layout
    does (below), never to get past an op it has no rule for.
    Modules without split parameters are unchanged.

    With `sequence-parallel` (Korthikanti et al. 2022), in the entries
    without a KV cache whose sequence divides by the ranks: the embedding's
    output is split along the sequence (`mf.scatter`), so norms and residual
    adds run on the rank's part of it; the input of column-parallel matmuls
    is all-gathered first (`mf.all_gather`, whose gradient becomes a
    reduce-scatter), the row-parallel matmuls' partial sums are
    reduce-scattered (`mf.reduce_scatter`) instead of all-reduced, and a
    norm's weight is read through `mf.replicate` (its gradient is summed over
    the ranks' parts of the sequence).

    ```mlir
    // before
    %w = mf.param @wq : tensor<64x64xf32>   // sharding(@grid, [[1], []])
    %q = mf.matmul %x, %w transpose_rhs : ... -> tensor<1x8x64xf32>
    // after, on a 1x2 grid
    %w = mf.param @wq : tensor<32x64xf32>
    %q = mf.matmul %x, %w transpose_rhs : ... -> tensor<1x8x32xf32>
    ```
  }];
}

def MFAutodiffPass : Pass<"mf-autodiff", "::mlir::ModuleOp"> {
  let summary = "Builds the forward_backward entry: loss and parameter gradients";
  let description = [{
    For a training module (`mf.run_mode = #mf.run_mode<train>` or
    `<finetune>`), clones the
    `forward_loss` entry into `forward_backward` and appends the reverse
    pass: starting from d loss = 1, every op's gradient rule
    (`GradientOpInterface`) turns the gradient of its result into gradients
    of its operands, summed where a value has several users; each read of a
    parameter adds to that parameter's gradient. The entry returns the loss
    and one gradient per parameter that is not `frozen` (module order), named
    `grad.<parameter>`.
    An op without a rule is an error at its location. Other modules are
    left unchanged.

    ```mlir
    func.func @forward_backward(%ids: tensor<1x8xi32>, %labels: tensor<1x8xi32>)
        -> (tensor<f32> {mf.name = "loss"},
            tensor<256x64xf32> {mf.name = "grad.model.embed_tokens.weight"}, ...)
    ```
  }];
}

def MFTrainStepPass : Pass<"mf-train-step", "::mlir::ModuleOp"> {
  let summary = "Builds the train_step entry: forward, backward and the optimizer update";
  let description = [{
    For a training module with a `forward_backward` entry (after
    `mf-autodiff`), builds `train_step(input_ids, labels, learning_rate,
    step)`: the forward and backward pass, then, in `mf` ops, global-norm
    gradient clipping and one AdamW update of every trained parameter, whose
    new values (and new optimizer state) are stored with `mf.assign`. The
    optimizer is the module's `mf.optimizer` (`#mf.optimizer<...>`,
    verified by the dialect): `kind` (AdamW with bias correction and
    decoupled decay, as torch.optim.AdamW; or MindSpore's AdamWeightDecay,
    FP32StateAdamWeightDecay and FusedAdamWeightDecay, the same update),
    `beta1`, `beta2`, `eps`, `weight_decay`, `gradient_accumulation_steps`,
    and `max_grad_norm` when gradients are clipped. `learning_rate` (the
    schedule's rate for this update) and `step` (the update's number,
    counting from 1) are f32 scalars from the host.

    Optimizer state lives in `state` parameters: `optimizer.m.<p>` and
    `optimizer.v.<p>` (fp32), and with gradient accumulation
    `optimizer.grad_sum.<p>` plus an entry `accumulate_gradients(input_ids,
    labels)` that adds a micro-batch's gradients / N to them; `train_step`
    then adds the last micro-batch, updates, and clears the sums. The entry
    returns the loss and, when clipping, the gradient norm before clipping.
  }];
}

def MFSplitStagesPass : Pass<"mf-split-stages", "::mlir::ModuleOp"> {
  let summary = "A pipeline stage's forward keeps what its backward reads";
  let description = [{
    In a pipelined training module (`mf.micro_batches`, after mf-train-step
    and mf-recompute), each stage but the last runs its forward for a
    micro-batch and its backward later. Without this pass the backward
    (`stage<s>_accumulate_gradients`) recomputes the whole forward from the
    stage's input. This pass splits it at the values the backward reads:
    its forward ops (those its `hidden` result depends on) move into a new
    `stage<s>_forward`, which returns `hidden` and, as `saved.<i>`, every
    forward value a backward op reads; the backward takes them as inputs
    after `output_gradient` and keeps only the backward (parameter and
    constant reads, which cost nothing, on both sides). What mf-recompute
    chose to recompute stays in the backward (its clones read the kept
    checkpoints), so `recompute_config` decides what a micro-batch in
    flight keeps, as in MindFormers.

    ```mlir
    // before
    func.func @stage0_accumulate_gradients(%x, %dy) -> (tensor<...> {mf.name = "hidden"}) {
      %h = mf.matmul %x, %w ...      // forward
      %g = mf.matmul %dy, %w ...     // backward, reads %x
      ...
    }
    // after
    func.func @stage0_forward(%x) -> (hidden, saved.0 ...)
    func.func @stage0_accumulate_gradients(%x, %dy, %saved0, ...)
    ```
  }];
}

def MFSplitWeightGradientsPass
    : Pass<"mf-split-weight-gradients", "::mlir::ModuleOp"> {
  let summary = "A pipeline part's weight gradients apart from its input gradient";
  let description = [{
    Zero-bubble pipeline schedules (Qi et al., "Zero Bubble Pipeline
    Parallelism", 2024; MindSpore's `pipeline_scheduler: zero_bubble_v`)
    run a part's backward as two passes: B, the gradient of the part's
    input (which the part before waits for), and W, the gradients of its
    parameters (which nothing waits for, and which fill the schedule's
    bubbles). In a module scheduled `zero_bubble_v` (after mf-split-stages),
    each `<prefix>accumulate_gradients` that returns an `input_gradient` is
    split at the values W reads from B:

    ```mlir
    // before
    func.func @stage1_chunk0_accumulate_gradients(%x, %dy, %saved0)
        -> (tensor<...> {mf.name = "input_gradient"}) {
      %dh = mf.matmul %dy, %w ...          // B: the input gradient
      %dw = mf.matmul %dy, %x ...          // W
      mf.assign @optimizer.grad_sum.w, ...
    }
    // after
    func.func @stage1_chunk0_input_gradients(%x, %dy, %saved0)
        -> (input_gradient, wsaved.0 ...)
    func.func @stage1_chunk0_weight_gradients(%x, %dy, %wsaved0, ...)  // what it reads
    ```

    W takes only the backward's inputs it reads (then every `wsaved`), so
    what only B reads is not kept until W. Parameter and constant reads
    are on both sides. The model's first part has no input gradient: it
    keeps its accumulate_gradients.
  }];
}

def MFRecomputePass : Pass<"mf-recompute", "::mlir::func::FuncOp"> {
  let summary = "The backward reads recomputed copies of selected forward values";
  let description = [{
    In an entry that returns a `loss` (or a pipeline stage's `hidden` output)
    and differentiates it (after
    mf-autodiff and mf-train-step), the forward ops are those the loss
    depends on; every other op is the backward. Forward ops chosen for
    recomputation have their results dropped after the forward: each
    backward use reads a clone (marked `mf.recomputed`), built just before
    the first backward op that needs it, from the kept values (checkpoints)
    read through `mf.recompute_barrier`, which stops CSE and folding from
    finding a clone equal to its original and merging them back.

    - `full`: layer path prefixes (`model.layers.3`): every forward op of
      the layer except those whose results leave it (its output, the
      checkpoint) and parameter or constant reads.
    - `select`: op patterns as in MindFormers' `select_recompute`,
      optionally after a layer prefix and a colon
      (`model.layers.3:feed_forward\.mul`; without one, any layer): levels
      split at `\.`, full-matched against the names of the op's path within
      its layer, from the first; a pattern naming a cell
      (`feed_forward`) selects every op in it.
    - `select-comm`: patterns of the same form whose all-gathers alone are
      recomputed (`select_comm_recompute`: the backward gathers again from
      the kept shard).
    - Always: casts that widen a float (bf16 or f16 to f32), which are
      exact: the backward casts the kept narrow value again.
    - `exclude`: patterns of the same form naming ops (the whole path
      within the layer) that are kept whatever `full` and `select` say, as
      MindFormers' `select_recompute_exclude`.

    An op answers to each name of its location (a `fused<"model-paths">`
    location has several: mfc's SwiGLU is both `feed_forward.mul` and the
    silu inside it, `feed_forward.w1.activation.silu`).

    ```mlir
    // before: the backward reads %h, the forward's SwiGLU
    %h = mf.swiglu %g, %u : tensor<1x8x172xf32>    // model.layers.0.feed_forward.mul
    ...
    %dh = mf.matmul %dy, %w2 ...
    %dg = mf.mul %dh, %h ...
    // after --mf-recompute="select=feed_forward\.mul"
    %g2 = mf.recompute_barrier %g : tensor<1x8x172xf32>
    %u2 = mf.recompute_barrier %u : tensor<1x8x172xf32>
    %h2 = mf.swiglu %g2, %u2 {mf.recomputed} : tensor<1x8x172xf32>
    %dg = mf.mul %dh, %h2 ...
    ```
  }];
  let options = [
    ListOption<"full", "full", "std::string",
               "Layer path prefixes whose forward is recomputed whole">,
    ListOption<"select", "select", "std::string",
               "Op patterns ([layer-prefix:]level\\.level) recomputed alone">,
    ListOption<"selectComm", "select-comm", "std::string",
               "Op patterns ([layer-prefix:]level\\.level) whose all-gathers "
               "are recomputed (select_comm_recompute)">,
    ListOption<"exclude", "exclude", "std::string",
               "Op patterns ([layer-prefix:]level\\.level) never recomputed">
  ];
}

def MFScheduleUpdatesPass : Pass<"mf-schedule-updates", "::mlir::func::FuncOp"> {
  let summary = "Moves each parameter's update to just after its gradient";
  let description = [{
    mf-train-step appends the optimizer after the whole backward and marks
    the ops it builds with `mf.update`: the parameter's symbol on the ops of
    its update, a unit on those several updates share (AdamW's per-step
    scalars, clipping, a data-parallel bucket's all-reduce); a fusion
    region carries its members' mark. This pass moves each shared op up to
    just after its latest operand, and each parameter's ops, in their
    order, up to just after the latest value they read and every read of a
    parameter they assign; then it removes the marks. Gradients then die as
    soon as they are used, and a weight gradient's matmul fused into its
    update no longer keeps the activations it reads to the end of the step.
    It runs after fusion: fusion places a region at its last member, which
    could otherwise put a read after an assignment. With gradient clipping
    each update needs every gradient's norm, so the updates stay at the
    end.

    ```mlir
    // before: the update of @w waits for the rest of the backward
    %gw = mf.matmul %dy, %x transpose_lhs ...
    ... (the rest of the backward)
    %w1 = mf.sub %w0, %gw {mf.update = @w} ...
    %a = mf.assign @w, %w1 {mf.update = @w}
    // after: it follows %gw
    %gw = mf.matmul %dy, %x transpose_lhs ...
    %w1 = mf.sub %w0, %gw ...
    %a = mf.assign @w, %w1
    ... (the rest of the backward)
    ```
  }];
}

def MFDropRecomputeBarriersPass : Pass<"mf-drop-recompute-barriers",
                                       "::mlir::func::FuncOp"> {
  let summary = "Removes mf.recompute_barrier once no pass can merge clones";
  let description = [{
    After fusion, nothing in mfc's pipeline merges equal values any more: each
    `mf.recompute_barrier` is replaced by its input, so codegen, the memory
    plan and the executable see plain values (a barrier inside a fusion
    region is removed too).
  }];
}

def MFFuseElementwisePass : Pass<"mf-fuse-elementwise", "::mlir::func::FuncOp"> {
  let summary = "Groups chains of elementwise ops into mf.fusion regions";
  let description = [{
    Elementwise ops (and the broadcasts feeding them) join the group of a
    producer when no value of the group is needed, in between, by an op
    outside it. A group becomes an `mf.fusion elementwise` when the
    cost model says it moves fewer bytes fused than op by op (its
    intermediates never reach memory). Nothing is duplicated.

    Before:
    ```mlir
    %0 = mf.add %a, %b : tensor<8xf32>
    %1 = mf.exp %0 : tensor<8xf32>
    ```
    After:
    ```mlir
    %1 = mf.fusion elementwise(%a, %b) : (...) -> tensor<8xf32> {
    ^bb0(%x: tensor<8xf32>, %y: tensor<8xf32>):
      %0 = mf.add %x, %y : tensor<8xf32>
      %1 = mf.exp %0 : tensor<8xf32>
      mf.yield %1 : tensor<8xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::mf::MFDialect"];
}

def MFFuseMatmulEpiloguePass
    : Pass<"mf-fuse-matmul-epilogue", "::mlir::func::FuncOp"> {
  let summary = "Fuses matmuls into the elementwise work that consumes them";
  let description = [{
    A matmul whose only user is an elementwise op, or an elementwise
    `mf.fusion`, becomes part of it: the epilogue (bias, activation, residual
    add, the SwiGLU gate `silu(x Wg) * (x Wu)`) is applied per output tile and
    the matmul's result never reaches memory. The region's kind becomes
    `matmul_epilogue`. Applied when the cost model says it saves bytes.

    Before:
    ```mlir
    %g = mf.matmul %x, %wg transpose_rhs : ...
    %u = mf.matmul %x, %wu transpose_rhs : ...
    %h = mf.swiglu %g, %u : tensor<1x8x172xf32>
    ```
    After:
    ```mlir
    %h = mf.fusion matmul_epilogue(%x, %wg, %wu) : ... {
      %g = mf.matmul ...
      %u = mf.matmul ...
      %h = mf.swiglu %g, %u : tensor<1x8x172xf32>
      mf.yield %h : tensor<1x8x172xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::mf::MFDialect"];
}

def MFFuseAttentionPass : Pass<"mf-fuse-attention", "::mlir::func::FuncOp"> {
  let summary = "Fuses attention with the RoPE and KV-cache writes it alone "
                "reads, and the gradients of one attention together";
  let description = [{
    An f32 `mf.attention` takes into one kind `attention` region the
    RoPE of its query, the KV-cache writes of its key and value at its
    `past_length`, and the RoPE of the new keys, when nothing else reads
    them (the updated caches may be read after it). The region's kernel
    rotates the query and keys per tile, writes the caches in place and
    attends flash-style: the rotated tensors never reach memory. Applied
    when the cost model says it saves bytes (a cache updated in place counts
    once), so a lone attention stays the runtime's op.

    The gradients of one attention with respect to its query, keys and
    values (`mf.attention_grad` ops with the same operands) become one
    kind `attention_grad` region: its kernel recomputes the softmax once
    for all three.

    Before:
    ```mlir
    %q = mf.rope %q0, %pos theta = 1.0e+04 : ...
    %k = mf.rope %k0, %pos theta = 1.0e+04 : ...
    %kc = mf.kv_cache_write %cache_k, %k, %past : ...
    %vc = mf.kv_cache_write %cache_v, %v, %past : ...
    %o = mf.attention %q, %kc, %vc past_length(%past) causal scale = 0.25 : ...
    ```
    After:
    ```mlir
    %r:3 = mf.fusion attention(%q0, %pos, %k0, %cache_k, %past, %cache_v, %v)
        : ... { ... }
    ```
  }];
  let dependentDialects = ["::mlir::mf::MFDialect"];
}

def MFFuseNormPass : Pass<"mf-fuse-norm", "::mlir::func::FuncOp"> {
  let summary = "Fuses row reductions (norms, softmax) with their elementwise "
                "producers and consumers";
  let description = [{
    An `mf.rms_norm`, `mf.layer_norm` or last-dimension `mf.softmax` takes
    into one kind `norm` region the elementwise ops of its shape that
    compute its input for it alone (the cast up to f32 in a 16-bit model)
    and the chain of sole elementwise users of its result (the cast back),
    when the cost model says that moves fewer bytes. An RMSNorm or
    LayerNorm with no such neighbours becomes a one-op region too (in Graph
    Mode a kernel dispatch costs less host work than the eager op); a
    softmax alone stays an op. Runs before `mf-fuse-elementwise`.

    Before:
    ```mlir
    %x32 = mf.cast %x : tensor<1x8x64xf16> to tensor<1x8x64xf32>
    %n = mf.rms_norm %x32, %w eps = 1.0e-05 : tensor<1x8x64xf32>, tensor<64xf32>
    %y = mf.cast %n : tensor<1x8x64xf32> to tensor<1x8x64xf16>
    ```
    After:
    ```mlir
    %y = mf.fusion norm(%x, %w) : ... { ... }
    ```
  }];
  let dependentDialects = ["::mlir::mf::MFDialect"];
}

#endif // MF_TRANSFORMS_PASSES_TD
