//===- MFOps.td - mf dialect operations --------------------*- tablegen -*-===//

#ifndef MF_OPS_TD
#define MF_OPS_TD

include "dialects/MF/IR/MFBase.td"
include "dialects/MF/IR/MFAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

def MF_ParameterResource : Resource<"::mlir::mf::ParameterResource">;

def MF_ParameterOp : MF_Op<"parameter", [Symbol, HasParent<"::mlir::ModuleOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let inExecutable = 0; // not stored in model.bin
  let summary = "A trainable model parameter";
  let description = [{
    Declares a model weight. Weights are not part of the program: the runtime
    loads them from a checkpoint by `sym_name` (the Hugging Face name) or by
    `mf_name` (the MindFormers name), or initializes them as `init` says.
    `std` is the standard deviation of a `normal` init. A `frozen` parameter
    is not trained (LoRA's base weights): it gets no gradient and no
    optimizer state. A `state` parameter is not a model weight but training
    state (AdamW's moments, summed gradients): it gets no gradient, starts
    at its init when no weight file has it, and training checkpoints keep
    it.

    A parameter of a sharded program names the device grid (`shard.grid`)
    and, as `shard.sharding`'s `split_axes` does, the grid axes each
    dimension is split over: `type` stays the whole weight (what a
    checkpoint holds) and each rank reads its block, which is the type of
    the `mf.param` that reads it once `mf-partition` has run. With
    `groups = G`, the split dimension holds G equal parts (GPT-2's fused
    q, k and v) each split the same way: a rank's block is its share of
    every part, in order (vLLM's merged column-parallel layout), so that it
    holds its heads' q, k and v.

    With `parts = [n0, n1, ...]` the weight is those tensors stacked along
    dimension 0, one slice each: a mixture-of-experts layer's experts
    (`[E, out, in]`), which checkpoints hold one tensor per expert
    (Hugging Face's `experts.N.gate_proj.weight`) and which expert
    parallelism splits along dimension 0. The runtime reads, initializes
    and writes each part under its own name; `sym_name` names the stack.

    A `panels` parameter is a 2-D [N, K] weight that Graph Mode's kernels
    read, where they multiply by it transposed, packed into panels of 32
    rows (runtime/kernels/PanelGemm.h) that the runtime packs once when the weights
    change (`mf-choose-weight-layout` decides). Nothing may assign it: the
    packed copy would be stale. A `dot_panels` parameter is a quantized
    weight's i8 values packed alike for int8 dot products (each panel
    [K / 4][32][4]: four K of a column side by side), which the kernels
    multiply by int8 activations (`mf.dynamic_quantize`).

    A `quantized` parameter is a 2-D [N, K] weight stored as integer values
    q whose float value is `q * scale`: `i8` [N, K], or with `bits = 4`
    int4 values two to a byte, `i8` [N, K / 2] (column 2j in the low
    nibble of byte j, 2j + 1 in the high one: golden-stick's qint4x2
    packing). `quant_scale` names the float parameter that holds its
    scales, [N] (one per row, `quant_group` 0) or [K / quant_group, N] (one
    per row and group of `quant_group` columns, a group's side by side as
    golden-stick stores them). The
    runtime fills both from a float checkpoint (round to nearest,
    symmetric: docs/quantization.md) or reads both from a quantized one;
    `mf.dequantize` reads them. A split quantized weight's companions (its
    scales, and a calibrated one's) are split along the dimension that
    holds its split one, over the same grid axes, or whole when they hold
    none of it (`companionSplitAxes`): the verifier checks it.

    A `calibrated` one (int8 per row) multiplies activations quantized with
    static scales (golden-stick's SmoothQuant, or PTQ with per-tensor
    activations): `quant_input_scale` and `quant_input_zero_point` name the
    parameters that `mf.quantize` reads ([K], float and i8), `quant_bias`
    the float [N] one that corrects the product for the zero point
    (`-zp * scale[n] * sum_k q[n, k]`), and then `quant_scale` holds the
    activations' per-tensor scale times the weight's. With
    `smooth = alpha` the weight and the activations' scales carry
    SmoothQuant's per-channel factors of migration strength alpha. The
    runtime computes all four from a float checkpoint and the activation
    ranges that `mf-run --task calibrate` records, or reads them from a
    quantized one.

    A `calibrated_scales` parameter holds the symmetric int8 scales of an
    activation, one per channel (a KV cache's keys or values: [kv_heads,
    head_dim], which `mf.quantize` writes into an i8 cache and
    `mf.attention` reads back): the runtime computes them from the
    per-channel ranges that `mf-run --task calibrate` records under the
    string's name (`max(|min|, |max|) * 2 / 255`, golden-stick's symmetric
    KV-cache scales), or reads them from a checkpoint.

    ```mlir
    mf.parameter @model.norm.weight : tensor<64xf32> init = ones
        {mf_name = "model.norm_out.weight"}
    mf.parameter @w : tensor<96x64xi8> init = zeros quantized(@w_scale)
    mf.parameter @w_scale : tensor<96xf32> init = ones
    mf.parameter @w4 : tensor<96x32xi8> init = zeros quantized(@w4_scale group = 32 bits = 4)
    mf.parameter @w4_scale : tensor<2x96xf32> init = ones
    mf.parameter @w8 : tensor<96x64xi8> init = zeros
        quantized(@w8_scale calibrated(@w8_input_scale, @w8_input_zero_point, @w8_bias smooth = 5.0e-01))
    mf.parameter @model.layers.0.attention.kv_cache.key_scale : tensor<2x16xf32>
        init = ones calibrated_scales("model.layers.0.attention.attention_core.key")
    mf.parameter @model.layers.0.self_attn.q_proj.weight : tensor<64x64xf32>
        init = normal sharding(@grid, [[1], []]) {std = 2.0e-02 : f64}
    mf.parameter @transformer.h.0.attn.c_attn.weight : tensor<64x192xf32>
        init = normal sharding(@grid, [[], [1]] groups = 3) {std = 2.0e-02 : f64}
    mf.parameter @model.layers.0.mlp.experts.gate_proj : tensor<2x48x32xf32>
        init = normal sharding(@grid, [[0], [], []]) {std = 2.0e-02 : f64,
        parts = ["model.layers.0.mlp.experts.0.gate_proj.weight",
                 "model.layers.0.mlp.experts.1.gate_proj.weight"]}
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    TypeAttrOf<MF_ParameterTensor>:$type,
    MF_ParameterInit:$init,
    OptionalAttr<F64Attr>:$std,
    OptionalAttr<StrAttr>:$mf_name,
    UnitAttr:$frozen,
    UnitAttr:$state,
    UnitAttr:$panels,
    UnitAttr:$dot_panels,
    OptionalAttr<FlatSymbolRefAttr>:$grid,
    OptionalAttr<MF_GridAxesArrayAttr>:$split_axes,
    OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<2>]>>:$split_groups,
    OptionalAttr<FlatSymbolRefAttr>:$quant_scale,
    OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$quant_group,
    OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<4>, IntMaxValue<8>]>>:$quant_bits,
    OptionalAttr<FlatSymbolRefAttr>:$quant_input_scale,
    OptionalAttr<FlatSymbolRefAttr>:$quant_input_zero_point,
    OptionalAttr<FlatSymbolRefAttr>:$quant_bias,
    OptionalAttr<F64Attr>:$quant_smooth_alpha,
    OptionalAttr<StrArrayAttr>:$parts,
    OptionalAttr<StrAttr>:$calibrated_scales
  );
  let assemblyFormat = [{
    $sym_name `:` $type `init` `=` $init (`frozen` $frozen^)? (`state` $state^)?
    (`panels` $panels^)? (`dot_panels` $dot_panels^)? (`sharding` `(` $grid^ `,` $split_axes (`groups` `=` $split_groups^)? `)`)?
    (`quantized` `(` $quant_scale^ (`group` `=` $quant_group^)? (`bits` `=` $quant_bits^)?
     (`calibrated` `(` $quant_input_scale^ `,` $quant_input_zero_point `,` $quant_bias (`smooth` `=` $quant_smooth_alpha^)? `)`)? `)`)?
    (`calibrated_scales` `(` $calibrated_scales^ `)`)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    /// Whether training computes a gradient for it and updates it.
    bool isTrained() { return !getFrozen() && !getState(); }
    /// The block of the parameter one rank holds: each split dimension
    /// divided by the product of its grid axes' sizes (the whole type
    /// when the parameter is not split).
    ::mlir::RankedTensorType getShardType(::mlir::shard::GridOp grid);
    /// An error unless `companion` (its scales, ...: `dims` says where it
    /// holds N and K) is split as companionSplitAxes says.
    ::mlir::LogicalResult verifyCompanionSplit(ParameterOp companion,
                                               CompanionDims dims);
    /// The parts its split dimension holds, each split the same way (1:
    /// one block of the whole dimension).
    int64_t getSplitPartCount() { return getSplitGroups().value_or(1); }
  }];
}

def MF_ParamOp : MF_FreeOp<"param", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Reads a parameter";
  let description = [{
    The value of the `mf.parameter` named by `name`; its type must match.
    Every read in an entry sees the value the parameter had when the entry
    began (an `mf.assign` takes effect for the next run).

    ```mlir
    %w = mf.param @model.norm.weight : tensor<64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs MF_ParameterTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def MF_AssignOp : MF_FreeOp<"assign", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    AllTypesMatch<["value", "result"]>,
    MemoryEffects<[MemWrite<MF_ParameterResource>]>]> {
  let summary = "Updates a parameter for the runs that follow";
  let description = [{
    Stores `value` as the new value of the `mf.parameter` named by `name`
    (a training step's update of a weight or of optimizer state); the
    result is that new value. Reads of the parameter in the same entry still
    see its value at entry, so all of them come before the assignment when
    the entry runs. A parameter is assigned at most once per entry; frozen
    parameters are never assigned.

    ```mlir
    %w1 = mf.assign @model.norm.weight, %w0 : tensor<64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name, MF_FloatTensor:$value);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = "$name `,` $value attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Constants and index generation
//===----------------------------------------------------------------------===//

def MF_ConstantOp : MF_FreeOp<"constant", [ConstantLike, Pure,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "A constant tensor";
  let description = [{
    ```mlir
    %zero = mf.constant dense<0> : tensor<i32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs MF_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def MF_IotaOp : MF_CostedOp<"iota", [Pure]> {
  let summary = "Indices 0, 1, 2, ... along one dimension";
  let description = [{
    Element `[i0, ..., in]` of the result is `i<dimension>`. Used for token
    positions.

    ```mlir
    %pos = mf.iota dim = 1 : tensor<1x8xi32>
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntNonNegative]>:$dimension);
  let results = (outs MF_IndexTensor:$result);
  let assemblyFormat = "`dim` `=` $dimension attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise primitives
//===----------------------------------------------------------------------===//

class MF_BinaryOp<string mnemonic, list<Trait> traits = []>
    : MF_Op<mnemonic, !listconcat(traits, [Pure, Elementwise,
                                           SameOperandsAndResultType,
                                           DeclareOpInterfaceMethods<MF_GradientOpInterface>])> {
  let arguments = (ins MF_Tensor:$lhs, MF_Tensor:$rhs);
  let results = (outs MF_Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def MF_AddOp : MF_BinaryOp<"add", [Commutative]> {
  let summary = "Elementwise addition";
  let description = [{
    Operands and result have the same type; use `mf.broadcast` to match shapes.

    ```mlir
    %r = mf.add %a, %b : tensor<1x8x64xf32>
    ```
  }];
  let hasFolder = 1;
}

def MF_SubOp : MF_BinaryOp<"sub"> {
  let summary = "Elementwise subtraction";
  let description = [{
    ```mlir
    %r = mf.sub %a, %b : tensor<1x8x64xf32>
    ```
  }];
}

def MF_MulOp : MF_BinaryOp<"mul", [Commutative]> {
  let summary = "Elementwise multiplication";
  let description = [{
    ```mlir
    %r = mf.mul %a, %b : tensor<1x8x64xf32>
    ```
  }];
}

def MF_DivOp : MF_BinaryOp<"div"> {
  let summary = "Elementwise division";
  let description = [{
    ```mlir
    %r = mf.div %a, %b : tensor<1x8x64xf32>
    ```
  }];
}

def MF_MaxOp : MF_BinaryOp<"max", [Commutative]> {
  let summary = "Elementwise maximum";
  let description = [{
    ```mlir
    %r = mf.max %a, %b : tensor<1x8x64xf32>
    ```
  }];
}

def MF_MinOp : MF_BinaryOp<"min", [Commutative]> {
  let summary = "Elementwise minimum";
  let description = [{
    ```mlir
    %r = mf.min %a, %b : tensor<1x8x64xf32>
    ```
  }];
}

class MF_UnaryOp<string mnemonic, list<Trait> traits = []>
    : MF_Op<mnemonic, !listconcat(traits, [Pure, Elementwise,
                                           SameOperandsAndResultType,
                                           DeclareOpInterfaceMethods<MF_GradientOpInterface>])> {
  let arguments = (ins MF_FloatTensor:$input);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

/// An activation whose cost is `flopsPerElement` per result element
/// (exp, a division and a few multiplies and adds, as the scalar body in
/// ScalarEmitter.cpp computes it).
class MF_CostedUnaryOp<string mnemonic, int flopsPerElement,
                       list<Trait> traits = []>
    : MF_CostedOp<mnemonic, !listconcat(traits, [Pure, Elementwise,
                                                 SameOperandsAndResultType,
                                                 DeclareOpInterfaceMethods<MF_GradientOpInterface>])> {
  let arguments = (ins MF_FloatTensor:$input);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let extraClassDefinition = [{
    int64_t $cppClass::getFlops() {
      return }] # flopsPerElement # [{ *
             ::llvm::cast<::mlir::ShapedType>(getType()).getNumElements();
    }
  }];
}

def MF_NegOp : MF_UnaryOp<"neg"> {
  let summary = "Elementwise negation";
  let description = [{
    ```mlir
    %r = mf.neg %x : tensor<8xf32>
    ```
  }];
}

def MF_ExpOp : MF_UnaryOp<"exp"> {
  let summary = "Elementwise exponential";
  let description = [{
    ```mlir
    %r = mf.exp %x : tensor<8xf32>
    ```
  }];
}

def MF_LogOp : MF_UnaryOp<"log"> {
  let summary = "Elementwise natural logarithm";
  let description = [{
    ```mlir
    %r = mf.log %x : tensor<8xf32>
    ```
  }];
}

def MF_TanhOp : MF_UnaryOp<"tanh"> {
  let summary = "Elementwise hyperbolic tangent";
  let description = [{
    ```mlir
    %r = mf.tanh %x : tensor<8xf32>
    ```
  }];
}

def MF_SqrtOp : MF_UnaryOp<"sqrt"> {
  let summary = "Elementwise square root";
  let description = [{
    ```mlir
    %r = mf.sqrt %x : tensor<8xf32>
    ```
  }];
}

def MF_RsqrtOp : MF_UnaryOp<"rsqrt"> {
  let summary = "Elementwise reciprocal square root";
  let description = [{
    ```mlir
    %r = mf.rsqrt %x : tensor<8xf32>
    ```
  }];
}

def MF_SiluOp : MF_CostedUnaryOp<"silu", 4> {
  let summary = "SiLU (swish): x * sigmoid(x)";
  let description = [{
    ```mlir
    %r = mf.silu %x : tensor<1x8x172xf32>
    ```
  }];
}

def MF_FastGeluOp : MF_CostedUnaryOp<"fast_gelu", 5> {
  let summary = "Fast GELU: x * sigmoid(1.702 x)";
  let description = [{
    MindSpore's `FastGeLU`, which MindFormers' `hidden_act: fast_gelu`
    selects: `x / (1 + exp(-1.702 |x|)) * exp(0.851 (x - |x|))`, that is
    `x * sigmoid(1.702 x)`. Not the tanh approximation of GELU.

    ```mlir
    %r = mf.fast_gelu %x : tensor<1x8x256xf32>
    ```
  }];
}

def MF_GeluOp : MF_CostedOp<"gelu", [DeclareOpInterfaceMethods<MF_GradientOpInterface>, Pure, Elementwise,
                                     SameOperandsAndResultType]> {
  let summary = "GELU, exact (erf) or with the tanh approximation";
  let description = [{
    `approximate = tanh` is GPT-2's `gelu_new`:
    `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.

    ```mlir
    %r = mf.gelu %x approximate = tanh : tensor<1x8x256xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$input,
                       MF_GeluApproximation:$approximate);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat =
      "$input `approximate` `=` $approximate attr-dict `:` type($result)";
}

def MF_CastOp : MF_Op<"cast", [DeclareOpInterfaceMethods<MF_GradientOpInterface>, Pure, Elementwise, SameOperandsAndResultShape]> {
  let summary = "Converts the element type";
  let description = [{
    Rounds to nearest even when narrowing between float types; integers
    (i32, a quantized weight's i8 values) become floats by value.

    ```mlir
    %r = mf.cast %x : tensor<8xbf16> to tensor<8xf32>
    ```
  }];
  let arguments = (ins MF_AnyTensor:$input);
  let results = (outs MF_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasFolder = 1;
}

def MF_DequantizeOp : MF_CostedOp<"dequantize", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>]> {
  let summary = "The float value of a quantized weight";
  let description = [{
    `result[n, k] = q[n, k] * scale[n]` for per-row scales ([N]), or
    `* scale[k / group_size, n]` for scales per row and group of
    `group_size` columns ([K / group_size, N]), computed in f32 and stored
    in the scales' type; `q` is i8 [N, K], or with `bits = 4` int4 values
    two to a byte, i8 [N, K / 2] (q[n, 2j] in the low nibble of byte j):
    the weight that a
    `quantized` `mf.parameter` holds. Graph Mode's matmul kernels read `q`
    and the scales where they multiply by the result (no float copy of the
    weight exists); PyNative computes it.

    ```mlir
    %w = mf.dequantize %q, %s : tensor<96x64xi8>, tensor<96xf32> -> tensor<96x64xf32>
    %w2 = mf.dequantize %q, %s2 group_size = 32
        : tensor<96x64xi8>, tensor<2x96xf32> -> tensor<96x64xf32>
    %w4 = mf.dequantize %q4, %s2 group_size = 32 bits = 4
        : tensor<96x32xi8>, tensor<2x96xf32> -> tensor<96x64xf32>
    ```
  }];
  let arguments = (ins MF_QuantizedTensor:$input, MF_FloatTensor:$scale,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntNonNegative]>, "0">:$group_size,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntMinValue<4>, IntMaxValue<8>]>, "8">:$bits);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`group_size` `=` $group_size^)? (`bits` `=` $bits^)? attr-dict `:` type($input) `,` type($scale) `->` type($result)
  }];
}

def MF_DynamicQuantizeOp : MF_CostedOp<"dynamic_quantize", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>]> {
  let summary = "Activations as int8 values and one scale per row";
  let description = [{
    For a float tensor of rank >= 2, per row of the last dimension (a
    token's activations), symmetric:
    `scale = max|x| / 127`, rounded to the input's type, and
    `q = clamp(round_half_even(x / scale), -128, 127)` with the rounded
    scale (0 and all-zero values for a row of zeros), computed in f32.
    This is MindSpore's `DynamicQuant` that golden-stick's W8A8 with
    `act_quant_granularity: per_token` runs before each quantized Linear;
    `mf.dequantize` of the two is the rows the matmul multiplies, which
    Graph Mode's kernels multiply as int8 dot products.

    ```mlir
    %q, %s = mf.dynamic_quantize %x : tensor<1x8x64xf32> -> tensor<1x8x64xi8>, tensor<1x8xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$input);
  let results = (outs MF_QuantizedTensor:$values, MF_FloatTensor:$scales);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($values) `,` type($scales)
  }];
}

def MF_QuantizeOp : MF_CostedOp<"quantize", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>]> {
  let summary = "Activations as int8 values with static scales and zero points";
  let description = [{
    For a float tensor [..., K], per channel k of the last dimension:
    `q = clamp(round_half_even(x / scale[k] + zero_point[k]), -128, 127)`,
    computed in f32 with the scales as stored. Scales and zero points may
    span more trailing dimensions (a KV cache's [kv_heads, head_dim]
    channels: golden-stick's per-channel int8 KV cache). Without zero
    points the quantization is symmetric (0). This is MindSpore's
    `QuantV2` that golden-stick's SmoothQuant (and PTQ with
    `act_quant_granularity: per_tensor`) runs before each quantized
    Linear: the scales are the calibrated per-tensor scale times the
    channel's smoothing factor, the zero points the calibrated one in every
    channel (asymmetric). The matmul multiplies the values as they are
    (`mf.cast` to the compute dtype); the scale and the zero point's
    correction are the weight's scales and a bias.

    ```mlir
    %q = mf.quantize %x, %s, %zp : tensor<1x8x64xf32>, tensor<64xf32>, tensor<64xi8> -> tensor<1x8x64xi8>
    %k8 = mf.quantize %k, %ks : tensor<1x8x2x16xf32>, tensor<2x16xf32> -> tensor<1x8x2x16xi8>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$input, MF_FloatTensor:$scale,
                       Optional<MF_QuantizedTensor>:$zero_point);
  let results = (outs MF_QuantizedTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $zero_point^)? attr-dict `:` type($input) `,` type($scale) (`,` type($zero_point)^)? `->` type($result)
  }];
}

def MF_BroadcastOp : MF_CostedOp<"broadcast", [
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>, DeclareOpInterfaceMethods<MF_GradientOpInterface>, Pure]> {
  let summary = "Broadcasts a tensor to a larger shape, numpy style";
  let description = [{
    Dimensions are aligned at the right; each input dimension is 1 or equal
    to the result's.

    ```mlir
    %r = mf.broadcast %bias : tensor<64xf32> to tensor<1x8x64xf32>
    ```
  }];
  let arguments = (ins MF_Tensor:$input);
  let results = (outs MF_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class MF_ReduceOp<string mnemonic> : MF_Op<mnemonic, [Pure, InferTypeOpAdaptor,
    SameOperandsAndResultElementType, DeclareOpInterfaceMethods<MF_GradientOpInterface>]> {
  let description = [{
    Reduces `dimension`, which stays in the result with size 1.

    ```mlir
    %r = mf.}] # mnemonic # [{ %x dim = 2 : tensor<1x8x64xf32> -> tensor<1x8x1xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$input,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$dimension);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $input `dim` `=` $dimension attr-dict `:` type($input) `->` type($result)
  }];
}

def MF_ReduceSumOp : MF_ReduceOp<"reduce_sum"> {
  let summary = "Sum over one dimension";
}

def MF_ReduceMaxOp : MF_ReduceOp<"reduce_max"> {
  let summary = "Maximum over one dimension";
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

def MF_RecomputeBarrierOp : MF_FreeOp<"recompute_barrier",
    [SameOperandsAndResultType]> {
  let inExecutable = 0; // not stored in model.bin
  let summary = "The value a recomputation starts from, opaque to CSE and folding";
  let description = [{
    mf-recompute clones forward ops for the backward; the clones read their
    inputs through this op, so no pass finds a clone equal to its original
    and merges the two (which would keep the activation alive again: the
    classic recompute bug). It declares no memory effects, so CSE and DCE
    leave it alone; it has no folder. mf-drop-recompute-barriers replaces it
    by its input after fusion.

    ```mlir
    %x2 = mf.recompute_barrier %x : tensor<1x8x64xf32>
    ```
  }];
  let arguments = (ins MF_Tensor:$input);
  let results = (outs MF_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def MF_ReshapeOp : MF_CostedOp<"reshape", [
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>, DeclareOpInterfaceMethods<MF_GradientOpInterface>, Pure,
    SameOperandsAndResultElementType]> {
  let summary = "Reinterprets the shape; the element count is unchanged";
  let description = [{
    ```mlir
    %r = mf.reshape %x : tensor<1x8x64xf32> to tensor<1x8x4x16xf32>
    ```
  }];
  let arguments = (ins MF_Tensor:$input);
  let results = (outs MF_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def MF_TransposeOp : MF_CostedOp<"transpose", [DeclareOpInterfaceMethods<MF_GradientOpInterface>, Pure, InferTypeOpAdaptor,
    SameOperandsAndResultElementType]> {
  let summary = "Permutes dimensions";
  let description = [{
    Result dimension `i` is input dimension `permutation[i]`.

    ```mlir
    %r = mf.transpose %x [0, 2, 1, 3]
        : tensor<1x8x4x16xf32> -> tensor<1x4x8x16xf32>
    ```
  }];
  let arguments = (ins MF_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs MF_Tensor:$result);
  let assemblyFormat = [{
    $input $permutation attr-dict `:` type($input) `->` type($result)
  }];
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def MF_SliceOp : MF_CostedOp<"slice", [
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>, DeclareOpInterfaceMethods<MF_GradientOpInterface>, Pure, SameOperandsAndResultElementType]> {
  let summary = "A contiguous box of a tensor";
  let description = [{
    Takes the box starting at `offsets` with the result's shape (stride 1).

    ```mlir
    %q = mf.slice %qkv [0, 0, 0] : tensor<1x8x192xf32> -> tensor<1x8x64xf32>
    ```
  }];
  let arguments = (ins MF_Tensor:$input, DenseI64ArrayAttr:$offsets);
  let results = (outs MF_Tensor:$result);
  let assemblyFormat = [{
    $input $offsets attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MF_ConcatOp : MF_CostedOp<"concat", [DeclareOpInterfaceMethods<MF_GradientOpInterface>,
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>, Pure,
    SameOperandsAndResultElementType]> {
  let summary = "Joins tensors along one dimension";
  let description = [{
    ```mlir
    %r = mf.concat %a, %b dim = 1
        : (tensor<1x4x64xf32>, tensor<1x4x64xf32>) -> tensor<1x8x64xf32>
    ```
  }];
  let arguments = (ins Variadic<MF_Tensor>:$inputs,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$dimension);
  let results = (outs MF_Tensor:$result);
  let assemblyFormat = [{
    $inputs `dim` `=` $dimension attr-dict `:` functional-type($inputs, $result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Model-level operations
//===----------------------------------------------------------------------===//

def MF_EmbeddingOp : MF_CostedOp<"embedding", [
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>, DeclareOpInterfaceMethods<MF_GradientOpInterface>, Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>],
    ["getFlops", "getBytesAccessed"]> {
  let summary = "Looks up rows of an embedding table";
  let description = [{
    `result[b, s, :] = table[ids[b, s], :]`. An id outside `[0, vocab)` is an
    error at run time. The table may hold a quantized weight's i8 values
    (mf-quantize-weights gathers their rows and scales for a tied
    embedding).

    Vocabulary parallel (`vocab on @grid axes = [...]`): the table is this
    rank's block of rows of the whole table, split over the ranks that
    differ along those grid axes. Ids in other blocks give zero rows, so
    the result is a partial sum over those ranks (mf-partition adds the
    all-reduce).

    ```mlir
    %h = mf.embedding %table, %ids
        : tensor<256x64xf32>, tensor<1x8xi32> -> tensor<1x8x64xf32>
    %partial = mf.embedding %block, %ids vocab on @grid axes = [1]
        : tensor<128x64xf32>, tensor<1x8xi32> -> tensor<1x8x64xf32>
    ```
  }];
  let arguments = (ins MF_ParameterTensor:$table, MF_IndexTensor:$ids,
                       OptionalAttr<FlatSymbolRefAttr>:$grid,
                       OptionalAttr<DenseI16ArrayAttr>:$grid_axes);
  let results = (outs MF_ParameterTensor:$result);
  let assemblyFormat = [{
    $table `,` $ids (`vocab` `on` $grid^ `axes` `=` $grid_axes)? attr-dict `:` type($table) `,` type($ids) `->` type($result)
  }];
  let builders = [
    // Not vocabulary parallel; the result type from the shape rule.
    OpBuilder<(ins "Value":$table, "Value":$ids), [{
      build($_builder, $_state, table, ids, FlatSymbolRefAttr(),
            DenseI16ArrayAttr());
    }]>
  ];
}

def MF_RmsNormOp : MF_CostedOp<"rms_norm", [
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>, DeclareOpInterfaceMethods<MF_GradientOpInterface>, Pure,
    AllTypesMatch<["input", "result"]>,
    AllElementTypesMatch<["input", "weight"]>]> {
  let summary = "RMSNorm over the last dimension";
  let description = [{
    `x / sqrt(mean(x^2, -1) + epsilon) * weight`; `weight` has the size of the
    last dimension.

    ```mlir
    %r = mf.rms_norm %x, %w eps = 1.0e-05 : tensor<1x8x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$input, MF_FloatTensor:$weight,
                       F64Attr:$epsilon);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `eps` `=` $epsilon attr-dict `:` type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def MF_LayerNormOp : MF_CostedOp<"layer_norm", [
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>, DeclareOpInterfaceMethods<MF_GradientOpInterface>, Pure,
    AllTypesMatch<["input", "result"]>,
    AllTypesMatch<["weight", "bias"]>,
    AllElementTypesMatch<["input", "weight"]>]> {
  let summary = "LayerNorm over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * weight + bias`, with the biased
    variance, over the last dimension.

    ```mlir
    %r = mf.layer_norm %x, %w, %b eps = 1.0e-05
        : tensor<1x8x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$input, MF_FloatTensor:$weight,
                       MF_FloatTensor:$bias, F64Attr:$epsilon);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias `eps` `=` $epsilon attr-dict `:` type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def MF_MatmulOp : MF_CostedOp<"matmul", [
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>, DeclareOpInterfaceMethods<MF_GradientOpInterface>, Pure,
    InferTypeOpAdaptor]> {
  let summary = "Matrix multiplication, batched over leading dimensions";
  let description = [{
    Multiplies the last two dimensions of `lhs` and `rhs`, after transposing
    them if `transpose_lhs` / `transpose_rhs` is set. A rank-2 `rhs` (a
    weight) is applied to every matrix of `lhs`; otherwise the leading batch
    dimensions of both operands must be equal. A `Linear` weight stored as
    `[out, in]` is used with `transpose_rhs`.

    ```mlir
    %y = mf.matmul %x, %w transpose_rhs
        : tensor<1x8x64xf32>, tensor<128x64xf32> -> tensor<1x8x128xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$lhs, MF_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def MF_SwiGluOp : MF_CostedOp<"swiglu", [DeclareOpInterfaceMethods<MF_GradientOpInterface>, Pure, Elementwise,
    SameOperandsAndResultType]> {
  let summary = "The SwiGLU gate: silu(gate) * up";
  let description = [{
    ```mlir
    %h = mf.swiglu %gate, %up : tensor<1x8x172xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$gate, MF_FloatTensor:$up);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

def MF_SoftmaxOp : MF_CostedOp<"softmax", [DeclareOpInterfaceMethods<MF_GradientOpInterface>, Pure, SameOperandsAndResultType]> {
  let summary = "Softmax along one dimension";
  let description = [{
    ```mlir
    %p = mf.softmax %x dim = 3 : tensor<1x4x8x8xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$input,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$dimension);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = "$input `dim` `=` $dimension attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def MF_RopeOp : MF_CostedOp<"rope", [
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>, DeclareOpInterfaceMethods<MF_GradientOpInterface>, Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Rotary position embedding, rotate-half form";
  let description = [{
    `input` is `[batch, seq, heads, head_dim]`, `positions` is `[batch, seq]`.
    For `i < head_dim / 2` and angle `p * theta^(-2i / head_dim)`, the pair
    `(x[i], x[i + head_dim/2])` is rotated by the angle (the Hugging Face
    `rotate_half` convention). With `inverse` the rotation is by minus the
    angle: that is the rotation's transpose, so it is also its gradient.

    `frequency_scale` (head_dim / 2 positive values) multiplies each
    inverse frequency: the context extensions position interpolation
    (every frequency divided by the factor) and LLaMA-3's (low frequencies
    divided, high ones kept, a ramp between) are such scales, which the
    frontend computes from the YAML.

    ```mlir
    %q = mf.rope %x, %pos theta = 1.0e+04
        : tensor<1x8x4x16xf32>, tensor<1x8xi32>
    %k = mf.rope %x, %pos theta = 5.0e+05 frequency_scale = [1.0, 0.5, 0.125, 0.125]
        : tensor<1x8x4x8xf32>, tensor<1x8xi32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$input, MF_IndexTensor:$positions,
                       F64Attr:$theta, UnitAttr:$inverse,
                       OptionalAttr<DenseF64ArrayAttr>:$frequency_scale);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $positions `theta` `=` $theta (`frequency_scale` `=` $frequency_scale^)? (`inverse` $inverse^)? attr-dict `:` type($input) `,` type($positions)
  }];
  let hasVerifier = 1;
}

def MF_AttentionOp : MF_CostedOp<"attention", [
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>, DeclareOpInterfaceMethods<MF_GradientOpInterface>, Pure,
    AllTypesMatch<["query", "result"]>,
    AllTypesMatch<["key", "value"]>, AttrSizedOperandSegments]> {
  let summary = "Scaled dot-product attention, causal, with grouped KV heads";
  let description = [{
    `query` is `[batch, seq, q_heads, head_dim]`; `key` and `value` are
    `[batch, kv_len, kv_heads, head_dim]` with `q_heads` a multiple of
    `kv_heads` (grouped-query attention: query head `h` reads KV head
    `h / (q_heads / kv_heads)`). Scores are `q.k * scale`.

    With `causal`, query `i` sees keys `0 .. past_length + i`, where
    `past_length` (default 0) is the number of tokens already in a KV cache
    that `key` and `value` hold; keys beyond that are never read, so a cache
    may be longer than what it holds. `past_length` is one scalar for every
    batch row, or one per row (`tensor<batch x i32>`, written after a
    colon): the rows of a serving batch are at different positions.

    With a `block_table` (`tensor<batch x blocks x i32>`, a paged KV cache
    as PagedAttention has it), `key` and `value` are pools
    `[num_blocks, block_size, kv_heads, head_dim]` and row `b`'s key at
    position `p` is pool block `block_table[b, p / block_size]`, row
    `p % block_size`; `past_length` is then required. A negative entry is
    a block not mapped: a query row that would see a key in one has zeros
    as its output (a free serving slot, a prompt's padding). An entry past
    the pool is an error at run time.

    With `key_scale` and `value_scale` (`[kv_heads, head_dim]`, the query's
    type) `key` and `value` are an int8 KV cache (`mf.quantize` wrote it):
    key channel `c` reads `q * key_scale[c]` in f32, values alike
    (symmetric: MindFormers' int8 KV cache, `kvcache_dtype: int8`).

    ```mlir
    %o = mf.attention %q, %k, %v past_length(%n) causal scale = 2.5e-01
        : tensor<1x1x4x16xf32>, tensor<1x32x2x16xf32>
    %r = mf.attention %q2, %k2, %v2 past_length(%rows : tensor<2xi32>) causal
        scale = 2.5e-01 : tensor<2x1x4x16xf32>, tensor<2x32x2x16xf32>
    %p = mf.attention %q2, %kp, %vp past_length(%rows : tensor<2xi32>)
        block_table(%table) causal scale = 2.5e-01
        : tensor<2x1x4x16xf32>, tensor<64x8x2x16xf32>, tensor<2x4xi32>
    %i = mf.attention %q, %k8, %v8 past_length(%n) causal scale = 2.5e-01
        kv_scales(%ks, %vs : tensor<2x16xf32>, tensor<2x16xf32>)
        : tensor<1x1x4x16xf32>, tensor<1x32x2x16xi8>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$query, MF_CacheTensor:$key,
                       MF_CacheTensor:$value,
                       Optional<MF_PositionTensor>:$past_length,
                       Optional<MF_BlockTable>:$block_table,
                       Optional<MF_FloatTensor>:$key_scale,
                       Optional<MF_FloatTensor>:$value_scale,
                       UnitAttr:$causal, F64Attr:$scale);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value
    (`past_length` `(` $past_length^ `` custom<PositionType>(type($past_length)) `)`)?
    (`block_table` `(` $block_table^ `)`)?
    (`causal` $causal^)? `scale` `=` $scale
    (`kv_scales` `(` $key_scale^ `,` $value_scale `:` type($key_scale) `,` type($value_scale) `)`)? attr-dict `:` type($query) `,` type($key)
    (`,` type($block_table)^)?
  }];
  let hasVerifier = 1;
}

def MF_KvCacheWriteOp : MF_CostedOp<"kv_cache_write", [
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>, Pure,
    AllTypesMatch<["cache", "result"]>,
    AllElementTypesMatch<["cache", "update"]>],
    ["getFlops", "getBytesAccessed"]> {
  let summary = "Writes new keys or values into a KV cache";
  let description = [{
    `cache` is `[batch, max_len, kv_heads, head_dim]`, `update` is
    `[batch, seq, kv_heads, head_dim]`; the result is `cache` with rows
    `position .. position + seq` replaced by `update`, where `position` is
    one scalar for every batch row or one per row (`tensor<batch x i32>`,
    written after the other types). A position past the end is an error at
    run time.

    With a `block_table` (`tensor<batch x blocks x i32>`), `cache` is a pool
    `[num_blocks, block_size, kv_heads, head_dim]` of paged KV blocks
    (mf.attention says how a table maps positions); a row whose block is
    not mapped (a negative entry) is not written.

    An int8 cache (`i8`, MindFormers' `kvcache_dtype: int8`) takes i8 rows
    that `mf.quantize` computed; `mf.attention` reads it with its scales.

    ```mlir
    %c1 = mf.kv_cache_write %c0, %k, %pos
        : tensor<1x32x2x16xf32>, tensor<1x1x2x16xf32>
    %c3 = mf.kv_cache_write %c2, %k2, %rows
        : tensor<2x32x2x16xf32>, tensor<2x1x2x16xf32>, tensor<2xi32>
    %p1 = mf.kv_cache_write %p0, %k2, %rows block_table(%table)
        : tensor<64x8x2x16xf32>, tensor<2x1x2x16xf32>, tensor<2xi32>,
          tensor<2x4xi32>
    ```
  }];
  let arguments = (ins MF_CacheTensor:$cache, MF_CacheTensor:$update,
                       MF_PositionTensor:$position,
                       Optional<MF_BlockTable>:$block_table);
  let results = (outs MF_CacheTensor:$result);
  let assemblyFormat = [{
    $cache `,` $update `,` $position (`block_table` `(` $block_table^ `)`)?
    attr-dict `:` type($cache) `,`
    type($update) `` custom<TrailingPositionType>(type($position))
    (`,` type($block_table)^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Collectives (sharded programs: every rank runs the same program)
//===----------------------------------------------------------------------===//

def MF_AllReduceOp : MF_CostedOp<"all_reduce", [
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>, 
    DeclareOpInterfaceMethods<MF_GradientOpInterface>, Pure,
    SameOperandsAndResultType,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>],
    ["getFlops", "getBytesAccessed"]> {
  let summary = "Sums a tensor over the ranks of grid axes";
  let description = [{
    Each rank holds a partial sum (the result of a row-parallel matmul); the
    result, on every rank of the group, is the sum over the ranks that
    differ only in the coordinates of `grid_axes` of `grid` (a
    `shard.grid`). Sums are accumulated in f32 whatever the element type.
    Its gradient is the identity (Megatron's `g`): the result is replicated,
    so each rank's gradient of it is already the gradient of its partial
    sum.

    ```mlir
    %y = mf.all_reduce %partial on @grid axes = [1] : tensor<1x8x64xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$input, FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $input `on` $grid `axes` `=` $grid_axes attr-dict `:` type($result)
  }];
}

/// A collective along one dimension: `dimension` of the tensor is split
/// over the ranks of `grid_axes` on one side of the op and whole on the
/// other.
class MF_DimCollectiveOp<string mnemonic, string summary_, string description_>
    : MF_CostedOp<mnemonic, [DeclareOpInterfaceMethods<MF_GradientOpInterface>,
                             DeclareOpInterfaceMethods<MF_ShardingOpInterface>,
                             Pure, SameOperandsAndResultElementType,
                             DeclareOpInterfaceMethods<SymbolUserOpInterface>],
                  ["getFlops", "getBytesAccessed"]> {
  let summary = summary_;
  let description = description_;
  let arguments = (ins MF_FloatTensor:$input, FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$dimension);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $input `on` $grid `axes` `=` $grid_axes `dim` `=` $dimension attr-dict
    `:` type($input) `->` type($result)
  }];
}

def MF_AllGatherOp : MF_DimCollectiveOp<"all_gather",
    "Joins the ranks' blocks along a dimension",
    [{
    Each rank holds a block of the result along `dimension`; the result, on
    every rank of the group (the ranks that differ only in the coordinates
    of `grid_axes`), is the blocks in the order of those coordinates. Its
    gradient keeps the rank's block of the result's gradient (`mf.scatter`):
    the result is replicated, so each rank's gradient of it is whole.

    ```mlir
    %w = mf.all_gather %block on @grid axes = [0] dim = 0
        : tensor<32x64xf32> -> tensor<64x64xf32>
    ```
    }]>;

def MF_ReduceScatterOp : MF_DimCollectiveOp<"reduce_scatter",
    "Sums over the ranks and keeps this rank's block along a dimension",
    [{
    The sum of `input` over the ranks of the group, of which each rank keeps
    the block along `dimension` at its coordinates (ZeRO's gradient
    reduction; the all-reduce's second half). Sums are accumulated in f32.
    Its gradient is the all-gather of the result's gradient.

    ```mlir
    %g = mf.reduce_scatter %grad on @grid axes = [0] dim = 0
        : tensor<64x64xf32> -> tensor<32x64xf32>
    ```
    }]>;

def MF_ScatterOp : MF_DimCollectiveOp<"scatter",
    "Keeps this rank's block of a replicated tensor along a dimension",
    [{
    No communication: every rank holds `input` whole and keeps the block
    along `dimension` at its coordinates on `grid_axes` (the shard of the
    weights a rank updates with ZeRO). Its gradient is the all-gather of the
    result's gradient.

    ```mlir
    %shard = mf.scatter %w on @grid axes = [0] dim = 0
        : tensor<64x64xf32> -> tensor<32x64xf32>
    ```

    The block of an all-reduce over the same ranks is their reduce-scatter
    (canonicalization: the gradient of an all-gather whose consumers
    compute parts of its gradient, as under sequence parallelism).
    }]> {
  let hasCanonicalizeMethod = 1;
}

def MF_AllToAllDimsOp : MF_CostedOp<"all_to_all_dims", [
    DeclareOpInterfaceMethods<MF_GradientOpInterface>,
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>, Pure,
    SameOperandsAndResultElementType,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>],
    ["getFlops", "getBytesAccessed"]> {
  let summary = "Moves a tensor's split over the ranks from one dimension to another";
  let description = [{
    Each of the `n` ranks of the group (the ranks that differ only in the
    coordinates of `grid_axes`) cuts `input` into `n` blocks along
    `split_dim` and sends block `j` to rank `j`; the result is the blocks
    it receives joined along `concat_dim` in the senders' order (StableHLO's
    `all_to_all`, an `MPI_Alltoall`). DeepSpeed-Ulysses' context
    parallelism: the ranks hold a block of the sequence of every head
    before, and every position of a block of the heads after. Its gradient
    moves the split back: the same op with the two dimensions swapped.

    ```mlir
    %q = mf.all_to_all_dims %x on @grid axes = [3] split = 2 concat = 1
        : tensor<1x8x4x16xf32> -> tensor<1x16x2x16xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$input, FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$split_dim,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$concat_dim);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $input `on` $grid `axes` `=` $grid_axes `split` `=` $split_dim
    `concat` `=` $concat_dim attr-dict `:` type($input) `->` type($result)
  }];
}

def MF_ProcessIndexOp : MF_FreeOp<"process_index", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "This rank's index along grid axes";
  let description = [{
    The index of the running rank among the ranks that differ only in the
    coordinates of `grid_axes` (row-major over them; upstream MLIR's
    `shard.process_multi_index` of one axis): what a rank's block of a split
    dimension starts at, in blocks (context parallelism's first position).

    ```mlir
    %r = mf.process_index on @grid axes = [3] : tensor<i32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$grid_axes);
  let results = (outs MF_ScalarIndexTensor:$result);
  let assemblyFormat = [{
    `on` $grid `axes` `=` $grid_axes attr-dict `:` type($result)
  }];
}

def MF_ReplicateOp : MF_FreeOp<"replicate", [
    DeclareOpInterfaceMethods<MF_GradientOpInterface>,
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>, Pure,
    SameOperandsAndResultType,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let inExecutable = 0; // not stored in model.bin
  let summary = "A replicated value read by split computation (Megatron's f)";
  let description = [{
    The identity on `input`, which every rank of the group holds whole, where
    each rank's consumers compute with its block of split weights (the
    input of column-parallel matmuls): each rank's gradient of the value is
    then only its part, and the gradient rule sums them over the ranks of
    `grid_axes` with `mf.all_reduce`. `mf-partition` puts it there (and the
    frontend, over context parallelism's gathered keys); once
    `mf-autodiff` has used it, canonicalization folds it away.

    ```mlir
    %x1 = mf.replicate %x on @grid axes = [1] : tensor<1x8x64xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$input, FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $input `on` $grid `axes` `=` $grid_axes attr-dict `:` type($result)
  }];
  let hasFolder = 1;
}

def MF_CrossEntropyOp : MF_CostedOp<"cross_entropy", [
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>, DeclareOpInterfaceMethods<MF_GradientOpInterface>, Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Mean cross-entropy of logits against integer labels";
  let description = [{
    `logits` is `[tokens, vocab]`, `labels` is `[tokens]`. Tokens whose label
    equals `ignore_index` do not count; the result is the mean negative
    log-likelihood over the others (0 when there are none).

    Vocabulary parallel (`vocab on @grid axes = [...]`, Megatron's
    vocab-parallel cross-entropy): `logits` is this rank's block of the
    vocabulary, split over the ranks that differ along those grid axes. The
    ranks combine each token's maximum, sum of exponentials and label logit
    (two all-reduces of a few numbers per token), and every one of them
    computes the loss of the whole vocabulary.

    ```mlir
    %loss = mf.cross_entropy %logits, %labels ignore_index = -100
        : tensor<8x256xf32>, tensor<8xi32> -> tensor<f32>
    %same = mf.cross_entropy %block, %labels ignore_index = -100
        vocab on @grid axes = [1] : tensor<8x128xf32>, tensor<8xi32> -> tensor<f32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$logits, MF_IndexTensor:$labels,
                       I64Attr:$ignore_index,
                       OptionalAttr<FlatSymbolRefAttr>:$grid,
                       OptionalAttr<DenseI16ArrayAttr>:$grid_axes);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $logits `,` $labels `ignore_index` `=` $ignore_index (`vocab` `on` $grid^ `axes` `=` $grid_axes)? attr-dict `:` type($logits) `,` type($labels) `->` type($result)
  }];
  let builders = [
    // Not vocabulary parallel; the result type from the shape rule.
    OpBuilder<(ins "Value":$logits, "Value":$labels, "int64_t":$ignoreIndex), [{
      build($_builder, $_state, logits, labels,
            $_builder.getI64IntegerAttr(ignoreIndex), FlatSymbolRefAttr(),
            DenseI16ArrayAttr());
    }]>
  ];
}

//===----------------------------------------------------------------------===//
// Gradients (built by mf-autodiff)
//===----------------------------------------------------------------------===//

def MF_SiluGradOp : MF_CostedOp<"silu_grad", [Pure, Elementwise,
    SameOperandsAndResultType]> {
  let summary = "Gradient of SiLU: dy * d silu(x) / dx";
  let description = [{
    `dy * s * (1 + x * (1 - s))` with `s = sigmoid(x)`.

    ```mlir
    %dx = mf.silu_grad %x, %dy : tensor<1x8x172xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$input, MF_FloatTensor:$grad);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
}

def MF_GeluGradOp : MF_CostedOp<"gelu_grad", [Pure, Elementwise,
    SameOperandsAndResultType]> {
  let summary = "Gradient of GELU (exact or tanh approximation)";
  let description = [{
    ```mlir
    %dx = mf.gelu_grad %x, %dy approximate = tanh : tensor<1x8x256xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$input, MF_FloatTensor:$grad,
                       MF_GeluApproximation:$approximate);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat =
      "$input `,` $grad `approximate` `=` $approximate attr-dict `:` type($result)";
}

def MF_EmbeddingGradOp : MF_CostedOp<"embedding_grad", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Gradient of an embedding lookup: rows scattered and summed";
  let description = [{
    `result[v, :] = sum of grad[b, s, :] over every (b, s) with ids[b, s] = v`;
    the result has the table's type. Vocabulary parallel (`vocab on`, as in
    mf.embedding), the result is this rank's block of rows: ids in other
    blocks add nothing.

    ```mlir
    %dtable = mf.embedding_grad %ids, %dy
        : tensor<1x8xi32>, tensor<1x8x64xf32> -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins MF_IndexTensor:$ids, MF_FloatTensor:$grad,
                       OptionalAttr<FlatSymbolRefAttr>:$grid,
                       OptionalAttr<DenseI16ArrayAttr>:$grid_axes);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $grad (`vocab` `on` $grid^ `axes` `=` $grid_axes)? attr-dict `:` type($ids) `,` type($grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MF_RmsNormGradOp : MF_CostedOp<"rms_norm_grad", [Pure,
    AllTypesMatch<["input", "grad"]>]> {
  let summary = "Gradient of RMSNorm with respect to its input or weight";
  let description = [{
    The gradient with respect to forward operand `wrt`: 0, the input's
    (the input's type); 1, the weight's (summed over all rows).

    ```mlir
    %dx = mf.rms_norm_grad %x, %w, %dy eps = 1.0e-05 wrt = 0
        : tensor<1x8x64xf32>, tensor<64xf32> -> tensor<1x8x64xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$input, MF_FloatTensor:$weight,
                       MF_FloatTensor:$grad, F64Attr:$epsilon,
                       ConfinedAttr<I64Attr, [IntMinValue<0>, IntMaxValue<1>]>:$wrt);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $grad `eps` `=` $epsilon `wrt` `=` $wrt attr-dict `:` type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MF_LayerNormGradOp : MF_CostedOp<"layer_norm_grad", [Pure,
    AllTypesMatch<["input", "grad"]>]> {
  let summary = "Gradient of LayerNorm with respect to input, weight or bias";
  let description = [{
    The gradient with respect to forward operand `wrt`: 0, the input's; 1,
    the weight's; 2, the bias's (both summed over all rows).

    ```mlir
    %dw = mf.layer_norm_grad %x, %w, %dy eps = 1.0e-05 wrt = 1
        : tensor<1x8x64xf32>, tensor<64xf32> -> tensor<64xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$input, MF_FloatTensor:$weight,
                       MF_FloatTensor:$grad, F64Attr:$epsilon,
                       ConfinedAttr<I64Attr, [IntMinValue<0>, IntMaxValue<2>]>:$wrt);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $grad `eps` `=` $epsilon `wrt` `=` $wrt attr-dict `:` type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MF_AttentionGradOp : MF_CostedOp<"attention_grad", [Pure,
    AllTypesMatch<["query", "grad"]>, AllTypesMatch<["key", "value"]>]> {
  let summary = "Gradient of attention (no KV cache) for query, key or value";
  let description = [{
    For `mf.attention %q, %k, %v [causal] scale = s` and the gradient `grad`
    of its result: `wrt` = 0 gives the query's gradient, 1 the key's, 2
    the value's (summed over the query heads that share a KV head). The
    softmax is recomputed one query row at a time; no s x s matrix is kept.
    With a `past_length` (one scalar), query `i` saw keys `0 ..
    past_length + i`, as in `mf.attention`: context parallelism's queries
    of one block of the sequence against every rank's keys.

    ```mlir
    %dk = mf.attention_grad %q, %k, %v, %do causal scale = 2.5e-01 wrt = 1
        : tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32> -> tensor<1x8x2x16xf32>
    %dq = mf.attention_grad %q, %k, %v, %do past_length(%n) causal
        scale = 2.5e-01 wrt = 0
        : tensor<1x4x4x16xf32>, tensor<1x8x2x16xf32> -> tensor<1x4x4x16xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$query, MF_FloatTensor:$key,
                       MF_FloatTensor:$value, MF_FloatTensor:$grad,
                       Optional<MF_ScalarIndexTensor>:$past_length,
                       UnitAttr:$causal, F64Attr:$scale,
                       ConfinedAttr<I64Attr, [IntMinValue<0>, IntMaxValue<2>]>:$wrt);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $grad (`past_length` `(` $past_length^ `)`)? (`causal` $causal^)? `scale` `=` $scale `wrt` `=` $wrt attr-dict `:` type($query) `,` type($key) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MF_CrossEntropyGradOp : MF_CostedOp<"cross_entropy_grad", [Pure,
    AllTypesMatch<["logits", "result"]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Gradient of the mean cross-entropy with respect to the logits";
  let description = [{
    `(softmax(logits) - onehot(label)) * dloss / count` per counted token,
    zero for tokens labelled `ignore_index`. Vocabulary parallel (`vocab
    on`, as in mf.cross_entropy), this rank's block of it: the softmax's
    statistics are combined over the ranks.

    ```mlir
    %dlogits = mf.cross_entropy_grad %logits, %labels, %dloss ignore_index = -100
        : tensor<8x256xf32>, tensor<8xi32>, tensor<f32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$logits, MF_IndexTensor:$labels,
                       0DTensorOf<[F32]>:$grad, I64Attr:$ignore_index,
                       OptionalAttr<FlatSymbolRefAttr>:$grid,
                       OptionalAttr<DenseI16ArrayAttr>:$grid_axes);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad `ignore_index` `=` $ignore_index (`vocab` `on` $grid^ `axes` `=` $grid_axes)? attr-dict `:` type($logits) `,` type($labels) `,` type($grad)
  }];
  let hasVerifier = 1;
}

def MF_PadOp : MF_CostedOp<"pad", [Pure, SameOperandsAndResultElementType]> {
  let summary = "Places a tensor in a larger zero tensor";
  let description = [{
    The result is zero except for the box at `offsets` with the input's
    shape, which holds the input: the gradient of `mf.slice`.

    ```mlir
    %dqkv = mf.pad %dq [0, 0, 64] : tensor<1x8x64xf32> -> tensor<1x8x192xf32>
    ```
  }];
  let arguments = (ins MF_Tensor:$input, DenseI64ArrayAttr:$offsets);
  let results = (outs MF_Tensor:$result);
  let assemblyFormat = [{
    $input $offsets attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MF_AllToAllOffsetsOp : MF_CostedOp<"all_to_all_offsets", [
    Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>],
    ["getFlops", "getBytesAccessed"]> {
  let summary = "Tells each rank of a group how many rows of each segment it receives";
  let description = [{
    Expert parallelism's first exchange. `offsets` cut this rank's rows
    into `S` segments, `S / n` for each of the `n` ranks of the group (the
    ranks that differ only in the coordinates of `grid_axes`): segments
    `[j * S / n, (j + 1) * S / n)` go to rank `j`. The result cuts the rows
    this rank receives into segments by sender: segment `i * S / n + l` is
    sender `i`'s segment `this * S / n + l`, and the result's offsets are
    their sizes' running sum from 0. `mf.all_to_all` then moves the rows.

    ```mlir
    %recv_off = mf.all_to_all_offsets %off on @grid axes = [0] : tensor<9xi32>
    ```
  }];
  let arguments = (ins MF_IndexTensor:$offsets, FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes);
  let results = (outs MF_IndexTensor:$result);
  let assemblyFormat = [{
    $offsets `on` $grid `axes` `=` $grid_axes attr-dict `:` type($result)
  }];
}

def MF_AllToAllOp : MF_CostedOp<"all_to_all", [
    Pure, DeclareOpInterfaceMethods<MF_GradientOpInterface>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>],
    ["getFlops", "getBytesAccessed"]> {
  let summary = "Sends segments of rows to the ranks of a group (MPI_Alltoallv)";
  let description = [{
    Rows `[send_offsets[s], send_offsets[s + 1])` of `rows` are segment
    `s`; of the `S` segments, `[j * S / n, (j + 1) * S / n)` go to rank `j`
    of the group (as `mf.all_to_all_offsets`). The result holds what the
    ranks send this one, laid out by `recv_offsets` (segments by sender);
    its rows past the last offset are zero. Each rank's `recv_offsets` must
    be what `mf.all_to_all_offsets` makes of the senders' `send_offsets`;
    the result's row count is a static bound (a dropless expert-parallel
    layer's: every rank's rows). Its gradient sends the result's gradient
    back: `mf.all_to_all` with the two offsets swapped.

    ```mlir
    %recv = mf.all_to_all %rows, %off, %recv_off on @grid axes = [0]
        : tensor<12x64xf32>, tensor<9xi32>, tensor<9xi32> -> tensor<24x64xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$rows, MF_IndexTensor:$send_offsets,
                       MF_IndexTensor:$recv_offsets, FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $rows `,` $send_offsets `,` $recv_offsets `on` $grid `axes` `=` $grid_axes
    attr-dict `:` type($rows) `,` type($send_offsets) `,` type($recv_offsets)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//
// A routed feed-forward in the dropless regime (every token reaches its k
// experts, as Hugging Face computes it): the router's probabilities go
// through `mf.top_k`; `mf.moe_route` orders the (token, choice) pairs by
// expert; `mf.moe_dispatch` gathers the tokens' rows in that order;
// `mf.grouped_matmul` multiplies each expert's rows by its weights; and
// `mf.moe_combine` sums each token's rows, weighted. Shapes are static; the
// size of each expert's group is known only at run time (`offsets`).
// Result types come from shapes/ShapeRules.h, which the runtime's loader
// also calls.

def MF_TopKOp : MF_CostedOp<"top_k", [Pure, InferTypeOpAdaptor,
                                     DeclareOpInterfaceMethods<MF_GradientOpInterface>]> {
  let summary = "The k largest values of the last dimension and their indices";
  let description = [{
    Along the last dimension, the `k` largest values in descending order
    and their indices (`i32`); equal values in index order. The routers of
    mixture-of-experts layers choose their experts with it.

    ```mlir
    %p, %i = mf.top_k %probs k = 2 : tensor<6x8xf32> -> tensor<6x2xf32>, tensor<6x2xi32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$input,
                       ConfinedAttr<I64Attr, [IntPositive]>:$k);
  let results = (outs MF_FloatTensor:$values, MF_IndexTensor:$indices);
  let assemblyFormat = [{
    $input `k` `=` $k attr-dict `:` type($input) `->` type($values) `,` type($indices)
  }];
}

def MF_MoeRouteOp : MF_CostedOp<"moe_route", [Pure, InferTypeOpAdaptor]> {
  let summary = "Orders a layer's routed tokens by expert";
  let description = [{
    `indices[t, c]` is the expert of token `t`'s choice `c`. The pairs
    `(t, c)` are ordered by expert, and within an expert by priority:
    token order (`t * k + c`), or with `choice_order` choice order
    (`c * tokens + t`: every first choice before any second one).
    `positions[t, c]` is the pair's place in that order, and expert `e`'s
    pairs are places `[offsets[e], offsets[e + 1])`.

    With a `capacity` (> 0) an expert keeps only its first `capacity`
    pairs in priority order; a dropped pair's position is -1 (its token
    gets nothing from that expert) and the kept pairs stay packed. An
    index outside `[0, num_experts)` is an error when the op runs.

    ```mlir
    %pos, %off = mf.moe_route %i num_experts = 8 : tensor<6x2xi32> -> tensor<6x2xi32>, tensor<9xi32>
    %pos2, %off2 = mf.moe_route %i num_experts = 8 capacity = 2 choice_order
        : tensor<6x2xi32> -> tensor<6x2xi32>, tensor<9xi32>
    ```
  }];
  let arguments = (ins MF_IndexTensor:$indices,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_experts,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntNonNegative]>, "0">:$capacity,
                       UnitAttr:$choice_order);
  let results = (outs MF_IndexTensor:$positions, MF_IndexTensor:$offsets);
  let assemblyFormat = [{
    $indices `num_experts` `=` $num_experts (`capacity` `=` $capacity^)? (`choice_order` $choice_order^)?
    attr-dict `:` type($indices) `->` type($positions) `,` type($offsets)
  }];
}

def MF_MoeDispatchOp : MF_CostedOp<"moe_dispatch", [Pure, InferTypeOpAdaptor,
                                   DeclareOpInterfaceMethods<MF_GradientOpInterface>],
                                   ["getFlops", "getBytesAccessed"]> {
  let summary = "Gathers routed tokens' rows in expert order";
  let description = [{
    `result[positions[t, c]] = tokens[t]`: each token's row once per
    choice, at its place in the expert-grouped order of `mf.moe_route`
    (none for a dropped pair, position -1; rows no pair names are zero).
    With `weights` (`[tokens, k]`) each row is scaled by its choice's
    weight: the gradient of `mf.moe_combine`'s rows.

    ```mlir
    %rows = mf.moe_dispatch %x, %pos : (tensor<6x64xf32>, tensor<6x2xi32>) -> tensor<12x64xf32>
    %drows = mf.moe_dispatch %dy, %pos, %p
        : (tensor<6x64xf32>, tensor<6x2xi32>, tensor<6x2xf32>) -> tensor<12x64xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$tokens, MF_IndexTensor:$positions,
                       Optional<MF_FloatTensor>:$weights);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $tokens `,` $positions (`,` $weights^)? attr-dict `:` functional-type(operands, results)
  }];
}

def MF_GroupedMatmulOp : MF_CostedOp<"grouped_matmul", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<MF_GradientOpInterface>,
    DeclareOpInterfaceMethods<MF_ShardingOpInterface>]> {
  let summary = "Each expert's rows times that expert's weight";
  let description = [{
    Rows `[offsets[e], offsets[e + 1])` of `rows` are multiplied by
    `weights[e]`, stored `[in, out]`, or with `transpose_rhs` `[out, in]`
    (a Linear's weight): all experts' projections in one op, whose group
    sizes are known only at run time. Offsets that are not ascending
    within `[0, rows]` are an error when the op runs; rows no group claims
    are zero. Its cost assumes every row is computed once.

    The experts' weights may also be one stacked operand `[E, in, out]`
    (`[E, out, in]`): then the offsets may cut the rows into any multiple
    of `E` groups, group `g` being expert `g mod E`'s. That is an
    expert-parallel layer's, whose received rows come in `E` groups from
    each rank (`mf.all_to_all`).

    ```mlir
    %h = mf.grouped_matmul %rows, %off, %w0, %w1 transpose_rhs
        : tensor<12x64xf32>, tensor<3xi32>, tensor<96x64xf32>, tensor<96x64xf32> -> tensor<12x96xf32>
    %h2 = mf.grouped_matmul %recv, %recv_off, %w transpose_rhs
        : tensor<24x64xf32>, tensor<5xi32>, tensor<2x96x64xf32> -> tensor<24x96xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$rows, MF_IndexTensor:$offsets,
                       Variadic<MF_FloatTensor>:$weights, UnitAttr:$transpose_rhs);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $rows `,` $offsets `,` $weights (`transpose_rhs` $transpose_rhs^)? attr-dict `:` type($rows) `,` type($offsets) `,` type($weights) `->` type($result)
  }];
}

def MF_MoeCombineOp : MF_CostedOp<"moe_combine", [Pure, InferTypeOpAdaptor,
                                   DeclareOpInterfaceMethods<MF_GradientOpInterface>,
                                   DeclareOpInterfaceMethods<MF_ShardingOpInterface>]> {
  let summary = "Sums each token's expert rows, weighted by its router";
  let description = [{
    `result[t] = sum over c of weights[t, c] * rows[positions[t, c]]`,
    accumulated in f32, a dropped pair (position -1) adding nothing: the
    inverse of `mf.moe_dispatch`, weighted.

    ```mlir
    %y = mf.moe_combine %out, %pos, %p : tensor<12x64xf32>, tensor<6x2xi32>, tensor<6x2xf32> -> tensor<6x64xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$rows, MF_IndexTensor:$positions,
                       MF_FloatTensor:$weights);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $rows `,` $positions `,` $weights attr-dict `:` type($rows) `,` type($positions) `,` type($weights) `->` type($result)
  }];
}

def MF_TopKGradOp : MF_CostedOp<"top_k_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "The gradient of mf.top_k's values, back at their indices";
  let description = [{
    A zero tensor whose last dimension is `width`, holding `gradient`'s
    values at `indices` (each row's indices are distinct, as `mf.top_k`
    gives them).

    ```mlir
    %dp = mf.top_k_grad %dv, %i width = 8 : tensor<6x2xf32>, tensor<6x2xi32> -> tensor<6x8xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$gradient, MF_IndexTensor:$indices,
                       ConfinedAttr<I64Attr, [IntPositive]>:$width);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $gradient `,` $indices `width` `=` $width attr-dict `:` type($gradient) `,` type($indices) `->` type($result)
  }];
}

def MF_GroupedMatmulWeightGradOp : MF_CostedOp<"grouped_matmul_weight_grad", [
    Pure, InferTypeOpAdaptor]> {
  let summary = "One expert's weight gradient of mf.grouped_matmul";
  let description = [{
    `gradient[g]^T rows[g]` over expert `expert`'s group `g` (rows
    `[offsets[expert], offsets[expert + 1])`): the gradient of its weight
    stored `[out, in]`; zero when no token chose the expert.

    With `stacked = E` it is the gradient of a stacked weight
    `[E, out, in]`: expert `e`'s is the sum over the groups `g` with
    `g mod E = e` (`expert` is then 0).

    ```mlir
    %dw1 = mf.grouped_matmul_weight_grad %dh, %rows, %off expert = 1
        : tensor<12x96xf32>, tensor<12x64xf32>, tensor<3xi32> -> tensor<96x64xf32>
    %dw = mf.grouped_matmul_weight_grad %dh, %recv, %recv_off expert = 0 stacked = 2
        : tensor<24x96xf32>, tensor<24x64xf32>, tensor<5xi32> -> tensor<2x96x64xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$gradient, MF_FloatTensor:$rows,
                       MF_IndexTensor:$offsets,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$expert,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntNonNegative]>, "0">:$stacked);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $gradient `,` $rows `,` $offsets `expert` `=` $expert (`stacked` `=` $stacked^)? attr-dict `:` type($gradient) `,` type($rows) `,` type($offsets) `->` type($result)
  }];
}

def MF_MoeWeightsGradOp : MF_CostedOp<"moe_weights_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "The gradient of mf.moe_combine's routing weights";
  let description = [{
    `result[t, c] = dot(gradient[t], rows[positions[t, c]])`.

    ```mlir
    %dp = mf.moe_weights_grad %dy, %out, %pos
        : tensor<6x64xf32>, tensor<12x64xf32>, tensor<6x2xi32> -> tensor<6x2xf32>
    ```
  }];
  let arguments = (ins MF_FloatTensor:$gradient, MF_FloatTensor:$rows,
                       MF_IndexTensor:$positions);
  let results = (outs MF_FloatTensor:$result);
  let assemblyFormat = [{
    $gradient `,` $rows `,` $positions attr-dict `:` type($gradient) `,` type($rows) `,` type($positions) `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def MF_FusionOp : MF_CostedOp<"fusion", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"YieldOp">, RecursiveMemoryEffects,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>],
    ["getFlops", "getBytesAccessed"]> {
  let inExecutable = 0; // not stored in model.bin
  let summary = "A group of ops that becomes one kernel";
  let description = [{
    The body computes the results from the inputs (bound to the block
    arguments) and yields them; nothing else crosses the boundary, so the
    values inside never reach memory. `kind` names the fusion rule that
    formed the group, which code generation builds its kernel by; `kernel`
    (after code generation) the kernel that computes it, in the module's
    `mfexec.executable`. Its FLOPs are its body's; its bytes are only its
    inputs and results.

    ```mlir
    %r = mf.fusion elementwise (%a, %b)
        : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
    ^bb0(%x: tensor<8xf32>, %y: tensor<8xf32>):
      %s = mf.add %x, %y : tensor<8xf32>
      %e = mf.exp %s : tensor<8xf32>
      mf.yield %e : tensor<8xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<MF_AnyTensor>:$inputs, MF_FusionKind:$kind,
                       OptionalAttr<SymbolRefAttr>:$kernel);
  let results = (outs Variadic<MF_AnyTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $kind `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasVerifier = 1;
}

def MF_YieldOp : MF_Op<"yield", [Pure, Terminator, ReturnLike,
    HasParent<"FusionOp">]> {
  let inExecutable = 0; // not stored in model.bin
  let summary = "The results of an mf.fusion body";
  let description = [{
    ```mlir
    mf.yield %e : tensor<8xf32>
    ```
  }];
  let arguments = (ins Variadic<MF_AnyTensor>:$values);
  let builders = [OpBuilder<(ins), [{ /* empty yield */ }]>];
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

#endif // MF_OPS_TD
