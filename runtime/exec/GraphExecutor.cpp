//===- GraphExecutor.cpp - Graph Mode: kernels out of one arena -----------===//

#include "runtime/exec/GraphExecutor.h"

#include "runtime/hal/BlasThread.h"
#include "runtime/kernels/KernelServices.h"
#include "runtime/kernels/Kernels.h"
#include "runtime/kernels/PanelGemm.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

using namespace mfrt;

namespace {

/// Nor may a kernel's tile still run once a run returns (on an error).
struct FinishKernelsOnReturn {
  ThreadPool &pool;
  ~FinishKernelsOnReturn() { pool.finish(); }
};

} // namespace

GraphExecutor::GraphExecutor(const Executable &executable, Weights &weights,
                             Allocator &allocator, const KernelLibrary &kernels,
                             ThreadPool &pool)
    : Executor(executable, weights, allocator), kernels_(kernels), pool_(pool) {
  // Kernel tiles run on the pool; each BLAS call inside one is serial.
  makeBlasSerial();
}

uint64_t GraphExecutor::arenaBytes() const {
  uint64_t total = 0;
  for (const auto &[name, prepared] : prepared_) {
    total += prepared->program->arenaBytes;
  }
  return total;
}

uint64_t GraphExecutor::derivedBytes() const {
  uint64_t total = 0;
  for (const Derived &slot : slots_) {
    total += slot.tensor.byteSize();
  }
  for (const auto &[parameter, panels] : panels_) {
    total += panels.parameterItself ? 0 : panels.tensor.byteSize();
  }
  return total;
}

GraphExecutor::ParameterReads GraphExecutor::parameterReads() const {
  const fb::Executable &root = executable_.root();
  size_t count = root.parameters() ? root.parameters()->size() : 0;
  ParameterReads reads;
  reads.asStored.assign(count, false);
  reads.outsideDerivations.assign(count, false);
  reads.derivedInto.resize(count);
  for (const fb::Entry *entry : entriesAndInitializer(root)) {
    const fb::HostProgram *host = entry->host();
    if (!host) {
      continue;
    }
    bool derives = entry == root.initializer();
    const HostProgram *program = executable_.hostProgram(*entry);
    reads.assigned |= program->assignsParameters;
    auto storageOf = [&](uint32_t buffer) -> const fb::Buffer & {
      return *host->buffers()->Get(program->root[buffer]);
    };
    for (uint32_t c = 0; c < host->commands()->size(); ++c) {
      const auto &bindings = *host->commands()->Get(c)->bindings();
      const auto &panels = program->panelBindings[c];
      std::vector<uint32_t> read, written;
      for (uint32_t b = 0; b < bindings.size(); ++b) {
        const fb::Buffer &storage = storageOf(bindings.Get(b)->buffer());
        if (storage.kind() == fb::BufferKind::Derived &&
            bindings.Get(b)->access() != fb::Access::Read) {
          written.push_back(storage.index());
        }
        if (storage.kind() != fb::BufferKind::Parameter) {
          continue;
        }
        bool panel =
            std::any_of(panels.begin(), panels.end(),
                        [&](const auto &p) { return p.position == b; });
        reads.asStored[storage.index()] =
            reads.asStored[storage.index()] || !panel;
        if (!derives || panel) {
          reads.outsideDerivations[storage.index()] = true;
        } else {
          read.push_back(storage.index());
        }
      }
      for (uint32_t parameter : read) {
        reads.derivedInto[parameter].insert(written.begin(), written.end());
      }
    }
    for (uint32_t buffer : *host->outputs()) {
      const fb::Buffer &storage = storageOf(buffer);
      if (storage.kind() == fb::BufferKind::Parameter) {
        reads.asStored[storage.index()] = true;
        reads.outsideDerivations[storage.index()] = true;
      }
    }
  }
  return reads;
}

void GraphExecutor::keepParametersAsPanels() {
  // What is packed must stay valid: nothing may write the parameters.
  ParameterReads reads = parameterReads();
  readAsStored_ = reads.assigned
                      ? std::vector<bool>(reads.asStored.size(), true)
                      : std::move(reads.asStored);
}

