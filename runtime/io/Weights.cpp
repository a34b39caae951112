//===- Weights.cpp - parameter values for an executable -------------------===//

#include "runtime/io/Weights.h"

#include "runtime/base/FileIO.h"
#include "runtime/base/Hash.h"
#include "runtime/io/Quantization.h"
#include "runtime/io/Safetensors.h"
#include "runtime/kernels/PanelGemm.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <regex>
#include <set>

using namespace mfrt;

namespace {

/// The block of a split parameter this rank holds (nullopt: the whole).
std::optional<TensorBlock> blockOf(const fb::Parameter &parameter,
                                   const Communicator *ranks) {
  if (parameter.split_dim() < 0) {
    return std::nullopt;
  }
  std::vector<int64_t> axes(parameter.split_axes()->begin(),
                            parameter.split_axes()->end());
  int64_t parts = parameter.split_parts();
  int64_t length =
      parameter.type()->shape()->Get(parameter.split_dim()) / parts;
  int64_t index = ranks ? ranks->indexAlong(axes) : 0;
  return TensorBlock{parameter.split_dim(), index * length, length, parts};
}

/// `shape` with dimension `dim` seen as `parts` equal parts: [.., parts,
/// extent / parts, ..], so that a block of each part is one block along
/// dimension dim + 1.
Shape partsView(Shape shape, int64_t dim, int64_t parts) {
  shape[dim] /= parts;
  shape.insert(shape.begin() + dim, parts);
  return shape;
}

/// The whole weight's shape: the block's, times the ranks along the split.
Shape wholeShapeOf(const fb::Parameter &parameter,
                   const Executable &executable) {
  Shape shape = Executable::shapeOf(*parameter.type());
  if (parameter.split_dim() >= 0) {
    for (int16_t axis : *parameter.split_axes()) {
      shape[parameter.split_dim()] *= executable.root().grid()->Get(axis);
    }
  }
  return shape;
}

/// A parameter's value as its `init` says (of `shape`: the whole weight).
/// Storage for the whole of `parameter` (as loading checked it fits: its
/// block times the ranks) in `dtype`, for `doing` it ("gathering").
StatusOr<Tensor> wholeTensor(const fb::Parameter &parameter,
                             const Executable &executable, DType dtype,
                             const char *doing) {
  Shape shape = wholeShapeOf(parameter, executable);
  size_t size =
      static_cast<size_t>(*checkedElementCount(shape)) * dtypeSize(dtype);
  std::shared_ptr<void> bytes(std::malloc(std::max<size_t>(1, size)),
                              std::free);
  if (!bytes) {
    return Status::error(StatusCode::ResourceExhausted,
                         std::string("out of memory ") + doing +
                             " parameter '" + parameter.name()->str() + "'");
  }
  return Tensor(dtype, shape, std::move(bytes));
}

/// A stacked weight's parts from `firstPart` on fill `shape`'s dimension 0
/// (this rank's experts: no other rank's are made).
StatusOr<Tensor> initialValue(const fb::Parameter &parameter,
                              Allocator &allocator, uint64_t seed,
                              const Shape &shape, DType dtype,
                              int64_t firstPart = 0) {
  StatusOr<Tensor> tensor = allocator.allocate(dtype, shape);
  if (!tensor) {
    return tensor.status();
  }
  int64_t count = tensor->numElements();
  switch (parameter.init()) {
  case fb::ParameterInit::Zeros:
    break;
  case fb::ParameterInit::Ones:
    for (int64_t i = 0; i < count; ++i) {
      tensor->storeFloat(i, 1.0f);
    }
    break;
  case fb::ParameterInit::Normal:
  case fb::ParameterInit::HeUniform: {
    // Each part of a stacked weight as the tensor of its name would be
    // (an expert as on one rank); else the whole by the parameter's name.
    const auto *parts = parameter.parts();
    bool stacked = parts && parts->size();
    int64_t pieces = stacked && !shape.empty() ? shape[0] : 1;
    int64_t perPiece = count / std::max<int64_t>(1, pieces);
    for (int64_t piece = 0; piece < pieces; ++piece) {
      const flatbuffers::String *name =
          stacked ? parts->Get(firstPart + piece) : parameter.name();
      std::mt19937_64 generator(seed ^ fnv1a64(name->data(), name->size()));
      // Our own uniform draws (and Box-Muller on them): identical on every
      // platform.
      auto uniform = [&] {
        return (static_cast<double>(generator() >> 11) + 0.5) * 0x1.0p-53;
      };
      int64_t first = piece * perPiece;
      if (parameter.init() == fb::ParameterInit::HeUniform) {
        int64_t fanIn = shape.empty() ? 1 : std::max<int64_t>(1, shape.back());
        double bound = 1.0 / std::sqrt(static_cast<double>(fanIn));
        for (int64_t i = first; i < first + perPiece; ++i) {
          tensor->storeFloat(
              i, static_cast<float>((2.0 * uniform() - 1.0) * bound));
        }
        continue;
      }
      for (int64_t i = first; i < first + perPiece; ++i) {
        double value = std::sqrt(-2.0 * std::log(uniform())) *
                       std::cos(2.0 * M_PI * uniform());
        tensor->storeFloat(i, static_cast<float>(value * parameter.std()));
      }
    }
    break;
  }
  }
  return tensor;
}

/// Where a MindFormers checkpoint keeps one Mixtral expert's weight: its
/// experts stacked, `model.layers.L.feed_forward.ffn.w1.weight` [E, out,
/// in], for Hugging Face's `model.layers.L.block_sparse_moe.experts.e.w1.
/// weight` (r1.5.0's research/mixtral/convert_weight.py without use_gmm).
struct StackedSource {
  std::string name; ///< the stacked tensor
  int64_t expert = 0;
};

std::optional<StackedSource> stackedSourceOf(const std::string &hfName) {
  static const std::regex pattern(
      R"(^(model\.layers\.\d+)\.block_sparse_moe\.experts\.(\d+)\.(w[123])\.weight$)");
  std::smatch match;
  if (!std::regex_match(hfName, match, pattern) || match[2].length() > 9) {
    return std::nullopt;
  }
  return StackedSource{match[1].str() + ".feed_forward.ffn." + match[3].str() +
                           ".weight",
                       std::stoll(match[2].str())};
}

/// How many of the executable's experts each stacked source holds (its
/// experts' parameters, or a stacked parameter's parts).
std::map<std::string, int64_t>
stackedExpertCounts(const Executable &executable) {
  std::map<std::string, int64_t> counts;
  auto count = [&](const std::string &name) {
    if (std::optional<StackedSource> source = stackedSourceOf(name)) {
      int64_t &n = counts[source->name];
      n = std::max(n, source->expert + 1);
    }
  };
  for (const fb::Parameter *parameter : *executable.root().parameters()) {
    count(parameter->name()->str());
    if (parameter->parts()) {
      for (const flatbuffers::String *part : *parameter->parts()) {
        count(part->str());
      }
    }
  }
  return counts;
}

/// Expert `source.expert` of the stacked tensor `source.name` in `files`
/// (the last file that has it) into `into` ([out, in]), or only checked
/// when `into` has no storage; nullopt when no file has the stack, an
/// error when it does not hold that expert as `shape`.
std::optional<Status> readStackedExpert(
    const StackedSource &source, int64_t experts,
    std::vector<CheckpointFile> &files, const std::vector<std::string> &paths,
    std::vector<std::set<std::string>> &used, const std::string &forName,
    const Shape &shape, Tensor &into) {
  for (size_t f = files.size(); f-- > 0;) {
    auto it = files[f].tensors().find(source.name);
    if (it == files[f].tensors().end()) {
      continue;
    }
    const CheckpointEntry &stack = it->second;
    used[f].insert(source.name);
    Shape expected = shape;
    expected.insert(expected.begin(), experts);
    if (stack.shape != expected || stack.dtype == DType::I32 ||
        stack.dtype == DType::I8) {
      return Status::error(
          StatusCode::InvalidArgument,
          "'" + paths[f] + "': tensor '" + source.name + "' is " +
              std::string(dtypeName(stack.dtype)) + formatShape(stack.shape) +
              ", the model's experts stacked are floats of "
              "shape " +
              formatShape(expected) + " (for '" + forName + "')");
    }
    if (!into.defined()) {
      return Status::ok();
    }
    // Into `into` seen as [1, out, in]: the stack's slice `expert`.
    Shape one = shape;
    one.insert(one.begin(), 1);
    Tensor slice = into.reshaped(one);
    TensorBlock block{/*dim=*/0, source.expert, 1};
    return files[f].read(stack, slice, &block);
  }
  return std::nullopt;
}

/// Where a MindFormers checkpoint written with qkv_concat keeps a
/// parameter: wq/wk/wv rows inside w_qkv, interleaved per KV group
/// ([q of the group's heads, its k, its v] per group), and w1/w3 rows
/// alternating inside w_gate_hidden (MindFormers r1.5.0's
/// qkv_concat_hf2mg / ffn_concat_hf2mg layouts).
struct FusedSource {
  std::string name; ///< the fused tensor
  int part = 0;     ///< q, k, v = 0, 1, 2; w1, w3 = 0, 1
  bool qkv = false;
};

std::optional<FusedSource> fusedSourceOf(const std::string &mfName) {
  for (const char *suffix : {".weight", ".bias"}) {
    size_t suffixLength = std::strlen(suffix);
    if (mfName.size() <= suffixLength ||
        mfName.compare(mfName.size() - suffixLength, suffixLength, suffix) !=
            0) {
      continue;
    }
    std::string stem = mfName.substr(0, mfName.size() - suffixLength);
    for (int part = 0; part < 3; ++part) {
      std::string projection = std::string(".attention.w") + "qkv"[part];
      if (stem.size() > projection.size() &&
          stem.compare(stem.size() - projection.size(), projection.size(),
                       projection) == 0) {
        return FusedSource{stem.substr(0, stem.size() - projection.size()) +
                               ".attention.w_qkv" + suffix,
                           part, true};
      }
    }
    for (int part = 0; part < 2; ++part) {
      std::string projection =
          part == 0 ? ".feed_forward.w1" : ".feed_forward.w3";
      if (std::string(suffix) == ".weight" && stem.size() > projection.size() &&
          stem.compare(stem.size() - projection.size(), projection.size(),
                       projection) == 0) {
        return FusedSource{stem.substr(0, stem.size() - projection.size()) +
                               ".feed_forward.w_gate_hidden.weight",
                           part, false};
      }
    }
  }
  return std::nullopt;
}

/// Copies the rows of `part` out of a fused tensor of `fusedRows` rows
/// (see FusedSource) into `into`, whose rows are `rowBytes` long.
Status unfuseRows(const FusedSource &source, const Tensor &fused,
                  int64_t fusedRows, int64_t heads, int64_t kvHeads,
                  Tensor &into, const std::string &path) {
  int64_t rows = into.shape().empty() ? 1 : into.shape()[0];
  size_t rowBytes = into.byteSize() / static_cast<size_t>(rows);
  auto *out = static_cast<uint8_t *>(into.data());
  auto *in = static_cast<const uint8_t *>(fused.data());
  auto copyRow = [&](int64_t to, int64_t from) {
    std::memcpy(out + to * rowBytes, in + from * rowBytes, rowBytes);
  };
  if (!source.qkv) {
    if (fusedRows != 2 * rows) {
      return Status::error(StatusCode::InvalidArgument,
                           "'" + path + "': tensor '" + source.name + "' has " +
                               std::to_string(fusedRows) + " rows, not 2 x " +
                               std::to_string(rows));
    }
    for (int64_t row = 0; row < rows; ++row) {
      copyRow(row, 2 * row + source.part);
    }
    return Status::ok();
  }
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0 ||
      fusedRows % (heads + 2 * kvHeads) != 0) {
    return Status::error(StatusCode::InvalidArgument,
                         "'" + path + "': tensor '" + source.name + "' has " +
                             std::to_string(fusedRows) + " rows, which " +
                             std::to_string(heads) + " heads and " +
                             std::to_string(kvHeads) +
                             " KV heads do not split evenly");
  }
  int64_t headDim = fusedRows / (heads + 2 * kvHeads);
  int64_t repeats = heads / kvHeads;
  int64_t partRows = source.part == 0 ? repeats * headDim : headDim;
  if (rows != kvHeads * partRows) {
    return Status::error(StatusCode::InvalidArgument,
                         "'" + path + "': tensor '" + source.name +
                             "' does not hold the " + std::to_string(rows) +
                             " rows the model needs");
  }
  int64_t within = source.part == 0 ? 0 : (repeats + source.part - 1) * headDim;
  for (int64_t group = 0; group < kvHeads; ++group) {
    for (int64_t row = 0; row < partRows; ++row) {
      copyRow(group * partRows + row,
              group * (repeats + 2) * headDim + within + row);
    }
  }
  return Status::ok();
}

