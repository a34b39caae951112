//===- Passes.td - compiler-wide passes --------------------*- tablegen -*-===//

#ifndef MFC_COMPILER_TRANSFORMS_PASSES_TD
#define MFC_COMPILER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MFPlanMemoryPass : Pass<"mf-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Plans every transient tensor of each entry into one arena";
  let description = [{
    For every entry function, each op result that is a transient tensor
    becomes a buffer alive from its defining op to its last use (results
    returned by the entry live to the end). Parameters and constants live
    outside the arena; reshapes and KV-cache writes reuse their operand's
    buffer. The buffers are placed by the planner of
    `compiler/Analysis/MemoryPlanner` and the plan is recorded as
    attributes: `mf.arena_offset` on each defining op, and `mf.arena_bytes`,
    `mf.arena_lower_bound` on the function.

    Before:
    ```mlir
    %0 = mf.exp %arg0 : tensor<256xf32>
    %1 = mf.exp %0 : tensor<256xf32>
    ```
    After:
    ```mlir
    %0 = mf.exp %arg0 {mf.arena_offset = 0 : i64} : tensor<256xf32>
    %1 = mf.exp %0 {mf.arena_offset = 1024 : i64} : tensor<256xf32>
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
  let summary = "Generates native kernels for the fusion regions it supports";
  let description = [{
    Builds a kernel for every elementwise `mf.fusion` (one linalg.generic,
    deduplicated across layers), lowers the kernels to the LLVM dialect and,
    with `object-file`, emits them as an ELF object for `cpu`. Each region
    gets `mf.kernel = "mfk_N"` (or `mf.kernel_unsupported` with the reason);
    the module gets `mf.kernel_count`. The graph is otherwise unchanged.
  }];
  let options = [
    Option<"cpu", "cpu", "std::string", /*default=*/"\"native\"",
           "Target CPU: native (this machine), x86-64-v3, skylake-avx512, ...">,
    Option<"objectFile", "object-file", "std::string", /*default=*/"\"\"",
           "Write the kernels as an ELF object">,
    Option<"kernelsFile", "kernels-file", "std::string", /*default=*/"\"\"",
           "Write the kernels in the LLVM dialect">
  ];
}

#endif // MFC_COMPILER_TRANSFORMS_PASSES_TD