void GraphExecutor::letDerivedValuesReplaceSources() {
  ParameterReads reads = parameterReads();
  if (reads.assigned) {
    return; // the weights change: what was derived must be derived again
  }
  for (size_t parameter = 0; parameter < reads.derivedInto.size();
       ++parameter) {
    const std::set<uint32_t> &slots = reads.derivedInto[parameter];
    if (!reads.outsideDerivations[parameter] && !slots.empty()) {
      releasable_[static_cast<int64_t>(parameter)].assign(slots.begin(),
                                                          slots.end());
    }
  }
}

Status GraphExecutor::allocateSlot(uint32_t index) {
  Derived &slot = slots_[index];
  if (slot.tensor.data()) {
    return Status::ok();
  }
  StatusOr<Tensor> storage = allocator_.allocate(slot.dtype, slot.shape);
  if (!storage) {
    return storage.status();
  }
  slot.tensor = storage.take();
  for (auto &[name, prepared] : prepared_) {
    for (const auto &[buffer, bound, shape] : prepared->slotBuffers) {
      if (bound == index) {
        prepared->buffers[buffer] = slot.tensor.reshaped(shape);
      }
    }
  }
  return Status::ok();
}

Status GraphExecutor::releaseComputedSources() {
  std::vector<int64_t> ready;
  for (const auto &[parameter, slots] : releasable_) {
    if (std::all_of(slots.begin(), slots.end(), [&](uint32_t slot) {
          return slot < slots_.size() &&
                 slots_[slot].computedFor == weights_.version();
        })) {
      ready.push_back(parameter);
    }
  }
  if (ready.empty()) {
    return Status::ok();
  }
  MFRT_RETURN_IF_ERROR(finishKernels()); // their tiles may still read it
  for (int64_t parameter : ready) {
    // The entries' bindings of it (and of views of it) let go too; a
    // derivation that reads it never runs again (the weights do not change).
    const char *begin = static_cast<const char *>(weights_[parameter].data());
    const char *end = begin + weights_[parameter].byteSize();
    for (auto &[name, prepared] : prepared_) {
      for (Tensor &buffer : prepared->buffers) {
        const char *data = static_cast<const char *>(buffer.data());
        if (data && data >= begin && data < end) {
          buffer = Tensor();
        }
      }
    }
    weights_.release(parameter);
    releasable_.erase(parameter);
  }
  allocator_.releaseCached(); // what the weights held goes back now
  return Status::ok();
}

StatusOr<GraphExecutor::Derived *> GraphExecutor::panelsOf(Prepared &prepared,
                                                           uint32_t source,
                                                           int64_t parameter,
                                                           PanelLayout layout) {
  auto [it, inserted] = panels_.try_emplace(parameter);
  Derived &panels = it->second;
  if ((!inserted && panels.layout != layout) ||
      (weights_.storedAsPanels(parameter) &&
       weights_.panelLayout(parameter) != layout)) {
    return Status::error(
        StatusCode::InvalidArgument,
        "kernels read parameter '" +
            executable_.root().parameters()->Get(parameter)->name()->str() +
            "' packed in two layouts (panels and dot panels); recompile the "
            "model");
  }
  panels.layout = layout;
  if (!inserted) { // another entry's: this one packs it again if it must
    bool listed =
        panels.parameterItself ||
        std::any_of(prepared.panelSources.begin(), prepared.panelSources.end(),
                    [&](const auto &known) { return known.first == &panels; });
    if (!listed) {
      prepared.panelSources.emplace_back(&panels, source);
    }
    return &panels;
  }
  const Tensor &weight = prepared.buffers[source];
  int64_t n = weight.dim(0), k = weight.dim(1);
  DType dtype = weight.dtype();
  if (static_cast<size_t>(parameter) < readAsStored_.size() &&
      !readAsStored_[parameter]) {
    // Nothing reads it as stored: it becomes its panels (the same size).
    Tensor &stored = weights_.mutableTensor(parameter);
    if (!weights_.storedAsPanels(parameter)) {
      pool_.parallelFor(panelCount(n), [&](int64_t begin, int64_t end) {
        packWeightInPlace(layout, dtype, stored.data(), n, k, begin, end);
      });
      weights_.noteStoredAsPanels(parameter, layout);
    }
    panels.tensor = stored.reshaped({n * k});
    panels.parameterItself = true;
    panels.computedFor = weights_.version();
    return &panels;
  }
  StatusOr<Tensor> own = allocator_.allocate(dtype, {n * k});
  if (!own) {
    panels_.erase(it);
    return own.status();
  }
  panels.tensor = own.take(); // packed by run() from the source
  prepared.panelSources.emplace_back(&panels, source);
  return &panels;
}

