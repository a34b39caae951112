//===- Executable.cpp - loading model.bin ---------------------------------===//

#include "runtime/format/Executable.h"

#include "runtime/base/FileIO.h"
#include "runtime/format/ContentChecksum.h"
#include "runtime/format/HostProgram.h"
#include "runtime/format/OpTypes.h"
#include "shapes/ShapeRules.h"

#include <cmath>
#include <cstdio>

using namespace mfrt;

namespace {

Status checkTensorType(const fb::TensorType *type, const std::string &where) {
  if (!type) {
    return Status::error(where + " has no type");
  }
  if (type->dtype() < fb::DType::MIN || type->dtype() > fb::DType::MAX) {
    return Status::error(where + " has an unknown dtype " +
                         std::to_string(static_cast<int>(type->dtype())));
  }
  StatusOr<int64_t> count = checkedElementCount(Executable::shapeOf(*type));
  return count ? Status::ok() : count.status().withContext(where);
}

/// A collective's grid axes (distinct axes of the grid) and, along one
/// dimension, blocks whose count is the ranks of those axes.
/// The number of ranks along `axes`, after checking that they are distinct
/// axes of the grid (`where` names what names them).
template <typename Axes>
StatusOr<int64_t> ranksAlong(const fb::Executable &root, const Axes &axes,
                             const std::string &where) {
  size_t gridRank = root.grid() ? root.grid()->size() : 0;
  std::vector<bool> seen(gridRank, false);
  int64_t ranks = 1;
  for (int64_t axis : axes) {
    if (axis < 0 || static_cast<size_t>(axis) >= gridRank || seen[axis]) {
      return Status::error(where + " names grid axis " + std::to_string(axis) +
                           ", but the grid has " + std::to_string(gridRank) +
                           " axes (or names it twice)");
    }
    seen[axis] = true;
    ranks *= root.grid()->Get(axis);
  }
  return ranks;
}

Status checkCollective(const fb::Executable &root, const fb::Op &op,
                       const Shape &input, const Shape &result,
                       const Shape *offsets, const std::string &where) {
  bool alongDim = op.kind() != fb::OpKind::AllReduce &&
                  op.kind() != fb::OpKind::AllToAll &&
                  op.kind() != fb::OpKind::AllToAllOffsets &&
                  op.kind() != fb::OpKind::AllToAllDims &&
                  op.kind() != fb::OpKind::ProcessIndex;
  StatusOr<int64_t> ranks = ranksAlong(root, gridAxesOf(op), where);
  if (ranks && op.kind() == fb::OpKind::AllToAllDims) {
    // The dtypes: checkOpTypes checked them (float, one for both).
    const auto *attrs = op.attributes_as_AllToAllDimsAttrs();
    mfshapes::Inferred rule =
        mfshapes::inferAllToAllDims({mfshapes::Element::F32, input}, *ranks,
                                    attrs->split_dim(), attrs->concat_dim());
    if (!rule) {
      return Status::error(where + ": " + rule.error);
    }
    if (rule.results.front().shape != result) {
      return Status::error(where + ": the result " + formatShape(result) +
                           " is not " +
                           mfshapes::formatShape(rule.results.front().shape));
    }
  }
  if (ranks && offsets) {
    // A share of segments for each rank of the group.
    int64_t segments = offsets->empty() ? 0 : (*offsets)[0] - 1;
    if (segments < 1 || segments % *ranks != 0) {
      return Status::error(where + ": offsets " + formatShape(*offsets) +
                           " do not cut the rows into a share of segments "
                           "for each of " +
                           std::to_string(*ranks) + " ranks");
    }
  }
  if (!ranks || !alongDim) {
    return ranks.status();
  }
  const Shape &block = op.kind() == fb::OpKind::AllGather ? input : result;
  const Shape &whole = op.kind() == fb::OpKind::AllGather ? result : input;
  int64_t dim = collectiveDimension(op);
  Shape expected = block;
  if (dim < 0 || static_cast<size_t>(dim) >= block.size() ||
      (expected[dim] *= *ranks, expected != whole)) {
    return Status::error(where + ": " + formatShape(whole) + " is not " +
                         std::to_string(*ranks) + " blocks " +
                         formatShape(block) + " along dimension " +
                         std::to_string(dim));
  }
  return Status::ok();
}

Status checkEntry(const fb::Executable &root, const fb::Entry &entry) {
  std::string name = entry.name()->str();
  size_t valueCount = entry.values()->size();
  for (size_t i = 0; i < valueCount; ++i) {
    MFRT_RETURN_IF_ERROR(checkTensorType(
        entry.values()->Get(i), "value " + std::to_string(i) + " of " + name));
  }
  std::vector<bool> defined(valueCount, false);
  auto checkId = [&](uint32_t id, const std::string &what) -> Status {
    if (id >= valueCount) {
      return Status::error(what + " refers to value " + std::to_string(id) +
                           ", but entry '" + name + "' has " +
                           std::to_string(valueCount) + " values");
    }
    return Status::ok();
  };
  if (sizeOf(entry.input_names()) != sizeOf(entry.inputs()) ||
      sizeOf(entry.output_names()) != sizeOf(entry.outputs())) {
    return Status::error("entry '" + name +
                         "' has a different number of names and values");
  }
  if (!entry.inputs() || !entry.outputs()) {
    return Status::error("entry '" + name + "' has no input or output list");
  }
  for (uint32_t id : *entry.inputs()) {
    MFRT_RETURN_IF_ERROR(checkId(id, "an input of '" + name + "'"));
    if (defined[id]) {
      return Status::error("entry '" + name + "' lists input value " +
                           std::to_string(id) + " twice");
    }
    defined[id] = true;
  }
  size_t parameterCount = sizeOf(root.parameters());
  // Reads of a parameter see its value at entry, and the runtimes read
  // parameters in place: every read of an assigned parameter (or a
  // reshape of one) must come before the assignment.
  std::vector<int64_t> viewOf(valueCount, -1); // the parameter a value views
  std::vector<int64_t> assignedAt(parameterCount, -1);
  auto noteAssignment = [&](const fb::Parameter &parameter, int64_t index,
                            size_t at, const std::string &where) -> Status {
    if (parameter.frozen()) {
      return Status::error(where + " assigns frozen parameter '" +
                           parameter.name()->str() + "'");
    }
    if (assignedAt[index] >= 0) {
      return Status::error(where + " assigns parameter '" +
                           parameter.name()->str() + "' a second time");
    }
    assignedAt[index] = static_cast<int64_t>(at);
    return Status::ok();
  };
  if (entry.ops()) {
    for (size_t index = 0; index < entry.ops()->size(); ++index) {
      const fb::Op &op = *entry.ops()->Get(index);
      std::string where = "op " + std::to_string(index) + " of '" + name + "'";
      if (op.location()) {
        where += " (" + op.location()->str() + ")";
      }
      const OpRow *row = opRow(op.kind());
      if (!row) {
        return Status::error(where + " has an unknown kind " +
                             std::to_string(static_cast<int>(op.kind())));
      }
      int operands = static_cast<int>(sizeOf(op.operands()));
      if (operands < row->operandsMin ||
          (row->operandsMax >= 0 && operands > row->operandsMax) ||
          static_cast<int>(sizeOf(op.results())) != row->results) {
        return Status::error(where + " (" + fb::EnumNameOpKind(op.kind()) +
                             ") has the wrong number of operands or results");
      }
      if (op.attributes_type() != row->attributes) {
        return Status::error(
            where + " (" + fb::EnumNameOpKind(op.kind()) + ") has attributes " +
            fb::EnumNameOpAttributes(op.attributes_type()) + ", expected " +
            fb::EnumNameOpAttributes(row->attributes));
      }
      // The verifier accepts a union's type without its table.
      if (row->attributes != fb::OpAttributes::NONE && !op.attributes()) {
        return Status::error(where + " (" + fb::EnumNameOpKind(op.kind()) +
                             ") names its attribute table but has none");
      }
      if (std::string problem = checkAttributeValues(op); !problem.empty()) {
        return Status::error(where + " (" + fb::EnumNameOpKind(op.kind()) +
                             "): " + problem);
      }
      if (op.operands()) {
        for (uint32_t id : *op.operands()) {
          MFRT_RETURN_IF_ERROR(checkId(id, where));
          if (!defined[id]) {
            return Status::error(where + " uses value " + std::to_string(id) +
                                 " before it is defined");
          }
        }
      }
      std::vector<TensorDesc> operandTypes;
      if (op.operands()) {
        for (uint32_t id : *op.operands()) {
          const fb::TensorType &type = *entry.values()->Get(id);
          operandTypes.push_back(
              {Executable::dtypeOf(type), Executable::shapeOf(type)});
        }
      }
      std::vector<TensorDesc> resultTypes;
      for (uint32_t id : *op.results()) { // arity checked: results exist
        MFRT_RETURN_IF_ERROR(checkId(id, where));
        const fb::TensorType &type = *entry.values()->Get(id);
        resultTypes.push_back(
            {Executable::dtypeOf(type), Executable::shapeOf(type)});
      }
      Status typesFit = checkOpTypes(op, operandTypes, resultTypes);
      if (!typesFit) {
        return typesFit.withContext(where);
      }
      if (isCollective(op.kind())) {
        // An all-to-all's offsets: its segments (the loader checked arity).
        const Shape *offsets =
            op.kind() == fb::OpKind::AllToAll          ? &operandTypes[1].shape
            : op.kind() == fb::OpKind::AllToAllOffsets ? &operandTypes[0].shape
                                                       : nullptr;
        static const Shape kNoOperand;
        MFRT_RETURN_IF_ERROR(checkCollective(
            root, op, operandTypes.empty() ? kNoOperand : operandTypes[0].shape,
            resultTypes[0].shape, offsets, where));
      }
      if (std::vector<int64_t> axes = vocabularyAxes(op); !axes.empty()) {
        StatusOr<int64_t> ranks = ranksAlong(root, axes, where);
        if (!ranks) {
          return ranks.status();
        }
      }
      for (uint32_t id : *op.results()) {
        if (defined[id]) {
          return Status::error(where + " redefines value " +
                               std::to_string(id));
        }
        defined[id] = true;
      }
      if (op.kind() == fb::OpKind::Param || op.kind() == fb::OpKind::Assign) {
        bool assign = op.kind() == fb::OpKind::Assign;
        int64_t parameter = parameterOf(op);
        if (parameter < 0 || static_cast<size_t>(parameter) >= parameterCount) {
          return Status::error(where + (assign ? " assigns" : " reads") +
                               " parameter " + std::to_string(parameter) +
                               " of " + std::to_string(parameterCount));
        }
        const fb::Parameter &declared = *root.parameters()->Get(parameter);
        const fb::TensorType &used = *entry.values()->Get(op.results()->Get(0));
        if (Executable::shapeOf(*declared.type()) !=
                Executable::shapeOf(used) ||
            declared.type()->dtype() != used.dtype()) {
          return Status::error(where + (assign ? " assigns" : " reads") +
                               " parameter '" + declared.name()->str() +
                               "' with a different type");
        }
        if (assign) {
          MFRT_RETURN_IF_ERROR(
              noteAssignment(declared, parameter, index, where));
        } else {
          viewOf[op.results()->Get(0)] = parameter;
        }
      }
      if (op.kind() == fb::OpKind::Reshape &&
          viewOf[op.operands()->Get(0)] >= 0) {
        viewOf[op.results()->Get(0)] = viewOf[op.operands()->Get(0)];
      }
      if (op.kind() == fb::OpKind::Constant) {
        const fb::TensorType &type = *entry.values()->Get(op.results()->Get(0));
        int64_t bytes = *checkedElementCount(Executable::shapeOf(type)) *
                        dtypeSize(Executable::dtypeOf(type));
        int64_t element = dtypeSize(Executable::dtypeOf(type));
        int64_t held = static_cast<int64_t>(
            op.attributes_as_ConstantAttrs()->value()->size());
        if (held != bytes && !(held == element && bytes > 0)) {
          return Status::error(where + " holds " + std::to_string(held) +
                               " bytes of constant data, expected " +
                               std::to_string(bytes) + " (or one element, " +
                               std::to_string(element) + ", for a splat)");
        }
      }
    }
  }
  for (uint32_t id : *entry.outputs()) {
    MFRT_RETURN_IF_ERROR(checkId(id, "an output of '" + name + "'"));
    if (!defined[id]) {
      return Status::error("output value " + std::to_string(id) + " of '" +
                           name + "' is never defined");
    }
  }
  auto readAfterAssignment = [&](uint32_t id, size_t at) {
    return viewOf[id] >= 0 && assignedAt[viewOf[id]] >= 0 &&
           static_cast<int64_t>(at) > assignedAt[viewOf[id]];
  };
  size_t opCount = entry.ops() ? entry.ops()->size() : 0;
  for (size_t index = 0; index < opCount; ++index) {
    const fb::Op &op = *entry.ops()->Get(index);
    if (!op.operands()) {
      continue;
    }
    for (uint32_t id : *op.operands()) {
      if (readAfterAssignment(id, index)) {
        return Status::error("op " + std::to_string(index) + " of '" + name +
                             "' reads parameter '" +
                             root.parameters()->Get(viewOf[id])->name()->str() +
                             "' after it was assigned");
      }
    }
  }
  for (uint32_t id : *entry.outputs()) {
    if (readAfterAssignment(id, opCount)) {
      return Status::error("'" + name + "' returns parameter '" +
                           root.parameters()->Get(viewOf[id])->name()->str() +
                           "' that it also assigns");
    }
  }
  return Status::ok();
}

/// The type of input/output `index` of `entry`.
const fb::TensorType &inputType(const fb::Entry &entry, size_t index) {
  return *entry.values()->Get(entry.inputs()->Get(index));
}
const fb::TensorType &outputType(const fb::Entry &entry, size_t index) {
  return *entry.values()->Get(entry.outputs()->Get(index));
}

bool sameType(const fb::TensorType &a, const fb::TensorType &b) {
  return a.dtype() == b.dtype() &&
         Executable::shapeOf(a) == Executable::shapeOf(b);
}

/// The ranks each training sequence is split over (context parallelism):
/// its entries hold seq_length / this positions of each.
int64_t contextRanksOf(const fb::Executable &root) {
  return root.grid() && root.grid()->size() > kContextAxis
             ? root.grid()->Get(kContextAxis)
             : 1;
}

Status badSchedule(const std::string &what) {
  return Status::error("the pipeline schedule " + what);
}

/// A pipelined program's parts as its schedule and entries lay them out.
struct PipelineLayout {
  const fb::Pipeline &pipeline;
  int64_t stages, chunks, micro;
  bool vShape;
  /// Per part: its backward split into B and W (input_gradients and
  /// weight_gradients; zero-bubble schedules), else accumulate_gradients.
  std::vector<bool> split;