/// This rank's block of `whole`.
StatusOr<Tensor> blockOfTensor(const Tensor &whole, const TensorBlock &block,
                               Allocator &allocator) {
  Shape shape = whole.shape();
  shape[block.dim] = block.length * block.parts;
  StatusOr<Tensor> part = allocator.allocate(whole.dtype(), shape, false);
  if (!part) {
    return part.status();
  }
  copyBlock(whole.data(), part->data(),
            partsView(whole.shape(), block.dim, block.parts), block.dim + 1,
            block.begin, block.length, dtypeSize(whole.dtype()),
            /*intoWhole=*/false);
  return part;
}

/// A parameter's initial value on this rank: its block of the whole
/// weight's (so every layout starts from the same model).
/// LoRA's adapter matrices, by the names the compiler gives them
/// (PEFT's: `<module>.lora_A.weight`, `<module>.lora_B.weight`).
bool isLoraAdapter(const std::string &name) {
  auto endsWith = [&](const std::string &suffix) {
    return name.size() > suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) ==
               0;
  };
  return endsWith(".lora_A.weight") || endsWith(".lora_B.weight");
}

/// The scales of quantized parameter `parameter` (its quant_scale).
const fb::Parameter &scalesOf(const Executable &executable,
                              const fb::Parameter &parameter) {
  return *executable.root().parameters()->Get(
      static_cast<uint32_t>(parameter.quant_scale()));
}

/// The whole float [N, K] weight whose quantized values `parameter` holds
/// (I8 [N, K], or [N, K / 2] for 4 bits; a rank's block of them when
/// split).
Shape floatShapeOf(const fb::Parameter &parameter,
                   const Executable &executable) {
  Shape shape = wholeShapeOf(parameter, executable);
  shape[1] *= parameter.quant_bits() == 4 ? 2 : 1;
  return shape;
}