StatusOr<GraphExecutor::Prepared *>
GraphExecutor::prepare(const fb::Entry &entry) {
  std::string name = entry.name()->str();
  auto found = prepared_.find(&entry);
  if (found != prepared_.end()) {
    return found->second.get();
  }
  const HostProgram *program = executable_.hostProgram(entry);
  if (!program) {
    return Status::error(StatusCode::FailedPrecondition,
                         "entry '" + name +
                             "' has no host program: Graph "
                             "Mode needs one (recompile model.bin)");
  }
  auto prepared = std::make_unique<Prepared>();
  prepared->program = program;
  size_t arenaBytes =
      prepared->program->arenaBytes; // allocatePages: page-aligned
  void *arena = allocatePages(arenaBytes);
  if (!arena) {
    return Status::error(StatusCode::ResourceExhausted,
                         "cannot allocate the " + std::to_string(arenaBytes) +
                             "-byte arena of '" + name + "'");
  }
  prepared->arena = std::shared_ptr<void>(
      arena, [arenaBytes](void *block) { freePages(block, arenaBytes); });

  const fb::HostProgram &host = *entry.host();
  const fb::Executable &root = executable_.root();
  if (slots_.empty() && root.derived()) {
    slots_.resize(root.derived()->size());
  }
  std::vector<Tensor> &buffers = prepared->buffers;
  buffers.resize(host.buffers()->size());
  for (uint32_t i = 0; i < host.buffers()->size(); ++i) {
    const fb::Buffer &buffer = *host.buffers()->Get(i);
    DType dtype = Executable::dtypeOf(*buffer.type());
    Shape shape = Executable::shapeOf(*buffer.type());
    switch (buffer.kind()) {
    case fb::BufferKind::Arena:
      buffers[i] = Tensor(
          dtype, shape,
          std::shared_ptr<void>(prepared->arena,
                                static_cast<char *>(arena) + buffer.index()));
      break;
    case fb::BufferKind::Parameter:
      buffers[i] = prepared->program->writesParameter[buffer.index()]
                       ? weights_.mutableTensor(buffer.index())
                       : weights_[buffer.index()];
      break;
    case fb::BufferKind::Constant: {
      StatusOr<Tensor> constant = allocator_.allocate(dtype, shape);
      if (!constant) {
        return constant.status();
      }
      MFRT_RETURN_IF_ERROR(
          runKernel(*entry.ops()->Get(buffer.index()), {}, {&*constant}));
      buffers[i] = constant.take();
      break;
    }
    case fb::BufferKind::Derived: {
      // Bound when a command first computes it (allocateSlot).
      Derived &slot = slots_[buffer.index()];
      slot.dtype = dtype;
      slot.shape = shape;
      buffers[i] = slot.tensor;
      break;
    }
    case fb::BufferKind::View: {
      uint32_t source = buffer.index();
      if (std::find(prepared->perRun.begin(), prepared->perRun.end(), source) !=
          prepared->perRun.end()) {
        prepared->perRun.push_back(i);
      } else {
        buffers[i] = buffers[source].reshaped(shape);
      }
      break;
    }
    default: // inputs and outputs: bound by each run
      prepared->perRun.push_back(i);
    }
    const fb::Buffer &storage =
        *host.buffers()->Get(prepared->program->root[i]);
    if (storage.kind() == fb::BufferKind::Derived) {
      prepared->slotBuffers.emplace_back(i, storage.index(), shape);
    }
  }
  size_t commandCount = host.commands()->size();
  prepared->calls.resize(commandCount);
  prepared->panels.resize(commandCount);
  prepared->computes.resize(commandCount);
  for (uint32_t c = 0; c < commandCount; ++c) {
    const fb::Command &command = *host.commands()->Get(c);
    for (const fb::Binding *binding : *command.bindings()) {
      const fb::Buffer &storage =
          *host.buffers()->Get(prepared->program->root[binding->buffer()]);
      if (binding->access() == fb::Access::Write &&
          storage.kind() == fb::BufferKind::Derived) { // the initializer's
        prepared->computes[c].push_back(&slots_[storage.index()]);
      }
    }
    if (command.kind() != fb::CommandKind::Dispatch) {
      continue;
    }
    const std::string &kernelName =
        root.kernels()->Get(command.kernel())->str();
    KernelCall &call = prepared->calls[c];
    call.entry = kernels_.kernel(command.kernel());
    call.where = "kernel '" + kernelName + "' of '" + name + "'";
    call.executor = this;
    // Lengths follow from the buffers' static types (a parameter's panels
    // are its size); addresses are bound by each run.
    call.pointers.assign(command.bindings()->size(), nullptr);
    for (const fb::Binding *binding : *command.bindings()) {
      const fb::TensorType &type =
          *host.buffers()->Get(binding->buffer())->type();
      uint64_t bytes = dtypeSize(Executable::dtypeOf(type));
      for (int64_t dim : Executable::shapeOf(type)) {
        bytes *= static_cast<uint64_t>(dim); // the loader checked the sizes
      }
      call.lengths.push_back(bytes);
    }
    for (auto [position, layout] : prepared->program->panelBindings[c]) {
      uint32_t source = command.bindings()->Get(position)->buffer();
      StatusOr<Derived *> packed = panelsOf(
          *prepared, source, host.buffers()->Get(source)->index(), layout);
      if (!packed) {
        return packed.status();
      }
      prepared->panels[c].emplace_back(position, *packed);
    }
  }
  Prepared *pointer = prepared.get();
  prepared_[&entry] = std::move(prepared);
  return pointer;
}

