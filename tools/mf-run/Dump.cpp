//===- Dump.cpp - print an executable readably ----------------------------===//

#include "tools/mf-run/Dump.h"

#include "runtime/format/HostProgram.h"

#include <cstdio>

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
  char registry[17];
  std::snprintf(registry, sizeof(registry), "%016llx",
                static_cast<unsigned long long>(root.op_registry()));
  os << "mfc executable, format version " << root.format_version()
     << " (op registry " << registry << "), target "
     << (root.target() ? root.target()->str() : "?") << "\n";
  if (const fb::KernelTarget *kernels = root.kernel_target()) {
    os << "kernels compiled for " << kernels->triple()->str() << ", CPU "
       << kernels->cpu()->str() << ", features";
    size_t count = kernels->features() ? kernels->features()->size() : 0;
    for (size_t i = 0; i < count; ++i) {
      os << (i ? "," : " ") << kernels->features()->Get(i)->str();
    }
    os << (count ? "" : " (none)") << "\n";
  }
  if (root.grid()) {
    int64_t ranks = 1;
    os << "device grid ";
    for (size_t i = 0; i < root.grid()->size(); ++i) {
      os << (i ? "x" : "") << root.grid()->Get(i);
      ranks *= root.grid()->Get(i);
    }
    os << " (" << gridAxesText(root.grid()->size()) << "): run with mpirun -n "
       << ranks << "\n";
    if (root.grid()->size() > kContextAxis) {
      int64_t contextRanks = root.grid()->Get(kContextAxis);
      ContextRuns runs = contextRunsOf(model, 0, contextRanks);
      size_t count = runs.starts.size();
      os << "context parallelism: each of " << contextRanks << " ranks holds "
         << count << " run" << (count > 1 ? "s" : "") << " of " << runs.length
         << " positions of each sequence"
         << (count > 1 ? " (causal load balance)" : "") << "\n";
    }
  }
  if (const fb::Pipeline *pipeline = executable.pipeline()) {
    os << "pipeline: " << pipeline->stages()->size() << " stages";
    if (pipeline->chunks() > 1) {
      os << " of " << pipeline->chunks()
         << (mfshapes::isVShapedScheduler(pipeline->scheduler()->str())
                 ? " chunks in a V"
                 : " interleaved chunks");
    }
    os << ", " << pipeline->micro_batches() << " micro-batches a step, "
       << pipeline->scheduler()->str() << "\n";
    for (size_t stage = 0; stage < pipeline->stages()->size(); ++stage) {
      const fb::StageSchedule &own = *pipeline->stages()->Get(stage);
      os << "  stage " << stage << ":";
      // F<micro-batch>, with chunks F<micro-batch>.<chunk>; W: weight
      // gradients.
      for (size_t slot = 0; slot < own.backward()->size(); ++slot) {
        os << (own.weight() && own.weight()->Get(slot) ? " W"
               : own.backward()->Get(slot)             ? " B"
                                                       : " F")
           << own.micro_batch()->Get(slot);
        if (pipeline->chunks() > 1) {
          os << "." << own.chunk()->Get(slot);
        }
      }
      os << " (" << own.in_flight() << " micro-batches kept)\n";
    }
  }
  os << "model " << (model.name() ? model.name()->str() : "?") << ": "
     << fb::EnumNameModelFamily(model.family()) << ", run_mode "
     << (model.run_mode() ? model.run_mode()->str() : "?") << ", batch "
     << model.batch_size() << ", seq_length " << model.seq_length()
     << ", vocab " << model.vocab_size() << ", layers " << model.num_layers()
     << (model.kv_block_size() > 0
             ? ", paged KV cache: " + std::to_string(model.kv_num_blocks()) +
                   " blocks of " + std::to_string(model.kv_block_size()) +
                   " positions"
         : model.use_past() ? ", KV cache"
                            : "")
     << "\n";
  // The generation defaults mf-run's flags override.
  os << "generation: bos " << model.bos_token_id() << ", eos";
  if (model.eos_token_ids()) {
    for (int64_t id : *model.eos_token_ids()) {
      os << " " << id;
    }
  }
  os << ", pad " << model.pad_token_id() << ", ";
  if (model.do_sample()) {
    os << "sampling (top_k " << model.top_k() << ", top_p " << model.top_p()
       << ", temperature " << model.temperature() << ")";
  } else {
    os << "greedy";
  }
  if (model.repetition_penalty() != 1.0) {
    os << ", repetition_penalty " << model.repetition_penalty();
  }
  os << "\n";
  // Where text and weights come from when mf-run is not told.
  if (model.tokenizer()) {
    os << "tokenizer: " << model.tokenizer()->str();
    if (model.tokenizer_class()) {
      os << " (" << model.tokenizer_class()->str() << ")";
    }
    os << "\n";
  }
  if (model.chat_template()) {
    os << "chat template: " << model.chat_template()->size()
       << " characters from the YAML\n";
  }
  if (model.load_checkpoint()) {
    os << "weights (load_checkpoint): " << model.load_checkpoint()->str() << "\n";
  }
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
    if (parameter.split_dim() >= 0) {
      // A rank's block of the whole weight a checkpoint holds.
      Shape whole = Executable::shapeOf(*parameter.type());
      os << " split along dim " << parameter.split_dim() << " over grid axes [";
      for (size_t a = 0; a < parameter.split_axes()->size(); ++a) {
        int16_t axis = parameter.split_axes()->Get(a);
        os << (a ? ", " : "") << axis;
        whole[parameter.split_dim()] *= root.grid()->Get(axis);
      }
      os << "]";
      if (parameter.split_parts() > 1) {
        os << " in each of " << parameter.split_parts() << " parts";
      }
      os << " (whole " << formatShape(whole) << ")";
    }
    if (parameter.mf_name()) {
      os << " (mindformers: " << parameter.mf_name()->str() << ")";
    }
    if (parameter.stages() && parameter.stages()->size() > 0) {
      os << (parameter.stages()->size() > 1 ? " stages" : " stage");
      for (size_t s = 0; s < parameter.stages()->size(); ++s) {
        os << (s ? ", " : " ") << parameter.stages()->Get(s);
      }
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
  for (const fb::Entry *entry : entriesAndInitializer(root)) {
    os << (entry == root.initializer() ? "initializer " : "entry ")
       << entry->name()->str() << "(";
    for (size_t i = 0; i < entry->inputs()->size(); ++i) {
      os << (i ? ", " : "") << entry->input_names()->Get(i)->str() << ": "
         << typeText(*entry->values()->Get(entry->inputs()->Get(i)));
    }
    os << ") -> (";
    for (size_t i = 0; i < entry->outputs()->size(); ++i) {
      std::string name = entry->output_names()->Get(i)->str();
      os << (i ? ", " : "")
         << (name.empty() ? "%" + std::to_string(entry->outputs()->Get(i))
                          : name)
         << ": " << typeText(*entry->values()->Get(entry->outputs()->Get(i)));
    }
    size_t opCount = entry->ops() ? entry->ops()->size() : 0;
    os << "), " << opCount << " ops";
    if (entry->stage() >= 0) {
      os << ", pipeline stage " << entry->stage();
      // (A stage's train_step updates every chunk.)
      std::string name = entry->name()->str();
      if (executable.pipelineChunks() > 1 &&
          name !=
              mfshapes::stageEntryPrefix(entry->stage(), 0, 1) + "train_step") {
        os << " chunk " << entry->chunk();
      }
    }
    os << "\n";
    const fb::HostProgram *host = entry->host();
    // Per op: the command that computes it (-1: none) and where each value
    // is stored.
    std::vector<int64_t> commandOf(opCount, -1);
    std::vector<std::string> storedAt(entry->values()->size());
    size_t dispatchCount = 0;
    if (host) {
      for (uint32_t c = 0; c < host->commands()->size(); ++c) {
        const fb::Command &command = *host->commands()->Get(c);
        dispatchCount += command.kind() == fb::CommandKind::Dispatch;
        for (uint32_t i = 0; i < command.op_count() &&
                             command.first_op() + i < opCount; ++i) {
          commandOf[command.first_op() + i] = c;
        }
        for (const fb::Binding *binding : *command.bindings()) {
          if (binding->access() != fb::Access::Write ||
              binding->value() >= storedAt.size() ||
              binding->buffer() >= host->buffers()->size()) {
            continue;
          }
          const fb::Buffer &buffer = *host->buffers()->Get(binding->buffer());
          if (buffer.kind() == fb::BufferKind::Arena) {
            storedAt[binding->value()] = "[arena+" + std::to_string(buffer.index()) + "]";
          } else if (buffer.kind() == fb::BufferKind::Derived) {
            storedAt[binding->value()] =
                "[slot " + std::to_string(buffer.index()) + "]";
          }
        }
      }
      // What the initializer computed when the weights changed.
      for (const fb::Buffer *buffer : *host->buffers()) {
        if (buffer->kind() == fb::BufferKind::Derived && buffer->holds() >= 0 &&
            static_cast<size_t>(buffer->holds()) < storedAt.size()) {
          storedAt[buffer->holds()] =
              "[from weights: slot " + std::to_string(buffer->index()) + "]";
        }
      }
      os << "  graph mode: " << dispatchCount << " kernel dispatches, "
         << host->commands()->size() << " commands, arena "
         << host->arena_bytes() << " bytes\n";
    }
    int64_t shown = -1;
    for (size_t i = 0; i < opCount; ++i) {
      const fb::Op &op = *entry->ops()->Get(i);
      if (commandOf[i] >= 0 && commandOf[i] != shown) {
        shown = commandOf[i];
        const fb::Command &command = *host->commands()->Get(shown);
        if (command.kind() == fb::CommandKind::Dispatch &&
            command.kernel() < root.kernels()->size()) {
          const fb::KernelSignature &signature =
              *root.kernel_signatures()->Get(command.kernel());
          os << "  kernel " << root.kernels()->Get(command.kernel())->str()
             << " (" << signature.tiles() << " tiles";
          for (auto [inputs, layout] :
               {std::pair{signature.panel_inputs(), "panels"},
                {signature.dot_panel_inputs(), "dot panels"}}) {
            if (!inputs) {
              continue;
            }
            os << "; reads";
            for (uint32_t position : *inputs) {
              if (position < command.bindings()->size()) {
                os << " %" << command.bindings()->Get(position)->value();
              }
            }
            os << " as " << layout;
          }
          os << ") computes:\n";
        }
      }
      for (size_t r = 0; r < op.results()->size(); ++r) {
        uint32_t id = op.results()->Get(r);
        os << (r ? ", %" : "  %") << id << storedAt[id];
      }
      os << " = " << fb::EnumNameOpKind(op.kind());
      if (op.operands()) {
        for (size_t j = 0; j < op.operands()->size(); ++j) {
          os << (j ? ", %" : " %") << op.operands()->Get(j);
        }
      }
      for (size_t r = 0; r < op.results()->size(); ++r) {
        os << (r ? ", " : " : ")
           << typeText(*entry->values()->Get(op.results()->Get(r)));
      }
      if (op.location() && op.location()->size()) {
        os << "  @ " << op.location()->str();
      }
      os << "\n";
    }
  }
}
