//===- CPUKernels.h - fusion regions -> native CPU kernels ------*- C++ -*-===//
//
// A kernel is built as a function of its tile range and its buffers,
//
//   func.func @mfk_N(%tileBegin: i64, %tileEnd: i64, %input0: memref<..>,
//                    ..., %output0: memref<..>, ...) -> i32
//
// on dense row-major buffers of the region's input and result types,
// returning a status (runtime/hal/KernelAbi.h). A kernel's work is split into
// `mf.tiles` independent tiles (an attribute of the kernel function); a
// call computes tiles [tileBegin, tileEnd), so the runtime can spread one
// kernel over its threads. Lowering (KernelLowering.cpp) turns each into
// the published ABI: `int32_t mfk_N(const mfrt_dispatch_state_v1 *)`, which
// checks the dispatch and calls the body, and a table of the kernels that
// `mfrt_kernel_library_query` returns.
//
// Kernels call back into the runtime for matmul tiles and attention
// through a "service": an external function `mfrt_X` that lowering turns
// into a trampoline through the global pointer `mfrt_X_ptr`, which the
// runtime sets after loading the library. The shared object so needs no
// symbol of the process that loads it.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_CODEGEN_CPU_CPUKERNELS_H
#define MFC_COMPILER_CODEGEN_CPU_CPUKERNELS_H

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MFExec/IR/MFExecOps.h"
#include "runtime/hal/KernelAbi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"

#include <optional>
#include <string>
#include <vector>