void GraphExecutor::runKernelTiles(const void *context, int64_t begin,
                                   int64_t end) {
  const auto &call = *static_cast<const KernelCall *>(context);
  mfrt_dispatch_state_v1 state{begin,
                               end,
                               static_cast<uint32_t>(call.pointers.size()),
                               0,
                               call.pointers.data(),
                               call.lengths.data()};
  int32_t status = call.entry(&state);
  if (status != MFRT_KERNEL_OK) {
    call.executor->recordKernelFailure(call, status);
  }
}

void GraphExecutor::recordKernelFailure(const KernelCall &call,
                                        int32_t status) {
  Status failure =
      status == MFRT_KERNEL_SERVICE_FAILED
          ? Status::error(StatusCode::InvalidArgument,
                          call.where + ": " + takeServiceError())
      : status == MFRT_KERNEL_BAD_DISPATCH
          ? Status::error(StatusCode::DataLoss,
                          call.where + " refused its dispatch: the host "
                                       "program's bindings are not what the "
                                       "kernel was built for; recompile the "
                                       "model")
          : Status::error(StatusCode::Internal,
                          call.where + " returned the unknown status " +
                              std::to_string(status));
  std::lock_guard<std::mutex> lock(kernelFailureMutex_);
  if (!kernelFailed_.load(std::memory_order_relaxed)) {
    kernelFailure_ = std::move(failure);
    kernelFailed_.store(true, std::memory_order_release);
  }
}

Status GraphExecutor::finishKernels() {
  pool_.finish();
  if (!kernelFailed_.load(std::memory_order_acquire)) {
    return Status::ok();
  }
  std::lock_guard<std::mutex> lock(kernelFailureMutex_);
  kernelFailed_.store(false, std::memory_order_relaxed);
  return std::exchange(kernelFailure_, Status::ok());
}