  int64_t parts() const { return stages * chunks; }
  int64_t partOf(int64_t stage, int64_t chunk) const {
    return mfshapes::pipelinePartOf(stage, chunk, stages, vShape);
  }
  std::string prefixOf(int64_t part) const {
    mfshapes::PipelinePlace place =
        mfshapes::pipelinePlaceOf(part, stages, vShape);
    return mfshapes::stageEntryPrefix(place.stage, place.chunk, chunks);
  }
  static int64_t chunkOf(const fb::StageSchedule &own, size_t slot) {
    return own.chunk() ? static_cast<int64_t>(own.chunk()->Get(slot)) : 0;
  }
  static bool weightOf(const fb::StageSchedule &own, size_t slot) {
    return own.weight() && own.weight()->Get(slot);
  }
};

/// One stage's slots: each micro-batch's forward (none on the model's last
/// part), backward and, for a split part, W, once per chunk and in that
/// order, keeping no more passes than it says.
Status checkStageSlots(const PipelineLayout &layout, size_t stage) {
  const fb::StageSchedule &own =
      *layout.pipeline.stages()->Get(static_cast<uint32_t>(stage));
  std::string of = "stage " + std::to_string(stage);
  size_t slots = own.backward()->size();
  if (own.micro_batch()->size() != slots) {
    return badSchedule("of " + of + " has slots without a micro-batch");
  }
  if ((own.chunk() && own.chunk()->size() != slots) ||
      (own.weight() && own.weight()->size() != slots)) {
    return badSchedule("of " + of + " has slots without a chunk or kind");
  }
  // Per (chunk, micro-batch): its passes of each kind; each has a backward
  // slot, so a stage has at least as many slots (and nothing is allocated
  // for a schedule the file does not hold).
  size_t passes = static_cast<size_t>(layout.chunks * layout.micro);
  if (slots < passes) {
    return badSchedule("of " + of + " has " + std::to_string(slots) +
                       " slots for " + std::to_string(layout.micro) +
                       " micro-batches of " + std::to_string(layout.chunks) +
                       " chunks");
  }
  std::vector<int> forwards(passes), backwards(passes), weights(passes);
  int64_t inFlight = 0, most = 0;
  for (size_t slot = 0; slot < slots; ++slot) {
    int32_t index = own.micro_batch()->Get(slot);
    int64_t chunk = PipelineLayout::chunkOf(own, slot);
    if (index < 0 || index >= layout.micro) {
      return badSchedule("of " + of + " names micro-batch " +
                         std::to_string(index));
    }
    if (chunk < 0 || chunk >= layout.chunks) {
      return badSchedule("of " + of + " names chunk " + std::to_string(chunk) +
                         " of " + std::to_string(layout.chunks));
    }
    int64_t part = layout.partOf(static_cast<int64_t>(stage), chunk);
    bool lastPart = part + 1 == layout.parts();
    bool split = layout.split[static_cast<size_t>(part)];
    size_t at = static_cast<size_t>(chunk * layout.micro + index);
    if (PipelineLayout::weightOf(own, slot)) {
      if (!split || !own.backward()->Get(slot) || backwards[at] == 0) {
        return badSchedule("of " + of +
                           " runs a weight-gradient pass without its "
                           "backward's input gradient before it");
      }
      ++weights[at];
      --inFlight;
    } else if (own.backward()->Get(slot)) {
      if (!lastPart && forwards[at] == 0) {
        return badSchedule("of " + of + " runs a backward before its forward");
      }
      ++backwards[at];
      // A pass is kept from its forward (the last part's: its backward)
      // to its last slot (W when split).
      inFlight += (lastPart && split) ? 1 : (!lastPart && !split) ? -1 : 0;
      most = std::max(most, inFlight);
    } else {
      if (lastPart) {
        return badSchedule(
            "of the model's last part has a forward (its backwards run it)");
      }
      ++forwards[at];
      most = std::max(most, ++inFlight);
    }
  }
  for (int64_t chunk = 0; chunk < layout.chunks; ++chunk) {
    int64_t part = layout.partOf(static_cast<int64_t>(stage), chunk);
    bool lastPart = part + 1 == layout.parts();
    bool split = layout.split[static_cast<size_t>(part)];
    for (int64_t index = 0; index < layout.micro; ++index) {
      size_t at = static_cast<size_t>(chunk * layout.micro + index);
      if (backwards[at] != 1 || forwards[at] != (lastPart ? 0 : 1) ||
          weights[at] != (split ? 1 : 0)) {
        return badSchedule(
            "of " + of + " does not run micro-batch " + std::to_string(index) +
            (layout.chunks > 1 ? " of chunk " + std::to_string(chunk) : "") +
            (lastPart ? (split ? " backward and weight gradients" : " backward")
                      : (split ? " forward, backward and weight gradients"
                               : " forward and backward")) +
            " once");
      }
    }
  }
  if (own.in_flight() != most) {
    return badSchedule("of " + of + " keeps " + std::to_string(most) +
                       " inputs, not " + std::to_string(own.in_flight()));
  }
  return Status::ok();
}

std::vector<std::string> namesOf(
    const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>> *list) {
  std::vector<std::string> text;
  for (uint32_t i = 0; list && i < list->size(); ++i) {
    text.push_back(list->Get(i)->str());
  }
  return text;
}

/// The entries of each part in the model's order: inputs by name, outputs
/// by name, the hidden states passed on in one type, the gradients coming
/// back in it; each stage's update.
Status checkPipelineEntries(const fb::Executable &root,
                            const PipelineLayout &layout) {
  auto entryNamed = [&](const std::string &name) -> const fb::Entry * {
    for (const fb::Entry *entry : *root.entries()) {
      if (entry->name()->str() == name) {
        return entry;
      }
    }
    return nullptr;
  };
  // Each stage's update: the learning rate and step to the gradient norm.
  for (int64_t stage = 0; stage < layout.stages; ++stage) {
    std::string name = mfshapes::stageEntryPrefix(stage, 0, 1) + "train_step";
    const fb::Entry *entry = entryNamed(name);
    if (!entry || entry->stage() != stage) {
      return Status::error("the pipeline needs an entry '" + name +
                           "' of stage " + std::to_string(stage));
    }
    std::vector<std::string> outputs = namesOf(entry->output_names());
    if (namesOf(entry->input_names()) !=
            std::vector<std::string>{"learning_rate", "step"} ||
        outputs.size() > 1 ||
        (outputs.size() == 1 && outputs[0] != "grad_norm")) {
      return Status::error("entry '" + name +
                           "' does not take and return "
                           "what its pipeline stage passes on");
    }
    if (!Executable::hasType(inputType(*entry, 0), DType::F32, {}) ||
        !Executable::hasType(inputType(*entry, 1), DType::F32, {}) ||
        (!outputs.empty() &&
         !Executable::hasType(outputType(*entry, 0), DType::F32, {}))) {
      return Status::error("entry '" + name +
                           "' does not map an f32 "
                           "learning rate and step to an f32 gradient norm");
    }
  }
  const fb::TensorType *previousHidden = nullptr;
  const fb::ModelInfo &model = *root.model();
  std::vector<int64_t> idsShape = {model.batch_size(),
                                   model.seq_length() / contextRanksOf(root)};
  for (int64_t part = 0; part < layout.parts(); ++part) {
    mfshapes::PipelinePlace place =
        mfshapes::pipelinePlaceOf(part, layout.stages, layout.vShape);
    bool first = part == 0, last = part + 1 == layout.parts();
    bool split = layout.split[static_cast<size_t>(part)];
    std::string of =
        "stage " + std::to_string(place.stage) +
        (layout.chunks > 1 ? " chunk " + std::to_string(place.chunk) : "");
    std::string prefix = layout.prefixOf(part);
    std::string backwardName =
        prefix + (split ? "input_gradients" : "accumulate_gradients");
    std::vector<std::string> entryNames = {backwardName};
    if (!last) {
      entryNames.push_back(prefix + "forward");
    }
    if (split) {
      entryNames.push_back(prefix + "weight_gradients");
    }
    for (const std::string &name : entryNames) {
      const fb::Entry *entry = entryNamed(name);
      if (!entry || entry->stage() != place.stage ||
          entry->chunk() != place.chunk) {
        return Status::error("the pipeline needs an entry '" + name + "' of " +
                             of);
      }
    }
    // What a forward keeps for its backward: its outputs after `hidden`;
    // what a split B keeps for its W: its outputs after the gradients.
    const fb::Entry *forward = last ? nullptr : entryNamed(prefix + "forward");
    const fb::Entry *backward = entryNamed(backwardName);
    size_t saved = forward && forward->outputs()->size() > 0
                       ? forward->outputs()->size() - 1
                       : 0;
    std::vector<std::string> savedNames;
    for (size_t i = 0; i < saved; ++i) {
      savedNames.push_back("saved." + std::to_string(i));
    }
    std::vector<std::string> gradients;
    if (last) {
      gradients.push_back("loss");
    }
    if (!first) {
      gradients.push_back("input_gradient");
    }
    size_t weightSaved = split && backward->outputs()->size() > gradients.size()
                             ? backward->outputs()->size() - gradients.size()
                             : 0;
    std::vector<std::string> weightSavedNames;
    for (size_t i = 0; i < weightSaved; ++i) {
      weightSavedNames.push_back("wsaved." + std::to_string(i));
    }
    std::vector<std::string> backwardInputs = {first ? "input_ids" : "hidden"};
    if (last) {
      backwardInputs.push_back("labels");
    } else {
      backwardInputs.push_back("output_gradient");
      backwardInputs.insert(backwardInputs.end(), savedNames.begin(),
                            savedNames.end());
    }
    std::vector<std::string> backwardOutputs = gradients;
    backwardOutputs.insert(backwardOutputs.end(), weightSavedNames.begin(),
                           weightSavedNames.end());
    std::vector<std::string> forwardOutputs = {"hidden"};
    forwardOutputs.insert(forwardOutputs.end(), savedNames.begin(),
                          savedNames.end());
    auto expect = [&](const fb::Entry *entry,
                      const std::vector<std::string> &inputs,
                      const std::vector<std::string> &outputs) -> Status {
      if (namesOf(entry->input_names()) != inputs ||
          namesOf(entry->output_names()) != outputs) {
        return Status::error("entry '" + entry->name()->str() +
                             "' does not take and return "
                             "what its pipeline stage passes on");
      }
      return Status::ok();
    };
    MFRT_RETURN_IF_ERROR(expect(backward, backwardInputs, backwardOutputs));
    if (forward) {
      MFRT_RETURN_IF_ERROR(
          expect(forward, {backwardInputs.front()}, forwardOutputs));
    }
    // A W takes the backward's inputs it reads (in their order), then
    // every value its B saved for it: each in the type it has there.
    const fb::Entry *weight =
        split ? entryNamed(prefix + "weight_gradients") : nullptr;
    std::vector<const fb::TensorType *> weightTypes;
    if (weight) {
      std::vector<std::string> names = namesOf(weight->input_names());
      size_t next = 0;
      for (size_t i = 0; i + weightSaved < names.size(); ++i) {
        while (next < backwardInputs.size() &&
               backwardInputs[next] != names[i]) {
          ++next;
        }
        if (next == backwardInputs.size()) {
          break;
        }
        weightTypes.push_back(&inputType(*backward, next++));
      }
      for (size_t i = 0; i < weightSaved; ++i) {
        weightTypes.push_back(&outputType(*backward, gradients.size() + i));
      }
      bool savedLast =
          names.size() >= weightSaved &&
          std::equal(weightSavedNames.begin(), weightSavedNames.end(),
                     names.end() - static_cast<std::ptrdiff_t>(weightSaved));
      if (weightTypes.size() != names.size() || !savedLast ||
          weight->output_names()->size() != 0) {
        return Status::error("entry '" + weight->name()->str() +
                             "' does not take and return "
                             "what its pipeline stage passes on");
      }
    }
    // Types: the input, the hidden states on, the gradients back.
    const fb::TensorType &in = inputType(*backward, 0);
    if (first ? !Executable::hasType(in, DType::I32, idsShape)
              : (previousHidden && !sameType(in, *previousHidden)) ||
                    Executable::shapeOf(in).size() != 3) {
      return Status::error(
          "entry '" + backwardName + "' takes another input than " +
          (first ? "i32 ids" : "the previous stage's hidden states"));
    }
    for (size_t i = 0; i < gradients.size(); ++i) {
      const fb::TensorType &type = outputType(*backward, i);
      if (gradients[i] == "loss" ? !Executable::hasType(type, DType::F32, {})
                                 : !sameType(type, in)) {
        return Status::error("entry '" + backwardName + "' returns " +
                             gradients[i] + " of another type");
      }
    }
    if (last &&
        !Executable::hasType(inputType(*backward, 1), DType::I32, idsShape)) {
      return Status::error("entry '" + backwardName +
                           "' takes labels of another type");
    }
    // Eval in stages runs the last part's forward: its input and the
    // labels to the loss, as its backward takes them.
    if (const fb::Entry *lastForward =
            last ? entryNamed(prefix + "forward") : nullptr) {
      if (lastForward->inputs()->size() != 2 ||
          lastForward->outputs()->size() != 1 ||
          !sameType(inputType(*lastForward, 0), in) ||
          !sameType(inputType(*lastForward, 1), inputType(*backward, 1)) ||
          !Executable::hasType(outputType(*lastForward, 0), DType::F32, {})) {
        return Status::error("entry '" + prefix +
                             "forward' does not map its stage's input and i32 "
                             "labels to an f32 loss");
      }
    }
    if (forward) {
      // The forward takes what the backward takes, and its backward the
      // gradient of the hidden states it sends and what it saved.
      const fb::TensorType &hidden = outputType(*forward, 0);
      if (!sameType(inputType(*forward, 0), in) ||
          !sameType(inputType(*backward, 1), hidden)) {
        return Status::error("entry '" + backwardName +
                             "' takes a gradient of another type than its "
                             "stage's output");
      }
      for (size_t i = 0; i < saved; ++i) {
        if (!sameType(inputType(*backward, 2 + i),
                      outputType(*forward, 1 + i))) {
          return Status::error("entry '" + backwardName + "' takes saved." +
                               std::to_string(i) +
                               " of another type than its forward keeps");
        }
      }
      previousHidden = &hidden;
    }
    for (size_t i = 0; i < weightTypes.size(); ++i) {
      if (!sameType(inputType(*weight, i), *weightTypes[i])) {
        return Status::error("entry '" + prefix + "weight_gradients' takes " +
                             weight->input_names()->Get(i)->str() +
                             " of another type than its backward has");
      }
    }
  }
  return Status::ok();
}

/// The stages together: a forward waits for its input from the part
/// before, a backward for its gradient from the part after (the last
/// part's, for its input), a W only for its own stage's B. Runs them in
/// turn; a schedule in which every unfinished stage waits would hang
/// every rank.
Status checkPipelineFinishes(const PipelineLayout &layout) {
  size_t stages = static_cast<size_t>(layout.stages);
  std::vector<size_t> next(stages, 0);
  std::vector<std::vector<bool>> forwardDone(
      static_cast<size_t>(layout.parts()),
      std::vector<bool>(static_cast<size_t>(layout.micro))),
      backwardDone = forwardDone;
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (size_t stage = 0; stage < stages; ++stage) {
      const fb::StageSchedule &own =
          *layout.pipeline.stages()->Get(static_cast<uint32_t>(stage));
      for (; next[stage] < own.backward()->size(); ++next[stage]) {
        size_t slot = next[stage];
        if (PipelineLayout::weightOf(own, slot)) {
          continue; // after its B on this stage (checked)
        }
        bool backward = own.backward()->Get(slot);
        size_t index = static_cast<size_t>(own.micro_batch()->Get(slot));
        size_t part = static_cast<size_t>(layout.partOf(
            static_cast<int64_t>(stage), PipelineLayout::chunkOf(own, slot)));
        bool ready = backward && part + 1 < static_cast<size_t>(layout.parts())
                         ? backwardDone[part + 1][index]
                         : part == 0 || forwardDone[part - 1][index];
        if (!ready) {
          break;
        }
        (backward ? backwardDone : forwardDone)[part][index] = true;
        progressed = true;
      }
    }
  }
  for (size_t stage = 0; stage < stages; ++stage) {
    if (next[stage] < layout.pipeline.stages()
                          ->Get(static_cast<uint32_t>(stage))
                          ->backward()
                          ->size()) {
      return badSchedule("makes the stages wait for each other forever "
                         "(stage " +
                         std::to_string(stage) + " at slot " +
                         std::to_string(next[stage]) + ")");
    }
  }
  return Status::ok();
}

