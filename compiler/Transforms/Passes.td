//===- Passes.td - compiler-wide passes --------------------*- tablegen -*-===//

#ifndef MFC_COMPILER_TRANSFORMS_PASSES_TD
#define MFC_COMPILER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MFPlanMemoryPass : Pass<"mf-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Plans every transient tensor of each entry into one arena";
  let description = [{
    For every entry function, each op result that is a transient tensor
    becomes a buffer alive from its defining op to its last use. Results the
    entry returns are not planned (the runtime writes them into the
    caller's tensors), except through views, which keep their buffer alive
    to the end. Parameters and constants live
    outside the arena; reshapes and KV-cache writes reuse their operand's
    buffer. The buffers are placed by the planner of
    `compiler/Analysis/MemoryPlanner` and the plan is recorded as
    attributes: `mf.arena_offsets` on each defining op (one per result, -1
    for a result without a buffer, -2 for a value the weights alone
    determine in an entry that assigns no parameter: the runtime computes
    it when the weights change, outside the arena), and `mf.arena_bytes`,
    `mf.arena_lower_bound`, `mf.derived_bytes` on the function. Run after codegen, the program
    it plans is the host program: kernels (regions) and eager ops.

    Before:
    ```mlir
    %0 = mf.exp %arg0 : tensor<256xf32>
    %1 = mf.exp %0 : tensor<256xf32>
    ```
    After:
    ```mlir
    %0 = mf.exp %arg0 {mf.arena_offsets = array<i64: 0>} : tensor<256xf32>
    %1 = mf.exp %0 {mf.arena_offsets = array<i64: 1024>} : tensor<256xf32>
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

def MFCodegenCPUPass : Pass<"mf-codegen-cpu", "::mlir::ModuleOp"> {
  let summary = "Generates native kernels and turns each entry into a host program";
  let description = [{
    Every f32 `mf.matmul` outside a region first becomes a one-op `matmul`
    region. Each region then gets a kernel with the ABI
    `void mfk_N(int64_t tileBegin, int64_t tileEnd, T *in..., T *out...)`:
    elementwise regions one linalg.generic, matmul regions a tile loop that
    calls the runtime's gemm service into scratch and applies the epilogue
    per tile (a product of several rows by an f32 parameter, in a module
    that assigns none, reads the parameter as panels of 32 columns the
    runtime packs once: the region's `mf.panel_inputs`). Identical kernels are shared (`mf.kernel = "mfk_N"` on each
    region). A region without a kernel rule is inlined back into plain ops
    and counted in the module's `mf.kernels_skipped`. The kernels, lowered
    to the LLVM dialect, go into the nested module `mf_kernels`; with
    `object-file` they are also emitted as an ELF object for `cpu`.
  }];
  let options = [
    Option<"cpu", "cpu", "std::string", /*default=*/"\"native\"",
           "Target CPU: native (this machine), x86-64-v3, skylake-avx512, ...">,
    Option<"objectFile", "object-file", "std::string", /*default=*/"\"\"",
           "Write the kernels as an ELF object">,
    Option<"kernelsFile", "kernels-file", "std::string", /*default=*/"\"\"",
           "Write the kernels before lowering (linalg, scf, memref)">,
    Option<"packWeights", "pack-weights", "bool", /*default=*/"true",
           "In a module that assigns no parameter, multiply several rows by "
           "an f32 parameter [N, K] through its panels, packed once by the "
           "runtime (mf.panel_inputs on the region)">
  ];
}

#endif // MFC_COMPILER_TRANSFORMS_PASSES_TD
