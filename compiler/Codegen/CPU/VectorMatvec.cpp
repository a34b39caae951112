//===- VectorMatvec.cpp - one row times a weight panel, in vector ops -----===//
//
// Decode multiplies one row by every weight: out[j] = x . w[n0 + j] for the
// rows of a weight w [N, K] a tile covers. OpenBLAS's sgemv spends as much
// on its call as on a small panel, and a 16-bit weight had to be widened
// into a copy first; this is the product as the kernel's own code:
//
//   for j in [0, n) by 8:                     // eight weight rows at once
//     acc[0..7] = 0                            // vector<16xf32> each
//     for k in [0, K) by 16: xv = x[k..k+16]   // masked at a partial end
//       acc[r] = fma(w[n0 + j + r][k..k+16], xv, acc[r])
//     out[j..j+8] = the eight sums             // one shuffle-add tree
//   for the last n % 8 rows: one accumulator, summed by vector.reduction
//
// A weight stored [K, N] (GPT-2's Conv1D) is read by rows instead, each
// x[k] broadcast against 128 columns of row k at a time (eight vectors; 16
// with a mask at the tile's end): no sums across lanes at all.
//
// A weight packed into panels (a parameter; runtime/kernels/PanelGemm.h) is
// read like the [K, N] one, four whole panels at a time: each x[k] against
// the k-th 32 columns of each (four contiguous streams); the rest one panel
// at a time, a narrow last one under masks.
//
// Loads of f16/bf16 are widened in registers, and a quantized weight's i8
// values converted (the kernel scales the sums); products are summed in
// f32, as the gemm services do. bf16 rows go 32 elements a load: a bf16 is the
// high half of an f32, so a pair's 32 bits give its even element by a
// shift and its odd one by a mask (x split alike), with no widening
// shuffle (Qwen2 scaled to 4 layers, bf16: decode 82.6-103.0 -> 84.2-113.8
// tokens/s, 7 alternating runs, never slower).
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/CPUKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mfc;

namespace {

/// f32 lanes of one AVX-512 register (two AVX2 ones elsewhere).
constexpr int64_t kLanes = 16;
/// Weight rows in flight: eight independent FMA chains, and the tree that
/// sums them costs ~3 ops a row where a reduction costs ~8.
constexpr int64_t kRowsAtOnce = 8;
/// Vectors of columns in flight for a [K, N] weight: eight FMA chains.
constexpr int64_t kColumnVectors = 8;
/// Panels in flight for packed weights: four, two vectors each.
constexpr int64_t kPanelsAtOnce = kColumnVectors / 2;

class MatvecEmitter {
public:
  MatvecEmitter(OpBuilder &builder, Location loc, Value x, Value w, int64_t k)
      : b_(builder), loc_(loc), x_(x), w_(w), k_(k),
        storage_(cast<MemRefType>(w.getType()).getElementType()),
        wide_(VectorType::get({kLanes}, builder.getF32Type())) {}

  /// Sums of x times weight rows row0.., `count` of them, each a vector of
  /// kLanes partial sums.
  SmallVector<Value> partialSums(Value row0, int64_t count) {
    SmallVector<Value> init(count, zeros());
    // bf16 goes 32 at a time: one load, even and odd elements as f32 by a
    // shift and a mask of their 32-bit pairs (no widening shuffle).
    bool pairs = storage_.isBF16();
    int64_t chunk = pairs ? 2 * kLanes : kLanes;
    int64_t whole = k_ / chunk * chunk;
    auto step = [&](OpBuilder &builder, Value kk, ValueRange sums,
                    int64_t valid) {
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPoint(builder.getInsertionBlock(),
                           builder.getInsertionPoint());
      SmallVector<Value> xv = pairs ? loadPairs(x_, {kk}, valid)
                                    : SmallVector<Value>{load(x_, {kk}, valid)};
      SmallVector<Value> next;
      for (int64_t r = 0; r < count; ++r) {
        Value row = arith::AddIOp::create(b_, loc_, row0, index(r));
        SmallVector<Value> wv =
            pairs ? loadPairs(w_, {row, kk}, valid)
                  : SmallVector<Value>{load(w_, {row, kk}, valid)};
        Value sum = sums[r];
        for (size_t part = 0; part < wv.size(); ++part) {
          sum = vector::FMAOp::create(b_, loc_, wv[part], xv[part], sum);
        }
        next.push_back(sum);
      }
      return next;
    };
    SmallVector<Value> sums = init;
    if (whole > 0) {
      auto loop = scf::ForOp::create(
          b_, loc_, index(0), index(whole), index(chunk), init,
          [&](OpBuilder &builder, Location, Value kk, ValueRange carried) {
            scf::YieldOp::create(builder, loc_,
                                 step(builder, kk, carried, chunk));
          });
      sums.assign(loop.getResults().begin(), loop.getResults().end());
    }
    if (whole < k_) { // the last k_ % chunk columns, masked
      sums = step(b_, index(whole), sums, k_ - whole);
    }
    return sums;
  }