/// Each row's largest magnitude over the whole row of a row-parallel
/// `parameter`, whose columns `columns` holds (read with `readStatus`):
/// every rank along the split takes part even when its read failed (then
/// all fail), so that none waits for it.
StatusOr<std::vector<double>> wholeRowMagnitudes(const fb::Parameter &parameter,
                                                 const Status &readStatus,
                                                 const Tensor &columns,
                                                 Communicator *ranks) {
  std::vector<double> magnitudes =
      readStatus ? rowMaxMagnitudes(columns)
                 : std::vector<double>(static_cast<size_t>(columns.dim(0)));
  magnitudes.push_back(readStatus ? 0.0 : 1.0); // failed here
  if (ranks) {
    std::vector<int64_t> axes(parameter.split_axes()->begin(),
                              parameter.split_axes()->end());
    MFRT_RETURN_IF_ERROR(ranks->allReduceInPlace(
        magnitudes.data(), static_cast<int64_t>(magnitudes.size()),
        /*max=*/true, axes));
  }
  if (!readStatus) {
    return readStatus;
  }
  if (magnitudes.back() != 0.0) {
    return Status::error(StatusCode::Unavailable,
                         "another rank could not read its columns of '" +
                             parameter.name()->str() + "'");
  }
  magnitudes.pop_back();
  return magnitudes;
}

/// Fills `into` with a block of a quantized weight's whole float values
/// (rows along dimension 0, or columns along 1), in the scales' dtype.
using ReadBlock = std::function<Status(const TensorBlock &, Tensor &into)>;

/// The values of quantized `parameter` (returned) and its scales
/// (`scales`), quantized from its float weight a block of rows at a time
/// (~1M values: no float copy of a whole weight, the largest of which is a
/// tied vocabulary table), read by `read` in the scales' dtype (the
/// compute dtype, as golden-stick quantizes). With `rankBlock`, only a
/// rank's block (a column-parallel rank's rows, or a row-parallel one's
/// columns: whole groups, or with a scale per row the rank's part of each
/// row, whose scale the ranks along the split agree on by an all-reduce of
/// every row's largest magnitude): values and scales are then the rank's.
StatusOr<Tensor>
quantizedValues(const Executable &executable, const fb::Parameter &parameter,
                Allocator &allocator, Tensor &scales, const ReadBlock &read,
                std::optional<TensorBlock> rankBlock = std::nullopt,
                Communicator *ranks = nullptr) {
  const fb::Parameter &scaleParameter = scalesOf(executable, parameter);
  DType floatType = Executable::dtypeOf(*scaleParameter.type());
  Shape shape = floatShapeOf(parameter, executable);
  auto shapeOf = [&](const fb::Parameter &of) {
    return rankBlock ? Executable::shapeOf(*of.type())
                     : wholeShapeOf(of, executable);
  };
  int64_t rowOffset = 0;
  if (rankBlock && rankBlock->dim == 0) {
    shape[0] = rankBlock->length;
    rowOffset = rankBlock->begin;
  }
  if (rankBlock && rankBlock->dim == 1) {
    // Every row's columns of the rank (int4 bytes: two columns each).
    int64_t columns = parameter.quant_bits() == 4 ? 2 : 1;
    shape[1] = rankBlock->length * columns;
  }
  MFRT_ASSIGN_OR_RETURN(
      Tensor values, allocator.allocate(DType::I8, shapeOf(parameter), false));
  MFRT_ASSIGN_OR_RETURN(
      Tensor scaleTensor,
      allocator.allocate(floatType, shapeOf(scaleParameter), false));
  // A row-parallel rank's columns are read in one block: [N, K / ranks].
  const int64_t blockRows =
      rankBlock && rankBlock->dim == 1
          ? shape[0]
          : std::max<int64_t>(1, (int64_t(1) << 20) /
                                     std::max<int64_t>(1, shape[1]));
  for (int64_t first = 0; first < shape[0]; first += blockRows) {
    MFRT_ASSIGN_OR_RETURN(
        Tensor block,
        allocator.allocate(floatType,
                           {std::min(blockRows, shape[0] - first), shape[1]},
                           false));
    TensorBlock rows{/*dim=*/0, rowOffset + first, block.dim(0)};
    if (rankBlock && rankBlock->dim == 1) {
      int64_t columns = parameter.quant_bits() == 4 ? 2 : 1;
      rows = TensorBlock{/*dim=*/1, rankBlock->begin * columns, shape[1]};
    }
    std::optional<std::vector<double>> magnitudes;
    if (rankBlock && rankBlock->dim == 1 && parameter.quant_group() == 0) {
      MFRT_ASSIGN_OR_RETURN(magnitudes,
                            wholeRowMagnitudes(parameter, read(rows, block),
                                               block, ranks));
    } else {
      MFRT_RETURN_IF_ERROR(read(rows, block));
    }
    Status quantized = quantizeRtn(
        block, parameter.quant_group(), parameter.quant_bits(), values,
        scaleTensor, first, magnitudes ? magnitudes->data() : nullptr);
    if (!quantized) {
      return quantized.withContext("quantizing '" + parameter.name()->str() +
                                   "'");
    }
  }
  scales = std::move(scaleTensor);
  return values;
}

/// The float dtype quantized `parameter` is quantized from: its scales'
/// (the compute dtype), or a calibrated weight's bias's (its scales are
/// f32).
DType sourceTypeOf(const Executable &executable,
                   const fb::Parameter &parameter) {
  int32_t typed = parameter.quant_bias() >= 0 ? parameter.quant_bias()
                                              : parameter.quant_scale();
  return Executable::dtypeOf(*executable.root()
                                  .parameters()
                                  ->Get(static_cast<uint32_t>(typed))
                                  ->type());
}

/// How to give a model the ranges it needs, ending with what else serves.
const std::string kHowToCalibrate =
    ": give --calibration FILE, which mf-run FLOAT.bin --task calibrate "
    "--data TEXT --save-calibration FILE writes (FLOAT.bin: the same config "
    "compiled with mfc --calibration-model), or weights that hold ";

/// The values of calibrated `parameter` (returned), with its scales, input
/// scales, zero points and bias put in `companions` by parameter index,
/// quantized from its whole float weight (`read`, as quantizedValues) with
/// the activation ranges `calibration` holds for it.
StatusOr<Tensor>
calibratedValues(const Executable &executable, const fb::Parameter &parameter,
                 Allocator &allocator, const Calibration *calibration,
                 std::map<int32_t, Tensor> &companions, const ReadBlock &read) {
  std::string name = parameter.name()->str();
  const Calibration::Ranges *ranges =
      calibration ? calibration->find(name) : nullptr;
  if (!ranges) {
    return Status::error(
        StatusCode::FailedPrecondition,
        "parameter '" + name +
            "' multiplies int8 activations with calibrated scales "
            "(quant_method smooth_quant, or ptq with per_tensor "
            "activations), and " +
            (calibration ? std::string("the calibration has no ranges for it")
                         : std::string("no calibration was given")) +
            kHowToCalibrate + "its quantized values and scales");
  }
  DType computeType = sourceTypeOf(executable, parameter);
  Shape shape = wholeShapeOf(parameter, executable);
  CalibratedWeight weight;
  Status quantized = quantizeCalibrated(
      shape[0], shape[1], computeType, ranges->min, ranges->max,
      parameter.quant_smooth_alpha(),
      [&](int64_t first, Tensor &rows) {
        return read(TensorBlock{/*dim=*/0, first, rows.dim(0)}, rows);
      },
      [&](DType dtype, const Shape &of) {
        return allocator.allocate(dtype, of, false);
      },
      weight);
  if (!quantized) {
    return quantized.withContext("quantizing '" + name + "'");
  }
  companions[parameter.quant_scale()] = std::move(weight.scales);
  companions[parameter.quant_input_scale()] = std::move(weight.inputScales);
  companions[parameter.quant_input_zero_point()] = std::move(weight.zeroPoints);
  companions[parameter.quant_bias()] = std::move(weight.bias);
  return std::move(weight.values);
}

