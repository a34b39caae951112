//===- MFAttrs.td - mf enums and attributes ----------------*- tablegen -*-===//

#ifndef MF_ATTRS_TD
#define MF_ATTRS_TD

include "dialects/MF/IR/MFBase.td"
include "mlir/IR/EnumAttr.td"

// Enums are written out by name in op formats: `init = normal`.

def MF_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how GELU is computed", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"tanh", 1>
    ]> {
  let cppNamespace = "::mlir::mf";
}

def MF_ParameterInit : I32EnumAttr<"ParameterInit",
    "how a parameter is initialized when no checkpoint provides it", [
      I32EnumAttrCase<"zeros", 0>,
      I32EnumAttrCase<"ones", 1>,
      I32EnumAttrCase<"normal", 2>,
      // Uniform in +-1/sqrt(fan_in) (fan_in: the last dimension):
      // MindSpore's HeUniform(negative_slope=sqrt(5)), which MindFormers'
      // LoRA gives lora_a, as PEFT's kaiming_uniform_(a=sqrt(5)).
      I32EnumAttrCase<"he_uniform", 3>
    ]> {
  let cppNamespace = "::mlir::mf";
}

def MF_FusionKind : I32EnumAttr<"FusionKind",
    "the fusion rule that formed an mf.fusion region, which decides its kernel", [
      I32EnumAttrCase<"elementwise", 0>,
      I32EnumAttrCase<"matmul", 1>,
      I32EnumAttrCase<"matmul_epilogue", 2>,
      I32EnumAttrCase<"norm", 3>,
      I32EnumAttrCase<"attention", 4>,
      I32EnumAttrCase<"attention_grad", 5>
    ]> {
  let cppNamespace = "::mlir::mf";
}

//===----------------------------------------------------------------------===//
// Module settings: the frontend's contract with the training passes and
// the writer, verified by the dialect (MFDialect::verifyOperationAttribute).
//===----------------------------------------------------------------------===//

def MF_RunMode : I32EnumAttr<"RunMode",
    "what the module is compiled for (MindFormers' run_mode)", [
      I32EnumAttrCase<"predict", 0>,
      I32EnumAttrCase<"train", 1>,
      I32EnumAttrCase<"finetune", 2>,
      I32EnumAttrCase<"eval", 3>
    ]> {
  let cppNamespace = "::mlir::mf";
  let genSpecializedAttr = 0;
}

/// `module attributes {mf.run_mode = #mf.run_mode<train>}`
def MF_RunModeAttr : EnumAttr<MF_Dialect, MF_RunMode, "run_mode"> {
  let assemblyFormat = "`<` $value `>`";
}

def MF_OptimizerKind : I32EnumAttr<"OptimizerKind",
    "MindFormers' AdamW variants", [
      I32EnumAttrCase<"AdamW", 0>,
      I32EnumAttrCase<"AdamWeightDecay", 1>,
      I32EnumAttrCase<"FP32StateAdamWeightDecay", 2>,
      I32EnumAttrCase<"FusedAdamWeightDecay", 3>
    ]> {
  let cppNamespace = "::mlir::mf";
  let genSpecializedAttr = 0;
}

def MF_OptimizerAttr : AttrDef<MF_Dialect, "Optimizer"> {
  let mnemonic = "optimizer";
  let summary = "a training module's optimizer and step settings";
  let description = [{
    The optimizer mf-train-step builds (AdamW with bias correction; the
    AdamWeightDecay variants without), its hyper-parameters, the gradient
    accumulation steps, the global-norm clip (absent: none), ZeRO-1
    (`parallel_optimizer`) and the data-parallel gradient buckets.

    ```mlir
    module attributes {mf.run_mode = #mf.run_mode<train>,
        mf.optimizer = #mf.optimizer<kind = AdamW, beta1 = 9.0e-01,
            beta2 = 9.5e-01, eps = 1.0e-08, weight_decay = 1.0e-01,
            gradient_accumulation_steps = 1, max_grad_norm = 1.0>}
    ```
  }];
  let parameters = (ins
    "::mlir::mf::OptimizerKind":$kind,
    "::mlir::FloatAttr":$beta1,
    "::mlir::FloatAttr":$beta2,
    "::mlir::FloatAttr":$eps,
    "::mlir::FloatAttr":$weight_decay,
    "int64_t":$gradient_accumulation_steps,
    OptionalParameter<"::mlir::FloatAttr">:$max_grad_norm,
    OptionalParameter<"::mlir::UnitAttr">:$parallel_optimizer,
    DefaultValuedParameter<"int64_t", "1">:$gradient_aggregation_group);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // MF_ATTRS_TD
