//===- GraphExecutor.cpp - Graph Mode: kernels out of one arena -----------===//

#include "runtime/GraphExecutor.h"

#include "runtime/KernelServices.h"
#include "runtime/Kernels.h"
#include "runtime/PanelGemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

// OpenBLAS (pthread build): stops its server threads. Not in cblas.h, so
// weak: a BLAS without it keeps its threads.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

using namespace mfrt;

GraphExecutor::GraphExecutor(const Executable &executable,
                             Weights &weights, Allocator &allocator,
                             const KernelLibrary &kernels, ThreadPool &pool)
    : Executor(executable, weights, allocator), kernels_(kernels), pool_(pool) {
  // Kernel tiles run on the pool; each BLAS call inside one is serial. Its
  // idle server threads spin (sched_yield) for ~0.1 s after start-up and
  // would compete with the pool's threads for the cores: stop them. With
  // one thread set, OpenBLAS never starts them again.
  openblas_set_num_threads(1);
  if (blas_thread_shutdown_) {
    blas_thread_shutdown_();
  }
}

uint64_t GraphExecutor::arenaBytes() const {
  uint64_t total = 0;
  for (const auto &[name, prepared] : prepared_) {
    total += prepared->program.arenaBytes;
  }
  return total;
}

uint64_t GraphExecutor::derivedBytes() const {
  uint64_t total = 0;
  for (const auto &[key, value] : derived_) {
    total += value.parameterItself ? 0 : value.tensor.byteSize();
  }
  return total;
}

namespace {

/// Per parameter of `root`: whether some entry reads it as stored, that is
/// otherwise than as a kernel's panel input (every parameter when an
/// entry assigns any: what is packed must stay valid).
std::vector<bool> parametersReadAsStored(const fb::Executable &root) {
  size_t count = root.parameters() ? root.parameters()->size() : 0;
  std::vector<bool> stored(count, false);
  for (const fb::Entry *entry : *root.entries()) {
    size_t opCount = entry->ops() ? entry->ops()->size() : 0;
    std::vector<int64_t> parameterOf(entry->values()->size(), -1);
    for (size_t i = 0; i < opCount; ++i) {
      const fb::Op &op = *entry->ops()->Get(i);
      if (op.kind() == fb::OpKind::Assign) {
        return std::vector<bool>(count, true);
      }
      if (op.kind() == fb::OpKind::Param) {
        parameterOf[op.results()->Get(0)] = op.ints()->Get(0);
      } else if (op.kind() == fb::OpKind::Reshape) {
        parameterOf[op.results()->Get(0)] = parameterOf[op.operands()->Get(0)];
      }
    }
    auto read = [&](uint32_t id) {
      if (parameterOf[id] >= 0) {
        stored[parameterOf[id]] = true;
      }
    };
    size_t dispatchCount = entry->dispatches() ? entry->dispatches()->size() : 0;
    size_t next = 0;
    for (size_t i = 0; i < opCount; ++i) {
      if (next < dispatchCount && entry->dispatches()->Get(next)->first_op() == i) {
        const fb::Dispatch &dispatch = *entry->dispatches()->Get(next++);
        std::vector<bool> panels(dispatch.inputs() ? dispatch.inputs()->size() : 0);
        if (dispatch.panel_inputs()) {
          for (uint32_t position : *dispatch.panel_inputs()) {
            panels[position] = true;
          }
        }
        for (size_t position = 0; position < panels.size(); ++position) {
          if (!panels[position]) {
            read(dispatch.inputs()->Get(position));
          }
        }
        i += dispatch.op_count() - 1; // the kernel reads only its inputs
        continue;
      }
      const fb::Op &op = *entry->ops()->Get(i);
      if (op.kind() != fb::OpKind::Param && op.kind() != fb::OpKind::Reshape) {
        for (uint32_t id : *op.operands()) {
          read(id);
        }
      }
    }
    for (uint32_t id : *entry->outputs()) {
      read(id);
    }
  }
  return stored;
}

} // namespace

void GraphExecutor::keepParametersAsPanels() {
  readAsStored_ = parametersReadAsStored(executable_.root());
}