/// Calibrated `parameter`'s scales (an int8 KV cache's) from the ranges
/// `calibration` holds under the name it gives (every channel's: a split
/// parameter keeps its rank's block, its KV heads').
StatusOr<Tensor> calibratedScales(const Executable &executable,
                                  const fb::Parameter &parameter,
                                  Allocator &allocator,
                                  const Calibration *calibration,
                                  const Communicator *ranks) {
  std::string name = parameter.name()->str();
  std::string rangesName = parameter.calibrated_scales()->str();
  const Calibration::Ranges *ranges =
      calibration ? calibration->find(rangesName) : nullptr;
  if (!ranges) {
    return Status::error(
        StatusCode::FailedPrecondition,
        "parameter '" + name +
            "' holds an int8 KV cache's scales (kvcache_dtype: int8), "
            "calibrated from the ranges of '" +
            rangesName + "', and " +
            (calibration ? std::string("the calibration has none")
                         : std::string("no calibration was given")) +
            kHowToCalibrate + "the scales (mf-run --save-weights)");
  }
  MFRT_ASSIGN_OR_RETURN(
      Tensor scales,
      allocator.allocate(Executable::dtypeOf(*parameter.type()),
                         wholeShapeOf(parameter, executable), false));
  MFRT_RETURN_IF_ERROR(symmetricChannelScales(ranges->min, ranges->max, scales)
                           .withContext("parameter '" + name + "'"));
  std::optional<TensorBlock> block = blockOf(parameter, ranks);
  return block ? blockOfTensor(scales, *block, allocator)
               : StatusOr<Tensor>(std::move(scales));
}

/// Quantized `parameter`'s values from its float weight (`read`, blocks of
/// the whole weight), its scales and (calibrated) other tensors put in
/// `companions` by parameter index: round to nearest, or SmoothQuant with
/// `calibration`'s ranges. A split weight is quantized whole, as on one
/// rank (per-row scales span the whole row, smoothing factors every row),
/// and the rank keeps its block of each tensor; but where the rank's block
/// can be quantized on its own — a column-parallel weight's rows rounded to
/// nearest, a row-parallel one's whole groups of columns, or its part of
/// each row with the row's largest magnitude from every rank — the rank
/// reads and quantizes only its block.
StatusOr<Tensor>
valuesFromFloat(const Executable &executable, const fb::Parameter &parameter,
                Allocator &allocator, const Calibration *calibration,
                std::map<int32_t, Tensor> &companions, const ReadBlock &read,
                Communicator *ranks) {
  std::optional<TensorBlock> block = blockOf(parameter, ranks);
  bool onItsOwn = block && block->parts == 1 &&
                  parameter.quant_input_scale() < 0;
  if (onItsOwn) {
    return quantizedValues(executable, parameter, allocator,
                           companions[parameter.quant_scale()], read, block,
                           ranks);
  }
  std::map<int32_t, Tensor> whole;
  StatusOr<Tensor> values =
      parameter.quant_input_scale() >= 0
          ? calibratedValues(executable, parameter, allocator, calibration,
                             whole, read)
          : quantizedValues(executable, parameter, allocator,
                            whole[parameter.quant_scale()], read);
  if (!values) {
    return values;
  }
  auto rankBlock = [&](const fb::Parameter &of,
                       Tensor tensor) -> StatusOr<Tensor> {
    std::optional<TensorBlock> block = blockOf(of, ranks);
    return block ? blockOfTensor(tensor, *block, allocator)
                 : StatusOr<Tensor>(std::move(tensor));
  };
  for (auto &[index, tensor] : whole) {
    MFRT_ASSIGN_OR_RETURN(companions[index],
                          rankBlock(*executable.root().parameters()->Get(index),
                                    std::move(tensor)));
  }
  return rankBlock(parameter, values.take());
}

StatusOr<Tensor> initialBlock(const Executable &executable,
                              const fb::Parameter &parameter,
                              Allocator &allocator, uint64_t seed,
                              const Communicator *ranks) {
  std::optional<TensorBlock> stackBlock = blockOf(parameter, ranks);
  if (parameter.parts() && parameter.parts()->size() && stackBlock) {
    // A rank's experts: made alone, from their own names' seeds.
    return initialValue(
        parameter, allocator, seed, Executable::shapeOf(*parameter.type()),
        Executable::dtypeOf(*parameter.type()), stackBlock->begin);
  }
  StatusOr<Tensor> whole = initialValue(parameter, allocator, seed,
                                        wholeShapeOf(parameter, executable),
                                        Executable::dtypeOf(*parameter.type()));
  std::optional<TensorBlock> block = blockOf(parameter, ranks);
  if (!whole || !block) {
    return whole;
  }
  return blockOfTensor(*whole, *block, allocator);
}

/// A stacked parameter (`parts`): this rank's slices, each read from the
/// tensor of its name (the other ranks' parts marked `used`, not read); an
/// empty tensor for another pipeline stage's.
StatusOr<Tensor> readParts(const Executable &executable,
                           const fb::Parameter &parameter,
                           std::vector<CheckpointFile> &files,
                           const std::vector<std::string> &paths,
                           std::vector<std::set<std::string>> &used,
                           const std::map<std::string, int64_t> &stackCounts,
                           Allocator &allocator, const Communicator *ranks,
                           int64_t stage) {
  const auto &parts = *parameter.parts();
  int64_t count = parts.size();
  std::optional<TensorBlock> block = blockOf(parameter, ranks);
  int64_t first = block ? block->begin : 0;
  int64_t held = block ? block->length : count;
  bool here = stage < 0 || Executable::holds(parameter, stage);
  Shape partShape = wholeShapeOf(parameter, executable);
  partShape.erase(partShape.begin());
  DType dtype = Executable::dtypeOf(*parameter.type());
  Tensor stack;
  if (here) {
    StatusOr<Tensor> made =
        allocator.allocate(dtype, Executable::shapeOf(*parameter.type()));
    if (!made) {
      return made.status();
    }
    stack = made.take();
  }
  for (int64_t p = 0; p < count; ++p) {
    std::string name = parts.Get(p)->str();
    size_t f = files.size();
    while (f-- > 0 && !files[f].tensors().count(name)) {
    }
    // Every rank checks every part, so that each refuses a bad file alike
    // (another rank's part is read there).
    if (f >= files.size()) {
      if (parameter.state()) {
        continue; // fresh training state: zeros (allocated so)
      }
      // A MindFormers checkpoint's stacked experts: the rank's slices.
      if (std::optional<StackedSource> source = stackedSourceOf(name)) {
        bool mine = here && p >= first && p < first + held;
        // Another rank's part is only checked.
        Tensor into =
            mine ? stack.rows(p - first, 1).reshaped(partShape) : Tensor();
        if (std::optional<Status> read =
                readStackedExpert(*source, stackCounts.at(source->name), files,
                                  paths, used, name, partShape, into)) {
          MFRT_RETURN_IF_ERROR(*read);
          continue;
        }
      }
      return Status::error(
          StatusCode::NotFound,
          (paths.size() == 1 ? "'" + paths[0] + "'"
                             : std::string("the weight files")) +
              " has no tensor '" + name + "'; the model needs it (part " +
              std::to_string(p) + " of '" + parameter.name()->str() + "')");
    }
    used[f].insert(name);
    const CheckpointEntry &entry = files[f].tensors().at(name);
    if (entry.shape != partShape || entry.dtype == DType::I32 ||
        entry.dtype == DType::I8) {
      return Status::error(StatusCode::InvalidArgument,
                           "'" + paths[f] + "': tensor '" + name + "' is " +
                               std::string(dtypeName(entry.dtype)) +
                               formatShape(entry.shape) + ", the model needs " +
                               "floats of shape " + formatShape(partShape));
    }
    if (!here || p < first || p >= first + held) {
      continue;
    }
    Tensor slice = stack.rows(p - first, 1).reshaped(partShape);
    MFRT_RETURN_IF_ERROR(files[f].read(entry, slice));
    files[f].release(entry);
  }
  return stack;
}

} // namespace