/// A pipelined program: a schedule the runtime can follow (each stage
/// runs each micro-batch's forward, then its backward, once per chunk,
/// keeping no more inputs than it says) and the entries it names, with
/// inputs and outputs that connect the model's parts (mfshapes::
/// pipelinePartOf: chunk c of stage s is part c * stages + s, or in a V).
Status checkPipeline(const fb::Executable &root) {
  const fb::Training *training = root.model()->training();
  const fb::Pipeline *pipeline = training ? training->pipeline() : nullptr;
  size_t stages = pipeline ? pipeline->stages()->size() : 0;
  int64_t chunks = pipeline ? pipeline->chunks() : 1;
  if (chunks < 1 || chunks > kMaxPipelineChunks) {
    return Status::error("the pipeline has " + std::to_string(chunks) +
                         " chunks a stage; 1 to " +
                         std::to_string(kMaxPipelineChunks) + " are valid");
  }
  for (const fb::Entry *entry : *root.entries()) {
    if (entry->stage() < -1 || entry->stage() >= static_cast<int64_t>(stages)) {
      return Status::error("entry '" + entry->name()->str() + "' is of stage " +
                           std::to_string(entry->stage()) +
                           " of a program of " + std::to_string(stages) +
                           " pipeline stages");
    }
    if (entry->chunk() < 0 || entry->chunk() >= chunks) {
      return Status::error("entry '" + entry->name()->str() + "' is of chunk " +
                           std::to_string(entry->chunk()) + " of stages of " +
                           std::to_string(chunks));
    }
  }
  for (uint32_t i = 0; root.parameters() && i < root.parameters()->size();
       ++i) {
    const fb::Parameter *parameter = root.parameters()->Get(i);
    if (!parameter->stages()) {
      continue;
    }
    for (int16_t stage : *parameter->stages()) {
      if (stage < 0 || static_cast<size_t>(stage) >= stages) {
        return Status::error("parameter '" + parameter->name()->str() +
                             "' is held by stage " + std::to_string(stage) +
                             " of a program of " + std::to_string(stages) +
                             " pipeline stages");
      }
    }
  }
  if (!pipeline) {
    return Status::ok();
  }
  // A stage's ranks hold only its parameters: each entry runs on one stage
  // and reads and writes only what that stage holds.
  for (const fb::Entry *entry : *root.entries()) {
    std::string where = "entry '" + entry->name()->str() + "'";
    if (entry->stage() < 0) {
      return Status::error(where + " of a pipelined program runs on no stage");
    }
    auto check = [&](int64_t parameter) -> Status {
      if (!Executable::holds(*root.parameters()->Get(parameter),
                             entry->stage())) {
        return Status::error(where + " of stage " +
                             std::to_string(entry->stage()) +
                             " reads parameter '" +
                             root.parameters()->Get(parameter)->name()->str() +
                             "', which its stage does not hold");
      }
      return Status::ok();
    };
    for (uint32_t i = 0; entry->ops() && i < entry->ops()->size(); ++i) {
      const fb::Op *op = entry->ops()->Get(i);
      if (op->kind() == fb::OpKind::Param || op->kind() == fb::OpKind::Assign) {
        MFRT_RETURN_IF_ERROR(check(parameterOf(*op)));
      }
    }
    const fb::HostProgram *host = entry->host();
    for (uint32_t i = 0; host && i < host->buffers()->size(); ++i) {
      if (host->buffers()->Get(i)->kind() == fb::BufferKind::Parameter) {
        MFRT_RETURN_IF_ERROR(check(host->buffers()->Get(i)->index()));
      }
    }
  }
  int64_t micro = pipeline->micro_batches();
  if (!root.grid() || root.grid()->size() <= kPipelineAxis ||
      root.grid()->Get(kPipelineAxis) != static_cast<int64_t>(stages) ||
      stages < 2) {
    return badSchedule("is not for the grid's stages (its axis " +
                       std::to_string(kPipelineAxis) + ")");
  }
  std::string scheduler = pipeline->scheduler()->str();
  if ((scheduler != "1f1b" && scheduler != "gpipe" &&
       scheduler != "zero_bubble_v") ||
      micro < 1 || micro > kMaxMicroBatches) {
    return badSchedule("is not a 1f1b, gpipe or zero_bubble_v schedule of 1 "
                       "to " +
                       std::to_string(kMaxMicroBatches) + " micro-batches");
  }
  if ((chunks > 1 && scheduler == "gpipe") ||
      (scheduler == "zero_bubble_v" && chunks != 2)) {
    return badSchedule("has " + std::to_string(chunks) +
                       " chunks a stage under " + scheduler +
                       " (interleaved 1f1b takes any, zero_bubble_v 2)");
  }
  PipelineLayout layout{*pipeline,
                        static_cast<int64_t>(stages),
                        chunks,
                        micro,
                        mfshapes::isVShapedScheduler(scheduler),
                        {}};
  for (int64_t part = 0; part < layout.parts(); ++part) {
    bool split = false;
    std::string name = layout.prefixOf(part) + "input_gradients";
    for (const fb::Entry *entry : *root.entries()) {
      split = split || entry->name()->str() == name;
    }
    layout.split.push_back(split);
  }
  for (size_t stage = 0; stage < stages; ++stage) {
    MFRT_RETURN_IF_ERROR(checkStageSlots(layout, stage));
  }
  MFRT_RETURN_IF_ERROR(checkPipelineEntries(root, layout));
  return checkPipelineFinishes(layout);
}