Status GraphExecutor::runCommand(const fb::Entry &entry, Prepared &prepared,
                                 size_t index, bool deferred) {
  const fb::Command &command = *entry.host()->commands()->Get(index);
  const auto &bindings = *command.bindings();
  std::vector<Tensor> &buffers = prepared.buffers;
  if (command.kind() == fb::CommandKind::Dispatch) {
    // Bindings are written only when they change: a worker's copy of the
    // call's line stays valid from one run to the next.
    KernelCall &call = prepared.calls[index];
    for (uint32_t i = 0; i < bindings.size(); ++i) {
      void *pointer = buffers[bindings.Get(i)->buffer()].data();
      for (auto [position, panels] : prepared.panels[index]) {
        if (position == i) {
          pointer = panels->tensor.data();
        }
      }
      if (call.pointers[i] != pointer) {
        call.pointers[i] = pointer;
      }
    }
    int64_t tiles =
        executable_.root().kernel_signatures()->Get(command.kernel())->tiles();
    if (deferred) {
      pool_.dispatch(tiles, runKernelTiles, &call);
    } else {
      pool_.parallelFor(tiles, runKernelTiles, &call);
    }
    if (kernelFailed_.load(std::memory_order_acquire)) {
      return finishKernels();
    }
    return Status::ok();
  }
  // An eager op reads what the kernels before it wrote.
  MFRT_RETURN_IF_ERROR(finishKernels());
  const fb::Op &op = *entry.ops()->Get(command.first_op());
  // Bindings: the op's operands, then its results (the loader checked).
  std::vector<const Tensor *> &operands = prepared.operands;
  std::vector<Tensor *> &results = prepared.results;
  uint32_t inputCount = sizeOf(op.operands());
  operands.clear();
  results.clear();
  for (uint32_t i = 0; i < bindings.size(); ++i) {
    Tensor &buffer = buffers[bindings.Get(i)->buffer()];
    if (i < inputCount) {
      operands.push_back(&buffer);
    } else {
      results.push_back(&buffer);
    }
  }
  Status status = runOp(
      op, operands, results,
      [this](int64_t count, const std::function<void(int64_t, int64_t)> &body) {
        pool_.parallelFor(count, body);
      });
  return status ? status
                : status.withContext("in '" + entry.name()->str() + "'");
}

Status GraphExecutor::observeCommand(
    const fb::Entry &entry, Prepared &prepared, size_t index,
    std::chrono::steady_clock::time_point began, const RunOptions &options) {
  const fb::Command &command = *entry.host()->commands()->Get(index);
  std::string entryName = entry.name()->str();
  std::string what =
      command.kind() == fb::CommandKind::Dispatch
          ? executable_.root().kernels()->Get(command.kernel())->str()
          : fb::EnumNameOpKind(entry.ops()->Get(command.first_op())->kind());
  const fb::Op &last =
      *entry.ops()->Get(command.first_op() + command.op_count() - 1);
  bool first = true;
  for (const fb::Binding *binding : *command.bindings()) {
    if (binding->access() != fb::Access::Write) {
      continue;
    }
    MFRT_RETURN_IF_ERROR(
        observe(entryName, command.first_op(), what,
                last.location() ? last.location()->str() : "", binding->value(),
                prepared.buffers[binding->buffer()], began, options, first));
    first = false;
  }
  return Status::ok();
}