int64_t mfrt::stageOfRank(const Executable &executable,
                          const Communicator *ranks) {
  if (executable.pipelineStages() <= 1 || !ranks || !executable.root().grid()) {
    return -1;
  }
  return ranks->indexAlong({kPipelineAxis});
}

StatusOr<Tensor> Weights::wholeOnPrimary(size_t index,
                                         const Executable &executable,
                                         Communicator *ranks) const {
  int64_t stage = stageOfRank(executable, ranks);
  if (stage < 0) {
    return whole(index, executable, ranks);
  }
  // The first stage holding it gathers it whole (its tensor-parallel
  // blocks), and its rank at data and model index 0 sends it to rank 0.
  const fb::Parameter &parameter = *executable.root().parameters()->Get(index);
  int64_t owner = parameter.stages() && parameter.stages()->size() > 0
                      ? parameter.stages()->Get(0)
                      : 0;
  int64_t stageAxis = kPipelineAxis;
  std::vector<int64_t> others;
  for (int64_t axis = 0;
       axis < static_cast<int64_t>(executable.root().grid()->size()); ++axis) {
    if (axis != stageAxis) {
      others.push_back(axis);
    }
  }
  Tensor gathered;
  if (stage == owner) {
    MFRT_ASSIGN_OR_RETURN(gathered, whole(index, executable, ranks));
  }
  if (owner == 0 || ranks->indexAlong(others) != 0) {
    return gathered;
  }
  if (stage == owner) {
    MFRT_RETURN_IF_ERROR(ranks->send(gathered, stageAxis, 0, /*tag=*/0));
    MFRT_RETURN_IF_ERROR(ranks->waitSends());
    return gathered;
  }
  if (stage != 0) {
    return gathered;
  }
  MFRT_ASSIGN_OR_RETURN(Tensor received,
                        wholeTensor(parameter, executable,
                                    Executable::dtypeOf(*parameter.type()),
                                    "receiving"));
  MFRT_RETURN_IF_ERROR(ranks->receive(received, stageAxis, owner, /*tag=*/0));
  return received;
}

StatusOr<Weights> Weights::initialize(const Executable &executable,
                                      Allocator &allocator, uint64_t seed,
                                      Communicator *ranks,
                                      const Calibration *calibration) {
  Weights weights;
  if (!executable.root().parameters()) {
    return weights;
  }
  // A quantized weight is its float init quantized, which fills its
  // scales (and a calibrated weight's other tensors: later parameters) too.
  std::map<int32_t, Tensor> companions;
  int64_t stage = stageOfRank(executable, ranks);
  for (const fb::Parameter *parameter : *executable.root().parameters()) {
    int32_t index = static_cast<int32_t>(weights.tensors_.size());
    if (stage >= 0 && !Executable::holds(*parameter, stage)) {
      weights.elsewhere_.resize(weights.tensors_.size() + 1);
      weights.elsewhere_.back() = true;
      weights.tensors_.emplace_back(); // another pipeline stage's
      continue;
    }
    if (auto scales = companions.find(index); scales != companions.end()) {
      weights.tensors_.push_back(std::move(scales->second));
      continue;
    }
    if (parameter->quant_scale() >= 0) {
      Shape shape = floatShapeOf(*parameter, executable);
      DType floatType = sourceTypeOf(executable, *parameter);
      StatusOr<Tensor> weight =
          initialValue(*parameter, allocator, seed, shape, floatType);
      if (!weight) {
        return weight.status();
      }
      auto read = [&](const TensorBlock &block, Tensor &into) {
        copyBlock(weight->data(), into.data(), shape, block.dim, block.begin,
                  block.length, dtypeSize(floatType), /*intoWhole=*/false);
        return Status::ok();
      };
      StatusOr<Tensor> values =
          valuesFromFloat(executable, *parameter, allocator, calibration,
                          companions, read, ranks);
      if (!values) {
        return values.status();
      }
      weights.calibrated_ += parameter->quant_input_scale() >= 0;
      weights.tensors_.push_back(values.take());
      continue;
    }
    StatusOr<Tensor> tensor =
        parameter->calibrated_scales()
            ? calibratedScales(executable, *parameter, allocator, calibration,
                               ranks)
            : initialBlock(executable, *parameter, allocator, seed, ranks);
    if (!tensor) {
      return tensor.status();
    }
    weights.calibrated_ += parameter->calibrated_scales() != nullptr;
    weights.tensors_.push_back(tensor.take());
  }
  return weights;
}

StatusOr<Weights> Weights::load(const Executable &executable,
                                Allocator &allocator, const std::string &path,
                                const std::string &otherPrefix) {
  return load(executable, allocator, std::vector<std::string>{path},
              otherPrefix);
}

