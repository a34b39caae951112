//===- MFExecOps.td - the mfexec executable dialect --------*- tablegen -*-===//
//
// `mfexec` is the compiler's last word: the host program of every entry
// after fusion, code generation and memory planning, with the kernels it
// dispatches. model.bin's writer serializes it; the runtime checks what it
// says instead of working it out again.
//
//===----------------------------------------------------------------------===//

#ifndef MFEXEC_OPS_TD
#define MFEXEC_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def MFExec_Dialect : Dialect {
  let name = "mfexec";
  let cppNamespace = "::mlir::mfexec";
  let summary = "Host programs and kernel executables: what model.bin holds";
  let description = [{
    A module in `mfexec` form holds, beside the `mf` entry functions (the
    op-level program that PyNative Mode interprets), one
    `mfexec.executable` per target with the kernels, and one `mfexec.entry`
    per entry function: its host program. A host program's values are
    buffers (`memref`s): slices of the entry's one arena, parameters,
    buffers the caller receives, values derived from the weights, constants
    and views of those. Its commands (`mfexec.dispatch`, `mfexec.library`,
    `mfexec.copy`) run in order and name, for every buffer they bind, its
    access and the op-level value it holds, so Graph Mode and PyNative Mode
    share one value space.
  }];
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

class MFExec_Op<string mnemonic, list<Trait> traits = []>
    : Op<MFExec_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def MFExec_Access : I32EnumAttr<"Access", "how a command uses a buffer", [
      I32EnumAttrCase<"read", 0>,
      I32EnumAttrCase<"write", 1>,
      I32EnumAttrCase<"readwrite", 2>
    ]> {
  let cppNamespace = "::mlir::mfexec";
  let genSpecializedAttr = 0;
}
def MFExec_AccessAttr : EnumAttr<MFExec_Dialect, MFExec_Access, "access">;
def MFExec_AccessArrayAttr
    : TypedArrayAttrBase<MFExec_AccessAttr, "buffer accesses">;