StatusOr<GraphExecutor::Derived *>
GraphExecutor::panelsOf(Prepared &prepared, uint32_t source,
                        const std::string &key, int64_t parameter) {
  auto [it, inserted] = derived_.try_emplace("panels of " + key);
  Derived &panels = it->second;
  if (!inserted) { // another entry's: this one packs it again if it must
    bool listed = panels.parameterItself ||
                  std::any_of(prepared.panelSources.begin(),
                              prepared.panelSources.end(),
                              [&](const auto &known) { return known.first == &panels; });
    if (!listed) {
      prepared.panelSources.emplace_back(&panels, source);
    }
    return &panels;
  }
  const Tensor &weight = prepared.values[source];
  int64_t n = weight.dim(0), k = weight.dim(1);
  DType dtype = weight.dtype();
  if (parameter >= 0 && static_cast<size_t>(parameter) < readAsStored_.size() &&
      !readAsStored_[parameter] &&
      weights_[parameter].shape() == weight.shape()) {
    // Nothing reads it as stored: it becomes its panels (the same size).
    Tensor &stored = weights_.mutableTensor(parameter);
    if (!weights_.storedAsPanels(parameter)) {
      pool_.parallelFor(panelCount(n), [&](int64_t begin, int64_t end) {
        packPanelsInPlace(dtype, stored.data(), n, k, begin, end);
      });
      weights_.noteStoredAsPanels(parameter);
    }
    panels.tensor = stored.reshaped({n * k});
    panels.parameterItself = true;
    panels.computedFor = weights_.version();
    return &panels;
  }
  StatusOr<Tensor> own = allocator_.allocate(dtype, {n * k});
  if (!own) {
    derived_.erase(it);
    return own.status();
  }
  panels.tensor = own.take(); // packed by run() from the source
  prepared.panelSources.emplace_back(&panels, source);
  return &panels;
}