/// Whether the runtime's tasks look for an entry named `name` (prefill,
/// decode, train_step, a stage's, ...): such an entry must have the role
/// whose contract the loader checks.
bool isTaskEntryName(const std::string &name) {
  static const char *const kNames[] = {"decode",
                                       "logits",
                                       "forward_loss",
                                       "forward_backward",
                                       "accumulate_gradients",
                                       "train_step"};
  return name.rfind("prefill", 0) == 0 || name.rfind("stage", 0) == 0 ||
         std::any_of(std::begin(kNames), std::end(kNames),
                     [&](const char *task) { return name == task; });
}

/// The entry points' signatures are a contract with the runtime's tasks:
/// token ids in, f32 logits or loss out, KV caches passed through.
Status checkEntryContracts(const fb::Executable &root) {
  const fb::ModelInfo &model = *root.model();
  int64_t batch = model.batch_size(), seq = model.seq_length();
  int64_t contextRanks = contextRanksOf(root);
  int64_t runs = std::max<int64_t>(model.context_blocks(), 1);
  if (runs > 2) {
    return Status::error("context_blocks is " + std::to_string(runs) +
                         "; a rank holds 1 or 2 runs of each sequence");
  }
  if (seq % (contextRanks * runs) != 0) {
    return Status::error(
        "seq_length " + std::to_string(seq) + " does not divide into " +
        std::to_string(runs) + " runs of positions for each of " +
        std::to_string(contextRanks) + " context-parallel ranks");
  }
  int64_t trainingSeq = seq / contextRanks;
  int64_t vocab = model.vocab_size();
  size_t caches = model.use_past() ? 2 * model.num_layers() : 0;
  // A paged cache: pools of kv_num_blocks blocks, read through block tables
  // [rows, width] that every predict entry takes after its positions.
  int64_t blockSize = model.kv_block_size(), poolBlocks = model.kv_num_blocks();
  bool paged = blockSize != 0 || poolBlocks != 0;
  int64_t tableWidth = 0;
  if (paged) {
    std::string pool = "the model's paged KV cache (" +
                       std::to_string(poolBlocks) + " blocks of " +
                       std::to_string(blockSize) + ")";
    if (blockSize <= 0 || poolBlocks <= 0 || poolBlocks > (int64_t(1) << 24)) {
      return Status::error(pool + " needs 1 to 2^24 blocks of at least one "
                                  "position");
    }
    if (caches == 0) {
      return Status::error(pool + " needs a KV cache (use_past)");
    }
    tableWidth = seq / blockSize + (seq % blockSize != 0);
    if (poolBlocks < tableWidth) {
      return Status::error(pool +
                           " holds less than one sequence of "
                           "seq_length " +
                           std::to_string(seq));
    }
  }
  // Whether input `i` of `entry` is a block table for `rows` rows, and
  // whether a cache type is a pool of the model's blocks.
  auto isBlockTable = [&](const fb::Entry &entry, size_t i, int64_t rows) {
    return Executable::hasType(inputType(entry, i), DType::I32,
                               {rows, tableWidth});
  };
  auto isPool = [&](const fb::TensorType &cache) {
    Shape shape = Executable::shapeOf(cache);
    return shape.size() == 4 && shape[0] == poolBlocks && shape[1] == blockSize;
  };
  const size_t tables = paged ? 1 : 0;
  const fb::Entry *prefill = nullptr;
  for (const fb::Entry *entry : *root.entries()) {
    if (entry->role() == fb::EntryRole::Prefill &&
        prefillTokensOf(*entry) == seq) {
      prefill = entry;
    }
  }
  int64_t chunks = 1;
  if (const fb::Training *training = model.training();
      training && training->pipeline()) {
    chunks = training->pipeline()->chunks();
  }
  for (const fb::Entry *entry : *root.entries()) {
    std::string name = entry->name()->str();
    auto bad = [&](const std::string &what) {
      return Status::error("entry '" + name + "' " + what);
    };
    // The role decides the contract; the name only follows it (the
    // runtime's tasks find entries by these names).
    fb::EntryRole role = entry->role();
    if (role < fb::EntryRole::MIN || role > fb::EntryRole::MAX ||
        (role == fb::EntryRole::None && isTaskEntryName(name))) {
      return bad("does not say what it computes (its role); recompile it "
                 "with this mfc");
    }
    if (role == fb::EntryRole::None) {
      continue; // a program no task runs (a probe's): no contract
    }
    std::string expected = entryNameOf(*entry, seq, chunks);
    if (name != expected) {
      return bad("has role " + std::string(fb::EnumNameEntryRole(role)) +
                 (expected.empty()
                      ? std::string(", which does not fit its ids' length or "
                                    "its stage")
                      : ", whose entry is named '" + expected + "'"));
    }
    size_t inputs = entry->inputs()->size(), outputs = entry->outputs()->size();
    bool isPrefill = role == fb::EntryRole::Prefill;
    int64_t shorterPrefill = isPrefill && prefillTokensOf(*entry) < seq
                                 ? prefillTokensOf(*entry)
                                 : -1;
    // (Both lengths are in 1..seq_length: the name check above.)
    int64_t rowPrefill =
        role == fb::EntryRole::PrefillRow ? prefillTokensOf(*entry) : -1;
    if (rowPrefill >= 0) {
      // One row's prefill: prefill's types with a batch of 1.
      if (caches == 0 || batch == 1) {
        return bad("is a prefill of one batch row: such entries are for a "
                   "model with a KV cache and a batch of more than one");
      }
      if (inputs != 3 + tables + caches || outputs != 1 + caches ||
          !Executable::hasType(inputType(*entry, 0), DType::I32,
                               {1, rowPrefill}) ||
          !Executable::hasType(inputType(*entry, 1), DType::I32, {1}) ||
          !Executable::hasType(inputType(*entry, 2), DType::I32, {1}) ||
          (paged && !isBlockTable(*entry, 3, 1)) ||
          !Executable::hasType(outputType(*entry, 0), DType::F32,
                               {1, 1, vocab})) {
        return bad("does not take i32 ids [1, " + std::to_string(rowPrefill) +
                   "], one past_length and one logits_position" +
                   (paged ? ", one row of block table [1, " +
                                std::to_string(tableWidth) + "]"
                          : std::string()) +
                   " and return f32 logits [1, 1, " + std::to_string(vocab) +
                   "]");
      }
      for (size_t i = 0; i < caches; ++i) {
        const fb::TensorType &cache = inputType(*entry, 3 + tables + i);
        bool fits = prefill && prefill->inputs()->size() == 3 + tables + caches;
        if (fits) {
          // One row of prefill's caches; a paged cache's pool whole.
          const fb::TensorType &whole = inputType(*prefill, 3 + tables + i);
          Shape row = Executable::shapeOf(whole);
          fits =
              !row.empty() && cache.dtype() == whole.dtype() &&
              Executable::shapeOf(cache) == (paged ? row : (row[0] = 1, row));
        }
        if (!fits || !sameType(cache, outputType(*entry, 1 + i))) {
          return bad(paged ? "takes KV caches that are not prefill's pools"
                           : "takes KV caches that are not one row of "
                             "prefill's");
        }
      }
    } else if (isPrefill || role == fb::EntryRole::Decode) {
      // ids, then each row's past_length (with a cache), then each row's
      // logits_position (prefill), then the caches; the logits of one
      // position per row.
      bool decode = role == fb::EntryRole::Decode;
      int64_t tokens = decode ? 1 : shorterPrefill >= 0 ? shorterPrefill : seq;
      if (shorterPrefill > 0 && caches == 0) {
        return bad("is a prefill for prompts of " +
                   std::to_string(shorterPrefill) +
                   " tokens, which needs a KV cache to go on from");
      }
      if (decode && caches == 0) {
        return bad("decodes without a KV cache");
      }
      const size_t kFirstPosition = 1, kTables = 1 + (caches > 0) + !decode;
      const size_t kFirstCache = kTables + tables;
      if (inputs != kFirstCache + caches || outputs != 1 + caches) {
        return bad("has the wrong number of inputs or outputs");
      }
      if (paged && !isBlockTable(*entry, kTables, batch)) {
        return bad("does not take i32 block_tables [" + std::to_string(batch) +
                   ", " + std::to_string(tableWidth) + "] after its positions");
      }
      bool positionsPerRow = true;
      for (size_t i = kFirstPosition; i < kTables; ++i) {
        positionsPerRow &=
            Executable::hasType(inputType(*entry, i), DType::I32, {batch});
      }
      if (!Executable::hasType(inputType(*entry, 0), DType::I32,
                               {batch, tokens}) ||
          !positionsPerRow ||
          !Executable::hasType(outputType(*entry, 0), DType::F32,
                               {batch, 1, vocab})) {
        return bad("does not take i32 ids [" + std::to_string(batch) + ", " +
                   std::to_string(tokens) + "] and i32 positions [" +
                   std::to_string(batch) + "] and return f32 logits [" +
                   std::to_string(batch) + ", 1, " + std::to_string(vocab) +
                   "]");
      }
      for (size_t i = 0; i < caches; ++i) {
        if (!sameType(inputType(*entry, kFirstCache + i),
                      outputType(*entry, 1 + i))) {
          return bad("returns a KV cache of another type than it takes");
        }
        if (paged && !isPool(inputType(*entry, kFirstCache + i))) {
          return bad("takes a KV cache that is not a pool of " +
                     std::to_string(poolBlocks) + " blocks of " +
                     std::to_string(blockSize));
        }
        if ((decode || shorterPrefill > 0) &&
            (!prefill || prefill->inputs()->size() != 3 + tables + caches ||
             !sameType(inputType(*entry, kFirstCache + i),
                       inputType(*prefill, 3 + tables + i)))) {
          return bad("takes KV caches of other types than prefill");
        }
      }
    } else if (role == fb::EntryRole::Logits) {
      if (inputs != 1 || outputs != 1 ||
          !Executable::hasType(inputType(*entry, 0), DType::I32,
                               {batch, seq}) ||
          !Executable::hasType(outputType(*entry, 0), DType::F32,
                               {batch, seq, vocab})) {
        return bad("does not map i32 ids to f32 logits of every position");
      }
    } else if (role == fb::EntryRole::ForwardBackward) {
      std::vector<const fb::Parameter *> trained;
      if (root.parameters()) {
        for (const fb::Parameter *parameter : *root.parameters()) {
          if (!parameter->frozen() && !parameter->state()) {
            trained.push_back(parameter);
          }
        }
      }
      size_t parameters = trained.size();
      if (inputs != 2 || outputs != 1 + parameters ||
          !Executable::hasType(inputType(*entry, 0), DType::I32,
                               {batch, trainingSeq}) ||
          !Executable::hasType(inputType(*entry, 1), DType::I32,
                               {batch, trainingSeq}) ||
          !Executable::hasType(outputType(*entry, 0), DType::F32, {})) {
        return bad("does not map i32 ids and labels to an f32 loss and one "
                   "gradient per trained parameter");
      }
      for (size_t i = 0; i < parameters; ++i) {
        if (!sameType(*trained[i]->type(), outputType(*entry, 1 + i))) {
          return bad("returns a gradient of another type than parameter '" +
                     trained[i]->name()->str() + "'");
        }
      }
    } else if (role == fb::EntryRole::TrainStep) {
      if (inputs != 4 || outputs < 1 || outputs > 2 ||
          !Executable::hasType(inputType(*entry, 0), DType::I32,
                               {batch, trainingSeq}) ||
          !Executable::hasType(inputType(*entry, 1), DType::I32,
                               {batch, trainingSeq}) ||
          !Executable::hasType(inputType(*entry, 2), DType::F32, {}) ||
          !Executable::hasType(inputType(*entry, 3), DType::F32, {}) ||
          !Executable::hasType(outputType(*entry, 0), DType::F32, {}) ||
          (outputs == 2 &&
           !Executable::hasType(outputType(*entry, 1), DType::F32, {}))) {
        return bad("does not map i32 ids and labels, an f32 learning rate and "
                   "step to an f32 loss (and gradient norm)");
      }
    } else if (role == fb::EntryRole::ForwardLoss ||
               role == fb::EntryRole::AccumulateGradients) {
      if (inputs != 2 || outputs != 1 ||
          !Executable::hasType(inputType(*entry, 0), DType::I32,
                               {batch, trainingSeq}) ||
          !Executable::hasType(inputType(*entry, 1), DType::I32,
                               {batch, trainingSeq}) ||
          !Executable::hasType(outputType(*entry, 0), DType::F32, {})) {
        return bad("does not map i32 ids and labels to an f32 loss");
      }
    }
  }
  return Status::ok();
}

