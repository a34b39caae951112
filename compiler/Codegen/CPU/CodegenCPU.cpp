//===- CodegenCPU.cpp - native kernels for the host program ---------------===//
//
// 1. The target CPU is resolved; which parameters the kernels read packed
//    into panels, mf-choose-weight-layout decided (`panels`).
// 2. Each region gets a kernel (structurally equivalent ones, every
//    layer's, are shared); a region without a kernel rule is inlined back
//    into plain ops, which the runtime's eager library runs, and the reason
//    is counted in `mf.kernels_skipped`.
// 3. The kernels go into the code module of an `mfexec.executable` for the
//    target that declares each kernel's buffers, tiles and panel inputs.
//
// Before it, mf-outline-lone-matmuls gives every matmul a region; after it,
// mfexec-lower-kernels lowers the code to the LLVM dialect. Each entry is
// then kernel regions and eager ops: what mf-lower-to-mfexec turns into a
// host program.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/CPUKernels.h"
#include "compiler/Codegen/CPU/ScalarEmitter.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/MF/Transforms/FusionUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OperationSupport.h"

#include <map>

namespace mfc {
#define GEN_PASS_DEF_MFCODEGENCPUPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace mfc

using namespace mlir;
using namespace mfc;

func::FuncOp mfc::createKernelFunction(mf::FusionOp fusion, OpBuilder &builder,
                                       int64_t tiles) {
  SmallVector<Type> argumentTypes(2, builder.getI64Type());
  for (Type type : llvm::concat<const Type>(fusion.getInputs().getTypes(),
                                            fusion.getResultTypes())) {
    auto tensor = cast<RankedTensorType>(type);
    argumentTypes.push_back(
        MemRefType::get(tensor.getShape(), tensor.getElementType()));
  }
  auto kernel = func::FuncOp::create(
      builder, fusion.getLoc(), "mfk",
      builder.getFunctionType(argumentTypes, builder.getI32Type()));
  kernel->setAttr(kTilesAttr, builder.getI64IntegerAttr(tiles));
  Block *entry = kernel.addEntryBlock();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(entry);
  func::ReturnOp::create(builder, fusion.getLoc(),
                         arith::ConstantIntOp::create(builder, fusion.getLoc(),
                                                      builder.getI32Type(),
                                                      MFRT_KERNEL_OK)
                             .getResult());
  return kernel;
}

void mfc::declareService(OpBuilder &builder, ModuleOp module, StringRef name,
                         bool returnsStatus) {
  if (module.lookupSymbol(name)) {
    return;
  }
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(module.getBody());
  SmallVector<Type> results;
  if (returnsStatus) {
    results.push_back(builder.getI32Type());
  }
  func::FuncOp::create(
      builder, module.getLoc(), name,
      builder.getFunctionType(LLVM::LLVMPointerType::get(builder.getContext()),
                              results))
      .setPrivate();
}

Value mfc::serviceArguments(OpBuilder &builder, func::FuncOp kernel,
                            unsigned fields) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(&kernel.getBody().front());
  return memref::AllocaOp::create(
      builder, kernel.getLoc(),
      MemRefType::get({static_cast<int64_t>(fields)}, builder.getI64Type()),
      ValueRange{}, builder.getI64IntegerAttr(8));
}

Value mfc::callService(OpBuilder &builder, Location loc, StringRef name,
                       Value arguments, ValueRange fields, bool returnsStatus) {
  Type i64 = builder.getI64Type();
  for (auto [index, field] : llvm::enumerate(fields)) {
    Value bits = field;
    if (field.getType().isF64()) { // a double field: its 8 bytes
      bits = arith::BitcastOp::create(builder, loc, i64, field);
    } else if (field.getType().isIndex()) {
      bits = arith::IndexCastOp::create(builder, loc, i64, field);
    }
    memref::StoreOp::create(
        builder, loc, bits, arguments,
        ValueRange{arith::ConstantIndexOp::create(builder, loc, index)});
  }
  Value address = LLVM::IntToPtrOp::create(
      builder, loc, LLVM::LLVMPointerType::get(builder.getContext()),
      arith::IndexCastOp::create(builder, loc, i64,
                                 memref::ExtractAlignedPointerAsIndexOp::create(
                                     builder, loc, arguments))
          .getResult());
  SmallVector<Type> results;
  if (returnsStatus) {
    results.push_back(builder.getI32Type());
  }
  auto call = func::CallOp::create(builder, loc, name, results, address);
  return returnsStatus ? call.getResult(0) : Value();
}

Value mfc::flattenMemRef(OpBuilder &builder, Location loc, Value memref,
                         ArrayRef<int64_t> shape) {
  SmallVector<OpFoldResult> sizes, strides;
  int64_t stride = 1;
  for (int64_t dim : llvm::reverse(shape)) {
    sizes.insert(sizes.begin(), builder.getIndexAttr(dim));
    strides.insert(strides.begin(), builder.getIndexAttr(stride));
    stride *= dim;
  }
  auto type = cast<MemRefType>(memref.getType());
  return memref::ReinterpretCastOp::create(
      builder, loc, MemRefType::get(shape, type.getElementType()), memref,
      builder.getIndexAttr(0), sizes, strides);
}