StatusOr<GraphExecutor::Prepared *>
GraphExecutor::prepare(const fb::Entry &entry) {
  std::string name = entry.name()->str();
  auto found = prepared_.find(name);
  if (found != prepared_.end()) {
    return found->second.get();
  }
  StatusOr<HostProgram> program = HostProgram::build(entry);
  if (!program) {
    return program.status();
  }
  auto prepared = std::make_unique<Prepared>();
  prepared->program = program.take();
  size_t arenaBytes = prepared->program.arenaBytes; // allocatePages: page-aligned
  void *arena = allocatePages(arenaBytes);
  if (!arena) {
    return Status::error("cannot allocate the " + std::to_string(arenaBytes) +
                         "-byte arena of '" + name + "'");
  }
  prepared->arena = std::shared_ptr<void>(
      arena, [arenaBytes](void *block) { freePages(block, arenaBytes); });

  size_t valueCount = entry.values()->size();
  std::vector<Tensor> &values = prepared->values;
  values.resize(valueCount);
  prepared->bound.assign(valueCount, false);
  auto bind = [&](uint32_t id, Tensor tensor) {
    values[id] = std::move(tensor);
    prepared->bound[id] = true;
  };
  for (uint32_t id = 0; id < valueCount; ++id) {
    int64_t offset = entry.arena_offsets()->Get(id);
    if (offset >= 0) {
      const fb::TensorType &type = *entry.values()->Get(id);
      bind(id, Tensor(Executable::dtypeOf(type), Executable::shapeOf(type),
                      std::shared_ptr<void>(prepared->arena,
                                            static_cast<char *>(arena) + offset)));
    }
  }
  for (auto [id, parameter] : prepared->program.inPlace) {
    bind(id, weights_.mutableTensor(parameter));
  }
  // Values the weights alone determine (HostProgram::derivedSteps: a
  // mixed-precision model's weights cast to its compute type, position
  // tables) are computed once per change of the weights, not
  // every run, into memory shared by the entries that compute the same
  // (every prefill length casts the same weights). A value's key says how
  // it follows from the weights (empty: it does not).
  std::vector<std::string> keyOf(valueCount);
  auto keysOf = [&](const flatbuffers::Vector<uint32_t> *ids) {
    std::string keys;
    for (uint32_t i = 0; ids && i < ids->size(); ++i) {
      keys += "(" + keyOf[ids->Get(i)] + ")";
    }
    return keys;
  };
  auto typeKey = [&](uint32_t id) {
    const fb::TensorType &type = *entry.values()->Get(id);
    return std::string(fb::EnumNameDType(type.dtype())) +
           formatShape(Executable::shapeOf(type));
  };
  std::vector<int64_t> parameterOf(valueCount, -1); // views of parameters
  std::vector<Derived *> derivedOutputs;
  auto bindDerived = [&](uint32_t id, std::string key) -> Status {
    auto [it, inserted] = derived_.try_emplace(key);
    if (inserted) {
      const fb::TensorType &type = *entry.values()->Get(id);
      StatusOr<Tensor> own = allocator_.allocate(Executable::dtypeOf(type),
                                                 Executable::shapeOf(type));
      if (!own) {
        derived_.erase(it);
        return own.status();
      }
      it->second.tensor = own.take();
    }
    bind(id, it->second.tensor);
    keyOf[id] = std::move(key);
    derivedOutputs.push_back(&it->second);
    return Status::ok();
  };
  prepared->panelInputs.resize(prepared->program.steps.size());
  for (size_t index = 0; index < prepared->program.steps.size(); ++index) {
    const HostStep &step = prepared->program.steps[index];
    bool derived = prepared->program.derivedSteps[index];
    void *kernel = nullptr;
    derivedOutputs.clear();
    if (step.dispatch) {
      const std::string &kernelName =
          executable_.root().kernels()->Get(step.dispatch->kernel())->str();
      kernel = kernels_.symbol(kernelName);
      if (!kernel) {
        return Status::error("kernel '" + kernelName + "' of '" + name +
                             "' is not in the loaded kernel library");
      }
      std::vector<std::pair<uint32_t, Derived *>> panels;
      const auto *panelInputs = step.dispatch->panel_inputs();
      for (uint32_t i = 0; panelInputs && i < panelInputs->size(); ++i) {
        uint32_t source = step.dispatch->inputs()->Get(panelInputs->Get(i));
        StatusOr<Derived *> packed = panelsOf(*prepared, source, keyOf[source],
                                              parameterOf[source]);
        if (!packed) {
          return packed.status();
        }
        panels.emplace_back(panelInputs->Get(i), *packed);
      }
      prepared->panelInputs[index] = std::move(panels);
      const auto *outputs = step.dispatch->outputs();
      for (uint32_t i = 0; derived && i < outputs->size(); ++i) {
        MFRT_RETURN_IF_ERROR(bindDerived(
            outputs->Get(i), kernelName + keysOf(step.dispatch->inputs()) +
                                 "#" + std::to_string(i) +
                                 typeKey(outputs->Get(i))));
      }
    } else {
      const fb::Op &op = *entry.ops()->Get(step.firstOp);
      uint32_t result = op.results()->Get(0);
      if (op.kind() == fb::OpKind::Param) {
        bind(result, weights_[op.ints()->Get(0)]);
        keyOf[result] = "param " + std::to_string(op.ints()->Get(0));
        parameterOf[result] = op.ints()->Get(0);
      } else if (op.kind() == fb::OpKind::Assign) {
        bind(result, weights_.mutableTensor(op.ints()->Get(0)));
      } else if (op.kind() == fb::OpKind::Reshape &&
                 prepared->bound[op.operands()->Get(0)]) {
        const fb::TensorType &type = *entry.values()->Get(result);
        bind(result,
             values[op.operands()->Get(0)].reshaped(Executable::shapeOf(type)));
        if (!keyOf[op.operands()->Get(0)].empty()) {
          keyOf[result] = keyOf[op.operands()->Get(0)] + " as " + typeKey(result);
        }
        parameterOf[result] = parameterOf[op.operands()->Get(0)];
      } else if (op.kind() == fb::OpKind::Constant) {
        const fb::TensorType &type = *entry.values()->Get(result);
        StatusOr<Tensor> constant = allocator_.allocate(
            Executable::dtypeOf(type), Executable::shapeOf(type));
        if (!constant) {
          return constant.status();
        }
        MFRT_RETURN_IF_ERROR(runKernel(op, {}, *constant));
        bind(result, constant.take());
        keyOf[result] = "constant " + std::to_string(result) + " of " + name;
      } else if (derived) {
        std::string attributes;
        for (uint32_t i = 0; op.ints() && i < op.ints()->size(); ++i) {
          attributes += " " + std::to_string(op.ints()->Get(i));
        }
        for (uint32_t i = 0; op.floats() && i < op.floats()->size(); ++i) {
          char exact[32]; // every bit of the double
          std::snprintf(exact, sizeof exact, " %a", op.floats()->Get(i));
          attributes += exact;
        }
        MFRT_RETURN_IF_ERROR(bindDerived(
            result, std::string(fb::EnumNameOpKind(op.kind())) + attributes +
                        keysOf(op.operands()) + typeKey(result)));
      }
    }
    KernelCall &call = prepared->calls.emplace_back();
    call.entry = kernel;
    if (step.dispatch) {
      call.where = "kernel '" +
                   executable_.root().kernels()->Get(step.dispatch->kernel())->str() +
                   "' of '" + name + "'";
    }
    if (derived) {
      prepared->derivedSteps.emplace_back(index, derivedOutputs);
    }
  }
  for (size_t index = 0; index < prepared->program.steps.size(); ++index) {
    const HostStep &step = prepared->program.steps[index];
    if (step.dispatch ||
        !boundWhenPrepared(*entry.ops()->Get(step.firstOp), *prepared)) {
      prepared->workSteps.push_back(static_cast<uint32_t>(index));
    }
  }
  Prepared *pointer = prepared.get();
  prepared_[name] = std::move(prepared);
  return pointer;
}