void GraphExecutor::takeQuantizedRows(const fb::Entry &entry,
                                      Prepared &prepared, size_t index,
                                      const std::vector<Tensor> &values) {
  const fb::Command &command = *entry.host()->commands()->Get(index);
  // The rows each quantize reads, or (computed in the command: the RoPE of
  // an int8 KV cache's new keys) what they are computed from.
  std::vector<uint32_t> taken;
  for (uint32_t i = 0; i < command.op_count(); ++i) {
    const fb::Op &op = *entry.ops()->Get(command.first_op() + i);
    if (op.kind() == fb::OpKind::DynamicQuantize ||
        op.kind() == fb::OpKind::Quantize) {
      taken.push_back(op.operands()->Get(0));
    }
  }
  for (size_t t = 0; t < taken.size(); ++t) {
    for (uint32_t i = 0; i < command.op_count(); ++i) {
      const fb::Op &op = *entry.ops()->Get(command.first_op() + i);
      if (op.results()->Get(0) == taken[t] && op.operands()) {
        taken.insert(taken.end(), op.operands()->begin(), op.operands()->end());
      }
    }
  }
  for (uint32_t rows : taken) {
    for (const fb::Binding *binding : *command.bindings()) {
      Tensor &buffer = prepared.buffers[binding->buffer()];
      if (binding->access() == fb::Access::Read && binding->value() == rows &&
          rows < values.size() &&
          values[rows].byteSize() == buffer.byteSize()) {
        std::memcpy(buffer.data(), values[rows].data(), buffer.byteSize());
      }
    }
  }
}

void GraphExecutor::packPanelCopies(Prepared &prepared) {
  for (const auto &[panels, source] : prepared.panelSources) {
    if (panels->computedFor != weights_.version()) {
      const Tensor &weight = prepared.buffers[source];
      int64_t n = weight.shape()[0], k = weight.shape()[1];
      pool_.parallelFor(panelCount(n), [&](int64_t begin, int64_t end) {
        packWeight(panels->layout, weight.dtype(), weight.data(), n, k,
                   panels->tensor.data(), begin, end);
      });
      panels->computedFor = weights_.version();
    }
  }
}

bool GraphExecutor::readsParameterElsewhere(const fb::Entry &entry,
                                            size_t command) const {
  const fb::HostProgram &host = *entry.host();
  const HostProgram &program = *executable_.hostProgram(entry);
  for (const fb::Binding *binding :
       *host.commands()->Get(static_cast<uint32_t>(command))->bindings()) {
    const fb::Buffer &storage =
        *host.buffers()->Get(program.root[binding->buffer()]);
    if (storage.kind() == fb::BufferKind::Parameter &&
        weights_.heldElsewhere(storage.index())) {
      return true;
    }
  }
  return false;
}

Status GraphExecutor::initialize() {
  const fb::Entry *initializer = executable_.root().initializer();
  if (!initializer || initializedFor_ == weights_.version()) {
    return Status::ok();
  }
  StatusOr<Prepared *> prepared = prepare(*initializer);
  if (!prepared) {
    return prepared.status();
  }
  Prepared &ready = **prepared;
  FinishKernelsOnReturn finishKernelsOnReturn{pool_};
  packPanelCopies(ready);
  for (size_t index = 0; index < initializer->host()->commands()->size();
       ++index) {
    const std::vector<Derived *> &computes = ready.computes[index];
    if (readsParameterElsewhere(*initializer, index)) {
      continue; // another pipeline stage's values, which its entries read
    }
    if (std::all_of(computes.begin(), computes.end(), [&](const Derived *slot) {
          return slot->computedFor == weights_.version();
        })) {
      // Computed before a later command failed: what it read may be
      // released since.
      continue;
    }
    for (const Derived *slot : computes) {
      MFRT_RETURN_IF_ERROR(
          allocateSlot(static_cast<uint32_t>(slot - slots_.data())));
    }
    MFRT_RETURN_IF_ERROR(
        runCommand(*initializer, ready, index, /*deferred=*/true));
    for (Derived *slot : computes) {
      slot->computedFor = weights_.version();
    }
    // What only derivations read goes as soon as they are computed, so
    // the weights and what replaces them are never all in memory at once.
    MFRT_RETURN_IF_ERROR(releaseComputedSources());
  }
  MFRT_RETURN_IF_ERROR(finishKernels());
  initializedFor_ = weights_.version();
  return Status::ok();
}

