//===- Weights.h - parameter values for an executable -----------*- C++ -*-===//

#ifndef MFC_RUNTIME_IO_WEIGHTS_H
#define MFC_RUNTIME_IO_WEIGHTS_H

#include "runtime/format/Executable.h"
#include "runtime/hal/Allocator.h"
#include "runtime/hal/Communicator.h"
#include "runtime/io/Calibration.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mfrt {

/// One tensor per parameter of the executable, in its declared dtype.
class Weights {
public:
  /// Deterministic values: zeros/ones as declared, normal(0, std) from a
  /// generator seeded by `seed` and the parameter's name, so a parameter's
  /// values do not depend on which others exist.
  ///
  /// In a sharded program (`ranks` given), a split parameter is this
  /// rank's block of the whole weight, with the same values as the
  /// whole weight of a single-rank run.
  ///
  /// A calibrated weight (static int8 activations: SmoothQuant) is
  /// quantized with the activation ranges of `calibration`, which must have
  /// it.
  static StatusOr<Weights> initialize(const Executable &executable,
                                      Allocator &allocator, uint64_t seed,
                                      Communicator *ranks = nullptr,
                                      const Calibration *calibration = nullptr);

  /// Values from a safetensors file, by Hugging Face name or MindFormers
  /// name, converted to the declared dtype. A missing tensor, an extra one
  /// (other than those named `otherPrefix`...: a training checkpoint's
  /// optimizer state) or a wrong shape is an error naming it.
  static StatusOr<Weights> load(const Executable &executable,
                                Allocator &allocator, const std::string &path,
                                const std::string &otherPrefix = "");
  /// The same over several files (base weights and LoRA adapters, say): a
  /// parameter comes from the last file that has it.
  /// A sharded program's rank reads only its block of a split parameter.
  /// With `inPlace`, a tensor that can serve as it is in the mapped file
  /// (CheckpointFile::view) is not copied. Off by default: measured here,
  /// the copy (in 2 MiB pages) decodes llama-100m ~20% faster than kernels
  /// reading 4 KiB file pages, at the price of a slower start.
  static StatusOr<Weights>
  load(const Executable &executable, Allocator &allocator,
       const std::vector<std::string> &paths,
       const std::string &otherPrefix = "", Communicator *ranks = nullptr,
       bool inPlace = false, const Calibration *calibration = nullptr);

  const Tensor &operator[](size_t index) const { return tensors_[index]; }
  /// For the optimizer, which updates the parameters in place (through
  /// entries that assign them: their executors call noteUpdated()).
  Tensor &mutableTensor(size_t index) { return tensors_[index]; }
  size_t size() const { return tensors_.size(); }

  /// Graph Mode alone (mf-run without --check) keeps a parameter that its
  /// kernels read only as panels (runtime/kernels/PanelGemm.h) as panels, in
  /// place of the stored layout: no second copy. The executor that packs
  /// it notes so; PyNative refuses such a parameter, save() and
  /// saveMerged() write the stored layout.
  bool storedAsPanels(size_t index) const {
    return index < asPanels_.size() && asPanels_[index].has_value();
  }
  /// The layout it is stored in (storedAsPanels(index) must hold).
  PanelLayout panelLayout(size_t index) const { return *asPanels_[index]; }
  void noteStoredAsPanels(size_t index, PanelLayout layout) {
    asPanels_.resize(tensors_.size());
    asPanels_[index] = layout;
  }

  /// Graph Mode alone may also release a parameter that it reads only to
  /// derive values from (a cast to the compute dtype): once they are
  /// computed they replace it. Reading it afterwards (PyNative, save())
  /// is an error naming it.
  bool released(size_t index) const {
    return index < released_.size() && released_[index];
  }
  void release(size_t index) {
    released_.resize(tensors_.size());
    released_[index] = true;
    tensors_[index] = Tensor();
  }

  /// Whether parameter `index` is another pipeline stage's, which this
  /// rank does not hold (its tensor is empty).
  bool heldElsewhere(size_t index) const {
    return index < elsewhere_.size() && elsewhere_[index];
  }

  /// Bytes of parameters served in place from mapped weight files (not
  /// in the allocator's count).
  uint64_t mappedBytes() const { return mappedBytes_; }

  /// The LoRA adapters load() found in no file and initialized as their
  /// `init` says (A HeUniform, B zeros: the model starts as its base), as
  /// MindFormers' LoRA layers start from a base checkpoint.
  const std::vector<std::string> &initializedAdapters() const {
    return initializedAdapters_;
  }

  /// The calibrated weights quantized from float values with a
  /// calibration's ranges (not read quantized from a file).
  int64_t calibratedFromRanges() const { return calibrated_; }

  /// Changes with every update of the parameters: what an executor
  /// computed from them is current while the version is the same.
  uint64_t version() const { return version_; }
  void noteUpdated() { ++version_; }

  /// Writes the weights with every LoRA adapter pair folded into its base
  /// weight (W += lora_scale * B A, transposed for GPT-2's [in, out]
  /// weights), without the adapters: weights for the same model compiled
  /// without pet_config.
  Status saveMerged(const Executable &executable,
                    const std::string &path) const;

  /// Writes every parameter (but the frozen ones, unless `withFrozen`)
  /// under its Hugging Face name, with `metadata`. In a sharded run every
  /// rank calls it (split parameters are gathered whole) and rank 0 writes
  /// the file a single-rank run would.
  Status save(const Executable &executable, const std::string &path,
              Communicator *ranks = nullptr, bool withFrozen = true,
              const std::map<std::string, std::string> &metadata = {}) const;

  /// Writes the LoRA adapters in PEFT's layout into the folder `dir`:
  /// adapter_model.safetensors (names prefixed `base_model.model.`) and
  /// adapter_config.json (r, lora_alpha, target_modules), which PEFT and
  /// vLLM load. Every rank calls it in a sharded run (split adapters are
  /// gathered); rank 0 writes. GPT-2's adapters on a third of the fused
  /// c_attn have no PEFT form: an error.
  Status savePeftAdapters(const Executable &executable, const std::string &dir,
                          Communicator *ranks = nullptr) const;

  /// Parameter `index` whole, as stored: a split one gathered from the
  /// ranks holding its blocks (a collective: every rank calls it).
  StatusOr<Tensor> whole(size_t index, const Executable &executable,
                         Communicator *ranks) const;

  /// whole(), on rank 0 (others get what they hold, or nothing): in a
  /// pipelined run the ranks of the first stage holding it send it there.
  /// A collective: every rank calls it.
  StatusOr<Tensor> wholeOnPrimary(size_t index, const Executable &executable,
                                  Communicator *ranks) const;

private:
  /// Parameter i, called `name`, as stored (an [N, K] one unpacked from
  /// its panels).
  StatusOr<Tensor> asStored(size_t index, const std::string &name) const;

  std::vector<Tensor> tensors_;
  std::vector<std::optional<PanelLayout>> asPanels_;
  std::vector<bool> released_;
  std::vector<bool> elsewhere_; ///< another pipeline stage's
  uint64_t version_ = 0;
  uint64_t mappedBytes_ = 0;
  std::vector<std::string> initializedAdapters_;
  int64_t calibrated_ = 0;
};

/// The pipeline stage whose parameters and entries this rank holds and
/// runs (its index along the grid's axis 2), or -1 for a program that
/// is not pipelined (every rank holds every parameter).
int64_t stageOfRank(const Executable &executable, const Communicator *ranks);

} // namespace mfrt

#endif // MFC_RUNTIME_IO_WEIGHTS_H