namespace {

using P = void *;

/// Calls `entry` as void(int64_t, int64_t, P x N) with N = sizeof...(I).
template <size_t... I>
void callWith(void *entry, int64_t b, int64_t e, const std::vector<P> &a,
              std::index_sequence<I...>) {
  using Kernel = void (*)(int64_t, int64_t, decltype(I, P())...);
  reinterpret_cast<Kernel>(entry)(b, e, a[I]...);
}

template <size_t... N>
void callKernelWith(void *entry, int64_t b, int64_t e, const std::vector<P> &a,
                    std::index_sequence<N...>) {
  // One case per buffer count 1 .. kMaxKernelArguments.
  ((a.size() == N + 1 ? callWith(entry, b, e, a, std::make_index_sequence<N + 1>())
                      : void()),
   ...);
}

/// Calls a kernel: void mfk_N(int64_t tileBegin, int64_t tileEnd, T *...),
/// with 1 to kMaxKernelArguments buffers (the loader checked the count).
void callKernel(void *entry, int64_t b, int64_t e, const std::vector<P> &a) {
  callKernelWith(entry, b, e, a, std::make_index_sequence<kMaxKernelArguments>());
}

} // namespace

bool GraphExecutor::boundWhenPrepared(const fb::Op &op,
                                      const Prepared &prepared) {
  return op.kind() == fb::OpKind::Param || op.kind() == fb::OpKind::Constant ||
         (op.kind() == fb::OpKind::Reshape &&
          prepared.bound[op.results()->Get(0)]);
}

void GraphExecutor::runKernelTiles(const void *context, int64_t begin,
                                   int64_t end) {
  const auto &call = *static_cast<const KernelCall *>(context);
  callKernel(call.entry, begin, end, call.arguments);
  if (kernelServiceFailed()) {
    attributeKernelServiceError(call.where);
  }
}

Status GraphExecutor::finishKernels() {
  pool_.finish();
  if (std::string why = takeKernelServiceError(); !why.empty()) {
    return Status::error(why);
  }
  return Status::ok();
}