void mfc::addTileReads(OpBuilder &builder, Location loc,
                       const TileReads &reads,
                       function_ref<Value(unsigned)> argument, int64_t cols,
                       function_ref<Value(Value)> fullTile,
                       function_ref<Value(Value)> rowPart,
                       SmallVectorImpl<Value> &views,
                       SmallVectorImpl<AffineMap> &maps,
                       llvm::MapVector<Value, unsigned> &inputOf) {
  MLIRContext *context = builder.getContext();
  std::map<std::pair<unsigned, TileInput>, unsigned> viewOf;
  for (auto [value, read] : reads) {
    auto [it, inserted] = viewOf.try_emplace(read, views.size());
    inputOf[value] = it->second;
    if (!inserted) {
      continue;
    }
    Value memref = argument(read.first);
    switch (read.second) {
    case TileInput::Full:
      views.push_back(fullTile(memref));
      maps.push_back(AffineMap::getMultiDimIdentityMap(2, context));
      break;
    case TileInput::Row:
      views.push_back(rowPart(flattenMemRef(builder, loc, memref, {cols})));
      maps.push_back(AffineMap::get(2, 0, getAffineDimExpr(1, context)));
      break;
    case TileInput::Scalar:
      views.push_back(flattenMemRef(builder, loc, memref, {1}));
      maps.push_back(AffineMap::get(2, 0, getAffineConstantExpr(0, context)));
      break;
    }
  }
}

LogicalResult mfc::buildBodyGeneric(
    OpBuilder &builder, Location loc, Block &body, ValueRange inputs,
    ValueRange outputs, ArrayRef<AffineMap> maps,
    ArrayRef<utils::IteratorType> iterators,
    const llvm::MapVector<Value, unsigned> &inputOf,
    function_ref<Value(Value, Value, Location)> load, std::string &why) {
  auto yield = cast<mf::YieldOp>(body.getTerminator());
  ScalarEmitter emitter(builder);
  std::string failure;
  linalg::GenericOp::create(
      builder, loc, inputs, outputs, maps, iterators,
      [&](OpBuilder &, Location bodyLoc, ValueRange scalars) {
        llvm::DenseMap<Value, Value> scalarOf;
        for (auto [key, position] : inputOf) {
          scalarOf[key] = load(key, scalars[position], bodyLoc);
        }
        FailureOr<SmallVector<Value>> computed =
            emitter.emitBody(body, scalarOf, bodyLoc, failure);
        // On failure the kernel is dropped; the body only has to verify.
        SmallVector<Value> results =
            succeeded(computed) ? *computed
                                : SmallVector<Value>(yield.getValues().size(),
                                                     scalars[0]);
        linalg::YieldOp::create(builder, bodyLoc, results);
      });
  if (!failure.empty()) {
    why = failure;
    return mlir::failure();
  }
  return success();
}

scf::ForOp mfc::buildTileLoop(OpBuilder &builder, Location loc, Block *entry,
                              int64_t tiles) {
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(builder, loc, value);
  };
  auto argument = [&](unsigned position) -> Value {
    return arith::IndexCastOp::create(builder, loc, builder.getIndexType(),
                                      entry->getArgument(position));
  };
  Value begin = arith::MaxSIOp::create(builder, loc, argument(0), index(0));
  Value end = arith::MinSIOp::create(builder, loc, argument(1), index(tiles));
  auto loop = scf::ForOp::create(builder, loc, begin, end, index(1));
  builder.setInsertionPointToStart(loop.getBody());
  return loop;
}

namespace {

/// The parameters mf-choose-weight-layout marked `panels` or `dot_panels`.
WeightLayouts parametersReadAsPanels(ModuleOp graph) {
  WeightLayouts layouts;
  for (auto parameter : graph.getOps<mf::ParameterOp>()) {
    if (parameter.getPanels()) {
      layouts.panels.insert(parameter.getSymName());
    }
    if (parameter.getDotPanels()) {
      layouts.dotPanels.insert(parameter.getSymName());
    }
  }
  return layouts;
}

FailureOr<func::FuncOp> buildKernel(mf::FusionOp fusion, OpBuilder &builder,
                                    const WeightLayouts &panelParameters,
                                    std::string &why) {
  switch (fusion.getKind()) {
  case mf::FusionKind::elementwise:
    return buildElementwiseKernel(fusion, builder, why);
  case mf::FusionKind::matmul:
  case mf::FusionKind::matmul_epilogue:
    return buildMatmulKernel(fusion, builder, panelParameters, why);
  case mf::FusionKind::norm:
    return buildNormKernel(fusion, builder, why);
  case mf::FusionKind::attention:
    return buildAttentionKernel(fusion, builder, why);
  case mf::FusionKind::attention_grad:
    return buildAttentionGradKernel(fusion, builder, why);
  }
  why = "no code generator for the region's kind";
  return failure();
}

struct MFCodegenCPUPass : mfc::impl::MFCodegenCPUPassBase<MFCodegenCPUPass> {
  using MFCodegenCPUPassBase::MFCodegenCPUPassBase;

  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<arith::ArithDialect, func::FuncDialect, LLVM::LLVMDialect,
                    mfexec::MFExecDialect,
                    linalg::LinalgDialect, math::MathDialect,
                    memref::MemRefDialect, scf::SCFDialect,
                    vector::VectorDialect>();
  }

