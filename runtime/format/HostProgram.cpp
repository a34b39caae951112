//===- HostProgram.cpp - an entry's Graph Mode program, verified ----------===//
//
// 1. Buffers: each where its kind says, of a valid type; views to roots.
// 2. Commands in order: bindings against the op-level program (which
//    values each command reads and writes, and where they live), the kernel
//    signatures, the access rules and the derived-value rules (only the
//    initializer derives values from the weights).
// 3. Lifetimes of arena buffers, first write to last use (outputs through
//    views: the end): none alive at once may overlap.
//
// The loader checked the op-level program first (Executable.cpp): ids in
// range, each value defined once by one op, types that fit the ops.
//
//===----------------------------------------------------------------------===//

#include "runtime/format/HostProgram.h"

#include <algorithm>
#include <map>
#include <optional>

using namespace mfrt;

namespace {

int64_t bytesOf(const fb::TensorType &type) {
  return *checkedElementCount(Executable::shapeOf(type)) *
         dtypeSize(Executable::dtypeOf(type));
}

bool sameType(const fb::TensorType &a, const fb::TensorType &b) {
  return a.dtype() == b.dtype() &&
         Executable::shapeOf(a) == Executable::shapeOf(b);
}

/// Where a value lives, to compare a binding's buffer with: a kind and an
/// index for storage of its own (input, parameter, constant, derived slot,
/// output), an arena buffer's root for a slice.
struct Storage {
  fb::BufferKind kind;
  int64_t index;
  bool operator==(const Storage &other) const {
    return kind == other.kind && index == other.index;
  }
};

class Verifier {
public:
  Verifier(const fb::Executable &root, const fb::Entry &entry, bool initializer)
      : root_(root), entry_(entry), name_(entry.name()->str()),
        initializer_(initializer) {}

  StatusOr<HostProgram> run() {
    const fb::HostProgram *host = entry_.host();
    if (!host) {
      return Status::error(
          StatusCode::FailedPrecondition,
          "'" + name_ +
              "' has no host program, so it cannot "
              "run in graph mode; run it with --mode pynative");
    }
    program_.arenaBytes = host->arena_bytes();
    program_.writesParameter.assign(sizeOf(root_.parameters()), false);
    if (initializer_ && sizeOf(entry_.inputs()) != 0) {
      return bad("takes inputs: the initializer takes none");
    }
    MFRT_RETURN_IF_ERROR(checkBuffers(*host));
    noteOpLevelValues();
    MFRT_RETURN_IF_ERROR(noteDerivedValues(*host));
    for (uint32_t i = 0; i < host->commands()->size(); ++i) {
      MFRT_RETURN_IF_ERROR(checkCommand(i, *host->commands()->Get(i)));
    }
    MFRT_RETURN_IF_ERROR(checkOutputs(*host));
    MFRT_RETURN_IF_ERROR(checkDerived(*host));
    MFRT_RETURN_IF_ERROR(checkOverlaps(*host));
    return std::move(program_);
  }

private:
  Status bad(const std::string &what) const {
    return Status::error("the host program of '" + name_ + "' " + what +
                         "; recompile the model");
  }

  const fb::TensorType &valueType(uint32_t id) const {
    return *entry_.values()->Get(id);
  }

