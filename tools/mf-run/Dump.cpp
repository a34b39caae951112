//===- Dump.cpp - print an executable readably ----------------------------===//

#include "tools/mf-run/Dump.h"

#include "runtime/HostProgram.h"

using namespace mfrt;

namespace {
std::string typeText(const fb::TensorType &type) {
  return std::string(dtypeName(Executable::dtypeOf(type))) +
         formatShape(Executable::shapeOf(type));
}
} // namespace

void mfrt::dumpExecutable(const Executable &executable, std::ostream &os) {
  const fb::Executable &root = executable.root();
  const fb::ModelInfo &model = executable.model();
  os << "mfc executable, format version " << root.format_version()
     << ", target " << (root.target() ? root.target()->str() : "?") << "\n";
  if (const fb::KernelTarget *kernels = root.kernel_target()) {
    os << "kernels compiled for " << kernels->triple()->str() << ", CPU "
       << kernels->cpu()->str() << ", features";
    size_t count = kernels->features() ? kernels->features()->size() : 0;
    for (size_t i = 0; i < count; ++i) {
      os << (i ? "," : " ") << kernels->features()->Get(i)->str();
    }
    os << (count ? "" : " (none)") << "\n";
  }
  os << "model " << (model.name() ? model.name()->str() : "?") << ": "
     << fb::EnumNameModelFamily(model.family()) << ", run_mode "
     << (model.run_mode() ? model.run_mode()->str() : "?") << ", batch "
     << model.batch_size() << ", seq_length " << model.seq_length()
     << ", vocab " << model.vocab_size() << ", layers " << model.num_layers()
     << (model.use_past() ? ", KV cache" : "") << "\n";
  size_t parameterCount = root.parameters() ? root.parameters()->size() : 0;
  int64_t values = 0;
  for (size_t i = 0; i < parameterCount; ++i) {
    values += *checkedElementCount(
        Executable::shapeOf(*root.parameters()->Get(i)->type()));
  }
  os << "parameters: " << parameterCount << " tensors, " << values
     << " values\n";
  for (size_t i = 0; i < parameterCount; ++i) {
    const fb::Parameter &parameter = *root.parameters()->Get(i);
    os << "  " << parameter.name()->str() << " : " << typeText(*parameter.type())
       << " init " << fb::EnumNameParameterInit(parameter.init());
    if (parameter.mf_name()) {
      os << " (mindformers: " << parameter.mf_name()->str() << ")";
    }
    os << "\n";
  }
  size_t kernelCount = root.kernels() ? root.kernels()->size() : 0;
  os << "kernels: " << kernelCount;
  if (root.kernel_library()) {
    os << " in a " << root.kernel_library()->size()
       << "-byte ELF shared object:";
    for (size_t i = 0; i < kernelCount; ++i) {
      os << " " << root.kernels()->Get(i)->str();
    }
  }
  os << "\n";
  for (const fb::Entry *entry : *root.entries()) {
    os << "entry " << entry->name()->str() << "(";
    for (size_t i = 0; i < entry->inputs()->size(); ++i) {
      os << (i ? ", " : "") << entry->input_names()->Get(i)->str() << ": "
         << typeText(*entry->values()->Get(entry->inputs()->Get(i)));
    }
    os << ") -> (";
    for (size_t i = 0; i < entry->outputs()->size(); ++i) {
      os << (i ? ", " : "") << entry->output_names()->Get(i)->str() << ": "
         << typeText(*entry->values()->Get(entry->outputs()->Get(i)));
    }
    size_t opCount = entry->ops() ? entry->ops()->size() : 0;
    os << "), " << opCount << " ops\n";
    size_t dispatchCount = entry->dispatches() ? entry->dispatches()->size() : 0;
    if (entry->arena_offsets()) {
      os << "  graph mode: " << dispatchCount << " kernel dispatches, arena "
         << entry->arena_bytes() << " bytes\n";
    }
    size_t nextDispatch = 0;
    for (size_t i = 0; i < opCount; ++i) {
      const fb::Op &op = *entry->ops()->Get(i);
      if (nextDispatch < dispatchCount &&
          entry->dispatches()->Get(nextDispatch)->first_op() == i) {
        const fb::Dispatch &dispatch = *entry->dispatches()->Get(nextDispatch++);
        os << "  kernel " << root.kernels()->Get(dispatch.kernel())->str()
           << " (" << dispatch.tiles() << " tiles";
        if (dispatch.panel_inputs()) {
          os << "; reads";
          for (uint32_t position : *dispatch.panel_inputs()) {
            os << " %" << dispatch.inputs()->Get(position);
          }
          os << " as panels";
        }
        os << ") computes:\n";
      }
      int64_t offset =
          entry->arena_offsets() ? entry->arena_offsets()->Get(op.results()->Get(0)) : -1;
      os << "  %" << op.results()->Get(0);
      if (offset >= 0) {
        os << "[arena+" << offset << "]";
      } else if (offset == kDerivedFromWeights) {
        os << "[from weights]";
      }
      os << " = " << fb::EnumNameOpKind(op.kind());
      if (op.operands()) {
        for (size_t j = 0; j < op.operands()->size(); ++j) {
          os << (j ? ", %" : " %") << op.operands()->Get(j);
        }
      }
      os << " : " << typeText(*entry->values()->Get(op.results()->Get(0)));
      if (op.location() && op.location()->size()) {
        os << "  @ " << op.location()->str();
      }
      os << "\n";
    }
  }
}