  /// Sums of x times the rows row0.. (`count` of them) of an int4 weight
  /// stored [N, K / 2] (byte j of a row: k = 2j in the low nibble, 2j + 1
  /// in the high one), scaled per group of `group` (a multiple of 32) by
  /// `scales` ([K / group, weightRows] flat): 16 bytes a step are 32
  /// values of one group, their low nibbles against x's even elements and
  /// the high ones against its odd ones (x split once a step for all the
  /// rows), each converted vector times the row's scale. K % 32 == 0.
  SmallVector<Value> int4RowSums(Value row0, int64_t count, Value scales,
                                 int64_t group, int64_t weightRows) {
    auto bytesType = VectorType::get({kLanes}, b_.getI8Type());
    auto pairType = VectorType::get({2 * kLanes}, elementOf(x_));
    SmallVector<int64_t> evens, odds;
    for (int64_t i = 0; i < kLanes; ++i) {
      evens.push_back(2 * i);
      odds.push_back(2 * i + 1);
    }
    SmallVector<Value> init(count, zeros());
    auto loop = scf::ForOp::create(
        b_, loc_, index(0), index(k_ / 2), index(kLanes), init,
        [&](OpBuilder &builder, Location, Value kb, ValueRange sums) {
          OpBuilder::InsertionGuard guard(b_);
          b_.setInsertionPoint(builder.getInsertionBlock(),
                               builder.getInsertionPoint());
          Value k0 = arith::MulIOp::create(b_, loc_, kb, index(2));
          Value both =
              vector::LoadOp::create(b_, loc_, pairType, x_, ValueRange{k0});
          if (!elementOf(x_).isF32()) {
            both = arith::ExtFOp::create(
                b_, loc_, VectorType::get({2 * kLanes}, b_.getF32Type()), both);
          }
          Value xEven = vector::ShuffleOp::create(b_, loc_, both, both, evens);
          Value xOdd = vector::ShuffleOp::create(b_, loc_, both, both, odds);
          Value scaleRow = arith::MulIOp::create(
              b_, loc_, arith::DivUIOp::create(b_, loc_, k0, index(group)),
              index(weightRows));
          SmallVector<Value> next;
          for (int64_t r = 0; r < count; ++r) {
            Value row = arith::AddIOp::create(b_, loc_, row0, index(r));
            Value scale = memref::LoadOp::create(
                b_, loc_, scales,
                ValueRange{arith::AddIOp::create(b_, loc_, scaleRow, row)});
            if (!scale.getType().isF32()) {
              scale = arith::ExtFOp::create(b_, loc_, b_.getF32Type(), scale);
            }
            Value spread = vector::BroadcastOp::create(b_, loc_, wide_, scale);
            Value bytes = vector::LoadOp::create(b_, loc_, bytesType, w_,
                                                 ValueRange{row, kb});
            auto [low, high] = nibbles(bytes);
            Value sum = vector::FMAOp::create(
                b_, loc_, arith::MulFOp::create(b_, loc_, low, spread), xEven,
                sums[r]);
            next.push_back(vector::FMAOp::create(
                b_, loc_, arith::MulFOp::create(b_, loc_, high, spread), xOdd,
                sum));
          }
          scf::YieldOp::create(b_, loc_, next);
        });
    return SmallVector<Value>(loop.getResults().begin(),
                              loop.getResults().end());
  }