StatusOr<std::vector<Tensor>> GraphExecutor::run(const std::string &entryName,
                                                 std::vector<Tensor> inputs,
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
  Prepared &ready = **prepared;
  const fb::HostProgram &host = *entry->host();
  std::vector<Tensor> &buffers = ready.buffers;
  // Whatever happens, the run's buffers let go of the caller's tensors.
  struct ClearRunBuffers {
    Prepared &prepared;
    ~ClearRunBuffers() {
      for (uint32_t buffer : prepared.perRun) {
        prepared.buffers[buffer] = Tensor();
      }
    }
  } clearRunBuffers{ready};
  FinishKernelsOnReturn finishKernelsOnReturn{pool_};
  for (uint32_t i : ready.perRun) {
    const fb::Buffer &buffer = *host.buffers()->Get(i);
    const fb::TensorType &type = *buffer.type();
    if (buffer.kind() == fb::BufferKind::Input) {
      buffers[i] = inputs[buffer.index()];
    } else if (buffer.kind() == fb::BufferKind::Output) {
      // Outputs are written straight into tensors the caller keeps.
      StatusOr<Tensor> output =
          allocator_.allocate(Executable::dtypeOf(type),
                              Executable::shapeOf(type), /*zeroed=*/false);
      if (!output) {
        return output.status();
      }
      buffers[i] = output.take();
    } else { // a view of one of those, bound after it
      buffers[i] = buffers[buffer.index()].reshaped(Executable::shapeOf(type));
    }
  }

  const HostProgram &program = *ready.program;
  // Copies and checks only when a debugging user asked for them.
  bool observed = options.checkNumerics || options.traceEvents ||
                  options.capturedValues || options.quantizedFrom ||
                  !options.dumpTensorsDir.empty();
  // What the weights determine was computed when they last changed (a
  // profile shows when it is); a run that checks or keeps values looks at
  // what the entry reads of it.
  bool observeDerived = options.checkNumerics || options.capturedValues ||
                        !options.dumpTensorsDir.empty();
  if (!program.slots.empty()) {
    MFRT_RETURN_IF_ERROR(initialize());
  }
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
    // An observed command's outputs are looked at right away: it finishes.
    if (options.quantizedFrom) {
      takeQuantizedRows(*entry, ready, index, *options.quantizedFrom);
    }
    MFRT_RETURN_IF_ERROR(
        runCommand(*entry, ready, index, /*deferred=*/!observe));
    return observe ? observeCommand(*entry, ready, index, began, options)
                   : Status::ok();
  };
  packPanelCopies(ready);
  if (observeDerived) {
    // What the initializer computed, as the values of this entry's ops.
    for (const HostProgram::DerivedValue &derived : program.derivedValues) {
      const fb::Op &op = *entry->ops()->Get(derived.op);
      MFRT_RETURN_IF_ERROR(observe(
          entry->name()->str(), derived.op,
          std::string(fb::EnumNameOpKind(op.kind())) + " (initializer)",
          op.location() ? op.location()->str() : "", derived.value,
          buffers[derived.buffer], std::chrono::steady_clock::now(), options,
          /*traced=*/false));
    }
  }
  size_t commandCount = host.commands()->size();
  // --moe-stats looks at the routers' decisions only.
  auto routes = [&](size_t index) {
    const fb::Command &command = *host.commands()->Get(index);
    return options.moeStats && command.kind() == fb::CommandKind::Library &&
           entry->ops()->Get(command.first_op())->kind() ==
               fb::OpKind::MoeRoute;
  };
  for (size_t index = 0; index < commandCount; ++index) {
    MFRT_RETURN_IF_ERROR(runObserved(index, observed || routes(index)));
  }
  MFRT_RETURN_IF_ERROR(finishKernels());

  // An output in the arena leaves it (the next run reuses it); the others
  // are the caller's own tensors already (inputs updated in place, output
  // buffers) or storage of the executor's that outlives the run.
  const char *arenaBegin = static_cast<const char *>(ready.arena.get());
  const char *arenaEnd = arenaBegin + program.arenaBytes;
  std::vector<Tensor> outputs;
  for (uint32_t buffer : *host.outputs()) {
    const Tensor &value = buffers[buffer];
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
