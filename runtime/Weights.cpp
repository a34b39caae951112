//===- Weights.cpp - parameter values for an executable -------------------===//

#include "runtime/Weights.h"

#include "runtime/Hash.h"
#include "runtime/Safetensors.h"

#include <cmath>
#include <map>
#include <random>
#include <set>

using namespace mfrt;

StatusOr<Weights> Weights::initialize(const Executable &executable,
                                      Allocator &allocator, uint64_t seed) {
  Weights weights;
  if (!executable.root().parameters()) {
    return weights;
  }
  for (const fb::Parameter *parameter : *executable.root().parameters()) {
    StatusOr<Tensor> tensor =
        allocator.allocate(Executable::dtypeOf(*parameter->type()),
                           Executable::shapeOf(*parameter->type()));
    if (!tensor) {
      return tensor.status();
    }
    int64_t count = tensor->numElements();
    switch (parameter->init()) {
    case fb::ParameterInit::Zeros:
      break;
    case fb::ParameterInit::Ones:
      for (int64_t i = 0; i < count; ++i) {
        tensor->storeFloat(i, 1.0f);
      }
      break;
    case fb::ParameterInit::Normal: {
      std::mt19937_64 generator(seed ^ fnv1a64(parameter->name()->data(), parameter->name()->size()));
      // Box-Muller on our own uniform draws: identical on every platform.
      auto uniform = [&] {
        return (static_cast<double>(generator() >> 11) + 0.5) * 0x1.0p-53;
      };
      for (int64_t i = 0; i < count; ++i) {
        double value = std::sqrt(-2.0 * std::log(uniform())) *
                       std::cos(2.0 * M_PI * uniform());
        tensor->storeFloat(i, static_cast<float>(value * parameter->std()));
      }
      break;
    }
    }
    weights.tensors_.push_back(tensor.take());
  }
  return weights;
}

StatusOr<Weights> Weights::load(const Executable &executable,
                                Allocator &allocator, const std::string &path,
                                const std::string &otherPrefix) {
  StatusOr<SafetensorsFile> file = SafetensorsFile::open(path);
  if (!file) {
    return file.status();
  }
  const auto &tensors = file->tensors();
  Weights weights;
  std::set<std::string> used;
  if (executable.root().parameters()) {
    for (const fb::Parameter *parameter : *executable.root().parameters()) {
      std::string name = parameter->name()->str();
      auto it = tensors.find(name);
      if (it == tensors.end() && parameter->mf_name()) {
        it = tensors.find(parameter->mf_name()->str());
      }
      const std::string prefix = "transformer.";
      if (it == tensors.end() && name.rfind(prefix, 0) == 0) {
        it = tensors.find(name.substr(prefix.size())); // GPT-2's original files
      }
      if (it == tensors.end()) {
        return Status::error(
            "'" + path + "' has no tensor '" + name + "'" +
            (parameter->mf_name()
                 ? " (nor '" + parameter->mf_name()->str() + "')"
                 : std::string()) +
            "; the model needs it");
      }
      used.insert(it->first);
      Shape shape = Executable::shapeOf(*parameter->type());
      const SafetensorsEntry &entry = it->second;
      if (entry.shape != shape) {
        return Status::error("'" + path + "': tensor '" + it->first +
                             "' has shape " + formatShape(entry.shape) +
                             ", the model needs " + formatShape(shape));
      }
      if (entry.dtype == DType::I32) {
        return Status::error("'" + path + "': tensor '" + it->first +
                             "' is I32, parameters are floating point");
      }
      StatusOr<Tensor> tensor =
          allocator.allocate(Executable::dtypeOf(*parameter->type()), shape);
      if (!tensor) {
        return tensor.status();
      }
      Tensor source(entry.dtype, entry.shape,
                    std::shared_ptr<void>(const_cast<uint8_t *>(entry.data),
                                          [](void *) {}));
      for (int64_t i = 0; i < tensor->numElements(); ++i) {
        tensor->storeFloat(i, source.loadFloat(i));
      }
      weights.tensors_.push_back(tensor.take());
    }
  }
  for (const auto &[name, entry] : tensors) {
    bool other = !otherPrefix.empty() && name.rfind(otherPrefix, 0) == 0;
    if (!used.count(name) && !other) {
      return Status::error("'" + path + "' has a tensor '" + name +
                           "' that the model does not use; is it the "
                           "checkpoint of another config?");
    }
  }
  return weights;
}

Status Weights::save(const Executable &executable,
                     const std::string &path) const {
  std::vector<std::pair<std::string, const Tensor *>> named;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    named.emplace_back(executable.root().parameters()->Get(i)->name()->str(),
                       &tensors_[i]);
  }
  return writeSafetensors(path, named);
}