  /// The eight sums of eight vectors of partial sums, in order: pairs are
  /// halved and added until one lane a vector is left.
  Value sumEight(ArrayRef<Value> partial) {
    SmallVector<Value> level(partial.begin(), partial.end());
    for (int64_t half = kLanes / 2; half > 1; half /= 2) {
      SmallVector<Value> next;
      for (size_t i = 0; i < level.size(); i += 2) {
        next.push_back(addHalves(level[i], level[i + 1], half, kLanes));
      }
      level = std::move(next);
    }
    // One vector of pairs [a a b b ...]: the even lanes plus the odd ones.
    return addHalves(level[0], level[0], 1, kRowsAtOnce);
  }

  /// x . the columns col0.. of a [K, N] weight, `count` vectors of them
  /// (under `mask`, if given: one vector, the columns the tile still has).
  SmallVector<Value> columnSums(Value col0, int64_t count, Value mask) {
    return broadcastSums(count, [&](Value kk, int64_t c) {
      Value col = arith::AddIOp::create(b_, loc_, col0, index(c * kLanes));
      return mask ? loadUnder(w_, {kk, col}, mask)
                  : load(w_, {kk, col}, kLanes);
    });
  }

  /// x . the columns of `count` consecutive panels from panel p0 of a
  /// weight packed flat (runtime/kernels/PanelGemm.h: panel p at element 32p *
  /// K, [K][width]): two vectors a panel, each step along K one broadcast x[k]
  /// against a contiguous row of every panel. Whole panels (32 wide) when
  /// `width` is null, else one panel that wide, read under masks.
  SmallVector<Value> panelSums(Value p0, int64_t count, Value width) {
    Value stride = width ? width : index(kPanelWidth);
    SmallVector<Value> masks = panelMasks(width);
    return broadcastSums(2 * count, [&](Value kk, int64_t v) {
      Value at = panelElement(p0, v, kk, stride, k_);
      return width ? loadUnder(w_, {at}, masks[v % 2]) : load(w_, {at}, kLanes);
    });
  }