  Status checkBuffers(const fb::HostProgram &host) {
    size_t count = host.buffers()->size();
    program_.root.resize(count);
    for (uint32_t i = 0; i < count; ++i) {
      const fb::Buffer &buffer = *host.buffers()->Get(i);
      std::string what = "buffer " + std::to_string(i);
      const fb::TensorType &type = *buffer.type();
      if (type.dtype() < fb::DType::MIN || type.dtype() > fb::DType::MAX ||
          !checkedElementCount(Executable::shapeOf(type))) {
        return bad("gives " + what + " an invalid type");
      }
      int64_t index = buffer.index();
      auto expect = [&](size_t bound, const fb::TensorType *of) -> Status {
        if (index < 0 || static_cast<size_t>(index) >= bound) {
          return bad("gives " + what + " (" +
                     fb::EnumNameBufferKind(buffer.kind()) + ") index " +
                     std::to_string(index) + " of " + std::to_string(bound));
        }
        if (of && !sameType(type, *of)) {
          return bad("gives " + what + " another type than what it holds");
        }
        return Status::ok();
      };
      program_.root[i] = i;
      switch (buffer.kind()) {
      case fb::BufferKind::Input:
        MFRT_RETURN_IF_ERROR(expect(entry_.inputs()->size(), nullptr));
        MFRT_RETURN_IF_ERROR(expect(entry_.inputs()->size(),
                                    &valueType(entry_.inputs()->Get(index))));
        break;
      case fb::BufferKind::Output:
        MFRT_RETURN_IF_ERROR(expect(entry_.outputs()->size(), nullptr));
        MFRT_RETURN_IF_ERROR(expect(entry_.outputs()->size(),
                                    &valueType(entry_.outputs()->Get(index))));
        break;
      case fb::BufferKind::Parameter:
        MFRT_RETURN_IF_ERROR(expect(sizeOf(root_.parameters()), nullptr));
        MFRT_RETURN_IF_ERROR(expect(sizeOf(root_.parameters()),
                                    root_.parameters()->Get(index)->type()));
        break;
      case fb::BufferKind::Derived:
        MFRT_RETURN_IF_ERROR(expect(sizeOf(root_.derived()), nullptr));
        MFRT_RETURN_IF_ERROR(
            expect(sizeOf(root_.derived()), root_.derived()->Get(index)));
        if (initializer_ != (buffer.holds() < 0)) {
          return bad(initializer_
                         ? "names the value derived " + what +
                               " holds: the initializer's commands name them"
                         : "does not say which value derived " + what +
                               " holds");
        }
        break;
      case fb::BufferKind::Constant: {
        MFRT_RETURN_IF_ERROR(expect(sizeOf(entry_.ops()), nullptr));
        const fb::Op &op = *entry_.ops()->Get(index);
        if (op.kind() != fb::OpKind::Constant) {
          return bad("gives " + what + " the value of op " +
                     std::to_string(index) + ", which is no constant");
        }
        MFRT_RETURN_IF_ERROR(
            expect(sizeOf(entry_.ops()), &valueType(op.results()->Get(0))));
        break;
      }
      case fb::BufferKind::Arena: {
        int64_t element =
            static_cast<int64_t>(dtypeSize(Executable::dtypeOf(type)));
        int64_t bytes = bytesOf(type);
        if (index < 0 || index % element != 0 ||
            static_cast<uint64_t>(index) > program_.arenaBytes ||
            static_cast<uint64_t>(bytes) > program_.arenaBytes - index) {
          return bad("places " + what + " (" + std::to_string(bytes) +
                     " bytes) at offset " + std::to_string(index) +
                     " of an arena of " + std::to_string(program_.arenaBytes) +
                     " bytes");
        }
        break;
      }
      case fb::BufferKind::View: {
        MFRT_RETURN_IF_ERROR(expect(i, nullptr)); // an earlier buffer
        const fb::TensorType &source = *host.buffers()->Get(index)->type();
        if (source.dtype() != type.dtype() ||
            *checkedElementCount(Executable::shapeOf(source)) !=
                *checkedElementCount(Executable::shapeOf(type))) {
          return bad("views buffer " + std::to_string(index) + " as " + what +
                     " of another element type or count");
        }
        program_.root[i] = program_.root[index];
        break;
      }
      default:
        return bad("gives " + what + " an unknown kind");
      }
    }
    return Status::ok();
  }

  Storage storageOf(uint32_t buffer) const {
    uint32_t rootIndex = program_.root[buffer];
    const fb::Buffer &root = *entry_.host()->buffers()->Get(rootIndex);
    if (root.kind() == fb::BufferKind::Arena) {
      return {fb::BufferKind::Arena, rootIndex};
    }
    return {root.kind(), root.index()};
  }