def MFExec_TargetAttr : AttrDef<MFExec_Dialect, "Target"> {
  let mnemonic = "target";
  let summary = "What a kernel executable is compiled for";
  let description = [{
    The target triple, the LLVM CPU name and every feature it enables
    (LLVM's names, `avx2`): the runtime refuses kernels whose features its
    CPU lacks.

    ```mlir
    #mfexec.target<triple = "x86_64-unknown-linux-gnu", cpu = "znver3",
                   features = ["avx2", "fma"]>
    ```
  }];
  let parameters = (ins StringRefParameter<"target triple">:$triple,
                        StringRefParameter<"LLVM CPU name">:$cpu,
                        "::mlir::ArrayAttr":$features);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

def MFExec_ExecutableOp : MFExec_Op<"executable", [Symbol, SymbolTable,
    IsolatedFromAbove, NoTerminator, SingleBlock, NoRegionArguments]> {
  let summary = "The kernels of one target and their code";
  let description = [{
    Holds an `mfexec.kernel` for every kernel the host programs dispatch
    and one nested module with their code (func/linalg before lowering,
    the LLVM dialect after), each kernel a function of the kernel's name.

    ```mlir
    mfexec.executable @cpu target(#mfexec.target<...>) {
      mfexec.kernel @mfk_0 tiles(4) : (memref<4x64xf32>) -> memref<4x64xf32>
      module { llvm.func @mfk_0(...) {...} }
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, MFExec_TargetAttr:$target);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `target` `(` qualified($target) `)` attr-dict-with-keyword $body
  }];
  let extraClassDeclaration = [{
    /// The nested module holding the kernels' code.
    ::mlir::ModuleOp getCode();
  }];
  let hasRegionVerifier = 1;
}

def MFExec_KernelOp : MFExec_Op<"kernel", [Symbol,
    HasParent<"ExecutableOp">]> {
  let summary = "A kernel's ABI: its buffers, in order, and its tiles";
  let description = [{
    The kernel's inputs and outputs are dense row-major buffers of these
    types, passed in this order; its work is `tiles` independent tiles,
    and one call computes a range of them. A `panels` input is a 2-D
    [N, K] weight that the kernel reads packed into panels of 32 rows
    (runtime/kernels/PanelGemm.h), not as stored; a `dot_panels` input an
    i8 [N, K] weight packed for int8 dot products
    (runtime/kernels/Int8DotGemm.h).

    ```mlir
    mfexec.kernel @mfk_1 tiles(8) panels [1]
        : (memref<16x64xf32>, memref<64x64xf32>) -> memref<16x64xf32>
    mfexec.kernel @mfk_2 tiles(4) dot_panels [1]
        : (memref<16x64xf32>, memref<96x64xi8>, memref<96xf32>) -> memref<16x96xf32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<FunctionType>:$function_type,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$tiles,
                       OptionalAttr<DenseI32ArrayAttr>:$panel_inputs,
                       OptionalAttr<DenseI32ArrayAttr>:$dot_panel_inputs);
  let assemblyFormat = [{
    $sym_name `tiles` `(` $tiles `)` (`panels` $panel_inputs^)?
    (`dot_panels` $dot_panel_inputs^)? attr-dict `:` $function_type
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Host programs
//===----------------------------------------------------------------------===//

def MFExec_EntryOp : MFExec_Op<"entry", [IsolatedFromAbove, SingleBlock,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "The host program of an entry function";
  let description = [{
    Graph Mode's program for entry `function` (an `mf` function, the
    op-level program): the block arguments are the entry's inputs, the
    commands run in order, and `mfexec.return` names the outputs. Once
    memory is planned, every transient value lives in the entry's arena of
    `arena_bytes` bytes (`arena_lower_bound` is the most bytes alive at
    once); before, its buffers are `mfexec.transient`.

    The module's one `initializer` entry computes every value derived from
    the weights (`mfexec.derived`) and runs when they change, before any
    other entry: it takes no input, reads only parameters, constants and
    derived values, writes only derived values and returns them. The other
    entries only read derived values, each naming the op-level value of its
    own function that the slot holds.

    ```mlir
    mfexec.entry @prefill arena(4096) {
    ^bb0(%ids: memref<1x16xi32>):
      ...
      mfexec.return %logits : memref<1x256xf32>
    }
    mfexec.entry @derive_from_weights initializer arena(0) {
      %w = mfexec.param @w : memref<64x64xf32>
      %c = mfexec.derived slot(0) : memref<64x64xbf16>
      mfexec.library "mf.cast" op(1) values [0, 1]
          (read %w : memref<64x64xf32>, write %c : memref<64x64xbf16>)
      mfexec.return %c : memref<64x64xbf16>
    }
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$function,
      UnitAttr:$initializer,
      OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$arena_bytes,
      OptionalAttr<I64Attr>:$arena_lower_bound);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $function (`initializer` $initializer^)? (`arena` `(` $arena_bytes^ `)`)?
    attr-dict-with-keyword $body
  }];
  let hasRegionVerifier = 1;
}

def MFExec_ReturnOp : MFExec_Op<"return", [Pure, Terminator,
    HasParent<"EntryOp">]> {
  let summary = "The outputs of a host program";
  let arguments = (ins Variadic<AnyStaticShapeMemRef>:$outputs);
  let assemblyFormat = "attr-dict ($outputs^ `:` type($outputs))?";
}

//===----------------------------------------------------------------------===//
// Storage: where a host program's buffers are
//===----------------------------------------------------------------------===//

class MFExec_StorageOp<string mnemonic, list<Trait> traits = []>
    : MFExec_Op<mnemonic, !listconcat(traits, [Pure,
                                               HasParent<"EntryOp">])> {
  let results = (outs AnyStaticShapeMemRef:$buffer);
}

def MFExec_TransientOp : MFExec_StorageOp<"transient"> {
  let summary = "A transient buffer, not yet placed in the arena";
  let description = [{
    Memory planning (`mfexec-plan-memory`) gives each an offset in the
    entry's arena: it becomes an `mfexec.arena` slice.

    ```mlir
    %b = mfexec.transient : memref<16x64xf32>
    ```
  }];
  let assemblyFormat = "attr-dict `:` type($buffer)";
}

def MFExec_ArenaOp : MFExec_StorageOp<"arena"> {
  let summary = "A slice of the entry's arena";
  let description = [{
    The buffer at byte `offset` of the arena, as long as its type; the
    memory plan guarantees that no two slices alive at once overlap.

    ```mlir
    %b = mfexec.arena[4096] : memref<16x64xf32>
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntNonNegative]>:$offset);
  let assemblyFormat = "`[` $offset `]` attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

def MFExec_ParamOp : MFExec_StorageOp<"param",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A parameter's storage";
  let description = [{
    Commands read the weights here, and a training step's kernel may write
    a parameter's new value straight into it.

    ```mlir
    %w = mfexec.param @model.norm.weight : memref<64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let assemblyFormat = "$name attr-dict `:` type($buffer)";
}

def MFExec_OutputBufferOp : MFExec_StorageOp<"output_buffer"> {
  let summary = "A buffer the caller receives";
  let description = [{
    Allocated for each run and handed to the caller as an output, so the
    command that computes the output writes it in place of a copy.

    ```mlir
    %o = mfexec.output_buffer : memref<1x256xf32>
    ```
  }];
  let assemblyFormat = "attr-dict `:` type($buffer)";
}

def MFExec_DerivedOp : MFExec_StorageOp<"derived"> {
  let summary = "A value the weights alone determine";
  let description = [{
    Storage outside the arena for a value that only parameters and
    constants determine (a weight cast to the compute type, a position
    table), read by entries that assign no parameter: the initializer
    entry computes it when the weights change, not every run. Entries that
    read the same value (every prefill length casts the same weights) name
    the same `slot` and share it. In an entry other than the initializer,
    `holds` is the op-level value of the entry's function that the slot
    holds (PyNative computes it; `mf-run --check` compares the two).

    ```mlir
    %c = mfexec.derived slot(0) holds(3) : memref<64x64xbf16>
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntNonNegative]>:$slot,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$holds);
  let assemblyFormat = [{
    `slot` `(` $slot `)` (`holds` `(` $holds^ `)`)? attr-dict `:` type($buffer)
  }];
  let hasVerifier = 1;
}

def MFExec_ConstantOp : MFExec_StorageOp<"constant"> {
  let summary = "The value of an op-level constant";
  let description = [{
    The constant that op `op_index` of the op-level program defines.

    ```mlir
    %c = mfexec.constant op(3) : memref<16xi32>
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntNonNegative]>:$op_index);
  let assemblyFormat = "`op` `(` $op_index `)` attr-dict `:` type($buffer)";
}

def MFExec_ViewOp : MFExec_Op<"view", [Pure, HasParent<"EntryOp">]> {
  let summary = "Another shape of the same bytes";
  let description = [{
    ```mlir
    %v = mfexec.view %b : memref<16x64xf32> to memref<16x4x16xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeMemRef:$source);
  let results = (outs AnyStaticShapeMemRef:$buffer);
  let assemblyFormat =
      "$source attr-dict `:` type($source) `to` type($buffer)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Commands
//===----------------------------------------------------------------------===//

// Every command binds buffers, each with an access and the op-level value
// it holds (`values`, by position): what it reads and what it produces.
class MFExec_CommandOp<string mnemonic, list<Trait> traits = []>
    : MFExec_Op<mnemonic, !listconcat(traits, [HasParent<"EntryOp">])> {
  code commandClassDeclaration = [{
    /// The access of binding `index`.
    ::mlir::mfexec::Access getAccess(unsigned index) {
      return ::llvm::cast<::mlir::mfexec::AccessAttr>(getAccesses()[index])
          .getValue();
    }
  }];
}

def MFExec_DispatchOp : MFExec_CommandOp<"dispatch",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Runs a kernel on its bindings";
  let description = [{
    Runs every tile of `kernel` (`@executable::@kernel`) on the buffers in
    the kernel's order, inputs then outputs. It computes ops
    [first_op, first_op + op_count) of the op-level program. An input the
    kernel updates in place (a KV cache) is bound `readwrite` and again,
    as the same buffer, for the output that is its new value: the output
    is tied to it.

    ```mlir
    mfexec.dispatch @cpu::@mfk_1 ops(4, 1) values [3, 4, 5]
        (read %x : memref<16x64xf32>, read %w : memref<64x64xf32>,
         write %y : memref<16x64xf32>)
    ```
  }];
  let arguments = (ins SymbolRefAttr:$kernel,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$first_op,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$op_count,
                       DenseI64ArrayAttr:$values,
                       MFExec_AccessArrayAttr:$accesses,
                       Variadic<AnyStaticShapeMemRef>:$bindings);
  let assemblyFormat = [{
    $kernel `ops` `(` $first_op `,` $op_count `)` `values` $values
    custom<Bindings>($bindings, type($bindings), $accesses) attr-dict
  }];
  let extraClassDeclaration = commandClassDeclaration;
  let hasVerifier = 1;
}

def MFExec_LibraryOp : MFExec_CommandOp<"library"> {
  let summary = "Runs an op of the runtime's library";
  let description = [{
    Runs op `op_index` of the op-level program (an `op_name`) with the
    runtime's eager kernel for it, reading its operands from and writing
    its results to these buffers (operands first, then results, in order).
    A KV-cache write updates its cache in place: the cache is bound
    `readwrite` and holds the result.

    ```mlir
    mfexec.library "mf.embedding" op(2) values [0, 1, 2]
        (read %w : memref<256x64xf32>, read %ids : memref<1x16xi32>,
         write %x : memref<1x16x64xf32>)
    ```
  }];
  let arguments = (ins StrAttr:$op_name,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$op_index,
                       DenseI64ArrayAttr:$values,
                       MFExec_AccessArrayAttr:$accesses,
                       Variadic<AnyStaticShapeMemRef>:$bindings);
  let assemblyFormat = [{
    $op_name `op` `(` $op_index `)` `values` $values
    custom<Bindings>($bindings, type($bindings), $accesses) attr-dict
  }];
  let extraClassDeclaration = commandClassDeclaration;
  let hasVerifier = 1;
}

def MFExec_CopyOp : MFExec_CommandOp<"copy"> {
  let summary = "Stores a value into another buffer";
  let description = [{
    Copies the first binding into the second, of the same type: op
    `op_index` of the op-level program, a parameter's new value stored
    (`mf.assign`) when no kernel could compute it in place.

    ```mlir
    mfexec.copy op(9) values [8, 9]
        (read %new : memref<64xf32>, write %w : memref<64xf32>)
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntNonNegative]>:$op_index,
                       DenseI64ArrayAttr:$values,
                       MFExec_AccessArrayAttr:$accesses,
                       Variadic<AnyStaticShapeMemRef>:$bindings);
  let assemblyFormat = [{
    `op` `(` $op_index `)` `values` $values
    custom<Bindings>($bindings, type($bindings), $accesses) attr-dict
  }];
  let extraClassDeclaration = commandClassDeclaration;
  let hasVerifier = 1;
}

#endif // MFEXEC_OPS_TD