  /// x . the columns of `count` consecutive panels from panel p0 of an
  /// int4 weight's bytes, packed flat like an i8 weight [weightRows, K / 2]
  /// (byte row kb of a panel: each column's values at k = 2kb, low nibble,
  /// and 2kb + 1, high), scaled per group of `group` along K by `scales`
  /// ([K / group, weightRows] flat): per group, two FMA chains a vector
  /// (x[2kb] times the low nibbles, x[2kb + 1] the high ones), then the
  /// group's sums times its scales into the totals. Whole panels when
  /// `width` is null, else one panel that wide, under masks.
  SmallVector<Value> int4PanelSums(Value p0, int64_t count, Value width,
                                   Value scales, int64_t group,
                                   int64_t weightRows) {
    Value stride = width ? width : index(kPanelWidth);
    auto bytesType = VectorType::get({kLanes}, b_.getI8Type());
    SmallVector<Value> masks = panelMasks(width);
    auto broadcastX = [&](Value at) -> Value {
      Value xk = memref::LoadOp::create(b_, loc_, x_, ValueRange{at});
      if (!elementOf(x_).isF32()) {
        xk = arith::ExtFOp::create(b_, loc_, b_.getF32Type(), xk);
      }
      return vector::BroadcastOp::create(b_, loc_, wide_, xk);
    };
    int64_t vectors = 2 * count;
    SmallVector<Value> init(vectors, zeros());
    auto groups = scf::ForOp::create(
        b_, loc_, index(0), index(k_ / group), index(1), init,
        [&](OpBuilder &outer, Location, Value g, ValueRange totals) {
          OpBuilder::InsertionGuard guard(b_);
          b_.setInsertionPoint(outer.getInsertionBlock(),
                               outer.getInsertionPoint());
          Value firstPair =
              arith::MulIOp::create(b_, loc_, g, index(group / 2));
          SmallVector<Value> zero(vectors, zeros());
          auto pairs = scf::ForOp::create(
              b_, loc_, firstPair,
              arith::AddIOp::create(b_, loc_, firstPair, index(group / 2)),
              index(1), zero,
              [&](OpBuilder &inner, Location, Value kb, ValueRange sums) {
                OpBuilder::InsertionGuard guard(b_);
                b_.setInsertionPoint(inner.getInsertionBlock(),
                                     inner.getInsertionPoint());
                Value even = arith::MulIOp::create(b_, loc_, kb, index(2));
                Value xEven = broadcastX(even);
                Value xOdd =
                    broadcastX(arith::AddIOp::create(b_, loc_, even, index(1)));
                SmallVector<Value> next;
                for (int64_t v = 0; v < vectors; ++v) {
                  Value at = panelElement(p0, v, kb, stride, k_ / 2);
                  Value bytes;
                  if (width) {
                    Value padding = arith::ConstantOp::create(
                        b_, loc_, bytesType,
                        DenseElementsAttr::get(
                            bytesType,
                            ArrayRef<Attribute>{b_.getI8IntegerAttr(0)}));
                    bytes = vector::MaskedLoadOp::create(b_, loc_, bytesType,
                                                         w_, ValueRange{at},
                                                         masks[v % 2], padding);
                  } else {
                    bytes = vector::LoadOp::create(b_, loc_, bytesType, w_,
                                                   ValueRange{at});
                  }
                  auto [low, high] = nibbles(bytes);
                  Value sum =
                      vector::FMAOp::create(b_, loc_, low, xEven, sums[v]);
                  next.push_back(
                      vector::FMAOp::create(b_, loc_, high, xOdd, sum));
                }
                scf::YieldOp::create(b_, loc_, next);
              });
          SmallVector<Value> next;
          for (int64_t v = 0; v < vectors; ++v) {
            Value column = arith::AddIOp::create(
                b_, loc_,
                arith::MulIOp::create(
                    b_, loc_, arith::AddIOp::create(b_, loc_, p0, index(v / 2)),
                    index(kPanelWidth)),
                index(v % 2 * kLanes));
            Value at = arith::AddIOp::create(
                b_, loc_, arith::MulIOp::create(b_, loc_, g, index(weightRows)),
                column);
            Value scale = width ? loadUnder(scales, {at}, masks[v % 2])
                                : load(scales, {at}, kLanes);
            next.push_back(vector::FMAOp::create(b_, loc_, pairs.getResult(v),
                                                 scale, totals[v]));
          }
          scf::YieldOp::create(b_, loc_, next);
        });
    return SmallVector<Value>(groups.getResults().begin(),
                              groups.getResults().end());
  }

  /// The sum of one vector of partial sums.
  Value sumOne(Value partial) {
    return vector::ReductionOp::create(b_, loc_, vector::CombiningKind::ADD,
                                       partial, arith::FastMathFlags::reassoc);
  }

  Value index(int64_t value) {
    return arith::ConstantIndexOp::create(b_, loc_, value);
  }

  Value zeros() {
    return arith::ConstantOp::create(
        b_, loc_, wide_,
        DenseElementsAttr::get(wide_,
                               ArrayRef<Attribute>{b_.getF32FloatAttr(0)}));
  }

private:
  /// Masks of the two vectors of a panel `width` wide (none for null).
  SmallVector<Value> panelMasks(Value width) {
    if (!width) {
      return {};
    }
    auto maskType = VectorType::get({kLanes}, b_.getI1Type());
    return {vector::CreateMaskOp::create(b_, loc_, maskType, ValueRange{width}),
            vector::CreateMaskOp::create(b_, loc_, maskType,
                                         ValueRange{arith::SubIOp::create(
                                             b_, loc_, width, index(kLanes))})};
  }

  /// The flat element of vector `v` (two a panel) of the panels from p0,
  /// at row `row` of panels `depth` rows deep, rows `stride` elements apart.
  Value panelElement(Value p0, int64_t v, Value row, Value stride,
                     int64_t depth) {
    Value panel = arith::MulIOp::create(
        b_, loc_, arith::AddIOp::create(b_, loc_, p0, index(v / 2)),
        index(kPanelWidth * depth));
    return arith::AddIOp::create(
        b_, loc_,
        arith::AddIOp::create(b_, loc_, panel,
                              arith::MulIOp::create(b_, loc_, row, stride)),
        index(v % 2 * kLanes));
  }