  /// Where the op-level program's inputs, parameters, constants and views
  /// of them live; the op that defines each other value.
  void noteOpLevelValues() {
    size_t valueCount = entry_.values()->size();
    definedBy_.assign(valueCount, -1);
    held_.assign(valueCount, std::nullopt);
    views_.assign(valueCount, {});
    for (uint32_t i = 0; i < entry_.inputs()->size(); ++i) {
      held_[entry_.inputs()->Get(i)] = Storage{fb::BufferKind::Input, i};
    }
    for (uint32_t index = 0; index < sizeOf(entry_.ops()); ++index) {
      const fb::Op &op = *entry_.ops()->Get(index);
      for (uint32_t result : *op.results()) {
        definedBy_[result] = index;
      }
      uint32_t result = op.results()->Get(0);
      if (op.kind() == fb::OpKind::Param) {
        held_[result] = Storage{fb::BufferKind::Parameter, parameterOf(op)};
      } else if (op.kind() == fb::OpKind::Constant) {
        held_[result] = Storage{fb::BufferKind::Constant, index};
      } else if (op.kind() == fb::OpKind::Assign) {
        // (The loader allows one assignment per parameter and entry.)
        assignOf_[parameterOf(op)] = {op.operands()->Get(0), result};
      } else if (op.kind() == fb::OpKind::Reshape) {
        held_[result] = held_[op.operands()->Get(0)];
        views_[op.operands()->Get(0)].push_back(result);
      }
    }
  }

  /// An entry's derived buffers hold the values they name, computed by
  /// ops of the entry (the initializer computes them for Graph Mode).
  Status noteDerivedValues(const fb::HostProgram &host) {
    for (uint32_t i = 0; i < host.buffers()->size(); ++i) {
      const fb::Buffer &buffer = *host.buffers()->Get(i);
      if (buffer.kind() != fb::BufferKind::Derived || initializer_) {
        continue;
      }
      std::string what = "derived buffer " + std::to_string(i);
      int64_t value = buffer.holds();
      if (static_cast<uint64_t>(value) >= entry_.values()->size() ||
          definedBy_[value] < 0 || held_[value] ||
          !sameType(*buffer.type(), valueType(static_cast<uint32_t>(value)))) {
        return bad("gives " + what + " a value it cannot hold");
      }
      const fb::Op &op = *entry_.ops()->Get(definedBy_[value]);
      if (op.kind() == fb::OpKind::Param || op.kind() == fb::OpKind::Constant ||
          op.kind() == fb::OpKind::Reshape || op.kind() == fb::OpKind::Assign) {
        return bad("gives " + what + " a value it cannot hold");
      }
      hold(static_cast<uint32_t>(value),
           Storage{fb::BufferKind::Derived, buffer.index()});
      program_.slots.push_back(static_cast<uint32_t>(buffer.index()));
      program_.derivedValues.push_back(
          {i, static_cast<uint32_t>(value),
           static_cast<uint32_t>(definedBy_[value])});
    }
    return Status::ok();
  }

  /// `value` and the reshapes of it are in `storage`.
  void hold(uint32_t value, Storage storage) {
    held_[value] = storage;
    for (uint32_t view : views_[value]) {
      hold(view, storage);
    }
  }

  /// A read of `value` through `buffer` at command `at`.
  Status checkRead(uint32_t value, uint32_t buffer, uint32_t at,
                   const std::string &where) {
    if (!held_[value] || !(*held_[value] == storageOf(buffer))) {
      return bad("has " + where + " read value " + std::to_string(value) +
                 " from a buffer that does not hold it");
    }
    if (overwritten_.count(value) && overwritten_[value] < at) {
      return bad("has " + where + " read value " + std::to_string(value) +
                 " after a command updated its buffer in place");
    }
    Storage storage = storageOf(buffer);
    if (storage.kind == fb::BufferKind::Parameter) {
      auto written = parameterWrittenAt_.find(storage.index);
      if (written != parameterWrittenAt_.end() && written->second < at) {
        return bad("has " + where + " read a parameter after it was written");
      }
    }
    use(buffer, at);
    return Status::ok();
  }