namespace mfc {

/// The attribute holding a kernel function's tile count.
inline constexpr llvm::StringLiteral kTilesAttr = "mf.tiles";

/// Declares runtime service `name` once in `module`: one argument, the
/// address of its argument struct (runtime/hal/KernelAbi.h), and an i32 status
/// result when `returnsStatus`.
void declareService(mlir::OpBuilder &builder, mlir::ModuleOp module,
                    llvm::StringRef name, bool returnsStatus);
/// A kernel's stack buffer for a service's argument struct of `fields`
/// 8-byte fields, allocated once at the kernel's entry.
mlir::Value serviceArguments(mlir::OpBuilder &builder,
                             mlir::func::FuncOp kernel, unsigned fields);
/// Calls service `name` with `fields`, the struct's fields in order (i64
/// values, addresses too, and f64 ones: 8 bytes each, as the C struct lays
/// them out), stored into `arguments` (serviceArguments). The status, or
/// null when the service returns none.
mlir::Value callService(mlir::OpBuilder &builder, mlir::Location loc,
                        llvm::StringRef name, mlir::Value arguments,
                        mlir::ValueRange fields, bool returnsStatus);

/// The runtime's matmul-tile service, called by matmul kernels with an
/// mfrt_gemm_args_v1 {A, B, C, ldc, m0, n0, m, n, K, N, transB, transA, M}:
/// C[m x n] (row stride ldc) = rows m0.. of op(A) [M x K] (A is [K x M] when
/// transA) times columns n0.. of op(B) (B is [N x K] when transB, else
/// [K x N]).
inline constexpr llvm::StringLiteral kGemmService = "mfrt_gemm_f32";
/// The same for f16 and bf16 operands A and B (C stays f32): the runtime
/// widens the rows and the panel a tile reads, then multiplies in f32.
inline constexpr llvm::StringLiteral kGemmServiceF16 = "mfrt_gemm_f16";
inline constexpr llvm::StringLiteral kGemmServiceBF16 = "mfrt_gemm_bf16";
/// The same for A times an [N x K] parameter B (transB) that the runtime
/// passes packed once into panels of 32 columns, the last one narrower
/// (runtime/kernels/PanelGemm.h): the kernel's argument is memref<N*K>. f16 and
/// bf16 A and B have their own services (C stays f32).
inline constexpr llvm::StringLiteral kGemmPanelsService = "mfrt_gemm_panels_f32";
inline constexpr llvm::StringLiteral kGemmPanelsServiceF16 = "mfrt_gemm_panels_f16";
inline constexpr llvm::StringLiteral kGemmPanelsServiceBF16 = "mfrt_gemm_panels_bf16";
/// f32 A times the i8 values of a quantized weight B (as stored, or as
/// panels): C = A op(Q); the kernel multiplies C's columns by the scales.
inline constexpr llvm::StringLiteral kGemmServiceI8 = "mfrt_gemm_i8";
inline constexpr llvm::StringLiteral kGemmPanelsServiceI8 =
    "mfrt_gemm_panels_i8";
/// The same with f16 or bf16 A (its rows widened once a tile).
inline constexpr llvm::StringLiteral kGemmPanelsServiceI8F16 =
    "mfrt_gemm_panels_i8_f16";
inline constexpr llvm::StringLiteral kGemmPanelsServiceI8BF16 =
    "mfrt_gemm_panels_i8_bf16";
/// f32 A times an int4 weight stored [N, K / 2] (not packed: a tied table
/// its lookups read), with its scales per group of K.
inline constexpr llvm::StringLiteral kGemmServiceI4 = "mfrt_gemm_i4";
/// A times an int4 weight's byte panels with its scales per group of K
/// (passed in the argument struct), in A's type: f32, f16, bf16.
inline constexpr llvm::StringLiteral kGemmPanelsServiceI4 =
    "mfrt_gemm_panels_i4";
inline constexpr llvm::StringLiteral kGemmPanelsServiceI4F16 =
    "mfrt_gemm_panels_i4_f16";
inline constexpr llvm::StringLiteral kGemmPanelsServiceI4BF16 =
    "mfrt_gemm_panels_i4_bf16";
/// int8 rows (mf.dynamic_quantize) times an int8 weight, both scaled
/// (the rows' scales and the weight's passed in the argument struct, in
/// the product's type): through the weight's dot panels, or as stored.
inline constexpr llvm::StringLiteral kGemmDotService = "mfrt_gemm_i8i8_dot";
inline constexpr llvm::StringLiteral kGemmDotServiceF16 =
    "mfrt_gemm_i8i8_dot_f16";
inline constexpr llvm::StringLiteral kGemmDotServiceBF16 =
    "mfrt_gemm_i8i8_dot_bf16";
inline constexpr llvm::StringLiteral kGemmInt8RowsService = "mfrt_gemm_i8i8";
inline constexpr llvm::StringLiteral kGemmInt8RowsServiceF16 =
    "mfrt_gemm_i8i8_f16";
inline constexpr llvm::StringLiteral kGemmInt8RowsServiceBF16 =
    "mfrt_gemm_i8i8_bf16";
/// Columns of the product per panel: runtime/kernels/PanelGemm.h's kPanelWidth,
/// the layout both sides share (checked by the panels numerics harness).
inline constexpr int64_t kPanelWidth = 32;
/// On a region whose kernel takes some inputs as panels: their operand
/// numbers, which mf-codegen-cpu moves into the kernel's mfexec.kernel.
inline constexpr llvm::StringLiteral kPanelInputsAttr = "mf.panel_inputs";
/// The same for the inputs it takes as dot panels (runtime/kernels/
/// Int8DotGemm.h: an int8 weight that int8 rows multiply).
inline constexpr llvm::StringLiteral kDotPanelInputsAttr =
    "mf.dot_panel_inputs";

/// The runtime's attention service (runtime/hal/KernelAbi.h's
/// mfrt_attention_args_v1): computes units [begin, end) of (batch, KV head)
/// of an attention region, returning an i32 status.
inline constexpr llvm::StringLiteral kAttentionService = "mfrt_attention";

/// Builds the kernel of an attention region (RoPE, KV-cache writes and
/// attention): one tile per (batch, KV head), or one tile in all for
/// little work, each a call of the attention service.
mlir::FailureOr<mlir::func::FuncOp>
buildAttentionKernel(mlir::mf::FusionOp fusion, mlir::OpBuilder &builder,
                     std::string &why);

/// The runtime's attention-gradient service (mfrt_attention_grad_args_v1):
/// units [begin, end) of the gradients of one attention, returning an i32
/// status.
inline constexpr llvm::StringLiteral kAttentionGradService =
    "mfrt_attention_grad";

/// Builds the kernel of an attention_grad region (the gradients of one
/// attention with respect to any of its inputs, computed together): one
/// tile per (batch, KV head), or one in all for little work.
mlir::FailureOr<mlir::func::FuncOp>
buildAttentionGradKernel(mlir::mf::FusionOp fusion, mlir::OpBuilder &builder,
                         std::string &why);

/// How a kernel reads a region input of shape `from` against its output
/// of shape `to` flattened to [rows, cols]: whole, one row of cols for every
/// row (a bias, a norm's weight), or one value.
enum class TileInput { Full, Row, Scalar };
/// Which, if the input can be read tile by tile (nullopt otherwise).
std::optional<TileInput> classifyTileInput(llvm::ArrayRef<int64_t> from,
                                           llvm::ArrayRef<int64_t> to);

/// Region values a tiled kernel reads: the region argument of each and how.
using TileReads =
    llvm::MapVector<mlir::Value, std::pair<unsigned, TileInput>>;

/// Appends the linalg.generic inputs over a [rows, cols] tile for `reads`,
/// one per (argument, how): a whole input's tile by `fullTile`, a row
/// input's [cols] view cut by `rowPart`, a scalar as a [1] view; records in
/// `inputOf` which input each value is.
void addTileReads(mlir::OpBuilder &builder, mlir::Location loc,
                  const TileReads &reads,
                  llvm::function_ref<mlir::Value(unsigned)> argument,
                  int64_t cols,
                  llvm::function_ref<mlir::Value(mlir::Value)> fullTile,
                  llvm::function_ref<mlir::Value(mlir::Value)> rowPart,
                  llvm::SmallVectorImpl<mlir::Value> &views,
                  llvm::SmallVectorImpl<mlir::AffineMap> &maps,
                  llvm::MapVector<mlir::Value, unsigned> &inputOf);

/// A linalg.generic over `inputs` and `outputs` computing the region
/// `body` per element: region value `key` is input inputOf[key], loaded by
/// `load(key, scalar, loc)` into the compute domain. Fails (and says why
/// in `why`) if an op of the body has no scalar form.
llvm::LogicalResult buildBodyGeneric(
    mlir::OpBuilder &builder, mlir::Location loc, mlir::Block &body,
    mlir::ValueRange inputs, mlir::ValueRange outputs,
    llvm::ArrayRef<mlir::AffineMap> maps,
    llvm::ArrayRef<mlir::utils::IteratorType> iterators,
    const llvm::MapVector<mlir::Value, unsigned> &inputOf,
    llvm::function_ref<mlir::Value(mlir::Value, mlir::Value, mlir::Location)>
        load,
    std::string &why);

/// Builds the kernel of a norm region (an RMSNorm, LayerNorm or softmax
/// over rows with elementwise producers and consumers): tiles of whole
/// rows, each computed producers -> row statistics -> normalized consumers
/// while it is in cache.
mlir::FailureOr<mlir::func::FuncOp>
buildNormKernel(mlir::mf::FusionOp fusion, mlir::OpBuilder &builder,
                std::string &why);

/// Builds the kernel of an elementwise region at `builder`'s insertion point
/// (one linalg.generic; one tile).
mlir::FailureOr<mlir::func::FuncOp>
buildElementwiseKernel(mlir::mf::FusionOp fusion, mlir::OpBuilder &builder,
                       std::string &why);

/// Builds the kernel of a matmul region (one or more matmuls sharing their
/// output shape, and an elementwise epilogue): output tiles of at most
/// 256 x 256 (halved while there are fewer than 6, down to 64 a side, 16
/// columns for one row, and 8K multiply-adds; one tile for a kernel under
/// 128K), each computed by the gemm service into scratch and finished by
/// the epilogue while it is in cache (a lone matmul straight into its
/// result). A product by one of `panelParameters` ([N, K], transposed)
/// reads it as panels: kGemmPanelsService, or emitVectorMatvecByPanels for
/// one row; int8 rows (an mf.dequantize of mf.dynamic_quantize's values)
/// times an int8 weight are int8 dot products, through the weight's dot
/// panels (kGemmDotService) or as stored (kGemmInt8RowsService).
/// The parameters that kernels read packed (mf-choose-weight-layout's
/// `panels` and `dot_panels`).
struct WeightLayouts {
  llvm::StringSet<> panels, dotPanels;
};

mlir::FailureOr<mlir::func::FuncOp>
buildMatmulKernel(mlir::mf::FusionOp fusion, mlir::OpBuilder &builder,
                  const WeightLayouts &panelParameters, std::string &why);

/// Emits out[outOffset + j] = x . w[n0 + j] for j in [0, n): a row x [K]
/// times rows of a weight w [N, K] (memrefs of f32, f16 or bf16; summed in
/// f32) into the f32 memref `out` [>= outOffset + n], in vector ops
/// (VectorMatvec.cpp: eight weight rows at once, 16 lanes a register).
void emitVectorMatvec(mlir::OpBuilder &builder, mlir::Location loc,
                      mlir::Value x, mlir::Value w, mlir::Value out,
                      mlir::Value outOffset, mlir::Value n0, mlir::Value n,
                      int64_t k);
/// The same for an int4 weight [weightRows, K] stored as bytes [weightRows,
/// K / 2] (k = 2j in the low nibble of byte j) with its scales per `group`
/// of K (a flat memref of [K / group, weightRows]); K and `group`
/// multiples of 32.
void emitVectorMatvecInt4(mlir::OpBuilder &builder, mlir::Location loc,
                          mlir::Value x, mlir::Value w, mlir::Value scales,
                          mlir::Value out, mlir::Value outOffset,
                          mlir::Value n0, mlir::Value n, int64_t k,
                          int64_t weightRows, int64_t group);
/// The same for a weight stored [K, N]: out[outOffset + j] = x . column
/// n0 + j of w, by rows of w (x[k] times 128 columns at a time).
void emitVectorMatvecByColumns(mlir::OpBuilder &builder, mlir::Location loc,
                               mlir::Value x, mlir::Value w, mlir::Value out,
                               mlir::Value outOffset, mlir::Value n0,
                               mlir::Value n, int64_t k);

/// The same for a weight [weightRows, K] given as its panels
/// (kGemmPanelsService's layout, a flat memref): out[outOffset + j] = x .
/// row n0 + j, n0 a multiple of 32.
void emitVectorMatvecByPanels(mlir::OpBuilder &builder, mlir::Location loc,
                              mlir::Value x, mlir::Value panels,
                              mlir::Value out, mlir::Value outOffset,
                              mlir::Value n0, mlir::Value n, int64_t k,
                              int64_t weightRows);

/// The same for an int4 weight [weightRows, K] given as the panels of its
/// bytes (i8 [weightRows, K / 2] packed like an i8 weight: byte row kb of
/// a panel holds each column's values at k = 2kb, low nibble, and 2kb + 1,
/// high) and its scales per `group` of K (a flat memref of [K / group,
/// weightRows]), applied to each group's sums.
void emitVectorMatvecByInt4Panels(mlir::OpBuilder &builder, mlir::Location loc,
                                  mlir::Value x, mlir::Value panels,
                                  mlir::Value scales, mlir::Value out,
                                  mlir::Value outOffset, mlir::Value n0,
                                  mlir::Value n, int64_t k, int64_t weightRows,
                                  int64_t group);

/// Lowers a module of kernels for `target` to the LLVM dialect, services
/// included, each kernel behind its ABI entry point, with the library's
/// query function (runtime/hal/KernelAbi.h).
llvm::LogicalResult lowerKernelsToLLVM(mlir::ModuleOp kernels,
                                       mlir::mfexec::TargetAttr target);

/// What kernels are compiled for (`cpu`: "native" = this machine, or an
/// LLVM CPU name): the triple, the CPU and every feature it enables (LLVM's
/// names), which model.bin records so that mf-run refuses a CPU that lacks
/// one. An error at `loc` for a CPU LLVM does not know.
mlir::FailureOr<mlir::mfexec::TargetAttr>
resolveKernelTarget(llvm::StringRef cpu, mlir::Location loc);

/// Translates an LLVM-dialect module, optimizes it (O3) and emits an ELF
/// object for `target`. Returns the object's bytes.
mlir::FailureOr<std::string> emitKernelObject(mlir::ModuleOp kernels,
                                              mlir::mfexec::TargetAttr target);

/// Links an object file into an ELF shared object with LLVM's lld.
mlir::FailureOr<std::string> linkSharedObject(llvm::StringRef object,
                                              mlir::Location loc);

/// The kernel function of `fusion` in the form above (named "mfk" until
/// deduplication names it), with `tiles` in kTilesAttr and an entry block
/// holding only the return of MFRT_KERNEL_OK.
mlir::func::FuncOp createKernelFunction(mlir::mf::FusionOp fusion,
                                       mlir::OpBuilder &builder, int64_t tiles);

/// A dense row-major view of `memref`'s buffer as `shape` (same element
/// count).
mlir::Value flattenMemRef(mlir::OpBuilder &builder, mlir::Location loc,
                          mlir::Value memref, llvm::ArrayRef<int64_t> shape);

/// In a kernel's entry block, the loop over its tiles [tileBegin, tileEnd)
/// (the first two arguments), clamped to [0, tiles): a corrupt dispatch
/// cannot make a kernel write outside its buffers. The builder is left at
/// the start of the loop body.
mlir::scf::ForOp buildTileLoop(mlir::OpBuilder &builder, mlir::Location loc,
                               mlir::Block *entry, int64_t tiles);

/// The graph's kernel executable, if codegen ran.
mlir::mfexec::ExecutableOp findExecutable(mlir::ModuleOp graph);

/// The graph's kernels as one ELF shared object (empty without kernels),
/// for model.bin.
mlir::FailureOr<std::string> buildKernelLibrary(mlir::ModuleOp graph);

} // namespace mfc

#endif // MFC_COMPILER_CODEGEN_CPU_CPUKERNELS_H