  /// The low and the high nibbles of 16 bytes of int4 pairs, in f32 (an
  /// arithmetic shift sign-extends each).
  std::pair<Value, Value> nibbles(Value bytes) {
    auto wordsType = VectorType::get({kLanes}, b_.getI32Type());
    auto splat = [&](int32_t value) -> Value {
      return arith::ConstantOp::create(
          b_, loc_, wordsType,
          DenseElementsAttr::get(
              wordsType, ArrayRef<Attribute>{b_.getI32IntegerAttr(value)}));
    };
    Value words = arith::ExtSIOp::create(b_, loc_, wordsType, bytes);
    Value low = arith::ShRSIOp::create(
        b_, loc_, arith::ShLIOp::create(b_, loc_, words, splat(28)), splat(28));
    Value high = arith::ShRSIOp::create(b_, loc_, words, splat(4));
    return {arith::SIToFPOp::create(b_, loc_, wide_, low),
            arith::SIToFPOp::create(b_, loc_, wide_, high)};
  }

  /// Sums over k of x[k] (in f32, broadcast) times the `vectors` vectors
  /// `loadAt(k, v)` reads: that many FMA chains, no sums across lanes.
  SmallVector<Value>
  broadcastSums(int64_t vectors,
                llvm::function_ref<Value(Value, int64_t)> loadAt) {
    SmallVector<Value> init(vectors, zeros());
    auto loop = scf::ForOp::create(
        b_, loc_, index(0), index(k_), index(1), init,
        [&](OpBuilder &builder, Location, Value kk, ValueRange sums) {
          OpBuilder::InsertionGuard guard(b_);
          b_.setInsertionPoint(builder.getInsertionBlock(),
                               builder.getInsertionPoint());
          Value xk = memref::LoadOp::create(b_, loc_, x_, ValueRange{kk});
          if (!elementOf(x_).isF32()) {
            xk = arith::ExtFOp::create(b_, loc_, b_.getF32Type(), xk);
          }
          Value broadcast = vector::BroadcastOp::create(b_, loc_, wide_, xk);
          SmallVector<Value> next;
          for (int64_t v = 0; v < vectors; ++v) {
            next.push_back(vector::FMAOp::create(b_, loc_, loadAt(kk, v),
                                                 broadcast, sums[v]));
          }
          scf::YieldOp::create(b_, loc_, next);
        });
    return SmallVector<Value>(loop.getResults().begin(),
                              loop.getResults().end());
  }

  /// kLanes elements of `memref` at `indices` in f32, those `mask` selects
  /// (the rest 0).
  Value loadUnder(Value memref, ValueRange indices, Value mask) {
    Type element = elementOf(memref);
    auto stored = VectorType::get({kLanes}, element);
    Attribute zero = element.isInteger(8)
                         ? Attribute(b_.getIntegerAttr(element, 0))
                         : Attribute(b_.getFloatAttr(element, 0.0));
    Value padding = arith::ConstantOp::create(
        b_, loc_, stored, DenseElementsAttr::get(stored, ArrayRef(zero)));
    return widen(vector::MaskedLoadOp::create(b_, loc_, stored, memref, indices,
                                              mask, padding));
  }

  static Type elementOf(Value memref) {
    return cast<MemRefType>(memref.getType()).getElementType();
  }

  /// kLanes elements of `memref` at `indices` in f32; the first `valid`
  /// only (the rest 0) at the end of a row.
  Value load(Value memref, ValueRange indices, int64_t valid) {
    if (valid < kLanes) {
      auto maskType = VectorType::get({kLanes}, b_.getI1Type());
      return loadUnder(memref, indices,
                       vector::ConstantMaskOp::create(
                           b_, loc_, maskType, ArrayRef<int64_t>{valid}));
    }
    auto stored = VectorType::get({kLanes}, elementOf(memref));
    return widen(vector::LoadOp::create(b_, loc_, stored, memref, indices));
  }