  /// A write of `value` into `buffer` at command `at` (`tied`: the buffer
  /// is an input the command updates in place).
  Status checkWrite(uint32_t value, uint32_t buffer, uint32_t at, bool tied,
                    const std::string &where) {
    Storage storage = storageOf(buffer);
    switch (storage.kind) {
    case fb::BufferKind::Arena:
    case fb::BufferKind::Output:
    case fb::BufferKind::Derived:
      break;
    case fb::BufferKind::Input: // a KV cache the caller passed in
      if (!tied) {
        return bad("has " + where +
                   " overwrite an input it does not update "
                   "in place");
      }
      break;
    case fb::BufferKind::Parameter: {
      // Only a parameter's new value, once: the assignment's.
      auto assign = assignOf_.find(storage.index);
      bool assigned =
          assign != assignOf_.end() &&
          (assign->second.first == value || assign->second.second == value);
      if (!assigned || program_.writesParameter[storage.index]) {
        return bad("has " + where +
                   " write a parameter other than with its "
                   "assignment's value, once");
      }
      program_.writesParameter[storage.index] = true;
      program_.assignsParameters = true;
      parameterWrittenAt_[storage.index] = at;
      break;
    }
    default:
      return bad("has " + where + " write a constant");
    }
    if (held_[value]) {
      return bad("has " + where + " write value " + std::to_string(value) +
                 ", which is already computed");
    }
    hold(value, storage);
    if (storage.kind == fb::BufferKind::Arena &&
        !firstWrite_.count(program_.root[buffer])) {
      firstWrite_[program_.root[buffer]] = at;
    }
    use(buffer, at);
    return Status::ok();
  }

  void use(uint32_t buffer, uint32_t at) {
    uint32_t root = program_.root[buffer];
    lastUse_[root] = std::max(lastUse_[root], static_cast<int64_t>(at));
  }

  /// Accesses and ties: the first `inputs` bindings are read (or an input
  /// updated in place), the rest written; a written buffer bound again is
  /// only the readwrite input tied to it.
  Status checkAccesses(const fb::Command &command, size_t inputs,
                       const std::string &where) {
    const auto &bindings = *command.bindings();
    for (uint32_t i = 0; i < bindings.size(); ++i) {
      const fb::Binding &binding = *bindings.Get(i);
      bool input = i < inputs;
      fb::Access access = binding.access();
      if (access < fb::Access::MIN || access > fb::Access::MAX ||
          (input ? access == fb::Access::Write : access != fb::Access::Write)) {
        return bad("gives " + where + " binding " + std::to_string(i) +
                   " an access its position does not allow");
      }
      if (binding.buffer() >= program_.root.size() ||
          binding.value() >= entry_.values()->size()) {
        return bad("gives " + where + " a binding out of range");
      }
      if (!sameType(*entry_.host()->buffers()->Get(binding.buffer())->type(),
                    valueType(binding.value()))) {
        return bad("has " + where + " bind value " +
                   std::to_string(binding.value()) +
                   " to a buffer of another type");
      }
    }
    for (uint32_t i = 0; i < bindings.size(); ++i) {
      const fb::Binding &a = *bindings.Get(i);
      for (uint32_t j = i + 1; j < bindings.size(); ++j) {
        const fb::Binding &b = *bindings.Get(j);
        bool aliased = storageOf(a.buffer()) == storageOf(b.buffer());
        bool written =
            a.access() != fb::Access::Read || b.access() != fb::Access::Read;
        bool tied = a.access() == fb::Access::ReadWrite &&
                    b.access() == fb::Access::Write && a.buffer() == b.buffer();
        if (aliased && written && !tied) {
          return bad("has " + where + " bind one buffer as " +
                     std::to_string(i) + " and " + std::to_string(j) +
                     " where it writes it");
        }
      }
      if (a.access() == fb::Access::ReadWrite) {
        bool tiedOutput = false;
        for (uint32_t j = i + 1; j < bindings.size(); ++j) {
          tiedOutput =
              tiedOutput || (bindings.Get(j)->buffer() == a.buffer() &&
                             bindings.Get(j)->access() == fb::Access::Write);
        }
        if (!tiedOutput) {
          return bad("has " + where + " update binding " + std::to_string(i) +
                     " in place with no output tied to it");
        }
      }
    }
    return Status::ok();
  }

