//===- MFBase.td - mf dialect definition and base classes ---*- tablegen -*-===//
//
// The `mf` graph dialect: ranked, statically shaped tensors with value
// semantics, at the level a transformer model is written in.
//
//===----------------------------------------------------------------------===//

#ifndef MF_BASE_TD
#define MF_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "dialects/MF/IR/MFInterfaces.td"

def MF_Dialect : Dialect {
  let name = "mf";
  let cppNamespace = "::mlir::mf";
  let summary = "Graph dialect for transformer models described in MindFormers YAML";
  let description = [{
    `mf` holds a whole model as a graph of tensor operations with value
    semantics. Model-level operations (`mf.attention`, `mf.rms_norm`,
    `mf.rope`, ...) keep the structure the model is written in, so that
    fusion and the cost models can reason about them; primitive operations
    (`mf.add`, `mf.exp`, `mf.reduce_sum`, ...) are what composite operations
    decompose into. Every tensor is ranked with a static shape. Parameters
    are module-level symbols (`mf.parameter`) read with `mf.param`.

    Every operation carries a location naming the model path it came from
    (`model.layers.3.attention.wq`) fused with the YAML line that defined it.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
  // The module's and entries' mf.* settings are checked as the contract
  // they are (run mode, optimizer, entry value names, ...).
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  // Sharded programs name their device grid (shard.grid) and split their
  // parameters as upstream's shard.sharding does (#shard.axisarray).
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def MF_FloatElement : AnyTypeOf<[F32, F16, BF16]>;
def MF_FloatTensor : StaticShapeTensorOf<[F32, F16, BF16]>;
def MF_IndexTensor : StaticShapeTensorOf<[I32]>;
def MF_Tensor : StaticShapeTensorOf<[F32, F16, BF16, I32]>;
/// A quantized weight's integer values (docs/quantization.md).
def MF_QuantizedTensor : StaticShapeTensorOf<[I8]>;
/// A KV cache's rows: float, or int8 with scales (kvcache_dtype: int8).
def MF_CacheTensor : StaticShapeTensorOf<[F32, F16, BF16, I8]>;
/// Any value: what a fusion region may read.
def MF_AnyTensor : StaticShapeTensorOf<[F32, F16, BF16, I32, I8]>;
/// What a parameter holds: a float tensor or a quantized weight.
def MF_ParameterTensor : StaticShapeTensorOf<[F32, F16, BF16, I8]>;
/// Upstream's shard.sharding split_axes (#shard.axisarray): per tensor
/// dimension, the grid axes it is split over. (Not ShardBase.td's own
/// definition: including that file would make mf's enum generator emit
/// shard's enums a second time.)
def MF_GridAxesArrayAttr : Attr<
    CPred<"::llvm::isa<::mlir::shard::GridAxesArrayAttr>($_self)">,
    "split axes per dimension (#shard.axisarray)"> {
  let storageType = "::mlir::shard::GridAxesArrayAttr";
  let returnType = "::mlir::shard::GridAxesArrayAttr";
  let convertFromStorage = "$_self";
}

/// A rank-0 tensor<i32>: a position or a length.
def MF_ScalarIndexTensor : 0DTensorOf<[I32]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getI32Type())";
}

/// Where each batch row's new tokens start in a KV cache: a rank-0
/// tensor<i32> (one position for every row) or tensor<batch x i32> (one per
/// row: the rows of a serving batch are sequences of their own).
def MF_PositionTensor : TensorRankOf<[I32], [0, 1]>;
/// A paged KV cache's block table: per batch row, the pool block of each
/// block_size positions (negative: not mapped).
def MF_BlockTable : TensorRankOf<[I32], [2]>;

//===----------------------------------------------------------------------===//
// Base op class
//===----------------------------------------------------------------------===//

/// The op registry (tools/mf-tblgen, docs/adding-an-op.md): every `mf` op is
/// an op model.bin can store unless it sets `inExecutable = 0` (structure
/// that lowering removes). What model.bin stores of it is its ODS
/// definition itself: its operand and result counts, their type
/// constraints, `SameOperandsAndResultType`, and each attribute as a typed
/// field (a symbol `name` as the parameter's index; the `grid` symbol not
/// at all: an executable has one grid). From that mf-tblgen generates the
/// schema's op kinds and attribute tables, the runtime's op table and the
/// writer's encoding.
class MF_ExecutableRecord {
  bit inExecutable = 1;
}

/// Every `mf` op reports its cost; ops whose FLOPs are not one per result
/// element override `getFlops`.
class MF_Op<string mnemonic, list<Trait> traits = []>
    : Op<MF_Dialect, mnemonic,
         !listconcat(traits, [DeclareOpInterfaceMethods<MF_CostOpInterface>])>,
      MF_ExecutableRecord;

/// An op whose cost differs from the elementwise default: it defines the
/// interface methods named in `overrides` in C++.
class MF_CostedOp<string mnemonic, list<Trait> traits = [],
                  list<string> overrides = ["getFlops"]>
    : Op<MF_Dialect, mnemonic,
         !listconcat(traits, [DeclareOpInterfaceMethods<MF_CostOpInterface,
                                                        overrides>])>,
      MF_ExecutableRecord;

/// An op that does no work of its own: reading a parameter or a constant
/// costs nothing until a consumer reads the value (which counts the bytes).
class MF_FreeOp<string mnemonic, list<Trait> traits = []>
    : MF_CostedOp<mnemonic, traits, ["getFlops", "getBytesAccessed"]>;

#endif // MF_BASE_TD