  /// 2 * kLanes bf16 elements of `memref` at `indices` (the first `valid`,
  /// the rest 0) as f32: the even ones, then the odd ones.
  SmallVector<Value> loadPairs(Value memref, ValueRange indices,
                               int64_t valid) {
    auto stored = VectorType::get({2 * kLanes}, storage_);
    Value loaded;
    if (valid < 2 * kLanes) {
      Value mask = vector::ConstantMaskOp::create(
          b_, loc_, VectorType::get({2 * kLanes}, b_.getI1Type()),
          ArrayRef<int64_t>{valid});
      Value padding = arith::ConstantOp::create(
          b_, loc_, stored,
          DenseElementsAttr::get(
              stored, ArrayRef<Attribute>{b_.getFloatAttr(storage_, 0.0)}));
      loaded = vector::MaskedLoadOp::create(b_, loc_, stored, memref, indices,
                                            mask, padding);
    } else {
      loaded = vector::LoadOp::create(b_, loc_, stored, memref, indices);
    }
    auto words = VectorType::get({kLanes}, b_.getI32Type());
    Value both = vector::BitCastOp::create(b_, loc_, words, loaded);
    auto splat = [&](int32_t value) -> Value {
      return arith::ConstantOp::create(
          b_, loc_, words,
          DenseElementsAttr::get(
              words, ArrayRef<Attribute>{b_.getI32IntegerAttr(value)}));
    };
    // A bf16 is the high half of an f32: the low element of a pair shifted
    // up, the high one with the low half cleared.
    Value even = arith::ShLIOp::create(b_, loc_, both, splat(16));
    Value odd = arith::AndIOp::create(b_, loc_, both, splat(-65536));
    return {vector::BitCastOp::create(b_, loc_, wide_, even),
            vector::BitCastOp::create(b_, loc_, wide_, odd)};
  }

  /// A loaded vector in f32 (a quantized weight's i8 values as numbers).
  Value widen(Value loaded) {
    Type element = cast<VectorType>(loaded.getType()).getElementType();
    if (element.isF32()) {
      return loaded;
    }
    if (element.isInteger(8)) {
      return arith::SIToFPOp::create(b_, loc_, wide_, loaded);
    }
    return arith::ExtFOp::create(b_, loc_, wide_, loaded);
  }

  /// For lanes in groups of 2 * half (across a then b), the first halves
  /// plus the second ones: `lanes` results.
  Value addHalves(Value a, Value b, int64_t half, int64_t lanes) {
    SmallVector<int64_t> first, second;
    for (int64_t group = 0; static_cast<int64_t>(first.size()) < lanes;
         group += 2 * half) {
      for (int64_t i = 0; i < half; ++i) {
        first.push_back(group + i);
        second.push_back(group + half + i);
      }
    }
    Value low = vector::ShuffleOp::create(b_, loc_, a, b, first);
    Value high = vector::ShuffleOp::create(b_, loc_, a, b, second);
    return arith::AddFOp::create(b_, loc_, low, high);
  }

  OpBuilder &b_;
  Location loc_;
  Value x_, w_;
  int64_t k_;
  Type storage_;
  VectorType wide_;
};

/// emitVectorMatvec's loops, `sumsOf(emitter, row0, count)` giving the
/// partial sums of `count` weight rows from row0.
void emitRowLoops(
    OpBuilder &builder, Location loc, Value x, Value w, Value out,
    Value outOffset, Value n0, Value n, int64_t k,
    llvm::function_ref<SmallVector<Value>(MatvecEmitter &, Value, int64_t)>
        sumsOf) {
  MatvecEmitter emitter(builder, loc, x, w, k);
  Value eight = emitter.index(kRowsAtOnce);
  Value grouped = arith::MulIOp::create(
      builder, loc, arith::DivUIOp::create(builder, loc, n, eight), eight);
  auto rowsFrom = [&](Value j) {
    return arith::AddIOp::create(builder, loc, n0, j);
  };
  auto outAt = [&](Value j) {
    return arith::AddIOp::create(builder, loc, outOffset, j).getResult();
  };
  scf::ForOp::create(
      builder, loc, emitter.index(0), grouped, eight, ValueRange{},
      [&](OpBuilder &body, Location, Value j, ValueRange) {
        OpBuilder::InsertionGuard guard(builder);
        builder.setInsertionPoint(body.getInsertionBlock(),
                                  body.getInsertionPoint());
        Value sums =
            emitter.sumEight(sumsOf(emitter, rowsFrom(j), kRowsAtOnce));
        vector::StoreOp::create(builder, loc, sums, out, ValueRange{outAt(j)});
        scf::YieldOp::create(builder, loc);
      });
  scf::ForOp::create(
      builder, loc, grouped, n, emitter.index(1), ValueRange{},
      [&](OpBuilder &body, Location, Value j, ValueRange) {
        OpBuilder::InsertionGuard guard(builder);
        builder.setInsertionPoint(body.getInsertionBlock(),
                                  body.getInsertionPoint());
        Value sum = emitter.sumOne(sumsOf(emitter, rowsFrom(j), 1)[0]);
        memref::StoreOp::create(builder, loc, sum, out, ValueRange{outAt(j)});
        scf::YieldOp::create(builder, loc);
      });
}

} // namespace