Status GraphExecutor::runStep(const fb::Entry &entry, Prepared &prepared,
                              size_t index, bool deferred) {
  const HostStep &step = prepared.program.steps[index];
  std::vector<Tensor> &values = prepared.values;
  if (step.dispatch) {
    const fb::Dispatch &dispatch = *step.dispatch;
    for (auto [id, cache] : step.cacheViews) {
      values[id] = values[cache]; // updated in place
    }
    // Pointers are written only when they change: a worker's copy of the
    // call's line stays valid from one run to the next.
    KernelCall &call = prepared.calls[index];
    size_t count = (dispatch.inputs() ? dispatch.inputs()->size() : 0) +
                   dispatch.outputs()->size();
    call.arguments.resize(count);
    size_t position = 0;
    auto point = [&](void *pointer) {
      if (call.arguments[position] != pointer) {
        call.arguments[position] = pointer;
      }
      ++position;
    };
    for (uint32_t i = 0; dispatch.inputs() && i < dispatch.inputs()->size(); ++i) {
      void *pointer = values[dispatch.inputs()->Get(i)].data();
      for (auto [position, panels] : prepared.panelInputs[index]) {
        if (position == i) {
          pointer = panels->tensor.data();
        }
      }
      point(pointer);
    }
    for (uint32_t id : *dispatch.outputs()) {
      point(values[id].data());
    }
    if (deferred) {
      pool_.dispatch(dispatch.tiles(), runKernelTiles, &call);
    } else {
      pool_.parallelFor(dispatch.tiles(), runKernelTiles, &call);
    }
    if (kernelServiceFailed()) {
      return finishKernels();
    }
    return Status::ok();
  }
  // An eager op reads what the kernels before it wrote.
  MFRT_RETURN_IF_ERROR(finishKernels());
  const fb::Op &op = *entry.ops()->Get(step.firstOp);
  uint32_t result = op.results()->Get(0);
  std::vector<const Tensor *> &operands = prepared.operands;
  operands.clear();
  for (uint32_t id : *op.operands()) {
    operands.push_back(&values[id]);
  }
  if (op.kind() == fb::OpKind::Reshape) {
    const fb::TensorType &type = *entry.values()->Get(result);
    values[result] = operands[0]->reshaped(Executable::shapeOf(type));
    return Status::ok();
  }
  if (op.kind() == fb::OpKind::KvCacheWrite) {
    values[result] = *operands[0]; // in place
  }
  Status status = runKernel(
      op, operands, values[result],
      [this](int64_t count, const std::function<void(int64_t, int64_t)> &body) {
        pool_.parallelFor(count, body);
      });
  return status ? status : status.withContext("in '" + entry.name()->str() + "'");
}

Status GraphExecutor::observeStep(const fb::Entry &entry, Prepared &prepared,
                                  size_t index,
                                  std::chrono::steady_clock::time_point began,
                                  const RunOptions &options) {
  const HostStep &step = prepared.program.steps[index];
  const std::vector<Tensor> &values = prepared.values;
  std::string entryName = entry.name()->str();
  if (step.dispatch) {
    const fb::Dispatch &dispatch = *step.dispatch;
    const std::string &name =
        executable_.root().kernels()->Get(dispatch.kernel())->str();
    const fb::Op &last =
        *entry.ops()->Get(dispatch.first_op() + dispatch.op_count() - 1);
    for (uint32_t id : *dispatch.outputs()) {
      MFRT_RETURN_IF_ERROR(observe(
          entryName, dispatch.first_op(), name,
          last.location() ? last.location()->str() : "", id, values[id],
          began, options, id == dispatch.outputs()->Get(0)));
    }
    return Status::ok();
  }
  const fb::Op &op = *entry.ops()->Get(step.firstOp);
  uint32_t result = op.results()->Get(0);
  return observe(entryName, step.firstOp, fb::EnumNameOpKind(op.kind()),
                 op.location() ? op.location()->str() : "", result,
                 values[result], began, options);
}

