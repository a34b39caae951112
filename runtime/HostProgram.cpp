//===- HostProgram.cpp - an entry as Graph Mode runs it -------------------===//
//
// 1. Steps: dispatches and the ops outside them, in program order.
// 2. Storage: each value is in the arena (its offset), a view of another
//    value's storage (reshape, KV-cache write), or outside (inputs,
//    parameters and their assignments, constants, values the weights alone
//    determine), or in a parameter when a kernel computes it for an
//    in-place assignment. Every value a step writes must have storage.
// 3. Lifetimes per arena buffer, from the step that writes it to the last
//    step that reads it or any view of it (entry outputs: to the end); no
//    two buffers alive at the same step may overlap in the arena.
//
//===----------------------------------------------------------------------===//

#include "runtime/HostProgram.h"

#include <algorithm>
#include <map>

using namespace mfrt;

namespace {

int64_t valueBytes(const fb::TensorType &type) {
  return *checkedElementCount(Executable::shapeOf(type)) *
         dtypeSize(Executable::dtypeOf(type));
}

} // namespace

StatusOr<HostProgram> HostProgram::build(const fb::Entry &entry) {
  std::string name = entry.name()->str();
  auto bad = [&](const std::string &what) {
    return Status::error("the memory plan of '" + name + "' " + what +
                         "; recompile the model");
  };
  size_t valueCount = entry.values()->size();
  if (!entry.arena_offsets()) {
    return Status::error("'" + name + "' has no memory plan, so it cannot run "
                         "in graph mode; run it with --mode pynative");
  }
  if (entry.arena_offsets()->size() != valueCount) {
    return bad("has " + std::to_string(entry.arena_offsets()->size()) +
               " offsets for " + std::to_string(valueCount) + " values");
  }
  HostProgram program;
  program.arenaBytes = entry.arena_bytes();

  // Steps, and the step that defines each value.
  constexpr int64_t kOutside = -1;
  std::vector<int64_t> definedAt(valueCount, kOutside);
  std::vector<int64_t> root(valueCount); // whose storage a value uses
  for (size_t id = 0; id < valueCount; ++id) {
    root[id] = static_cast<int64_t>(id);
  }
  std::vector<bool> inArena(valueCount, false);
  std::vector<bool> isOutput(valueCount, false);
  for (uint32_t id : *entry.outputs()) {
    isOutput[id] = true;
  }
  size_t opCount = entry.ops() ? entry.ops()->size() : 0;
  // In-place assignments: the parameter each such value is computed into,
  // and (below) the step that computes it.
  constexpr int64_t kNone = -1;
  std::vector<int64_t> computedInto(valueCount, kNone);
  for (size_t index = 0; index < opCount; ++index) {
    const fb::Op &op = *entry.ops()->Get(index);
    if (op.kind() == fb::OpKind::Assign && op.ints()->Get(1) != 0) {
      computedInto[op.operands()->Get(0)] = op.ints()->Get(0);
    }
  }
  std::map<int64_t, int64_t> updatedAt; // parameter -> step computing it
  std::vector<int64_t> viewOf(valueCount, kNone); // parameter a value reads
  // The op in a dispatch's range that defines `id`.
  auto writerIn = [&](const fb::Dispatch &dispatch,
                      uint32_t id) -> const fb::Op * {
    for (uint32_t index = dispatch.first_op();
         index < dispatch.first_op() + dispatch.op_count(); ++index) {
      const fb::Op *op = entry.ops()->Get(index);
      if (op->results() && op->results()->size() == 1 &&
          op->results()->Get(0) == id) {
        return op;
      }
    }
    return nullptr;
  };
  // Which values the weights and constants alone determine (`fixed`): in
  // an entry that assigns no parameter, a step computing only from such
  // values is derived, unless one of its results (or a view of it) is an
  // output or a KV cache: the caller may write those.
  bool &assigns = program.assignsParameters;
  std::vector<bool> fixed(valueCount, false), excluded = isOutput;
  for (size_t index = 0; index < opCount; ++index) {
    const fb::Op &op = *entry.ops()->Get(index);
    assigns = assigns || op.kind() == fb::OpKind::Assign;
    if (op.kind() == fb::OpKind::KvCacheWrite) {
      excluded[op.operands()->Get(0)] = true;
    }
  }
  for (size_t index = opCount; index-- > 0;) {
    const fb::Op &op = *entry.ops()->Get(index);
    if (op.kind() == fb::OpKind::Reshape && excluded[op.results()->Get(0)]) {
      excluded[op.operands()->Get(0)] = true;
    }
  }
  auto derivable = [&](const flatbuffers::Vector<uint32_t> *reads,
                       const flatbuffers::Vector<uint32_t> &writes) {
    return !assigns &&
           (!reads || std::all_of(reads->begin(), reads->end(),
                                  [&](uint32_t id) { return fixed[id]; })) &&
           std::none_of(writes.begin(), writes.end(),
                        [&](uint32_t id) { return excluded[id]; });
  };
  size_t nextDispatch = 0;
  auto storageOf = [&](uint32_t id, const std::string &what, int64_t step,
                       bool kernelOutput, bool derived) -> Status {
    int64_t offset = entry.arena_offsets()->Get(id);
    const fb::TensorType &type = *entry.values()->Get(id);
    int64_t bytes = valueBytes(type);
    if (derived) {
      fixed[id] = true;
      if (offset == kDerivedFromWeights) {
        return Status::ok();
      }
    } else if (offset == kDerivedFromWeights) {
      return bad("keeps " + what + " (value " + std::to_string(id) +
                 ") outside the arena as derived from the weights alone, "
                 "which it is not");
    }
    if (computedInto[id] != kNone) {
      int64_t parameter = computedInto[id];
      if (offset != -1 || isOutput[id] || !kernelOutput ||
          updatedAt.count(parameter)) {
        return bad("assigns value " + std::to_string(id) +
                   " in place, which only a kernel's own output outside the "
                   "arena can be, once per parameter");
      }
      updatedAt[parameter] = step;
      program.inPlace.emplace_back(id, static_cast<uint32_t>(parameter));
      return Status::ok();
    }
    if (offset == -1 && isOutput[id]) {
      if (std::find(program.outputBuffers.begin(), program.outputBuffers.end(),
                    id) == program.outputBuffers.end()) {
        program.outputBuffers.push_back(id);
      }
      return Status::ok();
    }
    if (offset < 0 || offset % dtypeSize(Executable::dtypeOf(type)) != 0 ||
        static_cast<uint64_t>(offset) + bytes > program.arenaBytes) {
      return bad("places " + what + " (value " + std::to_string(id) +
                 ", " + std::to_string(bytes) + " bytes) at offset " +
                 std::to_string(offset) + " of an arena of " +
                 std::to_string(program.arenaBytes) + " bytes");
    }
    inArena[id] = true;
    return Status::ok();
  };
  for (size_t index = 0; index < opCount;) {
    int64_t step = static_cast<int64_t>(program.steps.size());
    const fb::Dispatch *dispatch =
        entry.dispatches() && nextDispatch < entry.dispatches()->size() &&
                entry.dispatches()->Get(nextDispatch)->first_op() == index
            ? entry.dispatches()->Get(nextDispatch)
            : nullptr;
    if (dispatch) {
      ++nextDispatch;
      if (dispatch->tiles() == 0) {
        return bad("has a kernel dispatch with no tiles");
      }
      HostStep host{dispatch, static_cast<uint32_t>(index), {}};
      // (Not a kernel that updates a KV cache: its cache is no fixed value.)
      bool derived = derivable(dispatch->inputs(), *dispatch->outputs());
      for (uint32_t id : *dispatch->outputs()) {
        const fb::Op *write = writerIn(*dispatch, id);
        derived = derived && !(write && write->kind() == fb::OpKind::KvCacheWrite);
      }
      for (uint32_t id : *dispatch->outputs()) {
        definedAt[id] = step;
        // A KV-cache write in the kernel updates its cache input in place.
        const fb::Op *write = writerIn(*dispatch, id);
        if (write && write->kind() == fb::OpKind::KvCacheWrite) {
          uint32_t cache = write->operands()->Get(0);
          if (!dispatch->inputs() ||
              std::find(dispatch->inputs()->begin(), dispatch->inputs()->end(),
                        cache) == dispatch->inputs()->end() ||
              computedInto[id] != kNone) {
            return bad("has a kernel update a KV cache it does not take");
          }
          root[id] = root[cache];
          host.cacheViews.emplace_back(id, cache);
          continue;
        }
        MFRT_RETURN_IF_ERROR(storageOf(id, "a kernel's output", step,
                                       /*kernelOutput=*/true, derived));
      }
      program.steps.push_back(std::move(host));
      program.derivedSteps.push_back(derived);
      index += dispatch->op_count();
      continue;
    }
    const fb::Op &op = *entry.ops()->Get(index);
    uint32_t result = op.results()->Get(0);
    bool derived = false;
    switch (op.kind()) {
    case fb::OpKind::Param:
      viewOf[result] = op.ints()->Get(0);
      fixed[result] = true;
      break;
    case fb::OpKind::Constant:
      fixed[result] = true;
      break;
    case fb::OpKind::Assign: // into the parameter's own storage
      break;
    case fb::OpKind::Reshape:
      viewOf[result] = viewOf[op.operands()->Get(0)];
      root[result] = root[op.operands()->Get(0)];
      fixed[result] = fixed[op.operands()->Get(0)];
      break;
    case fb::OpKind::KvCacheWrite:
      root[result] = root[op.operands()->Get(0)];
      break;
    default:
      derived = derivable(op.operands(), *op.results());
      MFRT_RETURN_IF_ERROR(storageOf(result,
                                     std::string("the result of ") +
                                         fb::EnumNameOpKind(op.kind()),
                                     step, /*kernelOutput=*/false, derived));
    }
    definedAt[result] = step;
    program.steps.push_back({nullptr, static_cast<uint32_t>(index), {}});
    program.derivedSteps.push_back(derived);
    ++index;
  }

  // Lifetimes of arena buffers, in steps, through views.
  int64_t stepCount = static_cast<int64_t>(program.steps.size());
  std::vector<int64_t> lastUse(valueCount, kOutside);  // per buffer (root)
  std::vector<int64_t> lastRead(valueCount, kOutside); // per value
  std::vector<bool> isInput(valueCount, false);
  for (uint32_t id : *entry.inputs()) {
    isInput[id] = true;
  }
  // A value a step reads must be an input or the result of an earlier
  // step (not a value that only lives inside a kernel).
  auto use = [&](uint32_t id, int64_t step) -> Status {
    if (!isInput[id] && (definedAt[id] == kOutside || definedAt[id] >= step)) {
      return bad("reads value " + std::to_string(id) +
                 " at a step where graph mode has not computed it");
    }
    auto updated = viewOf[id] == kNone ? updatedAt.end() : updatedAt.find(viewOf[id]);
    if (updated != updatedAt.end() && step > updated->second) {
      return bad("reads a parameter's old value after a kernel updated it in "
                 "place");
    }
    lastUse[root[id]] = std::max(lastUse[root[id]], step);
    lastRead[id] = std::max(lastRead[id], step);
    return Status::ok();
  };
  for (int64_t step = 0; step < stepCount; ++step) {
    const HostStep &host = program.steps[step];
    if (host.dispatch) {
      if (host.dispatch->inputs()) {
        for (uint32_t id : *host.dispatch->inputs()) {
          MFRT_RETURN_IF_ERROR(use(id, step));
        }
      }
      continue;
    }
    const fb::Op &op = *entry.ops()->Get(host.firstOp);
    if (op.operands()) {
      for (uint32_t id : *op.operands()) {
        MFRT_RETURN_IF_ERROR(use(id, step));
      }
    }
  }
  for (uint32_t id : *entry.outputs()) {
    MFRT_RETURN_IF_ERROR(use(id, stepCount));
  }
  // An in-place KV-cache write overwrites its operand: nothing may read
  // the old cache afterwards.
  for (int64_t step = 0; step < stepCount; ++step) {
    const HostStep &host = program.steps[step];
    bool readLater =
        !host.dispatch &&
        entry.ops()->Get(host.firstOp)->kind() == fb::OpKind::KvCacheWrite &&
        lastRead[entry.ops()->Get(host.firstOp)->operands()->Get(0)] > step;
    for (auto [id, cache] : host.cacheViews) {
      readLater = readLater || lastRead[cache] > step;
    }
    if (readLater) {
      return bad("updates a KV cache in place that is read later");
    }
  }

  struct Buffer {
    int64_t first, last, begin, end; // steps [first, last], bytes [begin, end)
    uint32_t id;
  };
  std::vector<Buffer> buffers;
  for (uint32_t id = 0; id < valueCount; ++id) {
    if (inArena[id]) {
      int64_t offset = entry.arena_offsets()->Get(id);
      buffers.push_back({definedAt[id], std::max(definedAt[id], lastUse[id]),
                         offset,
                         offset + valueBytes(*entry.values()->Get(id)), id});
    }
  }
  std::sort(buffers.begin(), buffers.end(),
            [](const Buffer &a, const Buffer &b) { return a.first < b.first; });
  std::vector<const Buffer *> live;
  for (const Buffer &buffer : buffers) {
    live.erase(std::remove_if(live.begin(), live.end(),
                              [&](const Buffer *other) {
                                return other->last < buffer.first;
                              }),
               live.end());
    for (const Buffer *other : live) {
      if (buffer.begin < other->end && other->begin < buffer.end &&
          buffer.begin != buffer.end && other->begin != other->end) {
        return bad("gives values " + std::to_string(other->id) + " and " +
                   std::to_string(buffer.id) +
                   " overlapping bytes while both are alive");
      }
    }
    live.push_back(&buffer);
  }
  return program;
}