StatusOr<Weights> Weights::load(const Executable &executable,
                                Allocator &allocator,
                                const std::vector<std::string> &givenPaths,
                                const std::string &otherPrefix,
                                Communicator *ranks, bool inPlace,
                                const Calibration *calibration) {
  std::vector<CheckpointFile> files;
  std::vector<std::string> paths;
  for (const std::string &given : givenPaths) {
    StatusOr<std::vector<std::string>> expanded = checkpointFiles(given);
    if (!expanded) {
      return expanded.status();
    }
    for (const std::string &path : *expanded) {
      StatusOr<CheckpointFile> file = CheckpointFile::open(path);
      if (!file) {
        return file.status();
      }
      files.push_back(file.take());
      paths.push_back(path);
    }
  }
  std::string described =
      paths.size() == 1 ? "'" + paths[0] + "'" : "the weight files";
  int64_t stage = stageOfRank(executable, ranks);
  Weights weights;
  std::vector<std::set<std::string>> used(files.size());
  // The last fused qkv_concat tensor read (see below).
  std::string fusedName;
  Tensor fusedTensor;
  // The scales (and a calibrated weight's other tensors) of weights
  // quantized from a float tensor, by index.
  std::map<int32_t, Tensor> companions;
  if (executable.root().parameters()) {
    std::map<std::string, int64_t> stackCounts =
        stackedExpertCounts(executable);
    for (const fb::Parameter *parameter : *executable.root().parameters()) {
      if (auto scales =
              companions.find(static_cast<int32_t>(weights.tensors_.size()));
          scales != companions.end()) {
        weights.tensors_.push_back(std::move(scales->second));
        continue;
      }
      if (parameter->parts() && parameter->parts()->size() > 0) {
        // A stack of tensors (experts): this rank's, part by part.
        StatusOr<Tensor> block =
            readParts(executable, *parameter, files, paths, used, stackCounts,
                      allocator, ranks, stage);
        if (!block) {
          return block.status();
        }
        if (!block->defined()) { // another pipeline stage's
          weights.elsewhere_.resize(weights.tensors_.size() + 1);
          weights.elsewhere_.back() = true;
        }
        weights.tensors_.push_back(block.take());
        continue;
      }
      std::string name = parameter->name()->str();
      std::vector<std::string> candidates{name};
      if (parameter->mf_name()) {
        candidates.push_back(parameter->mf_name()->str());
        // Golden-stick's name of a quantized Linear's int8 weight.
        const std::string suffix = ".weight";
        std::string mfName = parameter->mf_name()->str();
        if (parameter->quant_scale() >= 0 && mfName.size() > suffix.size() &&
            mfName.compare(mfName.size() - suffix.size(), suffix.size(),
                           suffix) == 0) {
          candidates.push_back(mfName.substr(0, mfName.size() - suffix.size()) +
                               "._handler.weight");
        }
      }
      const std::string prefix = "transformer.";
      if (name.rfind(prefix, 0) == 0) {
        candidates.push_back(
            name.substr(prefix.size())); // GPT-2's original files
      }
      size_t tensorsBefore = weights.tensors_.size();
      const CheckpointEntry *found = nullptr;
      const CheckpointFile *foundFile = nullptr;
      std::string foundName, foundPath;
      for (size_t f = files.size(); f-- > 0 && !found;) {
        for (const std::string &candidate : candidates) {
          auto it = files[f].tensors().find(candidate);
          if (it != files[f].tensors().end()) {
            found = &it->second;
            foundFile = &files[f];
            foundName = candidate;
            foundPath = paths[f];
            used[f].insert(candidate);
            break;
          }
        }
      }
      if (stage >= 0 && !Executable::holds(*parameter, stage)) {
        // Another pipeline stage's: its ranks read it (and check it), and
        // a MindFormers qkv_concat tensor or stack of experts it would
        // come from is theirs too.
        std::optional<FusedSource> fused =
            parameter->mf_name() ? fusedSourceOf(parameter->mf_name()->str())
                                 : std::nullopt;
        std::optional<StackedSource> stacked = stackedSourceOf(name);
        for (const std::string *source : {fused ? &fused->name : nullptr,
                                          stacked ? &stacked->name : nullptr}) {
          for (size_t f = 0; source && f < files.size(); ++f) {
            if (files[f].tensors().count(*source)) {
              used[f].insert(*source);
            }
          }
        }
        weights.elsewhere_.resize(weights.tensors_.size() + 1);
        weights.elsewhere_.back() = true;
        weights.tensors_.emplace_back();
        continue;
      }
      if (!found && parameter->mf_name()) {
        // A MindFormers checkpoint written with qkv_concat.
        std::optional<FusedSource> source =
            fusedSourceOf(parameter->mf_name()->str());
        for (size_t f = files.size(); source && f-- > 0;) {
          auto it = files[f].tensors().find(source->name);
          if (it == files[f].tensors().end()) {
            continue;
          }
          const CheckpointEntry &fused = it->second;
          if (parameter->split_dim() >= 0) {
            return Status::error(StatusCode::Unimplemented,
                                 "'" + paths[f] + "': '" + source->name +
                                     "' (qkv_concat) is not read by a sharded "
                                     "program yet; convert the checkpoint to "
                                     "separate wq/wk/wv and w1/w3 tensors");
          }
          DType dtype = Executable::dtypeOf(*parameter->type());
          Shape shape = Executable::shapeOf(*parameter->type());
          Shape expected = fused.shape;
          if (expected.empty() || shape.size() != expected.size() ||
              !std::equal(shape.begin() + 1, shape.end(),
                          expected.begin() + 1) ||
              fused.dtype == DType::I32) {
            return Status::error(StatusCode::InvalidArgument,
                                 "'" + paths[f] + "': tensor '" + source->name +
                                     "' has shape " + formatShape(fused.shape) +
                                     ", which does not hold '" +
                                     parameter->mf_name()->str() +
                                     "' of shape " + formatShape(shape));
          }
          // wq, wk and wv (w1, w3) come one after the other: the fused
          // tensor is read once for all of them.
          if (fusedName != source->name || fusedTensor.dtype() != dtype) {
            StatusOr<Tensor> whole =
                allocator.allocate(dtype, fused.shape, false);
            if (!whole) {
              return whole.status();
            }
            MFRT_RETURN_IF_ERROR(files[f].read(fused, *whole));
            fusedTensor = whole.take();
            fusedName = source->name;
          }
          StatusOr<Tensor> tensor = allocator.allocate(dtype, shape, false);
          if (!tensor) {
            return tensor.status();
          }
          const fb::ModelInfo &model = executable.model();
          MFRT_RETURN_IF_ERROR(unfuseRows(
              *source, fusedTensor, fused.shape[0], model.num_heads(),
              model.num_kv_heads(), *tensor, paths[f]));
          used[f].insert(source->name);
          weights.tensors_.push_back(tensor.take());
          break;
        }
        if (weights.tensors_.size() == tensorsBefore + 1) {
          continue;
        }
      }
      if (!found) {
        // A MindFormers checkpoint's stacked Mixtral experts: the whole
        // expert, then (tensor parallelism) this rank's block of it.
        if (std::optional<StackedSource> source = stackedSourceOf(name)) {
          StatusOr<Tensor> tensor =
              allocator.allocate(Executable::dtypeOf(*parameter->type()),
                                 wholeShapeOf(*parameter, executable), false);
          if (!tensor) {
            return tensor.status();
          }
          if (std::optional<Status> read = readStackedExpert(
                  *source, stackCounts.at(source->name), files, paths, used,
                  name, tensor->shape(), *tensor)) {
            MFRT_RETURN_IF_ERROR(*read);
            std::optional<TensorBlock> block = blockOf(*parameter, ranks);
            if (block) {
              StatusOr<Tensor> mine = blockOfTensor(*tensor, *block, allocator);
              if (!mine) {
                return mine.status();
              }
              weights.tensors_.push_back(mine.take());
            } else {
              weights.tensors_.push_back(tensor.take());
            }
            continue;
          }
        }
      }
      if (!found && !parameter->state() && isLoraAdapter(name)) {
        // Training LoRA from a base checkpoint: the adapters start as
        // MindFormers' (and PEFT's) LoRA layers do.
        StatusOr<Tensor> initial =
            initialBlock(executable, *parameter, allocator,
                         executable.model().seed(), ranks);
        if (!initial) {
          return initial.status();
        }
        weights.tensors_.push_back(initial.take());
        weights.initializedAdapters_.push_back(name);
        continue;
      }
      if (!found && parameter->calibrated_scales()) {
        StatusOr<Tensor> scales = calibratedScales(
            executable, *parameter, allocator, calibration, ranks);
        if (!scales) {
          return scales.status();
        }
        weights.calibrated_ += 1;
        weights.tensors_.push_back(scales.take());
        continue;
      }
      if (!found && parameter->state()) {
        // Training state a fresh run starts from (a checkpoint has it).
        StatusOr<Tensor> initial =
            initialBlock(executable, *parameter, allocator, 0, ranks);
        if (!initial) {
          return initial.status();
        }
        weights.tensors_.push_back(initial.take());
        continue;
      }
      if (!found) {
        return Status::error(
            StatusCode::NotFound,
            described + " has no tensor '" + name + "'" +
                (parameter->mf_name()
                     ? " (nor '" + parameter->mf_name()->str() + "')"
                     : std::string()) +
                "; the model needs it");
      }
      bool quantized = parameter->quant_scale() >= 0;
      // A float checkpoint of a quantized weight has its float shape.
      Shape shape = quantized && found->dtype != DType::I8
                        ? floatShapeOf(*parameter, executable)
                        : wholeShapeOf(*parameter, executable);
      if (found->shape != shape) {
        return Status::error(StatusCode::InvalidArgument,
                             "'" + foundPath + "': tensor '" + foundName +
                                 "' has shape " + formatShape(found->shape) +
                                 ", the model needs " + formatShape(shape));
      }
      std::optional<TensorBlock> block = blockOf(*parameter, ranks);
      shape = Executable::shapeOf(*parameter->type());
      if (found->dtype == DType::I32) {
        return Status::error(StatusCode::InvalidArgument,
                             "'" + foundPath + "': tensor '" + foundName +
                                 "' is I32, parameters are floating point");
      }
      DType dtype = Executable::dtypeOf(*parameter->type());
      if (found->dtype == DType::I8 && !quantized && dtype != DType::I8) {
        return Status::error(StatusCode::InvalidArgument,
                             "'" + foundPath + "': tensor '" + foundName +
                                 "' is quantized (I8), the model needs float "
                                 "values; compile it with quantization_config "
                                 "or give the float checkpoint");
      }
      if (quantized && found->dtype != DType::I8) {
        // A float checkpoint: quantized here, which gives the scales too
        // (and a calibrated weight's other tensors).
        auto read = [&](const TensorBlock &block, Tensor &into) {
          return foundFile->read(*found, into, &block);
        };
        StatusOr<Tensor> values =
            valuesFromFloat(executable, *parameter, allocator, calibration,
                            companions, read, ranks);
        if (!values) {
          return values.status().withContext("'" + foundPath + "'");
        }
        foundFile->release(*found);
        weights.calibrated_ += parameter->quant_input_scale() >= 0;
        weights.tensors_.push_back(values.take());
        continue;
      }
      // In place (when asked) where the file's bytes serve as they are:
      // no copy, and ranks and processes share the file's pages. Else
      // copied and the file's pages released.
      std::optional<Tensor> mapped;
      if (inPlace) {
        mapped =
            foundFile->view(*found, dtype, shape, block ? &*block : nullptr);
      }
      // Calibrated scales divide what the cache stores: each must be
      // positive and finite (as the ones computed from ranges are).
      auto checkScales = [&](const Tensor &scales) {
        int64_t i =
            parameter->calibrated_scales() ? firstUnusableScale(scales) : -1;
        return i < 0 ? Status::ok()
                     : Status::error(StatusCode::InvalidArgument,
                                     "'" + foundPath + "': tensor '" +
                                         foundName + "' holds scale " +
                                         std::to_string(scales.loadFloat(i)) +
                                         " at " + std::to_string(i) +
                                         "; an int8 KV cache's scales are "
                                         "positive and finite");
      };
      if (mapped) {
        MFRT_RETURN_IF_ERROR(checkScales(*mapped));
        weights.mappedBytes_ += mapped->byteSize();
        weights.tensors_.push_back(std::move(*mapped));
        continue;
      }
      StatusOr<Tensor> tensor =
          allocator.allocate(dtype, shape, /*zeroed=*/false);
      if (!tensor) {
        return tensor.status();
      }
      MFRT_RETURN_IF_ERROR(
          foundFile->read(*found, *tensor, block ? &*block : nullptr));
      MFRT_RETURN_IF_ERROR(checkScales(*tensor));
      foundFile->release(*found);
      weights.tensors_.push_back(tensor.take());
    }
  }
  for (size_t f = 0; f < files.size(); ++f) {
    for (const auto &[name, entry] : files[f].tensors()) {
      bool other = !otherPrefix.empty() && name.rfind(otherPrefix, 0) == 0;
      bool elsewhere = false;
      for (const auto &set : used) {
        elsewhere |= set.count(name) > 0;
      }
      if (!elsewhere && !other) {
        return Status::error(StatusCode::InvalidArgument,
                             "'" + paths[f] + "' has a tensor '" + name +
                                 "' that the model does not use; is it the "
                                 "checkpoint of another config?");
      }
    }
  }
  return weights;
}