void mfc::emitVectorMatvec(OpBuilder &builder, Location loc, Value x, Value w,
                           Value out, Value outOffset, Value n0, Value n,
                           int64_t k) {
  emitRowLoops(builder, loc, x, w, out, outOffset, n0, n, k,
               [](MatvecEmitter &emitter, Value row0, int64_t count) {
                 return emitter.partialSums(row0, count);
               });
}

void mfc::emitVectorMatvecInt4(OpBuilder &builder, Location loc, Value x,
                               Value w, Value scales, Value out,
                               Value outOffset, Value n0, Value n, int64_t k,
                               int64_t weightRows, int64_t group) {
  emitRowLoops(builder, loc, x, w, out, outOffset, n0, n, k,
               [&](MatvecEmitter &emitter, Value row0, int64_t count) {
                 return emitter.int4RowSums(row0, count, scales, group,
                                            weightRows);
               });
}

void mfc::emitVectorMatvecByColumns(OpBuilder &builder, Location loc, Value x,
                                    Value w, Value out, Value outOffset,
                                    Value n0, Value n, int64_t k) {
  MatvecEmitter emitter(builder, loc, x, w, k);
  Value block = emitter.index(kColumnVectors * kLanes);
  Value whole = arith::MulIOp::create(
      builder, loc, arith::DivUIOp::create(builder, loc, n, block), block);
  auto at = [&](Value base, Value j, int64_t c) {
    return arith::AddIOp::create(builder, loc,
                                 arith::AddIOp::create(builder, loc, base, j),
                                 emitter.index(c * kLanes))
        .getResult();
  };
  scf::ForOp::create(
      builder, loc, emitter.index(0), whole, block, ValueRange{},
      [&](OpBuilder &body, Location, Value j, ValueRange) {
        OpBuilder::InsertionGuard guard(builder);
        builder.setInsertionPoint(body.getInsertionBlock(),
                                  body.getInsertionPoint());
        SmallVector<Value> sums =
            emitter.columnSums(at(n0, j, 0), kColumnVectors, Value());
        for (int64_t c = 0; c < kColumnVectors; ++c) {
          vector::StoreOp::create(builder, loc, sums[c], out,
                                  ValueRange{at(outOffset, j, c)});
        }
        scf::YieldOp::create(builder, loc);
      });
  scf::ForOp::create(
      builder, loc, whole, n, emitter.index(kLanes), ValueRange{},
      [&](OpBuilder &body, Location, Value j, ValueRange) {
        OpBuilder::InsertionGuard guard(builder);
        builder.setInsertionPoint(body.getInsertionBlock(),
                                  body.getInsertionPoint());
        Value left =
            arith::MinUIOp::create(builder, loc, emitter.index(kLanes),
                                   arith::SubIOp::create(builder, loc, n, j));
        Value mask = vector::CreateMaskOp::create(
            builder, loc, VectorType::get({kLanes}, builder.getI1Type()),
            ValueRange{left});
        Value sum = emitter.columnSums(at(n0, j, 0), 1, mask)[0];
        vector::MaskedStoreOp::create(
            builder, loc, out, ValueRange{at(outOffset, j, 0)}, mask, sum);
        scf::YieldOp::create(builder, loc);
      });
}