  void runOnOperation() override {
    ModuleOp graph = getOperation();
    if (mfexec::ExecutableOp existing = findExecutable(graph)) {
      emitError(existing.getLoc()) << "the graph has kernels already";
      return signalPassFailure();
    }
    FailureOr<mfexec::TargetAttr> target = resolveKernelTarget(cpu, graph.getLoc());
    if (failed(target)) {
      return signalPassFailure();
    }
    WeightLayouts panelParameters = parametersReadAsPanels(graph);

    OpBuilder builder(&getContext());
    builder.setInsertionPointToEnd(graph.getBody());
    auto executable = mfexec::ExecutableOp::create(builder, graph.getLoc(),
                                                   "cpu", *target);
    builder.createBlock(&executable.getBody());
    auto kernels = ModuleOp::create(builder, graph.getLoc());
    OpBuilder declarations = OpBuilder::atBlockBegin(kernels->getBlock());
    builder.setInsertionPointToEnd(kernels.getBody());

    std::map<std::string, int64_t> skipped;
    SmallVector<mf::FusionOp> withoutKernel;
    SmallVector<func::FuncOp> unique;
    for (auto function : graph.getOps<func::FuncOp>()) {
      for (auto fusion : function.getBody().front().getOps<mf::FusionOp>()) {
        std::string why;
        FailureOr<func::FuncOp> kernel =
            buildKernel(fusion, builder, panelParameters, why);
        if (failed(kernel)) {
          ++skipped[mf::stringifyFusionKind(fusion.getKind()).str() + ": " + why];
          withoutKernel.push_back(fusion);
          continue;
        }
        auto panels = fusion->getAttrOfType<DenseI32ArrayAttr>(kPanelInputsAttr);
        auto dotPanels =
            fusion->getAttrOfType<DenseI32ArrayAttr>(kDotPanelInputsAttr);
        fusion->removeAttr(kPanelInputsAttr);
        fusion->removeAttr(kDotPanelInputsAttr);
        // Identical regions (every layer's) share one kernel.
        func::FuncOp same = findEquivalentKernel(*kernel, unique);
        if (same) {
          kernel->erase();
          fusion.setKernelAttr(SymbolRefAttr::get(
              executable.getSymNameAttr(),
              {FlatSymbolRefAttr::get(same.getSymNameAttr())}));
          continue;
        }
        std::string name = "mfk_" + std::to_string(unique.size());
        kernel->setSymName(name);
        unique.push_back(*kernel);
        fusion.setKernelAttr(SymbolRefAttr::get(
            executable.getSymNameAttr(),
            {FlatSymbolRefAttr::get(builder.getStringAttr(name))}));
        SmallVector<Type> inputs, outputs;
        for (Type type : fusion.getInputs().getTypes()) {
          inputs.push_back(mfexec::bufferTypeOf(type));
        }
        for (Type type : fusion.getResultTypes()) {
          outputs.push_back(mfexec::bufferTypeOf(type));
        }
        mfexec::KernelOp::create(
            declarations, fusion.getLoc(), name,
            builder.getFunctionType(inputs, outputs),
            cast<IntegerAttr>((*kernel)->getAttr(kTilesAttr)).getInt(), panels,
            dotPanels);
      }
    }
    for (mf::FusionOp fusion : withoutKernel) {
      mf::inlineFusion(fusion);
    }
    SmallVector<NamedAttribute> counts;
    for (auto &[why, count] : skipped) {
      counts.push_back(builder.getNamedAttr(why, builder.getI64IntegerAttr(count)));
    }
    graph->setAttr("mf.kernels_skipped", builder.getDictionaryAttr(counts));
  }

  /// A kernel of `known` that computes what `kernel` does: the same
  /// operations on the same types in the same order, whatever their
  /// locations (every layer's copy of a region is one).
  static func::FuncOp findEquivalentKernel(func::FuncOp kernel,
                                           ArrayRef<func::FuncOp> known) {
    for (func::FuncOp candidate : known) {
      if (candidate.getFunctionType() != kernel.getFunctionType() ||
          candidate->getAttr(kTilesAttr) != kernel->getAttr(kTilesAttr)) {
        continue;
      }
      // Alike but for the name, which equivalence would compare.
      StringAttr name = kernel.getSymNameAttr();
      kernel.setSymNameAttr(candidate.getSymNameAttr());
      bool same = OperationEquivalence::isEquivalentTo(
          kernel, candidate, OperationEquivalence::IgnoreLocations);
      kernel.setSymNameAttr(name);
      if (same) {
        return candidate;
      }
    }
    return {};
  }

  static Type bufferTypeOf(Type type) {
    auto tensor = cast<RankedTensorType>(type);
    return MemRefType::get(tensor.getShape(), tensor.getElementType());
  }
};

} // namespace