std::string hexString(uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(value));
  return text;
}

Status checkFormatVersion(const fb::Executable &root) {
  uint32_t version = root.format_version();
  if (version < kMinFormatVersion || version > kMaxFormatVersion) {
    return Status::error("format version " + std::to_string(version) +
                         " is not supported (this "
                         "runtime reads " +
                         (kMinFormatVersion == kMaxFormatVersion
                              ? "version " + std::to_string(kMaxFormatVersion)
                              : "versions " +
                                    std::to_string(kMinFormatVersion) + " to " +
                                    std::to_string(kMaxFormatVersion)) +
                         "); recompile with a matching mfc");
  }
  if (root.op_registry() != kOpRegistryFingerprint) {
    return Status::error(
        "the file was written with another op registry (fingerprint " +
        hexString(root.op_registry()) + ", this runtime's " +
        hexString(kOpRegistryFingerprint) +
        "): recompile the model with the mfc of this mf-run");
  }
  return Status::ok();
}

/// Every kernel has a signature (HostProgram checks each dispatch against it).
Status checkKernelSignatures(const fb::Executable &root) {
  size_t kernels = root.kernels() ? root.kernels()->size() : 0;
  size_t signatures =
      root.kernel_signatures() ? root.kernel_signatures()->size() : 0;
  if (kernels != signatures) {
    return Status::error("the executable lists " + std::to_string(kernels) +
                         " kernels but " + std::to_string(signatures) +
                         " kernel signatures");
  }
  for (size_t k = 0; k < kernels; ++k) {
    // mfc numbers its kernels in order; a name moved to another index would
    // call a kernel with another's signature.
    std::string expected = "mfk_" + std::to_string(k);
    if (root.kernels()->Get(k)->str() != expected) {
      return Status::error("kernel " + std::to_string(k) + " is named '" +
                           root.kernels()->Get(k)->str() + "', not '" +
                           expected + "'");
    }
  }
  for (size_t k = 0; k < signatures; ++k) {
    const fb::KernelSignature &signature = *root.kernel_signatures()->Get(k);
    std::string where =
        "the signature of kernel '" + root.kernels()->Get(k)->str() + "'";
    for (const auto *types : {signature.inputs(), signature.outputs()}) {
      for (const fb::TensorType *type : *types) {
        MFRT_RETURN_IF_ERROR(checkTensorType(type, where));
      }
    }
  }
  for (size_t k = 0; k < signatures; ++k) {
    const fb::KernelSignature &signature = *root.kernel_signatures()->Get(k);
    std::string kernel = "kernel '" + root.kernels()->Get(k)->str() + "'";
    if (signature.tiles() == 0) {
      return Status::error(kernel + " has no tiles");
    }
    // Panel inputs: increasing input positions of 2-D float weights.
    int64_t previous = -1;
    for (uint32_t i = 0;
         signature.panel_inputs() && i < signature.panel_inputs()->size();
         ++i) {
      uint32_t position = signature.panel_inputs()->Get(i);
      if (static_cast<int64_t>(position) <= previous ||
          position >= signature.inputs()->size()) {
        return Status::error(kernel +
                             " names panel inputs out of order, "
                             "twice or past its " +
                             std::to_string(signature.inputs()->size()) +
                             " inputs");
      }
      previous = position;
      const fb::TensorType &type = *signature.inputs()->Get(position);
      if (type.dtype() == fb::DType::I32 ||
          Executable::shapeOf(type).size() != 2) {
        return Status::error(kernel + " reads input " +
                             std::to_string(position) +
                             " as panels; only a 2-D float or I8 (quantized) "
                             "weight is packed");
      }
    }
  }
  return Status::ok();
}