namespace {

/// emitVectorMatvecByPanels's loops, `sumsOf(emitter, p, panels, width)`
/// giving the sums of `panels` panels from p (whole, or one `width` wide).
void emitPanelLoops(OpBuilder &builder, Location loc, Value x, Value panels,
                    Value out, Value outOffset, Value n0, Value n, int64_t k,
                    int64_t weightRows,
                    llvm::function_ref<SmallVector<Value>(
                        MatvecEmitter &, Value, int64_t, Value)>
                        sumsOf) {
  MatvecEmitter emitter(builder, loc, x, panels, k);
  Value width = emitter.index(kPanelWidth);
  Value group = emitter.index(kPanelsAtOnce);
  Value first = arith::DivUIOp::create(builder, loc, n0, width);
  Value count = arith::CeilDivUIOp::create(builder, loc, n, width);
  // Groups of whole panels, then one panel at a time: the rest, and a
  // narrow last panel of the weight.
  Value whole = arith::MinSIOp::create(
      builder, loc, count,
      arith::SubIOp::create(builder, loc,
                            emitter.index(weightRows / kPanelWidth), first));
  whole = arith::MulIOp::create(
      builder, loc, arith::DivUIOp::create(builder, loc, whole, group), group);
  auto maskType = VectorType::get({kLanes}, builder.getI1Type());
  // Panels g.. of the tile (`panelsHere` of them, `panelWidth` wide or
  // whole): their columns to out, each vector under a mask of the columns
  // the tile still has.
  auto emitPanels = [&](OpBuilder &body, Value g, int64_t panelsHere,
                        bool narrow) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPoint(body.getInsertionBlock(), body.getInsertionPoint());
    Value p = arith::AddIOp::create(builder, loc, first, g);
    Value panelWidth;
    if (narrow) {
      panelWidth = arith::MinSIOp::create(
          builder, loc, width,
          arith::SubIOp::create(
              builder, loc, emitter.index(weightRows),
              arith::MulIOp::create(builder, loc, p, width)));
    }
    SmallVector<Value> sums = sumsOf(emitter, p, panelsHere, panelWidth);
    for (int64_t v = 0; v < 2 * panelsHere; ++v) {
      Value column = arith::AddIOp::create(
          builder, loc, arith::MulIOp::create(builder, loc, g, width),
          emitter.index(v * kLanes));
      Value left = arith::SubIOp::create(builder, loc, n, column);
      Value mask = vector::CreateMaskOp::create(builder, loc, maskType,
                                                ValueRange{left});
      vector::MaskedStoreOp::create(
          builder, loc, out,
          ValueRange{arith::AddIOp::create(builder, loc, outOffset, column)},
          mask, sums[v]);
    }
    scf::YieldOp::create(builder, loc);
  };
  scf::ForOp::create(builder, loc, emitter.index(0), whole, group, ValueRange{},
                     [&](OpBuilder &body, Location, Value g, ValueRange) {
                       emitPanels(body, g, kPanelsAtOnce, false);
                     });
  scf::ForOp::create(builder, loc, whole, count, emitter.index(1), ValueRange{},
                     [&](OpBuilder &body, Location, Value g, ValueRange) {
                       emitPanels(body, g, 1, true);
                     });
}

} // namespace

void mfc::emitVectorMatvecByPanels(OpBuilder &builder, Location loc, Value x,
                                   Value panels, Value out, Value outOffset,
                                   Value n0, Value n, int64_t k,
                                   int64_t weightRows) {
  emitPanelLoops(
      builder, loc, x, panels, out, outOffset, n0, n, k, weightRows,
      [](MatvecEmitter &emitter, Value p, int64_t count, Value width) {
        return emitter.panelSums(p, count, width);
      });
}

void mfc::emitVectorMatvecByInt4Panels(OpBuilder &builder, Location loc,
                                       Value x, Value panels, Value scales,
                                       Value out, Value outOffset, Value n0,
                                       Value n, int64_t k, int64_t weightRows,
                                       int64_t group) {
  emitPanelLoops(
      builder, loc, x, panels, out, outOffset, n0, n, k, weightRows,
      [&](MatvecEmitter &emitter, Value p, int64_t count, Value width) {
        return emitter.int4PanelSums(p, count, width, scales, group,
                                     weightRows);
      });
}
