//===- Communicator.h - the ranks of a sharded program ----------*- C++ -*-===//
//
// A program compiled for a device grid (model.bin's `grid`, upstream MLIR's
// shard.grid) runs as one MPI process per rank: `mpirun -n N mf-run ...`.
// This is the runtime's only door to MPI; everything else sees ranks,
// coordinates and collectives on tensors.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_HAL_COMMUNICATOR_H
#define MFC_RUNTIME_HAL_COMMUNICATOR_H

#include "runtime/base/Status.h"
#include "runtime/base/Tensor.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace mfrt {

class Communicator {
public:
  /// The ranks of `grid` (row-major: rank r sits at r's coordinates). For
  /// one rank, no MPI. Otherwise the process must have been started by
  /// mpirun with as many ranks as the grid has (else an error that says
  /// how to launch it); MPI is initialized here.
  static StatusOr<std::unique_ptr<Communicator>>
  start(const std::vector<int64_t> &grid);
  ~Communicator();

  int64_t rank() const { return rank_; }
  /// The grid's extents, one per axis.
  const std::vector<int64_t> &grid() const { return grid_; }
  int64_t size() const { return size_; }
  /// The index of this rank among the ranks that differ only along `axes`
  /// (row-major over `axes` in order), and how many such ranks there are.
  int64_t indexAlong(const std::vector<int64_t> &axes) const;
  int64_t extentAlong(const std::vector<int64_t> &axes) const;

  /// `output` = the sum of `input` over the ranks that differ only along
  /// `axes`. Sums are accumulated in f32: f16 and bf16 tensors are widened
  /// first (MPI has no 16-bit float types).
  Status allReduceSum(const Tensor &input, Tensor &output,
                      const std::vector<int64_t> &axes);

  /// `values` = their elementwise max (or sum) over the ranks that differ
  /// only along `axes`, in place: a vocabulary-parallel kernel's per-token
  /// statistics.
  Status allReduceInPlace(double *values, int64_t count, bool max,
                          const std::vector<int64_t> &axes);

  /// `whole` = the tensor whose blocks along `dim` the ranks that differ
  /// only along `axes` hold (`block` is this rank's), on every one of them.
  Status allGather(const Tensor &block, Tensor &whole, int64_t dim,
                   const std::vector<int64_t> &axes);

  /// `output` = this rank's block along `dim` of the sum of `input` over
  /// the ranks that differ only along `axes` (summed in f32).
  Status reduceScatterSum(const Tensor &input, Tensor &output, int64_t dim,
                          const std::vector<int64_t> &axes);
  /// `output` = this rank's block along `dim` of `input` (no
  /// communication: every rank holds `input` whole).
  Status keepBlock(const Tensor &input, Tensor &output, int64_t dim,
                   const std::vector<int64_t> &axes) const;

  /// Expert parallelism's count exchange: `sent` cuts this rank's rows
  /// into S segments, S / n for each of the n ranks that differ only along
  /// `axes` (rank j's in order); `received` (i32 [S + 1], may be `sent`'s
  /// buffer) cuts what arrives into segments by sender, offsets from 0
  /// (segment i * S / n + l: sender i's segment this * S / n + l).
  Status allToAllOffsets(const Tensor &sent, Tensor &received,
                         const std::vector<int64_t> &axes);
  /// Moves the rows of `rows` that `sendOffsets` give each rank to it
  /// (MPI_Alltoallv); `result` holds what arrives, laid out by
  /// `recvOffsets` (allToAllOffsets of the senders'), its other rows zero.
  Status allToAll(const Tensor &rows, const Tensor &sendOffsets,
                  const Tensor &recvOffsets, Tensor &result,
                  const std::vector<int64_t> &axes);
  /// Cuts `input` into n blocks along `splitDim` (n the ranks that differ
  /// only along `axes`), sends block j to rank j, and joins the blocks it
  /// receives along `concatDim` in the senders' order (MPI_Alltoall).
  Status allToAllDims(const Tensor &input, Tensor &output, int64_t splitDim,
                      int64_t concatDim, const std::vector<int64_t> &axes);

  /// Point to point along one grid axis (a pipeline's stages): sends
  /// `tensor` to the rank at index `to` along `axis` (the same coordinates
  /// otherwise), without waiting; the communicator keeps the tensor until
  /// the send is done (its storage must not change). `tag` tells the
  /// messages between two ranks apart.
  Status send(Tensor tensor, int64_t axis, int64_t to, int tag);
  /// Lets go of the tensors of the sends that are done, without waiting.
  Status progressSends();
  /// Receives into `tensor` (its size: what the sender sends) from the
  /// rank at index `from` along `axis`, waiting for it.
  Status receive(Tensor &tensor, int64_t axis, int64_t from, int tag);
  /// Waits until every send() so far is done.
  Status waitSends();

  /// Rank 0's `bytes` on every rank (replacing theirs): what a server's
  /// rank 0 decided that the other ranks must do the same.
  Status broadcastBytes(std::vector<uint8_t> &bytes);

  /// Whether every rank holds the same `facts` (a name and a value each,
  /// the same names in the same order on every rank): the first exchange
  /// of a run, so that ranks given different files or flags stop with
  /// this error instead of corrupting or hanging in a collective. The
  /// error names each fact that differs.
  Status
  checkAgreement(const std::vector<std::pair<std::string, uint64_t>> &facts);

  /// Ends every rank's process after one failed: the message is printed
  /// by the failing rank, and no rank is left waiting in a collective.
  [[noreturn]] void abort(int exitCode);

  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;

private:
  Communicator() = default;
  struct Groups;
  /// The communicator of the ranks that differ only along `axes` (every
  /// one made at start: ranks of different pipeline stages run different
  /// programs, so none could be made at first use, a collective of all
  /// ranks), or an error.
  StatusOr<void *> group(const std::vector<int64_t> &axes);
  /// group(axes) for a call of `count` MPI items (an error beyond MPI's
  /// int counts, `what` naming them).
  StatusOr<void *> groupFor(const std::vector<int64_t> &axes, int64_t count,
                            const char *what);

  /// `bytes` of scratch memory, reused by every collective (a step's
  /// collectives would otherwise allocate and zero their staging buffers
  /// each time); valid until the next call.
  uint8_t *scratch(size_t bytes) const;

  std::vector<int64_t> grid_;
  int64_t rank_ = 0, size_ = 1;
  std::unique_ptr<Groups> groups_;
  mutable std::unique_ptr<uint8_t[]> scratch_;
  mutable size_t scratchBytes_ = 0;
};

} // namespace mfrt

#endif // MFC_RUNTIME_HAL_COMMUNICATOR_H
