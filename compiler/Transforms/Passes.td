//===- Passes.td - compiler-wide passes --------------------*- tablegen -*-===//

#ifndef MFC_COMPILER_TRANSFORMS_PASSES_TD
#define MFC_COMPILER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MFExecPlanMemoryPass : Pass<"mfexec-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Places every transient buffer of each host program in one arena";
  let description = [{
    For every `mfexec.entry`, each `mfexec.transient` buffer lives from the
    first command that binds it (or a view of it) to the last; one the
    entry returns through a view lives to the end. The buffers are placed
    by the planner of `compiler/Analysis/MemoryPlanner`: each transient
    becomes an `mfexec.arena` slice at its offset, and the entry records
    `arena_bytes` and `arena_lower_bound` (the most bytes alive at once).

    Before:
    ```mlir
    mfexec.entry @f {
      %0 = mfexec.transient : memref<256xf32>
      ...
    ```
    After:
    ```mlir
    mfexec.entry @f arena(2048) attributes {arena_lower_bound = 2048 : i64} {
      %0 = mfexec.arena[0] : memref<256xf32>
      ...
    ```
  }];
  let options = [
    Option<"csvFile", "csv-file", "std::string", /*default=*/"\"\"",
           "Write the planning problem as MiniMalloc CSV (id,lower,upper,size)">,
    Option<"svgFile", "svg-file", "std::string", /*default=*/"\"\"",
           "Draw the plan: time x offset rectangles named by model path">,
    Option<"alignment", "alignment", "int64_t", /*default=*/"64",
           "Offsets are multiples of this many bytes">,
    Option<"workLimit", "work-limit", "int64_t", /*default=*/"100000",
           "Buffer placements of improvement search per entry, so that the "
           "same IR plans the same arena on any machine (0: no limit; give "
           "a time limit)">,
    Option<"timeLimit", "time-limit", "double", /*default=*/"-1",
           "Seconds of improvement search per entry (negative: none, the "
           "work limit alone; a time limit makes the plan depend on the "
           "machine's speed)">
  ];
}

def MFLowerToMFExecPass : Pass<"mf-lower-to-mfexec", "::mlir::ModuleOp"> {
  let summary = "Writes each entry's host program in mfexec";
  let description = [{
    For every entry function after code generation, an `mfexec.entry`: a
    dispatch per kernel region, a library call per eager op, a copy per
    parameter update no kernel computes in place, and the storage of every
    value (parameter, constant, view, caller's buffer, weight-derived, or
    transient for memory planning). Commands name the op-level values of
    their bindings.
  }];
  let dependentDialects = ["::mlir::mfexec::MFExecDialect"];
}

def MFOutlineLoneMatmulsPass : Pass<"mf-outline-lone-matmuls", "::mlir::ModuleOp"> {
  let summary = "Gives every float matmul outside a region a region of its own";
  let description = [{
    An f32, f16 or bf16 `mf.matmul` with a 2-D right operand that no fusion
    region holds becomes a one-op `matmul` region, so that all matmul-class
    work runs in the tiled kernels.
  }];
}

def MFChooseWeightLayoutPass : Pass<"mf-choose-weight-layout", "::mlir::ModuleOp"> {
  let summary = "Chooses the weights Graph Mode's kernels read as panels";
  let description = [{
    In a module that assigns no parameter, marks `panels` each f32, f16 or
    bf16 [N, K] parameter that every reader multiplies by transposed inside
    a matmul region: mf-codegen-cpu's kernels then read it packed into
    panels of 32 rows that the runtime packs once (runtime/kernels/PanelGemm.h).
    Runs after mf-outline-lone-matmuls.
  }];
  let options = [
    Option<"cpu", "cpu", "std::string", /*default=*/"\"native\"",
           "Target CPU, for pack-weights=auto: native (this machine), "
           "x86-64-v3, skylake-avx512, ...">,
    Option<"packWeights", "pack-weights", "std::string", /*default=*/"\"auto\"",
           "true, false, or auto (when the target has AVX-512, or AVX2 "
           "with FMA and F16C, which the runtime's panel microkernels "
           "need)">
  ];
  let dependentDialects = ["::mlir::mfexec::MFExecDialect"]; // the target
}

def MFCodegenCPUPass : Pass<"mf-codegen-cpu", "::mlir::ModuleOp"> {
  let summary = "Generates native kernels for the fusion regions";
  let description = [{
    Each region gets a kernel, `func.func @mfk_N(%tileBegin: i64,
    %tileEnd: i64, memref in..., memref out...) -> i32` (a status):
    elementwise regions one linalg.generic, matmul regions a tile loop that
    calls the runtime's gemm service into scratch and applies the epilogue
    per tile (a product by a `panels` parameter, see
    mf-choose-weight-layout, reads it as panels the runtime packs once: a
    panel input of the kernel).
    Structurally equivalent kernels are shared (`kernel = @cpu::@mfk_N` on
    each region). A region without a kernel rule is inlined back into plain ops
    and counted in the module's `mf.kernels_skipped`. The kernels go into an
    `mfexec.executable @cpu` for the target CPU, an `mfexec.kernel` each
    (buffers, tiles, panel inputs), their code in its nested module
    (func/linalg/scf on memrefs; `mfexec-lower-kernels` lowers it).
  }];
  let options = [
    Option<"cpu", "cpu", "std::string", /*default=*/"\"native\"",
           "Target CPU: native (this machine), x86-64-v3, skylake-avx512, ...">
  ];
  // A service's argument struct is passed as an !llvm.ptr.
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def MFExecLowerKernelsPass : Pass<"mfexec-lower-kernels", "::mlir::ModuleOp"> {
  let summary = "Lowers the kernels of the graph's executable to the LLVM dialect";
  let description = [{
    The code module of the `mfexec.executable`: linalg to loops, math to
    polynomial approximations and intrinsics, memref/func (bare pointers)
    to the LLVM dialect, each runtime service a trampoline through a
    pointer the runtime sets; with `object-file`, LLVM's O3 pipeline for the
    executable's target and an ELF object.
  }];
  let options = [
    Option<"objectFile", "object-file", "std::string", /*default=*/"\"\"",
           "Write the kernels as an ELF object">
  ];
}

#endif // MFC_COMPILER_TRANSFORMS_PASSES_TD