bool alignedShapes(
    const flatbuffers::Vector<flatbuffers::Offset<fb::TensorType>> *types) {
  if (types) {
    for (const fb::TensorType *type : *types) {
      if (!alignedVector(type->shape())) {
        return false;
      }
    }
  }
  return true;
}

/// Every vector of 8-byte values (shapes, arena offsets) is 8-byte
/// aligned, as mfc writes them (an op's attribute vectors: with its other
/// attribute checks, checkAttributeValues).
Status checkAlignment(const fb::Executable &root) {
  auto misaligned = [](const std::string &what) {
    return Status::error(what + " is misaligned (a vector of 8-byte values "
                                "at a 4-byte boundary; mfc never writes one)");
  };
  if (root.parameters()) {
    for (const fb::Parameter *parameter : *root.parameters()) {
      if (!alignedVector(parameter->type()->shape())) {
        return misaligned("the shape of parameter '" +
                          parameter->name()->str() + "'");
      }
    }
  }
  for (const fb::Entry *entry : entriesAndInitializer(root)) {
    std::string where = "entry '" + entry->name()->str() + "'";
    if (!alignedShapes(entry->values())) {
      return misaligned("a value type of " + where);
    }
    if (entry->host()) {
      for (const fb::Buffer *buffer : *entry->host()->buffers()) {
        if (!alignedVector(buffer->type()->shape())) {
          return misaligned("a buffer type of " + where);
        }
      }
    }
  }
  if (!alignedShapes(root.derived())) {
    return misaligned("a derived value's type");
  }
  if (root.kernel_signatures()) {
    for (const fb::KernelSignature *signature : *root.kernel_signatures()) {
      if (!alignedShapes(signature->inputs()) ||
          !alignedShapes(signature->outputs())) {
        return misaligned("a kernel signature's type");
      }
    }
  }
  return Status::ok();
}

/// Whether `companion` of quantized `weight` (its scales, ...) is split as
/// the weight's block needs: along `nDim` when the weight splits its rows,
/// along `kDim` when it splits its columns (-1: the companion holds no
/// such dimension and is whole), over the same grid axes (and, with its
/// rows, in the same parts). As mfc's companionSplitAxes.
bool splitAsWeight(const fb::Parameter &weight, const fb::Parameter &companion,
                   int64_t nDim, int64_t kDim) {
  int64_t expected = weight.split_dim() == 0   ? nDim
                     : weight.split_dim() == 1 ? kDim
                                               : -1;
  if (companion.split_dim() != expected) {
    return false;
  }
  if (expected < 0) {
    return true;
  }
  auto axes = [](const fb::Parameter &of) {
    return std::vector<int16_t>(of.split_axes()->begin(),
                                of.split_axes()->end());
  };
  int64_t parts = weight.split_dim() == 0 ? weight.split_parts() : 1;
  return weight.split_axes() && companion.split_axes() &&
         axes(weight) == axes(companion) && companion.split_parts() == parts;
}

/// Parameter `index`, quantized or not: an I8 parameter names its scales,
/// a later parameter that is not quantized itself, and neither is training
/// state; the two fit mf.dequantize's rule (shapes/ShapeRules.h), split
/// alike over the ranks (splitAsWeight).
Status checkQuantization(const fb::Executable &root, size_t index) {
  const auto &parameters = *root.parameters();
  const fb::Parameter &parameter = *parameters.Get(index);
  std::string where = "parameter '" + parameter.name()->str() + "'";
  int32_t scaleIndex = parameter.quant_scale();
  if (scaleIndex < 0) {
    if (parameter.quant_input_scale() != -1 ||
        parameter.quant_input_zero_point() != -1 ||
        parameter.quant_bias() != -1) {
      return Status::error(where + " is not quantized but names calibration "
                                   "parameters");
    }
    // (An I8 vector is a calibrated weight's zero points: checkSemantics
    // checks that one names it.)
    return Executable::dtypeOf(*parameter.type()) == DType::I8 &&
                   sizeOf(parameter.type()->shape()) != 1
               ? Status::error(where + " is I8 but names no scales")
               : Status::ok();
  }
  if (static_cast<size_t>(scaleIndex) <= index ||
      static_cast<size_t>(scaleIndex) >= parameters.size()) {
    return Status::error(where + " names scales " + std::to_string(scaleIndex) +
                         ", which is not a parameter after it");
  }
  const fb::Parameter &scales = *parameters.Get(scaleIndex);
  auto info = [](const fb::Parameter &of) {
    return mfshapes::TensorInfo{
        static_cast<mfshapes::Element>(Executable::dtypeOf(*of.type())),
        Executable::shapeOf(*of.type())};
  };
  mfshapes::Inferred rule = mfshapes::inferDequantize(
      info(parameter), info(scales), parameter.quant_group(),
      parameter.quant_bits());
  bool grouped = parameter.quant_group() > 0;
  // (Columns split in parts would give the values a share of each part
  // but the companions one block: mfc never splits a quantized weight so.)
  bool columnsInParts =
      parameter.split_dim() == 1 && parameter.split_parts() != 1;
  if (!rule || parameter.state() || parameter.split_dim() > 1 ||
      columnsInParts ||
      scales.quant_scale() >= 0 ||
      !splitAsWeight(parameter, scales, grouped ? 1 : 0, grouped ? 0 : -1)) {
    return Status::error(
        where + " and its scales '" + scales.name()->str() +
        "' are not a quantized weight (" +
        (rule ? std::string("training state, scales quantized, columns split "
                            "in parts, or the two not split alike over the "
                            "ranks")
              : rule.error) +
        ")");
  }
  // Calibrated activations: mf.quantize's scales and zero points [K] and
  // the bias [N], each a later parameter that is not quantized, split as
  // the weight's block needs (splitAsWeight).
  int32_t companions[] = {parameter.quant_input_scale(),
                          parameter.quant_input_zero_point(),
                          parameter.quant_bias()};
  bool calibrated = companions[0] >= 0;
  if (!calibrated) {
    if (companions[1] >= 0 || companions[2] >= 0 ||
        parameter.quant_smooth_alpha() != -1) {
      return Status::error(where + " has calibration parameters but no input "
                                   "scales");
    }
    return Status::ok();
  }
  if (parameter.quant_bits() != 8 || parameter.quant_group() != 0 ||
      !(parameter.quant_smooth_alpha() == -1 ||
        (parameter.quant_smooth_alpha() >= 0 &&
         parameter.quant_smooth_alpha() <= 1)) ||
      !std::isfinite(parameter.quant_smooth_alpha())) {
    return Status::error(where + " is calibrated but not int8 per row with a "
                                 "smoothing strength in [0, 1] or -1");
  }
  const int64_t n = Executable::shapeOf(*parameter.type())[0];
  const int64_t k = Executable::shapeOf(*parameter.type())[1];
  const int64_t sizes[] = {k, k, n};
  const char *names[] = {"input scales", "input zero points", "bias"};
  // The input scales and zero points hold K, the bias N (split with the
  // weight's columns or rows).
  const int64_t nDims[] = {-1, -1, 0};
  const int64_t kDims[] = {0, 0, -1};
  for (int i = 0; i < 3; ++i) {
    int32_t at = companions[i];
    if (at < 0 || static_cast<size_t>(at) <= index ||
        static_cast<size_t>(at) >= parameters.size()) {
      return Status::error(where + " names " + names[i] + " " +
                           std::to_string(at) +
                           ", which is not a parameter after it");
    }
    const fb::Parameter &companion = *parameters.Get(at);
    DType dtype = Executable::dtypeOf(*companion.type());
    // (The input scales and the bias in one float type: the runtime
    // computes both in it.)
    DType inputScales =
        Executable::dtypeOf(*parameters.Get(companions[0])->type());
    if (Executable::shapeOf(*companion.type()) != Shape{sizes[i]} ||
        (dtype == DType::I8) != (i == 1) || dtype == DType::I32 ||
        (i == 2 && dtype != inputScales) || companion.quant_scale() >= 0 ||
        !splitAsWeight(parameter, companion, nDims[i], kDims[i]) ||
        companion.state() ||
        (companion.parts() && companion.parts()->size() > 0)) {
      return Status::error(where + "'s " + names[i] + " '" +
                           companion.name()->str() + "' are not " +
                           (i == 1 ? "I8 [" : "floats [") +
                           std::to_string(sizes[i]) + "]" +
                           (i == 2 ? " of the input scales' type" : "") +
                           ", split as the weight");
    }
  }
  if (Executable::dtypeOf(*scales.type()) != DType::F32) {
    return Status::error(where + " is calibrated, and its scales '" +
                         scales.name()->str() +
                         "' are not F32 (they hold the activations' scale "
                         "too)");
  }
  return Status::ok();
}

