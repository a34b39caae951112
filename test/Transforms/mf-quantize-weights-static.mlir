// RUN: mf-opt %s --mf-quantize-weights="activations=per-tensor smooth-alpha=0.5" | FileCheck %s

// Static int8 activations (SmoothQuant): the weight is calibrated, each of
// its products' rows is mf.quantize of them by its input scales and zero
// points, multiplied as they are in f32 by the weight's f32 values (its
// scales hold the activations' scale too), then in the compute dtype with
// the bias that corrects for the zero point. Each product quantizes its own
// rows (each weight has its own smoothing factors).
// CHECK: mf.parameter @w : tensor<16x8xi8> init = normal quantized(@w_scale calibrated(@w_input_scale, @w_input_zero_point, @w_bias smooth = 5.000000e-01))
// CHECK-NEXT: mf.parameter @w_scale : tensor<16xf32> init = ones
// CHECK-NEXT: mf.parameter @w_input_scale : tensor<8xf16> init = ones
// CHECK-NEXT: mf.parameter @w_input_zero_point : tensor<8xi8> init = zeros
// CHECK-NEXT: mf.parameter @w_bias : tensor<16xf16> init = ones
// CHECK-LABEL: func.func @linear
// CHECK: %[[V:.*]] = mf.param @w : tensor<16x8xi8>
// CHECK: %[[S:.*]] = mf.param @w_scale : tensor<16xf32>
// CHECK: %[[W:.*]] = mf.dequantize %[[V]], %[[S]] : tensor<16x8xi8>, tensor<16xf32> -> tensor<16x8xf32>
// CHECK: %[[IS:.*]] = mf.param @w_input_scale : tensor<8xf16>
// CHECK: %[[ZP:.*]] = mf.param @w_input_zero_point : tensor<8xi8>
// CHECK: %[[Q:.*]] = mf.quantize %arg0, %[[IS]], %[[ZP]] : tensor<2x8xf16>, tensor<8xf16>, tensor<8xi8> -> tensor<2x8xi8>
// CHECK: %[[R:.*]] = mf.cast %[[Q]] : tensor<2x8xi8> to tensor<2x8xf32>
// CHECK: %[[P:.*]] = mf.matmul %[[R]], %[[W]] transpose_rhs : tensor<2x8xf32>, tensor<16x8xf32> -> tensor<2x16xf32>
// CHECK: %[[C:.*]] = mf.cast %[[P]] : tensor<2x16xf32> to tensor<2x16xf16>
// CHECK: %[[B:.*]] = mf.param @w_bias : tensor<16xf16>
// CHECK: %[[BB:.*]] = mf.broadcast %[[B]] : tensor<16xf16> to tensor<2x16xf16>
// CHECK: %[[Y:.*]] = mf.add %[[C]], %[[BB]] : tensor<2x16xf16>
// CHECK: mf.quantize %arg0
// CHECK: return
mf.parameter @w : tensor<16x8xf32> init = normal {std = 2.000000e-02 : f64}
func.func @linear(%x: tensor<2x8xf16>) -> (tensor<2x16xf16>, tensor<2x16xf16>) {
  %w = mf.param @w : tensor<16x8xf32>
  %c = mf.cast %w : tensor<16x8xf32> to tensor<16x8xf16>
  %y = mf.matmul %x, %c transpose_rhs : tensor<2x8xf16>, tensor<16x8xf16> -> tensor<2x16xf16>
  %z = mf.matmul %x, %c transpose_rhs : tensor<2x8xf16>, tensor<16x8xf16> -> tensor<2x16xf16>
  return %y, %z : tensor<2x16xf16>, tensor<2x16xf16>
}