StatusOr<std::vector<Tensor>>
GraphExecutor::run(const std::string &entryName, std::vector<Tensor> inputs,
                   const RunOptions &options) {
  StatusOr<const fb::Entry *> checked = checkedEntry(entryName, inputs);
  if (!checked) {
    return checked.status();
  }
  const fb::Entry *entry = *checked;
  StatusOr<Prepared *> prepared = prepare(*entry);
  if (!prepared) {
    return prepared.status();
  }
  MFRT_RETURN_IF_ERROR(beginRun(*entry, options));
  std::vector<Tensor> &values = (*prepared)->values;
  const std::vector<bool> &bound = (*prepared)->bound;
  // Whatever happens, the run's slots let go of the caller's tensors.
  struct ClearRunSlots {
    std::vector<Tensor> &values;
    const std::vector<bool> &bound;
    ~ClearRunSlots() {
      for (size_t id = 0; id < values.size(); ++id) {
        if (!bound[id]) {
          values[id] = Tensor();
        }
      }
    }
  } clearRunSlots{values, bound};
  // Nor may a kernel's tile still run once run() returns (on an error).
  struct FinishKernels {
    ThreadPool &pool;
    ~FinishKernels() { pool.finish(); }
  } finishKernelsOnReturn{pool_};
  for (size_t i = 0; i < inputs.size(); ++i) {
    values[entry->inputs()->Get(i)] = std::move(inputs[i]);
  }
  // Outputs are written straight into tensors the caller keeps.
  for (uint32_t id : (*prepared)->program.outputBuffers) {
    const fb::TensorType &type = *entry->values()->Get(id);
    StatusOr<Tensor> output = allocator_.allocate(
        Executable::dtypeOf(type), Executable::shapeOf(type), /*zeroed=*/false);
    if (!output) {
      return output.status();
    }
    values[id] = output.take();
  }

  const HostProgram &program = (*prepared)->program;
  // Copies and checks only when a debugging user asked for them.
  bool observed = options.checkNumerics || options.traceEvents ||
                  options.capturedValues || !options.dumpTensorsDir.empty();
  // What the weights determine was computed when they last changed (a
  // profile shows when it is). A run that checks or keeps values computes
  // it again, to observe it.
  bool observeDerived = options.checkNumerics || options.capturedValues ||
                        !options.dumpTensorsDir.empty();
  Prepared &ready = **prepared;
  // An entry that assigns parameters changes the weights, even if it fails
  // half way.
  struct NoteUpdate {
    Weights &weights;
    bool assigns;
    ~NoteUpdate() {
      if (assigns) {
        weights.noteUpdated();
      }
    }
  } noteUpdate{weights_, program.assignsParameters};
  auto runObserved = [&](size_t index, bool observe) -> Status {
    auto began = observe ? std::chrono::steady_clock::now()
                         : std::chrono::steady_clock::time_point();
    // An observed step's outputs are looked at right away: it finishes.
    MFRT_RETURN_IF_ERROR(runStep(*entry, ready, index, /*deferred=*/!observe));
    return observe ? observeStep(*entry, ready, index, began, options)
                   : Status::ok();
  };
  for (const auto &packed : ready.panelSources) {
    Derived *panels = packed.first;
    if (panels->computedFor != weights_.version()) {
      const Tensor &weight = values[packed.second];
      int64_t n = weight.shape()[0], k = weight.shape()[1];
      pool_.parallelFor(panelCount(n), [&](int64_t begin, int64_t end) {
        packPanels(weight.dtype(), weight.data(), n, k, panels->tensor.data(),
                   begin, end);
      });
      panels->computedFor = weights_.version();
    }
  }
  for (const auto &[index, outputs] : ready.derivedSteps) {
    if (std::any_of(outputs.begin(), outputs.end(), [&](const Derived *value) {
          return value->computedFor != weights_.version();
        })) {
      MFRT_RETURN_IF_ERROR(runObserved(index, observed && !observeDerived));
      for (Derived *value : outputs) {
        value->computedFor = weights_.version();
      }
    }
  }
  for (uint32_t index : ready.workSteps) {
    if (!program.derivedSteps[index] || observeDerived) {
      MFRT_RETURN_IF_ERROR(runObserved(index, observed));
    }
  }
  MFRT_RETURN_IF_ERROR(finishKernels());

  // An output that is a view into the arena leaves it (the next run reuses
  // it); the others are the caller's own tensors already.
  const char *arenaBegin = static_cast<const char *>((*prepared)->arena.get());
  const char *arenaEnd = arenaBegin + program.arenaBytes;
  std::vector<Tensor> outputs;
  for (uint32_t id : *entry->outputs()) {
    const Tensor &value = values[id];
    const char *data = static_cast<const char *>(value.data());
    if (data < arenaBegin || data >= arenaEnd) {
      outputs.push_back(value);
      continue;
    }
    StatusOr<Tensor> copy = allocator_.allocate(value.dtype(), value.shape());
    if (!copy) {
      return copy.status();
    }
    std::memcpy(copy->data(), value.data(), value.byteSize());
    outputs.push_back(copy.take());
  }
  return outputs;
}
