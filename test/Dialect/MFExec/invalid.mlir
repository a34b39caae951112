// RUN: mf-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{target feature "+avx2" is not an LLVM feature name such as "avx2"}}
mfexec.executable @cpu target(#mfexec.target<triple = "x86_64-unknown-linux-gnu", cpu = "znver3", features = ["+avx2"]>) {
  builtin.module {}
}

// -----

// expected-error @+1 {{a target needs a triple and a CPU name}}
mfexec.executable @cpu target(#mfexec.target<triple = "", cpu = "znver3", features = []>) {
  builtin.module {}
}

// -----

// expected-error @+1 {{needs exactly one nested module with the kernels' code}}
mfexec.executable @cpu target(#mfexec.target<triple = "x86_64", cpu = "znver3", features = []>) {
}

// -----

mfexec.executable @cpu target(#mfexec.target<triple = "x86_64", cpu = "znver3", features = []>) {
  // expected-error @+1 {{has no function 'mfk_0' in the executable's code}}
  mfexec.kernel @mfk_0 tiles(1) : (memref<4xf32>) -> memref<4xf32>
  builtin.module {}
}

// -----

mfexec.executable @cpu target(#mfexec.target<triple = "x86_64", cpu = "znver3", features = []>) {
  // expected-error @+1 {{takes 'memref<?xf32>': kernels take static-shape memrefs}}
  mfexec.kernel @mfk_0 tiles(1) : (memref<?xf32>) -> memref<4xf32>
  builtin.module {}
}

// -----

mfexec.executable @cpu target(#mfexec.target<triple = "x86_64", cpu = "znver3", features = []>) {
  // expected-error @+1 {{reads input 0 ('memref<4xf32>') as panels: only a 2-D float or i8 (quantized) weight can be}}
  mfexec.kernel @mfk_0 tiles(1) panels [0] : (memref<4xf32>) -> memref<4xf32>
  builtin.module {}
}

// -----

mfexec.executable @cpu target(#mfexec.target<triple = "x86_64", cpu = "znver3", features = []>) {
  // expected-error @+1 {{panel inputs must be increasing input positions below 1}}
  mfexec.kernel @mfk_0 tiles(1) panels [3] : (memref<4x4xf32>) -> memref<4xf32>
  builtin.module {}
}

// -----

mfexec.executable @cpu target(#mfexec.target<triple = "x86_64", cpu = "znver3", features = []>) {
  // expected-error @+1 {{attribute 'tiles' failed to satisfy constraint}}
  mfexec.kernel @mfk_0 tiles(0) : (memref<4xf32>) -> memref<4xf32>
  builtin.module {}
}

// -----