  Status checkCommand(uint32_t at, const fb::Command &command) {
    std::string where = "command " + std::to_string(at);
    size_t opCount = sizeOf(entry_.ops());
    const auto &bindings = *command.bindings();
    program_.panelBindings.emplace_back();
    if (command.first_op() >= opCount || command.op_count() == 0 ||
        command.op_count() > opCount - command.first_op()) {
      return bad("gives " + where + " ops outside the program");
    }
    size_t inputs = 0;
    switch (command.kind()) {
    case fb::CommandKind::Dispatch: {
      if (command.kernel() >= sizeOf(root_.kernel_signatures())) {
        return bad("has " + where + " dispatch kernel " +
                   std::to_string(command.kernel()) + ", which does not exist");
      }
      const fb::KernelSignature &signature =
          *root_.kernel_signatures()->Get(command.kernel());
      inputs = signature.inputs()->size();
      size_t count = inputs + signature.outputs()->size();
      if (bindings.size() != count) {
        return bad("has " + where + " bind " + std::to_string(bindings.size()) +
                   " buffers to kernel '" +
                   root_.kernels()->Get(command.kernel())->str() +
                   "', which takes " + std::to_string(count));
      }
      MFRT_RETURN_IF_ERROR(checkAccesses(command, inputs, where));
      for (uint32_t i = 0; i < count; ++i) {
        const fb::TensorType &expected =
            i < inputs ? *signature.inputs()->Get(i)
                       : *signature.outputs()->Get(i - inputs);
        if (!sameType(*entry_.host()
                           ->buffers()
                           ->Get(bindings.Get(i)->buffer())
                           ->type(),
                      expected)) {
          return bad("has " + where + " bind other buffers than kernel '" +
                     root_.kernels()->Get(command.kernel())->str() + "' takes");
        }
      }
      for (auto [list, layout] :
           {std::pair{signature.panel_inputs(), PanelLayout::Columns},
            {signature.dot_panel_inputs(), PanelLayout::Int8Dot}}) {
        for (uint32_t i = 0; list && i < list->size(); ++i) {
          uint32_t position = list->Get(i);
          const fb::Buffer *buffer = position < inputs
                                         ? entry_.host()->buffers()->Get(
                                               bindings.Get(position)->buffer())
                                         : nullptr;
          if (!buffer || buffer->kind() != fb::BufferKind::Parameter) {
            return bad("has " + where +
                       " read a panel input that is no parameter");
          }
          const fb::TensorType &type = *buffer->type();
          std::vector<int64_t> shape = Executable::shapeOf(type);
          if (layout == PanelLayout::Int8Dot &&
              (Executable::dtypeOf(type) != DType::I8 || shape.size() != 2 ||
               shape[1] % 4 != 0)) {
            return bad("has " + where +
                       " read dot panels of a weight that is not i8 [N, K] "
                       "with K a multiple of 4");
          }
          auto &known = program_.panelBindings.back();
          if (std::any_of(known.begin(), known.end(), [&](const auto &other) {
                return other.position == position;
              })) {
            return bad("has " + where + " read input " +
                       std::to_string(position) + " in two panel layouts");
          }
          known.push_back({position, layout});
        }
      }
      // Its inputs come from before its ops; its outputs are their results.
      for (uint32_t i = 0; i < count; ++i) {
        int64_t by = definedBy_[bindings.Get(i)->value()];
        bool inside = by >= command.first_op() &&
                      by < command.first_op() + command.op_count();
        if (i < inputs ? inside : !inside) {
          return bad("has " + where + " name value " +
                     std::to_string(bindings.Get(i)->value()) +
                     (i < inputs ? " as an input its own ops compute"
                                 : " as an output its ops do not compute"));
        }
      }
      for (uint32_t op = command.first_op();
           op < command.first_op() + command.op_count(); ++op) {
        if (entry_.ops()->Get(op)->kind() == fb::OpKind::Assign) {
          return bad("has " + where + " compute an assignment in a kernel");
        }
      }
      break;
    }
    case fb::CommandKind::Library:
    case fb::CommandKind::Copy: {
      const fb::Op &op = *entry_.ops()->Get(command.first_op());
      bool copy = command.kind() == fb::CommandKind::Copy;
      fb::OpKind kind = op.kind();
      if (command.op_count() != 1 ||
          (copy ? kind != fb::OpKind::Assign
                : kind == fb::OpKind::Param || kind == fb::OpKind::Constant ||
                      kind == fb::OpKind::Reshape ||
                      kind == fb::OpKind::Assign)) {
        return bad("has " + where + " run op " +
                   std::to_string(command.first_op()) + " (" +
                   fb::EnumNameOpKind(kind) + "), which it cannot");
      }
      inputs = sizeOf(op.operands());
      if (bindings.size() != inputs + op.results()->size()) {
        return bad("has " + where +
                   " bind other than its op's operands and results");
      }
      MFRT_RETURN_IF_ERROR(checkAccesses(command, inputs, where));
      for (uint32_t i = 0; i < bindings.size(); ++i) {
        uint32_t expected =
            i < inputs ? op.operands()->Get(i) : op.results()->Get(i - inputs);
        if (bindings.Get(i)->value() != expected) {
          return bad("has " + where + " bind another value than its op's");
        }
      }
      bool cacheWrite = kind == fb::OpKind::KvCacheWrite;
      if (cacheWrite != (bindings.Get(0)->access() == fb::Access::ReadWrite)) {
        return bad("has " + where + " update in place what is not a KV cache");
      }
      if (copy && storageOf(bindings.Get(1)->buffer()).kind !=
                      fb::BufferKind::Parameter) {
        return bad("has " + where +
                   " store an assignment elsewhere than in "
                   "its parameter");
      }
      break;
    }
    default:
      return bad("has " + where + " of an unknown kind");
    }
    for (uint32_t i = 0; i < bindings.size(); ++i) {
      const fb::Binding &binding = *bindings.Get(i);
      if (i < inputs) {
        MFRT_RETURN_IF_ERROR(
            checkRead(binding.value(), binding.buffer(), at, where));
        if (binding.access() == fb::Access::ReadWrite) {
          overwritten_[binding.value()] = at; // its new value replaces it
        }
      } else {
        bool tied = false;
        for (uint32_t j = 0; j < inputs; ++j) {
          tied = tied || (bindings.Get(j)->buffer() == binding.buffer() &&
                          bindings.Get(j)->access() == fb::Access::ReadWrite);
        }
        MFRT_RETURN_IF_ERROR(
            checkWrite(binding.value(), binding.buffer(), at, tied, where));
      }
    }
    return Status::ok();
  }