/// A grid of positive extents with at most kMaxRanks ranks.
Status checkGrid(const fb::Executable &root) {
  if (!root.grid()) {
    return Status::ok();
  }
  constexpr int64_t kMaxRanks = 1 << 20;
  int64_t ranks = 1;
  // data x model (x pipeline (x context)): the runtime makes a group per
  // set of axes.
  if (root.grid()->size() > kContextAxis + 1) {
    return Status::error(
        "the device grid has " + std::to_string(root.grid()->size()) +
        " axes (at most 4: " + gridAxesText(kContextAxis + 1) + ")");
  }
  for (int64_t extent : *root.grid()) {
    if (extent <= 0 || extent > kMaxRanks || ranks * extent > kMaxRanks) {
      return Status::error("the device grid has an extent of " +
                           std::to_string(extent) +
                           " (extents are positive, at most " +
                           std::to_string(kMaxRanks) + " ranks in all)");
    }
    ranks *= extent;
  }
  return Status::ok();
}

/// Calibrated scales (an int8 KV cache's): a float tensor that is neither
/// quantized nor training state, named after non-empty ranges, split if at
/// all along its first dimension (a tensor-parallel rank's KV heads).
Status checkCalibratedScales(const fb::Parameter &parameter) {
  const flatbuffers::String *ranges = parameter.calibrated_scales();
  if (!ranges) {
    return Status::ok();
  }
  DType dtype = Executable::dtypeOf(*parameter.type());
  if (ranges->size() == 0 || dtype == DType::I8 || dtype == DType::I32 ||
      parameter.quant_scale() >= 0 || parameter.split_dim() > 0 ||
      parameter.state() || sizeOf(parameter.type()->shape()) < 1) {
    return Status::error("parameter '" + parameter.name()->str() +
                         "' holds calibrated scales but is not a float "
                         "tensor of them (quantized, split along another "
                         "dimension than its first, training state, or "
                         "named after no ranges)");
  }
  return Status::ok();
}

/// A split parameter splits one dimension of its block over grid axes.
Status checkSplit(const fb::Executable &root, const fb::Parameter &parameter) {
  std::string where = "parameter '" + parameter.name()->str() + "'";
  if (parameter.split_parts() < 1) {
    return Status::error(where + " is split in " +
                         std::to_string(parameter.split_parts()) + " parts");
  }
  if (parameter.split_dim() < 0) {
    return parameter.split_axes() && parameter.split_axes()->size()
               ? Status::error(where + " has split axes but no split dimension")
               : Status::ok();
  }
  if (static_cast<size_t>(parameter.split_dim()) >=
          sizeOf(parameter.type()->shape()) ||
      !parameter.split_axes() || parameter.split_axes()->size() == 0) {
    return Status::error(where + " is split along dimension " +
                         std::to_string(parameter.split_dim()) +
                         ", which its type does not have (or over no axes)");
  }
  MFRT_RETURN_IF_ERROR(
      ranksAlong(root, *parameter.split_axes(), where).status());
  // The block holds its share of each part.
  if (parameter.type()->shape()->Get(parameter.split_dim()) %
          parameter.split_parts() !=
      0) {
    return Status::error(where + " has a block that does not split into its " +
                         std::to_string(parameter.split_parts()) + " parts");
  }
  return Status::ok();
}

/// A stacked parameter's parts are the slices of its whole weight's
/// dimension 0, each named, a float weight split (if at all) along them.
Status checkParts(const fb::Executable &root, const fb::Parameter &parameter) {
  if (!parameter.parts() || parameter.parts()->size() == 0) {
    return Status::ok();
  }
  std::string where = "parameter '" + parameter.name()->str() + "'";
  const auto *shape = parameter.type()->shape();
  int64_t whole = sizeOf(shape) ? shape->Get(0) : 0;
  if (parameter.split_dim() == 0) {
    for (int16_t axis : *parameter.split_axes()) {
      whole *= root.grid()->Get(axis); // checkSplit checked the axes
    }
  }
  if (whole != static_cast<int64_t>(parameter.parts()->size()) ||
      parameter.split_dim() > 0 || parameter.split_parts() != 1 ||
      parameter.quant_scale() >= 0 ||
      Executable::dtypeOf(*parameter.type()) == DType::I8) {
    return Status::error(where + " has " +
                         std::to_string(parameter.parts()->size()) +
                         " parts, which are not the slices of its float "
                         "weight's dimension 0 (" +
                         std::to_string(whole) + ")");
  }
  for (const flatbuffers::String *part : *parameter.parts()) {
    if (!part || part->size() == 0) {
      return Status::error(where + " has a part without a name");
    }
  }
  return Status::ok();
}

/// `programs` receives each entry's verified host program (null for an
/// entry without one), in entry order.
Status
checkSemantics(const fb::Executable &root,
               std::vector<std::shared_ptr<const HostProgram>> &programs) {
  const fb::ModelInfo &model = *root.model();
  if (model.vocab_size() <= 0 || model.seq_length() <= 0 ||
      model.batch_size() <= 0 || model.num_layers() < 0) {
    return Status::error("model info has non-positive sizes");
  }
  MFRT_RETURN_IF_ERROR(checkGrid(root));
  if (root.parameters()) {
    // Each parameter of scales belongs to one quantized weight (loading
    // fills it from that weight).
    std::vector<bool> scalesTaken(root.parameters()->size(), false);
    for (size_t index = 0; index < root.parameters()->size(); ++index) {
      const fb::Parameter *parameter = root.parameters()->Get(index);
      MFRT_RETURN_IF_ERROR(checkTensorType(
          parameter->type(), "parameter '" + parameter->name()->str() + "'"));
      if (parameter->init() < fb::ParameterInit::MIN ||
          parameter->init() > fb::ParameterInit::MAX) {
        return Status::error("parameter '" + parameter->name()->str() +
                             "' has an unknown init kind");
      }
      MFRT_RETURN_IF_ERROR(checkSplit(root, *parameter));
      MFRT_RETURN_IF_ERROR(checkParts(root, *parameter));
      MFRT_RETURN_IF_ERROR(checkQuantization(root, index));
      MFRT_RETURN_IF_ERROR(checkCalibratedScales(*parameter));
      for (int32_t companion :
           {parameter->quant_scale(), parameter->quant_input_scale(),
            parameter->quant_input_zero_point(), parameter->quant_bias()}) {
        if (companion < 0) {
          continue;
        }
        if (scalesTaken[companion]) {
          return Status::error("parameter '" + parameter->name()->str() +
                               "' names the scales of another quantized "
                               "weight");
        }
        scalesTaken[companion] = true;
      }
    }
    for (size_t index = 0; index < root.parameters()->size(); ++index) {
      const fb::Parameter &parameter = *root.parameters()->Get(index);
      if (Executable::dtypeOf(*parameter.type()) == DType::I8 &&
          sizeOf(parameter.type()->shape()) == 1 && !scalesTaken[index]) {
        return Status::error("parameter '" + parameter.name()->str() +
                             "' is an I8 vector that no calibrated weight "
                             "names as its zero points");
      }
    }
  }
  if (!root.entries() || root.entries()->size() == 0) {
    return Status::error("the executable has no entry points");
  }
  MFRT_RETURN_IF_ERROR(checkKernelSignatures(root));
  if (root.derived()) {
    for (const fb::TensorType *type : *root.derived()) {
      MFRT_RETURN_IF_ERROR(checkTensorType(type, "a derived value"));
    }
  }
  // The initializer's program is the last.
  std::vector<bool> computed(sizeOf(root.derived()), false);
  for (const fb::Entry *entry : entriesAndInitializer(root)) {
    bool initializer = entry == root.initializer();
    MFRT_RETURN_IF_ERROR(checkEntry(root, *entry));
    programs.emplace_back();
    if (!entry->host() && initializer) {
      return Status::error("the initializer has no host program");
    }
    if (entry->host()) {
      StatusOr<HostProgram> program =
          HostProgram::build(root, *entry, initializer);
      if (!program) {
        return program.status();
      }
      programs.back() = std::make_shared<const HostProgram>(program.take());
      for (uint32_t slot : programs.back()->slots) {
        computed[slot] = computed[slot] || initializer;
      }
    }
  }
  // What an entry reads as derived, the initializer computes.
  for (size_t i = 0; i < root.entries()->size(); ++i) {
    if (programs[i]) {
      for (uint32_t slot : programs[i]->slots) {
        if (!computed[slot]) {
          return Status::error("entry '" +
                               root.entries()->Get(i)->name()->str() +
                               "' reads derived slot " + std::to_string(slot) +
                               ", which no initializer computes");
        }
      }
    }
  }
  if (root.kernel_library() && root.kernel_library()->size() != 0 &&
      (!root.kernel_target() || root.kernel_target()->triple()->size() == 0 ||
       root.kernel_target()->cpu()->size() == 0)) {
    return Status::error("the kernel library does not say what CPU it was "
                         "compiled for");
  }
  MFRT_RETURN_IF_ERROR(checkPipeline(root));
  return checkEntryContracts(root);
}

} // namespace

