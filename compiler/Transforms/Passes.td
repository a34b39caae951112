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
    Option<"timeLimit", "time-limit", "double", /*default=*/"0.25",
           "Seconds of improvement search per entry">
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

def MFCodegenCPUPass : Pass<"mf-codegen-cpu", "::mlir::ModuleOp"> {
  let summary = "Generates native kernels for the fusion regions";
  let description = [{
    Every f32 `mf.matmul` outside a region first becomes a one-op `matmul`
    region. Each region then gets a kernel with the ABI
    `void mfk_N(int64_t tileBegin, int64_t tileEnd, T *in..., T *out...)`:
    elementwise regions one linalg.generic, matmul regions a tile loop that
    calls the runtime's gemm service into scratch and applies the epilogue
    per tile (a product of several rows by an f32 parameter, in a module
    that assigns none, reads the parameter as panels of 32 columns the
    runtime packs once: a panel input of the kernel). Structurally
    equivalent kernels are shared (`mf.kernel = "mfk_N"` on each region). A
    region without a kernel rule is inlined back into plain ops and counted
    in the module's `mf.kernels_skipped`. The kernels go into an
    `mfexec.executable @cpu` for the target CPU, an `mfexec.kernel` each
    (buffers, tiles, panel inputs), their code lowered to the LLVM dialect
    in its nested module; with `object-file` they are also emitted as an
    ELF object.
  }];
  let options = [
    Option<"cpu", "cpu", "std::string", /*default=*/"\"native\"",
           "Target CPU: native (this machine), x86-64-v3, skylake-avx512, ...">,
    Option<"objectFile", "object-file", "std::string", /*default=*/"\"\"",
           "Write the kernels as an ELF object">,
    Option<"kernelsFile", "kernels-file", "std::string", /*default=*/"\"\"",
           "Write the kernels before lowering (linalg, scf, memref)">,
    Option<"packWeights", "pack-weights", "std::string", /*default=*/"\"auto\"",
           "In a module that assigns no parameter, multiply by an f32, f16 or "
           "bf16 parameter [N, K] through its panels, packed once by the "
           "runtime: true, false, or auto (when the target has AVX-512, "
           "which the runtime's panel microkernel needs)">
  ];
}

#endif // MFC_COMPILER_TRANSFORMS_PASSES_TD