StatusOr<Tensor> Weights::asStored(size_t index,
                                   const std::string &name) const {
  const Tensor &tensor = tensors_[index];
  if (released(index)) {
    return Status::error(StatusCode::FailedPrecondition,
                         "parameter '" + name +
                             "' was released: Graph Mode keeps only the "
                             "values derived from it");
  }
  if (!storedAsPanels(index)) {
    return tensor;
  }
  std::shared_ptr<void> bytes(std::malloc(tensor.byteSize()), std::free);
  if (!bytes) {
    return Status::error(StatusCode::ResourceExhausted,
                         "out of memory unpacking a parameter of " +
                             std::to_string(tensor.byteSize()) + " bytes");
  }
  Tensor stored(tensor.dtype(), tensor.shape(), std::move(bytes));
  unpackWeight(*asPanels_[index], tensor.dtype(), tensor.data(), tensor.dim(0),
               tensor.dim(1), stored.data());
  return stored;
}

StatusOr<Tensor> Weights::whole(size_t index, const Executable &executable,
                                Communicator *ranks) const {
  const fb::Parameter &parameter = *executable.root().parameters()->Get(index);
  StatusOr<Tensor> stored = asStored(index, parameter.name()->str());
  if (!stored || parameter.split_dim() < 0) {
    return stored;
  }
  if (!ranks) {
    return Status::error(StatusCode::FailedPrecondition,
                         "parameter '" + parameter.name()->str() +
                             "' is split over ranks that are not running");
  }
  MFRT_ASSIGN_OR_RETURN(
      Tensor gathered,
      wholeTensor(parameter, executable, stored->dtype(), "gathering"));
  Shape shape = gathered.shape();
  // Gathered part by part: each part's blocks side by side.
  int64_t dim = parameter.split_dim(), parts = parameter.split_parts();
  Tensor gatheredParts = gathered.reshaped(partsView(shape, dim, parts));
  MFRT_RETURN_IF_ERROR(
      ranks->allGather(stored->reshaped(partsView(stored->shape(), dim, parts)),
                       gatheredParts, dim + 1,
                       std::vector<int64_t>(parameter.split_axes()->begin(),
                                            parameter.split_axes()->end())));
  return gathered;
}