int64_t mfrt::prefillTokensOf(const fb::Entry &entry) {
  if ((entry.role() != fb::EntryRole::Prefill &&
       entry.role() != fb::EntryRole::PrefillRow) ||
      !entry.inputs() || entry.inputs()->size() == 0 || !entry.values() ||
      entry.inputs()->Get(0) >= entry.values()->size()) {
    return -1;
  }
  const fb::TensorType &ids = *entry.values()->Get(entry.inputs()->Get(0));
  return ids.shape() && ids.shape()->size() == 2 ? ids.shape()->Get(1) : -1;
}

std::string mfrt::entryNameOf(const fb::Entry &entry, int64_t seq,
                              int64_t chunks) {
  int64_t tokens = prefillTokensOf(entry);
  std::string stage =
      entry.stage() >= 0
          ? mfshapes::stageEntryPrefix(entry.stage(), entry.chunk(), chunks)
          : std::string();
  switch (entry.role()) {
  case fb::EntryRole::Prefill:
  case fb::EntryRole::PrefillRow: {
    std::string base =
        entry.role() == fb::EntryRole::Prefill ? "prefill" : "prefill_row";
    return tokens == seq                ? base
           : tokens > 0 && tokens < seq ? base + "_" + std::to_string(tokens)
                                        : std::string();
  }
  case fb::EntryRole::Decode:
    return "decode";
  case fb::EntryRole::Logits:
    return "logits";
  case fb::EntryRole::ForwardLoss:
    return "forward_loss";
  case fb::EntryRole::ForwardBackward:
    return "forward_backward";
  case fb::EntryRole::AccumulateGradients:
    return "accumulate_gradients";
  case fb::EntryRole::TrainStep:
    return "train_step";
  case fb::EntryRole::StageForward:
    return stage.empty() ? std::string() : stage + "forward";
  case fb::EntryRole::StageForwardBackward:
    return stage.empty() ? std::string() : stage + "forward_backward";
  case fb::EntryRole::StageAccumulateGradients:
    return stage.empty() ? std::string() : stage + "accumulate_gradients";
  case fb::EntryRole::StageInputGradients:
    return stage.empty() ? std::string() : stage + "input_gradients";
  case fb::EntryRole::StageWeightGradients:
    return stage.empty() ? std::string() : stage + "weight_gradients";
  case fb::EntryRole::StageTrainStep:
    // One update per stage, over all its chunks.
    return entry.stage() < 0
               ? std::string()
               : mfshapes::stageEntryPrefix(entry.stage(), 0, 1) + "train_step";
  case fb::EntryRole::None:
    break;
  }
  return std::string();
}

std::vector<const fb::Entry *>
mfrt::entriesAndInitializer(const fb::Executable &root) {
  std::vector<const fb::Entry *> entries;
  if (root.entries()) {
    entries.assign(root.entries()->begin(), root.entries()->end());
  }
  if (root.initializer()) {
    entries.push_back(root.initializer());
  }
  return entries;
}

DType Executable::dtypeOf(const fb::TensorType &type) {
  return static_cast<DType>(type.dtype());
}

bool Executable::hasType(const fb::TensorType &type, DType dtype,
                         const Shape &shape) {
  size_t rank = type.shape() ? type.shape()->size() : 0;
  if (dtypeOf(type) != dtype || shape.size() != rank) {
    return false;
  }
  for (size_t d = 0; d < rank; ++d) {       // no Shape built: decode checks its
    if (type.shape()->Get(d) != shape[d]) { // inputs every token
      return false;
    }
  }
  return true;
}

Shape Executable::shapeOf(const fb::TensorType &type) {
  Shape shape;
  if (type.shape()) {
    shape.assign(type.shape()->begin(), type.shape()->end());
  }
  return shape;
}

uint64_t Executable::checksum() const { return root_->content_crc32(); }

StatusOr<Executable> Executable::fromBytes(std::vector<uint8_t> bytes,
                                           const std::string &name) {
  // A file that fails verification is corrupt, or from another mfc: data
  // loss unless the check said otherwise.
  StatusOr<Executable> executable = verify(std::move(bytes), name);
  if (!executable) {
    return executable.status().withDefaultCode(StatusCode::DataLoss);
  }
  return executable;
}

StatusOr<Executable> Executable::verify(std::vector<uint8_t> bytes,
                                        const std::string &name) {
  if (bytes.size() < 8 || !fb::ExecutableBufferHasIdentifier(bytes.data())) {
    return Status::error(StatusCode::InvalidArgument,
                         "'" + name +
                             "' is not an mfc executable (no 'MFEX' "
                             "file identifier); compile one with 'mfc compile "
                             "model.yaml -o model.bin'");
  }
  flatbuffers::Verifier verifier(bytes.data(), bytes.size());
  if (!fb::VerifyExecutableBuffer(verifier)) {
    return Status::error("'" + name +
                         "' is corrupt or truncated (the "
                         "flatbuffer verifier rejects it); recompile it");
  }
  const fb::Executable &root = *fb::GetExecutable(bytes.data());
  if (Status status = checkAlignment(root); !status) {
    return status.withContext("'" + name + "' is corrupt");
  }
  if (Status status = checkFormatVersion(root); !status) {
    return status.withContext("'" + name + "' is invalid");
  }
  const uint8_t *checksum = contentChecksumField(root);
  if (!checksum) {
    return Status::error("'" + name +
                         "' has no content checksum; recompile it");
  }
  uint32_t stored = flatbuffers::ReadScalar<uint32_t>(checksum);
  if (contentChecksum(bytes.data(), bytes.size(), checksum) != stored) {
    return Status::error(
        "'" + name +
        "' is corrupt: its bytes do not match "
        "their checksum (CRC-32); recompile it or copy it again");
  }
  Executable executable;
  executable.bytes_ = std::move(bytes);
  executable.root_ = fb::GetExecutable(executable.bytes_.data());
  Status status = checkSemantics(*executable.root_, executable.hostPrograms_);
  if (!status) {
    return status.withContext("'" + name + "' is invalid");
  }
  return executable;
}

const HostProgram *Executable::hostProgram(const fb::Entry &entry) const {
  for (uint32_t i = 0; i < root_->entries()->size(); ++i) {
    if (root_->entries()->Get(i) == &entry) {
      return hostPrograms_[i].get();
    }
  }
  return &entry == root_->initializer() ? hostPrograms_.back().get() : nullptr;
}

StatusOr<Executable> Executable::load(const std::string &path) {
  StatusOr<std::vector<uint8_t>> bytes =
      readRegularFile(path, "executable", kMaxExecutableBytes);
  if (!bytes) {
    return bytes.status();
  }
  return fromBytes(bytes.take(), path);
}

const fb::Entry *Executable::entry(const std::string &name) const {
  for (const fb::Entry *entry : *root_->entries()) {
    if (entry->name()->string_view() == name) { // no copy per lookup
      return entry;
    }
  }
  return nullptr;
}

std::vector<std::string> Executable::entryNames() const {
  std::vector<std::string> names;
  for (const fb::Entry *entry : *root_->entries()) {
    names.push_back(entry->name()->str());
  }
  return names;
}

const fb::Pipeline *Executable::pipeline() const {
  const fb::Training *training = model().training();
  return training ? training->pipeline() : nullptr;
}

int64_t Executable::pipelineStages() const {
  const fb::Pipeline *schedule = pipeline();
  return schedule ? static_cast<int64_t>(schedule->stages()->size()) : 1;
}

int64_t Executable::pipelineChunks() const {
  const fb::Pipeline *schedule = pipeline();
  return schedule ? schedule->chunks() : 1;
}

mfshapes::PipelinePlace Executable::pipelinePlaceOf(int64_t part) const {
  const fb::Pipeline *schedule = pipeline();
  return mfshapes::pipelinePlaceOf(
      part, pipelineStages(),
      schedule && mfshapes::isVShapedScheduler(schedule->scheduler()->str()));
}

int64_t Executable::pipelinePartOf(int64_t stage, int64_t chunk) const {
  const fb::Pipeline *schedule = pipeline();
  return mfshapes::pipelinePartOf(
      stage, chunk, pipelineStages(),
      schedule && mfshapes::isVShapedScheduler(schedule->scheduler()->str()));
}

std::string Executable::pipelinePrefixOf(int64_t part) const {
  mfshapes::PipelinePlace place = pipelinePlaceOf(part);
  return mfshapes::stageEntryPrefix(place.stage, place.chunk, pipelineChunks());
}

std::string Executable::pipelineBackwardOf(int64_t part) const {
  std::string prefix = pipelinePrefixOf(part);
  return entry(prefix + "input_gradients") ? prefix + "input_gradients"
                                           : prefix + "accumulate_gradients";
}

bool Executable::holds(const fb::Parameter &parameter, int64_t stage) {
  if (!parameter.stages() || parameter.stages()->size() == 0) {
    return true;
  }
  for (int16_t held : *parameter.stages()) {
    if (held == stage) {
      return true;
    }
  }
  return false;
}
