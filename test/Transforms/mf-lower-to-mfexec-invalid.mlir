// RUN: mf-opt %s --split-input-file --mf-lower-to-mfexec --verify-diagnostics

func.func @no_kernel(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{has no kernel in the executable: run mf-codegen-cpu first}}
  %0 = mf.fusion elementwise(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %n = mf.neg %a : tensor<4xf32>
    mf.yield %n : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{the module has host programs already}}
module {
  func.func @again(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
  mfexec.entry @again {
  ^bb0(%x: memref<4xf32>):
    mfexec.return %x : memref<4xf32>
  }
}
