//===- ScalarEmitter.cpp - mf elementwise ops as scalar arith/math --------===//

#include "compiler/Codegen/CPU/ScalarEmitter.h"

#include "dialects/MF/IR/MFOps.h"
#include "dialects/MF/Transforms/FusionUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mfc;

Type mfc::elementTypeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType();
}

Value ScalarEmitter::widen(Value scalar, Type elementType, Location loc) {
  if (isa<FloatType>(elementType) && !elementType.isF32()) {
    return arith::ExtFOp::create(builder_, loc, builder_.getF32Type(), scalar);
  }
  return scalar;
}

Value ScalarEmitter::round(Value scalar, Type elementType, Location loc) {
  if (isa<FloatType>(elementType) && !elementType.isF32()) {
    Value narrowed = arith::TruncFOp::create(builder_, loc, elementType, scalar);
    return arith::ExtFOp::create(builder_, loc, builder_.getF32Type(), narrowed);
  }
  return scalar;
}

Value ScalarEmitter::narrow(Value scalar, Type elementType, Location loc) {
  if (isa<FloatType>(elementType) && !elementType.isF32()) {
    return arith::TruncFOp::create(builder_, loc, elementType, scalar);
  }
  return scalar;
}

FailureOr<Value> ScalarEmitter::compute(Operation *op, ArrayRef<Value> in,
                                        Location loc, std::string &why) {
  OpBuilder &b = builder_;
  Type f32 = b.getF32Type();
  auto constant = [&](double value) -> Value {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
  };
  auto silu = [&](Value x) -> Value {
    Value negExp = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
    return arith::DivFOp::create(
        b, loc, x, arith::AddFOp::create(b, loc, constant(1.0), negExp));
  };
  bool integer = !isa<FloatType>(in.empty() ? f32 : in[0].getType());
  Value result =
      llvm::TypeSwitch<Operation *, Value>(op)
          .Case([&](mf::AddOp) -> Value {
            return integer ? Value(arith::AddIOp::create(b, loc, in[0], in[1]))
                           : Value(arith::AddFOp::create(b, loc, in[0], in[1]));
          })
          .Case([&](mf::SubOp) -> Value {
            return integer ? Value(arith::SubIOp::create(b, loc, in[0], in[1]))
                           : Value(arith::SubFOp::create(b, loc, in[0], in[1]));
          })
          .Case([&](mf::MulOp) -> Value {
            return integer ? Value(arith::MulIOp::create(b, loc, in[0], in[1]))
                           : Value(arith::MulFOp::create(b, loc, in[0], in[1]));
          })
          .Case([&](mf::DivOp) -> Value {
            return integer ? Value()
                           : Value(arith::DivFOp::create(b, loc, in[0], in[1]));
          })
          .Case([&](mf::MaxOp) -> Value {
            return integer
                       ? Value(arith::MaxSIOp::create(b, loc, in[0], in[1]))
                       : Value(arith::MaximumFOp::create(b, loc, in[0], in[1]));
          })
          .Case([&](mf::MinOp) -> Value {
            return integer
                       ? Value(arith::MinSIOp::create(b, loc, in[0], in[1]))
                       : Value(arith::MinimumFOp::create(b, loc, in[0], in[1]));
          })
          .Case([&](mf::ConstantOp constant) -> Value {
            auto splat = dyn_cast<SplatElementsAttr>(constant.getValue());
            if (!splat) {
              return Value();
            }
            if (auto value = dyn_cast<FloatAttr>(splat.getSplatValue<Attribute>())) {
              return arith::ConstantOp::create(
                  b, loc, b.getF32FloatAttr(value.getValueAsDouble()));
            }
            return arith::ConstantOp::create(
                b, loc, cast<TypedAttr>(splat.getSplatValue<Attribute>()));
          })
          .Case([&](mf::NegOp) -> Value {
            return arith::NegFOp::create(b, loc, in[0]);
          })
          .Case([&](mf::ExpOp) -> Value {
            return math::ExpOp::create(b, loc, in[0]);
          })
          .Case([&](mf::LogOp) -> Value {
            return math::LogOp::create(b, loc, in[0]);
          })
          .Case([&](mf::TanhOp) -> Value {
            return math::TanhOp::create(b, loc, in[0]);
          })
          .Case([&](mf::SqrtOp) -> Value {
            return math::SqrtOp::create(b, loc, in[0]);
          })
          .Case([&](mf::RsqrtOp) -> Value {
            return arith::DivFOp::create(b, loc, constant(1.0),
                                         math::SqrtOp::create(b, loc, in[0]));
          })
          .Case([&](mf::SiluOp) -> Value { return silu(in[0]); })
          .Case([&](mf::FastGeluOp) -> Value {
            // x / (1 + exp(-1.702 x)): x sigmoid(1.702 x)
            Value scaled =
                arith::MulFOp::create(b, loc, constant(-1.702), in[0]);
            return arith::DivFOp::create(
                b, loc, in[0],
                arith::AddFOp::create(b, loc, constant(1.0),
                                      math::ExpOp::create(b, loc, scaled)));
          })
          .Case([&](mf::SiluGradOp) -> Value {
            // dy * s * (1 + x (1 - s)), s = sigmoid(x)
            Value x = in[0];
            Value s = arith::DivFOp::create(
                b, loc, constant(1.0),
                arith::AddFOp::create(
                    b, loc, constant(1.0),
                    math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x))));
            Value slope = arith::AddFOp::create(
                b, loc, constant(1.0),
                arith::MulFOp::create(
                    b, loc, x, arith::SubFOp::create(b, loc, constant(1.0), s)));
            return arith::MulFOp::create(
                b, loc, in[1], arith::MulFOp::create(b, loc, s, slope));
          })
          .Case([&](mf::GeluGradOp gelu) -> Value {
            Value x = in[0];
            Value derivative;
            if (gelu.getApproximate() == mf::GeluApproximation::tanh) {
              // 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)
              Value x2 = arith::MulFOp::create(b, loc, x, x);
              Value t = math::TanhOp::create(
                  b, loc,
                  arith::MulFOp::create(
                      b, loc, constant(0.7978845608028654),
                      arith::AddFOp::create(
                          b, loc, x,
                          arith::MulFOp::create(
                              b, loc, constant(0.044715),
                              arith::MulFOp::create(b, loc, x2, x)))));
              Value left = arith::MulFOp::create(
                  b, loc, constant(0.5), arith::AddFOp::create(b, loc, constant(1.0), t));
              Value dt = arith::SubFOp::create(b, loc, constant(1.0),
                                               arith::MulFOp::create(b, loc, t, t));
              Value inner = arith::AddFOp::create(
                  b, loc, constant(1.0),
                  arith::MulFOp::create(b, loc, constant(3 * 0.044715), x2));
              Value right = arith::MulFOp::create(
                  b, loc,
                  arith::MulFOp::create(b, loc, constant(0.5 * 0.7978845608028654), x),
                  arith::MulFOp::create(b, loc, dt, inner));
              derivative = arith::AddFOp::create(b, loc, left, right);
            } else {
              // 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi)
              Value cdf = arith::MulFOp::create(
                  b, loc, constant(0.5),
                  arith::AddFOp::create(
                      b, loc, constant(1.0),
                      math::ErfOp::create(
                          b, loc,
                          arith::MulFOp::create(b, loc, x,
                                                constant(0.7071067811865476)))));
              Value pdf = arith::MulFOp::create(
                  b, loc, constant(0.3989422804014327),
                  math::ExpOp::create(
                      b, loc,
                      arith::MulFOp::create(b, loc, constant(-0.5),
                                            arith::MulFOp::create(b, loc, x, x))));
              derivative = arith::AddFOp::create(
                  b, loc, cdf, arith::MulFOp::create(b, loc, x, pdf));
            }
            return arith::MulFOp::create(b, loc, in[1], derivative);
          })
          .Case([&](mf::SwiGluOp) -> Value {
            return arith::MulFOp::create(b, loc, silu(in[0]), in[1]);
          })
          .Case([&](mf::GeluOp gelu) -> Value {
            Value x = in[0];
            Value half = arith::MulFOp::create(b, loc, constant(0.5), x);
            Value inner;
            if (gelu.getApproximate() == mf::GeluApproximation::tanh) {
              Value cube = arith::MulFOp::create(
                  b, loc, x, arith::MulFOp::create(b, loc, x, x));
              Value sum = arith::AddFOp::create(
                  b, loc, x,
                  arith::MulFOp::create(b, loc, constant(0.044715), cube));
              inner = math::TanhOp::create(
                  b, loc,
                  arith::MulFOp::create(b, loc, constant(0.7978845608028654),
                                        sum));
            } else {
              inner = math::ErfOp::create(
                  b, loc,
                  arith::MulFOp::create(b, loc, x,
                                        constant(0.7071067811865476)));
            }
            return arith::MulFOp::create(
                b, loc, half, arith::AddFOp::create(b, loc, constant(1.0), inner));
          })
          .Case([&](mf::CastOp cast) -> Value {
            Type from = elementTypeOf(cast.getInput());
            Type to = elementTypeOf(cast.getResult());
            if (isa<FloatType>(from) && isa<FloatType>(to)) {
              return in[0]; // rounded to `to` below
            }
            if (!isa<FloatType>(from) && isa<FloatType>(to)) {
              return arith::SIToFPOp::create(b, loc, f32, in[0]);
            }
            if (isa<FloatType>(from) && !isa<FloatType>(to)) {
              return arith::FPToSIOp::create(b, loc, to, in[0]);
            }
            return in[0];
          })
          .Default([](Operation *) { return Value(); });
  if (!result) {
    why = "no kernel rule for " + op->getName().getStringRef().str();
    return failure();
  }
  return round(result, elementTypeOf(op->getResult(0)), loc);
}


FailureOr<SmallVector<Value>>
ScalarEmitter::emitBody(Block &body, llvm::DenseMap<Value, Value> &scalarOf,
                        Location loc, std::string &why) {
  for (Operation &op : body.without_terminator()) {
    // A matmul's product is an input here; the weight it dequantized and
    // the rows it quantized are the matmul's, not the body's.
    if (scalarOf.count(op.getResult(0)) ||
        isa<mf::DequantizeOp, mf::DynamicQuantizeOp, mf::QuantizeOp>(op) ||
        mf::quantizedRowsOf(op.getResult(0))) {
      continue;
    }
    SmallVector<Value> operands;
    for (Value operand : op.getOperands()) {
      operands.push_back(scalarOf.lookup(operand));
    }
    FailureOr<Value> value = compute(&op, operands, loc, why);
    if (failed(value)) {
      return failure();
    }
    scalarOf[op.getResult(0)] = *value;
  }
  SmallVector<Value> results;
  for (Value yielded : body.getTerminator()->getOperands()) {
    Value scalar = scalarOf.lookup(yielded);
    if (!scalar) {
      why = "a region that yields one of its inputs";
      return failure();
    }
    results.push_back(narrow(scalar, elementTypeOf(yielded), loc));
  }
  return results;
}