Status Weights::save(const Executable &executable, const std::string &path,
                     Communicator *ranks, bool withFrozen,
                     const std::map<std::string, std::string> &metadata) const {
  // `named` points into `stored`: room for every part of every stack.
  size_t pieces = 0;
  for (const fb::Parameter *parameter : *executable.root().parameters()) {
    pieces += parameter->parts()
                  ? std::max<size_t>(1, parameter->parts()->size())
                  : 1;
  }
  std::vector<Tensor> stored;
  stored.reserve(pieces);
  std::vector<std::pair<std::string, const Tensor *>> named;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!withFrozen && executable.root().parameters()->Get(i)->frozen()) {
      continue;
    }
    StatusOr<Tensor> tensor = wholeOnPrimary(i, executable, ranks);
    if (!tensor) {
      return tensor.status();
    }
    const fb::Parameter &parameter = *executable.root().parameters()->Get(i);
    if (parameter.parts() && parameter.parts()->size() > 0 &&
        tensor->defined()) {
      // A stack: each part under its own name (Hugging Face's experts).
      Shape partShape(tensor->shape().begin() + 1, tensor->shape().end());
      for (size_t p = 0; p < parameter.parts()->size(); ++p) {
        stored.push_back(tensor->rows(p, 1).reshaped(partShape));
        named.emplace_back(parameter.parts()->Get(p)->str(), &stored.back());
      }
      continue;
    }
    stored.push_back(tensor.take());
    named.emplace_back(parameter.name()->str(), &stored.back());
  }
  if (ranks && ranks->rank() != 0) {
    return Status::ok(); // rank 0 writes the whole weights
  }
  return writeSafetensors(path, named, metadata);
}

Status Weights::savePeftAdapters(const Executable &executable,
                                 const std::string &dir,
                                 Communicator *ranks) const {
  const fb::Executable &root = executable.root();
  const fb::Training *training = root.model()->training();
  double scale = training ? training->lora_scale() : 0.0;
  if (root.model()->family() == fb::ModelFamily::GPT2) {
    return Status::error(StatusCode::Unimplemented,
                         "PEFT has no form for adapters on a third of GPT-2's "
                         "fused c_attn; use the safetensors file or "
                         "--merge-lora");
  }
  std::vector<Tensor> stored;
  std::vector<std::pair<std::string, const Tensor *>> named;
  std::set<std::string> modules;
  int64_t rank = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    std::string name = root.parameters()->Get(i)->name()->str();
    if (root.parameters()->Get(i)->state() || !isLoraAdapter(name)) {
      continue; // not their optimizer state
    }
    StatusOr<Tensor> tensor = wholeOnPrimary(i, executable, ranks);
    if (!tensor) {
      return tensor.status();
    }
    stored.push_back(tensor.take());
    if (name.find(".lora_A.") != std::string::npos) {
      rank = stored.back().defined() ? stored.back().dim(0) : rank;
    }
    // target_modules: the module's own name (q_proj), as PEFT matches it.
    std::string module = name.substr(0, name.find(".lora_"));
    modules.insert(module.substr(module.rfind('.') + 1));
    named.emplace_back("base_model.model." + name, nullptr);
  }
  if (named.empty() || scale == 0.0) {
    return Status::error(StatusCode::FailedPrecondition,
                         "the executable has no LoRA adapters to write in "
                         "PEFT's layout");
  }
  for (size_t i = 0; i < named.size(); ++i) {
    named[i].second = &stored[i];
  }
  if (ranks && ranks->rank() != 0) {
    return Status::ok();
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return Status::error(StatusCode::Unavailable,
                         "cannot create the PEFT folder '" + dir +
                             "': " + error.message());
  }
  MFRT_RETURN_IF_ERROR(
      writeSafetensors(dir + "/adapter_model.safetensors", named));
  nlohmann::json config = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"r", rank},
      {"lora_alpha", scale * static_cast<double>(rank)},
      {"lora_dropout", 0.0},
      {"bias", "none"},
      {"fan_in_fan_out", false},
      {"inference_mode", true},
      {"target_modules",
       std::vector<std::string>(modules.begin(), modules.end())},
      {"base_model_name_or_path", ""}};
  std::string text = config.dump(2) + "\n";
  return writeFileAtomically(dir + "/adapter_config.json",
                             "PEFT adapter config", [&](FileWriter &writer) {
                               writer.write(text);
                               return Status::ok();
                             });
}

Status Weights::saveMerged(const Executable &executable,
                           const std::string &path) const {
  const fb::Executable &root = executable.root();
  const fb::Training *training = root.model()->training();
  double scale = training ? training->lora_scale() : 0.0;
  if (scale == 0.0) {
    return Status::error(StatusCode::FailedPrecondition,
                         "the executable has no LoRA adapters to merge "
                         "(compile a config with pet_config: pet_type lora)");
  }
  bool transposed = root.model()->family() == fb::ModelFamily::GPT2;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    index[root.parameters()->Get(i)->name()->str()] = i;
  }
  std::vector<Tensor> merged, stored;
  merged.reserve(tensors_.size());
  stored.reserve(tensors_.size());
  std::vector<std::pair<std::string, const Tensor *>> named;
  const std::string suffixA = ".lora_A.weight";
  for (size_t i = 0; i < tensors_.size(); ++i) {
    std::string name = root.parameters()->Get(i)->name()->str();
    if (name.find(".lora_") != std::string::npos) {
      continue;
    }
    std::string prefix =
        name.substr(0, name.size() - std::string(".weight").size());
    StatusOr<Tensor> tensor = asStored(i, name);
    if (!tensor) {
      return tensor.status();
    }
    stored.push_back(tensor.take());
    const Tensor &weight = stored.back();
    // The adapters of this weight: on all of its outputs, or (GPT-2's
    // c_attn, MindFormers' dense1-3) on the q, k or v third.
    struct Adapter {
      size_t down, up;
      int64_t outOffset;
    };
    std::vector<Adapter> adapters;
    int64_t outputs = transposed ? weight.dim(1) : weight.dim(0);
    for (auto [suffix, third] : {std::pair("", -1), std::pair(".q", 0),
                                 std::pair(".k", 1), std::pair(".v", 2)}) {
      auto a = index.find(prefix + suffix + suffixA);
      auto b = index.find(prefix + suffix + ".lora_B.weight");
      if (a != index.end() && b != index.end()) {
        adapters.push_back(
            {a->second, b->second, third < 0 ? 0 : third * (outputs / 3)});
      }
    }
    if (adapters.empty()) {
      named.emplace_back(name, &stored.back());
      continue;
    }
    Tensor sum(
        weight.dtype(), weight.shape(),
        std::shared_ptr<void>(std::malloc(weight.byteSize()), std::free));
    std::memcpy(sum.data(), weight.data(), weight.byteSize());
    int64_t in = transposed ? weight.dim(0) : weight.dim(1);
    for (const Adapter &adapter : adapters) {
      const Tensor &down = tensors_[adapter.down], &up = tensors_[adapter.up];
      int64_t rank = down.dim(0);
      for (int64_t o = 0; o < up.dim(0); ++o) {
        int64_t column = adapter.outOffset + o;
        for (int64_t k = 0; k < in; ++k) {
          double delta = 0;
          for (int64_t r = 0; r < rank; ++r) {
            delta += up.loadFloat(o * rank + r) * down.loadFloat(r * in + k);
          }
          int64_t at = transposed ? k * outputs + column : column * in + k;
          sum.storeFloat(at,
                         static_cast<float>(sum.loadFloat(at) + scale * delta));
        }
      }
    }
    merged.push_back(std::move(sum));
    named.emplace_back(name, &merged.back());
  }
  return writeSafetensors(path, named);
}