  Status checkOutputs(const fb::HostProgram &host) {
    if (host.outputs()->size() != entry_.outputs()->size()) {
      return bad("returns " + std::to_string(host.outputs()->size()) +
                 " buffers for " + std::to_string(entry_.outputs()->size()) +
                 " outputs");
    }
    uint32_t end = host.commands()->size();
    for (uint32_t i = 0; i < host.outputs()->size(); ++i) {
      uint32_t buffer = host.outputs()->Get(i);
      if (buffer >= program_.root.size()) {
        return bad("returns a buffer out of range");
      }
      MFRT_RETURN_IF_ERROR(checkRead(entry_.outputs()->Get(i), buffer, end,
                                     "output " + std::to_string(i)));
    }
    return Status::ok();
  }

  /// The initializer writes derived slots, each once, from parameters,
  /// constants and derived slots alone; an entry writes none.
  Status checkDerived(const fb::HostProgram &host) {
    for (uint32_t at = 0; at < host.commands()->size(); ++at) {
      const fb::Command &command = *host.commands()->Get(at);
      for (const fb::Binding *binding : *command.bindings()) {
        Storage storage = storageOf(binding->buffer());
        bool derived = storage.kind == fb::BufferKind::Derived;
        bool fixed = derived || storage.kind == fb::BufferKind::Parameter ||
                     storage.kind == fb::BufferKind::Constant;
        bool read = binding->access() == fb::Access::Read;
        if (!initializer_ && derived && !read) {
          return bad("has command " + std::to_string(at) +
                     " write a derived value: only the initializer computes "
                     "them");
        }
        if (initializer_ && (read ? !fixed : !derived)) {
          return bad("has command " + std::to_string(at) +
                     " derive a value from something else than the weights");
        }
        if (initializer_ && !read) {
          uint32_t slot = static_cast<uint32_t>(storage.index);
          if (std::find(program_.slots.begin(), program_.slots.end(), slot) !=
              program_.slots.end()) {
            return bad("writes derived slot " + std::to_string(slot) +
                       " twice");
          }
          program_.slots.push_back(slot);
        }
      }
    }
    return Status::ok();
  }