// expected-error @+1 {{'nope' does not name an entry function}}
mfexec.entry @nope arena(0) {
  mfexec.return
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
// expected-error @+1 {{takes other inputs than @f}}
mfexec.entry @f arena(0) {
^bb0(%x: memref<8xf32>):
  mfexec.return %x : memref<8xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
// expected-error @+1 {{returns other outputs than @f}}
mfexec.entry @f arena(0) {
^bb0(%x: memref<4xf32>):
  mfexec.return
}

// -----

func.func @f() {
  return
}
mfexec.entry @f arena(64) {
  // expected-error @+1 {{places 128 bytes at offset 0 of an arena of 64 bytes}}
  %a = mfexec.arena[0] : memref<32xf32>
  mfexec.return
}

// -----

func.func @f() {
  return
}
mfexec.entry @f arena(64) {
  // expected-error @+1 {{offset 2 is not a multiple of 4, the element size}}
  %a = mfexec.arena[2] : memref<4xf32>
  mfexec.return
}

// -----

func.func @f() {
  return
}
mfexec.entry @f arena(64) {
  // expected-error @+1 {{'w' does not name a parameter}}
  %w = mfexec.param @w : memref<4xf32>
  mfexec.return
}

// -----

mf.parameter @w : tensor<4xf32> init = ones
func.func @f() {
  return
}
mfexec.entry @f arena(64) {
  // expected-error @+1 {{type 'memref<8xf32>' does not match 'tensor<4xf32>' of parameter 'w'}}
  %w = mfexec.param @w : memref<8xf32>
  mfexec.return
}

// -----

func.func @f() {
  return
}
mfexec.entry @f arena(64) {
  %a = mfexec.arena[0] : memref<4xf32>
  // expected-error @+1 {{views 'memref<4xf32>' as 'memref<2x4xf32>': a view keeps the element type and count}}
  %v = mfexec.view %a : memref<4xf32> to memref<2x4xf32>
  mfexec.return
}

// -----

// expected-error @+1 {{'mfexec.arena' op expects parent op 'mfexec.entry'}}
%a = mfexec.arena[0] : memref<4xf32>

// -----

mfexec.executable @cpu target(#mfexec.target<triple = "x86_64", cpu = "znver3", features = []>) {
  mfexec.kernel @mfk_0 tiles(1) : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  builtin.module {
    func.func @mfk_0(%b: i64, %e: i64, %x: memref<4xf32>, %c: memref<4xf32>, %y: memref<4xf32>) {
      return
    }
  }
}
func.func @f(%x: tensor<4xf32>, %c: tensor<4xf32>) {
  return
}
mfexec.entry @f arena(64) {
^bb0(%x: memref<4xf32>, %c: memref<4xf32>):
  %a = mfexec.arena[0] : memref<4xf32>
  %b = mfexec.arena[16] : memref<8xf32>
  // expected-error @+1 {{@cpu::@mfk_1 does not name a kernel}}
  mfexec.dispatch @cpu::@mfk_1 ops(0, 1) values [0, 1, 2] (read %x : memref<4xf32>, read %c : memref<4xf32>, write %a : memref<4xf32>)
  mfexec.return
}


// -----

mfexec.executable @cpu target(#mfexec.target<triple = "x86_64", cpu = "znver3", features = []>) {
  mfexec.kernel @mfk_0 tiles(1) : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  builtin.module {
    func.func @mfk_0(%b: i64, %e: i64, %x: memref<4xf32>, %c: memref<4xf32>, %y: memref<4xf32>) {
      return
    }
  }
}
func.func @f(%x: tensor<4xf32>, %c: tensor<4xf32>) {
  return
}
mfexec.entry @f arena(64) {
^bb0(%x: memref<4xf32>, %c: memref<4xf32>):
  %a = mfexec.arena[0] : memref<4xf32>
  %b = mfexec.arena[16] : memref<8xf32>
  // expected-error @+1 {{binds other buffers than kernel mfk_0 takes: '(memref<4xf32>, memref<4xf32>) -> memref<4xf32>'}}
  mfexec.dispatch @cpu::@mfk_0 ops(0, 1) values [0, 1, 2] (read %x : memref<4xf32>, read %c : memref<4xf32>, write %b : memref<8xf32>)
  mfexec.return
}


// -----

mfexec.executable @cpu target(#mfexec.target<triple = "x86_64", cpu = "znver3", features = []>) {
  mfexec.kernel @mfk_0 tiles(1) : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  builtin.module {
    func.func @mfk_0(%b: i64, %e: i64, %x: memref<4xf32>, %c: memref<4xf32>, %y: memref<4xf32>) {
      return
    }
  }
}
func.func @f(%x: tensor<4xf32>, %c: tensor<4xf32>) {
  return
}
mfexec.entry @f arena(64) {
^bb0(%x: memref<4xf32>, %c: memref<4xf32>):
  %a = mfexec.arena[0] : memref<4xf32>
  %b = mfexec.arena[16] : memref<8xf32>
  // expected-error @+1 {{binding 2 is an output but has access read}}
  mfexec.dispatch @cpu::@mfk_0 ops(0, 1) values [0, 1, 2] (read %x : memref<4xf32>, read %c : memref<4xf32>, read %a : memref<4xf32>)
  mfexec.return
}


// -----

mfexec.executable @cpu target(#mfexec.target<triple = "x86_64", cpu = "znver3", features = []>) {
  mfexec.kernel @mfk_0 tiles(1) : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  builtin.module {
    func.func @mfk_0(%b: i64, %e: i64, %x: memref<4xf32>, %c: memref<4xf32>, %y: memref<4xf32>) {
      return
    }
  }
}
func.func @f(%x: tensor<4xf32>, %c: tensor<4xf32>) {
  return
}
mfexec.entry @f arena(64) {
^bb0(%x: memref<4xf32>, %c: memref<4xf32>):
  %a = mfexec.arena[0] : memref<4xf32>
  %b = mfexec.arena[16] : memref<8xf32>
  // expected-error @+1 {{binding 0 is an input but has access write}}
  mfexec.dispatch @cpu::@mfk_0 ops(0, 1) values [0, 1, 2] (write %x : memref<4xf32>, read %c : memref<4xf32>, write %a : memref<4xf32>)
  mfexec.return
}


// -----

mfexec.executable @cpu target(#mfexec.target<triple = "x86_64", cpu = "znver3", features = []>) {
  mfexec.kernel @mfk_0 tiles(1) : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  builtin.module {
    func.func @mfk_0(%b: i64, %e: i64, %x: memref<4xf32>, %c: memref<4xf32>, %y: memref<4xf32>) {
      return
    }
  }
}
func.func @f(%x: tensor<4xf32>, %c: tensor<4xf32>) {
  return
}
mfexec.entry @f arena(64) {
^bb0(%x: memref<4xf32>, %c: memref<4xf32>):
  %a = mfexec.arena[0] : memref<4xf32>
  %b = mfexec.arena[16] : memref<8xf32>
  // expected-error @+1 {{binds one buffer as 0 and 2: only an input updated in place (readwrite) and the output tied to it may share a buffer that is written}}
  mfexec.dispatch @cpu::@mfk_0 ops(0, 1) values [0, 1, 2] (read %x : memref<4xf32>, read %c : memref<4xf32>, write %x : memref<4xf32>)
  mfexec.return
}


// -----

mfexec.executable @cpu target(#mfexec.target<triple = "x86_64", cpu = "znver3", features = []>) {
  mfexec.kernel @mfk_0 tiles(1) : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  builtin.module {
    func.func @mfk_0(%b: i64, %e: i64, %x: memref<4xf32>, %c: memref<4xf32>, %y: memref<4xf32>) {
      return
    }
  }
}
func.func @f(%x: tensor<4xf32>, %c: tensor<4xf32>) {
  return
}
mfexec.entry @f arena(64) {
^bb0(%x: memref<4xf32>, %c: memref<4xf32>):
  %a = mfexec.arena[0] : memref<4xf32>
  %b = mfexec.arena[16] : memref<8xf32>
  // expected-error @+1 {{binding 1 is readwrite but no output is tied to it}}
  mfexec.dispatch @cpu::@mfk_0 ops(0, 1) values [0, 1, 2] (read %x : memref<4xf32>, readwrite %c : memref<4xf32>, write %a : memref<4xf32>)
  mfexec.return
}


// -----

mfexec.executable @cpu target(#mfexec.target<triple = "x86_64", cpu = "znver3", features = []>) {
  mfexec.kernel @mfk_0 tiles(1) : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  builtin.module {
    func.func @mfk_0(%b: i64, %e: i64, %x: memref<4xf32>, %c: memref<4xf32>, %y: memref<4xf32>) {
      return
    }
  }
}
func.func @f(%x: tensor<4xf32>, %c: tensor<4xf32>) {
  return
}
mfexec.entry @f arena(64) {
^bb0(%x: memref<4xf32>, %c: memref<4xf32>):
  %a = mfexec.arena[0] : memref<4xf32>
  %b = mfexec.arena[16] : memref<8xf32>
  // expected-error @+1 {{has 3 bindings but 3 accesses and 2 op-level values}}
  mfexec.dispatch @cpu::@mfk_0 ops(0, 1) values [0, 1] (read %x : memref<4xf32>, read %c : memref<4xf32>, write %a : memref<4xf32>)
  mfexec.return
}


// -----

mfexec.executable @cpu target(#mfexec.target<triple = "x86_64", cpu = "znver3", features = []>) {
  mfexec.kernel @mfk_0 tiles(1) : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  builtin.module {
    func.func @mfk_0(%b: i64, %e: i64, %x: memref<4xf32>, %c: memref<4xf32>, %y: memref<4xf32>) {
      return
    }
  }
}
func.func @f(%x: tensor<4xf32>, %c: tensor<4xf32>) {
  return
}
mfexec.entry @f arena(64) {
^bb0(%x: memref<4xf32>, %c: memref<4xf32>):
  %a = mfexec.arena[0] : memref<4xf32>
  %b = mfexec.arena[16] : memref<8xf32>
  // expected-error @+1 {{binding 1 names no op-level value}}
  mfexec.dispatch @cpu::@mfk_0 ops(0, 1) values [0, -1, 2] (read %x : memref<4xf32>, read %c : memref<4xf32>, write %a : memref<4xf32>)
  mfexec.return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  return
}
mfexec.entry @f arena(64) {
^bb0(%x: memref<4xf32>):
  %a = mfexec.arena[0] : memref<4xf32>
  // expected-error @+1 {{binds no buffer for its result}}
  mfexec.library "mf.exp" op(0) values [] ()
  mfexec.return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  return
}
mfexec.entry @f arena(64) {
^bb0(%x: memref<4xf32>):
  %a = mfexec.arena[0] : memref<4xf32>
  // expected-error @+1 {{expected read, write or readwrite, not 'writes'}}
  mfexec.library "mf.exp" op(0) values [0, 1] (read %x : memref<4xf32>, writes %a : memref<4xf32>)
  mfexec.return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  return
}
mfexec.entry @f arena(64) {
^bb0(%x: memref<4xf32>):
  %a = mfexec.arena[0] : memref<8xf32>
  // expected-error @+1 {{copies one buffer into another of its type}}
  mfexec.copy op(0) values [0, 1] (read %x : memref<4xf32>, write %a : memref<8xf32>)
  mfexec.return
}

// -----

func.func @f() {
  return
}
mfexec.entry @f {
  // expected-error @+1 {{is a slice of an arena that has no size: the entry's memory is not planned}}
  %a = mfexec.arena[0] : memref<4xf32>
  mfexec.return
}

// -----

// Only the initializer computes derived values.
mf.parameter @p : tensor<4xf32> init = ones
func.func @f() -> tensor<4xf32> {
  %p = mf.param @p : tensor<4xf32>
  %e = mf.exp %p : tensor<4xf32>
  return %e : tensor<4xf32>
}
mfexec.entry @f arena(0) {
  %p = mfexec.param @p : memref<4xf32>
  %d = mfexec.derived slot(0) holds(1) : memref<4xf32>
  // expected-error @+1 {{writes a derived value: only the initializer entry computes them}}
  mfexec.library "mf.exp" op(1) values [0, 1] (read %p : memref<4xf32>, write %d : memref<4xf32>)
  mfexec.return %d : memref<4xf32>
}

// -----

// An entry reads a slot no initializer computes.
func.func @f() {
  return
}
mfexec.entry @f arena(0) {
  // expected-error @+1 {{reads slot 3, which no initializer entry of the module computes}}
  %d = mfexec.derived slot(3) holds(0) : memref<4xf32>
  mfexec.return
}

// -----

func.func @f() {
  return
}
mfexec.entry @f arena(0) {
  // expected-error @+1 {{must name the op-level value it holds (holds(N)) outside the initializer}}
  %d = mfexec.derived slot(0) : memref<4xf32>
  mfexec.return
}

// -----

func.func @init() {
  return
}
mfexec.entry @init initializer arena(0) {
  // expected-error @+1 {{names an op-level value in the initializer, whose commands name them}}
  %d = mfexec.derived slot(0) holds(0) : memref<4xf32>
  mfexec.return
}

// -----

// The initializer derives from the weights alone, into derived slots.
func.func @init(%x: tensor<4xf32>) {
  return
}
// expected-error @+1 {{is the initializer: it takes no input}}
mfexec.entry @init initializer arena(0) {
^bb0(%x: memref<4xf32>):
  mfexec.return
}

// -----

mf.parameter @p : tensor<4xf32> init = ones
func.func @init() -> tensor<4xf32> {
  %p = mf.param @p : tensor<4xf32>
  %e = mf.exp %p : tensor<4xf32>
  return %e : tensor<4xf32>
}
mfexec.entry @init initializer arena(16) {
  %p = mfexec.param @p : memref<4xf32>
  %a = mfexec.arena[0] : memref<4xf32>
  // expected-error @+1 {{writes a buffer that is not a derived value: the initializer derives values from the weights alone}}
  mfexec.library "mf.exp" op(1) values [0, 1] (read %p : memref<4xf32>, write %a : memref<4xf32>)
  mfexec.return %a : memref<4xf32>
}

// -----

func.func @init() {
  return
}
func.func @init2() {
  return
}
mfexec.entry @init initializer arena(0) {
  mfexec.return
}
// expected-error @+1 {{is a second initializer entry; a module has one}}
mfexec.entry @init2 initializer arena(0) {
  mfexec.return
}