  Status checkOverlaps(const fb::HostProgram &host) {
    struct Live {
      int64_t first, last, begin, end;
      uint32_t buffer;
    };
    std::vector<Live> live;
    for (auto [buffer, first] : firstWrite_) {
      const fb::Buffer &slice = *host.buffers()->Get(buffer);
      live.push_back({first, std::max<int64_t>(first, lastUse_[buffer]),
                      slice.index(), slice.index() + bytesOf(*slice.type()),
                      buffer});
    }
    for (auto [buffer, last] : lastUse_) {
      if (host.buffers()->Get(buffer)->kind() == fb::BufferKind::Arena &&
          !firstWrite_.count(buffer)) {
        return bad("reads arena buffer " + std::to_string(buffer) +
                   " before any command writes it");
      }
    }
    std::sort(live.begin(), live.end(),
              [](const Live &a, const Live &b) { return a.first < b.first; });
    std::vector<const Live *> alive;
    for (const Live &buffer : live) {
      alive.erase(std::remove_if(alive.begin(), alive.end(),
                                 [&](const Live *other) {
                                   return other->last < buffer.first;
                                 }),
                  alive.end());
      for (const Live *other : alive) {
        if (buffer.begin < other->end && other->begin < buffer.end &&
            buffer.begin != buffer.end && other->begin != other->end) {
          return bad("gives buffers " + std::to_string(other->buffer) +
                     " and " + std::to_string(buffer.buffer) +
                     " overlapping bytes while both are alive");
        }
      }
      alive.push_back(&buffer);
    }
    return Status::ok();
  }

  const fb::Executable &root_;
  const fb::Entry &entry_;
  std::string name_;
  bool initializer_;
  HostProgram program_;
  std::vector<int64_t> definedBy_;           // per value: its op, or -1
  std::vector<std::optional<Storage>> held_; // per value: where it is
  std::vector<std::vector<uint32_t>> views_; // per value: its reshapes
  std::map<uint32_t, uint32_t> overwritten_; // value -> command
  std::map<int64_t, uint32_t> parameterWrittenAt_;
  /// Per assigned parameter: its new value and the assignment's result.
  std::map<int64_t, std::pair<uint32_t, uint32_t>> assignOf_;
  std::map<uint32_t, int64_t> firstWrite_; // arena root -> command
  std::map<uint32_t, int64_t> lastUse_;    // root -> command
};

} // namespace

StatusOr<HostProgram> HostProgram::build(const fb::Executable &root,
                                         const fb::Entry &entry,
                                         bool initializer) {
  return Verifier(root, entry, initializer).run();
}
