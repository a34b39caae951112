//===- Communicator.cpp - the ranks of a sharded program over MPI ---------===//

#include "runtime/hal/Communicator.h"

#include "runtime/format/Executable.h"

// MPI's C API only: OpenMPI's deprecated C++ bindings need a library of
// their own.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>

using namespace mfrt;

/// The communicators of the rank groups collectives have used, by axes.
struct Communicator::Groups {
  std::map<std::vector<int64_t>, MPI_Comm> byAxes;
  /// send()'s requests and tensors, until done.
  std::vector<MPI_Request> sends;
  std::vector<Tensor> sent;
};

namespace {

std::string gridText(const std::vector<int64_t> &grid) {
  std::string text;
  for (int64_t extent : grid) {
    text += (text.empty() ? "" : "x") + std::to_string(extent);
  }
  return text;
}

/// Whether an MPI launcher (OpenMPI's mpirun, or a PMI one) started us.
bool startedByMpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") ||
         std::getenv("PMIX_RANK");
}

} // namespace

StatusOr<std::unique_ptr<Communicator>>
Communicator::start(const std::vector<int64_t> &grid) {
  std::unique_ptr<Communicator> communicator(new Communicator());
  communicator->grid_ = grid;
  int64_t ranks = 1;
  for (int64_t extent : grid) {
    ranks *= extent;
  }
  if (ranks == 1) {
    return communicator;
  }
  std::string compiled = "model.bin is compiled for " + std::to_string(ranks) +
                         " ranks (a " + gridText(grid) +
                         " grid: " + gridAxesText(grid.size()) + ")";
  if (!startedByMpirun()) {
    return Status::error(StatusCode::FailedPrecondition,
                         compiled + ": run mpirun -n " + std::to_string(ranks) +
                             " mf-run ...");
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
    return Status::error(StatusCode::Unavailable, "MPI_Init failed");
  }
  communicator->groups_ = std::make_unique<Groups>();
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  communicator->rank_ = rank;
  communicator->size_ = size;
  if (size != ranks) {
    return Status::error(StatusCode::FailedPrecondition,
                         compiled + ", but mpirun started " +
                             std::to_string(size) + ": run mpirun -n " +
                             std::to_string(ranks) + " mf-run ...");
  }
  // Every group of axes, each order of them (the ranks' order in the
  // group), made in the same order on every rank.
  size_t axes = grid.size();
  for (uint32_t subset = 1; subset < (1u << axes); ++subset) {
    std::vector<int64_t> along, others;
    for (size_t axis = 0; axis < axes; ++axis) {
      (subset & (1u << axis) ? along : others)
          .push_back(static_cast<int64_t>(axis));
    }
    do {
      MPI_Comm &comm = communicator->groups_->byAxes[along];
      if (MPI_Comm_split(MPI_COMM_WORLD,
                         static_cast<int>(communicator->indexAlong(others)),
                         static_cast<int>(communicator->indexAlong(along)),
                         &comm) != MPI_SUCCESS) {
        return Status::error(StatusCode::Unavailable, "MPI_Comm_split failed");
      }
    } while (std::next_permutation(along.begin(), along.end()));
  }
  return communicator;
}

Communicator::~Communicator() {
  if (!groups_) {
    return;
  }
  for (auto &[axes, comm] : groups_->byAxes) {
    if (comm != MPI_COMM_NULL) {
      MPI_Comm_free(&comm);
    }
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    MPI_Finalize();
  }
}

// An axis the grid does not have (a program without a grid has none) has
// one rank.
int64_t Communicator::indexAlong(const std::vector<int64_t> &axes) const {
  int64_t index = 0;
  for (int64_t axis : axes) {
    if (axis >= static_cast<int64_t>(grid_.size())) {
      continue;
    }
    int64_t stride = 1;
    for (size_t later = axis + 1; later < grid_.size(); ++later) {
      stride *= grid_[later];
    }
    index = index * grid_[axis] + (rank_ / stride) % grid_[axis];
  }
  return index;
}

int64_t Communicator::extentAlong(const std::vector<int64_t> &axes) const {
  int64_t extent = 1;
  for (int64_t axis : axes) {
    extent *= axis < static_cast<int64_t>(grid_.size()) ? grid_[axis] : 1;
  }
  return extent;
}

Status Communicator::allReduceSum(const Tensor &input, Tensor &output,
                                  const std::vector<int64_t> &axes) {
  if (input.numElements() != output.numElements() ||
      input.dtype() != output.dtype()) {
    return Status::error(
        StatusCode::Internal,
        "all_reduce: the result's type differs from its operand's");
  }
  int64_t count = input.numElements();
  if (extentAlong(axes) == 1) {
    if (output.data() != input.data()) {
      std::memmove(output.data(), input.data(), input.byteSize());
    }
    return Status::ok();
  }
  StatusOr<void *> made = groupFor(axes, count, "all_reduce of elements");
  if (!made) {
    return made.status();
  }
  MPI_Comm group = static_cast<MPI_Comm>(*made);
  int status;
  if (input.dtype() == DType::F32) {
    // The memory plan may place the result over the operand, which dies
    // here (MPI wants the same buffer or disjoint ones).
    const uint8_t *in = static_cast<const uint8_t *>(input.data());
    uint8_t *out = static_cast<uint8_t *>(output.data());
    size_t bytes = input.byteSize();
    bool overlap = in < out + bytes && out < in + bytes;
    if (overlap && in != out) {
      std::memmove(out, in, bytes);
    }
    status = MPI_Allreduce(overlap ? MPI_IN_PLACE : input.data(), output.data(),
                           static_cast<int>(count), MPI_FLOAT, MPI_SUM, group);
  } else {
    float *sums = reinterpret_cast<float *>(scratch(count * sizeof(float)));
    input.loadFloats(sums);
    status = MPI_Allreduce(MPI_IN_PLACE, sums, static_cast<int>(count),
                           MPI_FLOAT, MPI_SUM, group);
    output.storeFloats(sums);
  }
  return status == MPI_SUCCESS
             ? Status::ok()
             : Status::error(StatusCode::Unavailable, "MPI_Allreduce failed");
}

Status Communicator::allReduceInPlace(double *values, int64_t count, bool max,
                                      const std::vector<int64_t> &axes) {
  if (extentAlong(axes) == 1) {
    return Status::ok();
  }
  StatusOr<void *> made = groupFor(axes, count, "all_reduce of values");
  if (!made) {
    return made.status();
  }
  return MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(count),
                       MPI_DOUBLE, max ? MPI_MAX : MPI_SUM,
                       static_cast<MPI_Comm>(*made)) == MPI_SUCCESS
             ? Status::ok()
             : Status::error(StatusCode::Unavailable, "MPI_Allreduce failed");
}

Status Communicator::broadcastBytes(std::vector<uint8_t> &bytes) {
  if (size_ == 1) {
    return Status::ok();
  }
  uint64_t length = bytes.size();
  if (MPI_Bcast(&length, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
    return Status::error(StatusCode::Unavailable, "MPI_Bcast failed");
  }
  if (length > static_cast<uint64_t>(INT32_MAX)) {
    return Status::error(StatusCode::InvalidArgument,
                         "a broadcast of " + std::to_string(length) +
                             " bytes is beyond MPI's int counts");
  }
  bytes.resize(length);
  return MPI_Bcast(bytes.data(), static_cast<int>(length), MPI_BYTE, 0,
                   MPI_COMM_WORLD) == MPI_SUCCESS
             ? Status::ok()
             : Status::error(StatusCode::Unavailable, "MPI_Bcast failed");
}

Status Communicator::checkAgreement(
    const std::vector<std::pair<std::string, uint64_t>> &facts) {
  if (size_ == 1) {
    return Status::ok();
  }
  // Max of each value and of its negation: equal everywhere iff the max
  // is minus the min. Values keep 52 bits, which doubles hold exactly.
  size_t count = facts.size();
  std::vector<double> extremes(2 * count);
  for (size_t i = 0; i < count; ++i) {
    double value = static_cast<double>(facts[i].second & ((1ull << 52) - 1));
    extremes[i] = value;
    extremes[count + i] = -value;
  }
  std::vector<int64_t> everyAxis(grid_.size());
  std::iota(everyAxis.begin(), everyAxis.end(), 0);
  MFRT_RETURN_IF_ERROR(allReduceInPlace(extremes.data(),
                                        static_cast<int64_t>(extremes.size()),
                                        /*max=*/true, everyAxis));
  std::string differing;
  for (size_t i = 0; i < count; ++i) {
    if (extremes[i] != -extremes[count + i]) {
      differing += (differing.empty() ? "" : ", ") + facts[i].first;
    }
  }
  if (differing.empty()) {
    return Status::ok();
  }
  return Status::error(StatusCode::InvalidArgument,
                       "the ranks of this run were not given the same " +
                           differing +
                           "; every rank must run the same model.bin on the "
                           "same files with the same flags (mpirun -n N "
                           "mf-run ..., one command for all ranks)");
}

StatusOr<void *> Communicator::groupFor(const std::vector<int64_t> &axes,
                                        int64_t count, const char *what) {
  if (count > INT_MAX) {
    return Status::error(StatusCode::Internal,
                         std::string(what) + ": " + std::to_string(count) +
                             ", more than MPI's int count");
  }
  return group(axes);
}

StatusOr<void *> Communicator::group(const std::vector<int64_t> &axes) {
  if (!groups_) {
    return Status::error(StatusCode::FailedPrecondition,
                         "a collective outside an MPI run");
  }
  // The ranks with the same coordinates off `axes`, ordered by theirs
  // along `axes` (start() made them all).
  auto it = groups_->byAxes.find(axes);
  if (it == groups_->byAxes.end()) {
    return Status::error(StatusCode::Internal,
                         "a collective over axes the grid does not have");
  }
  return static_cast<void *>(it->second);
}

Status Communicator::send(Tensor tensor, int64_t axis, int64_t to, int tag) {
  StatusOr<void *> made = groupFor(
      {axis}, static_cast<int64_t>(tensor.byteSize()), "a send of bytes");
  if (!made) {
    return made.status();
  }
  MPI_Request request;
  if (MPI_Isend(tensor.data(), static_cast<int>(tensor.byteSize()), MPI_BYTE,
                static_cast<int>(to), tag, static_cast<MPI_Comm>(*made),
                &request) != MPI_SUCCESS) {
    return Status::error(StatusCode::Unavailable, "MPI_Isend failed");
  }
  groups_->sends.push_back(request);
  groups_->sent.push_back(std::move(tensor));
  return Status::ok();
}

Status Communicator::progressSends() {
  if (!groups_ || groups_->sends.empty()) {
    return Status::ok();
  }
  std::vector<int> done(groups_->sends.size());
  int count = 0;
  if (MPI_Testsome(static_cast<int>(groups_->sends.size()),
                   groups_->sends.data(), &count, done.data(),
                   MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
    return Status::error(StatusCode::Unavailable, "MPI_Testsome failed");
  }
  // Done requests are MPI_REQUEST_NULL now: drop them and their tensors.
  size_t kept = 0;
  for (size_t i = 0; i < groups_->sends.size(); ++i) {
    if (groups_->sends[i] != MPI_REQUEST_NULL) {
      groups_->sends[kept] = groups_->sends[i];
      groups_->sent[kept] = std::move(groups_->sent[i]);
      ++kept;
    }
  }
  groups_->sends.resize(kept);
  groups_->sent.resize(kept);
  return Status::ok();
}

Status Communicator::receive(Tensor &tensor, int64_t axis, int64_t from,
                             int tag) {
  StatusOr<void *> made = groupFor(
      {axis}, static_cast<int64_t>(tensor.byteSize()), "a receive of bytes");
  if (!made) {
    return made.status();
  }
  MPI_Status status;
  if (MPI_Recv(tensor.data(), static_cast<int>(tensor.byteSize()), MPI_BYTE,
               static_cast<int>(from), tag, static_cast<MPI_Comm>(*made),
               &status) != MPI_SUCCESS) {
    return Status::error(StatusCode::Unavailable, "MPI_Recv failed");
  }
  int received = 0;
  MPI_Get_count(&status, MPI_BYTE, &received);
  if (static_cast<size_t>(received) != tensor.byteSize()) {
    return Status::error(StatusCode::Internal,
                         "received " + std::to_string(received) +
                             " bytes, expected " +
                             std::to_string(tensor.byteSize()));
  }
  return Status::ok();
}

Status Communicator::waitSends() {
  if (!groups_ || groups_->sends.empty()) {
    return Status::ok();
  }
  int result = MPI_Waitall(static_cast<int>(groups_->sends.size()),
                           groups_->sends.data(), MPI_STATUSES_IGNORE);
  groups_->sends.clear();
  groups_->sent.clear();
  return result == MPI_SUCCESS
             ? Status::ok()
             : Status::error(StatusCode::Unavailable, "MPI_Waitall failed");
}

Status Communicator::allGather(const Tensor &block, Tensor &whole, int64_t dim,
                               const std::vector<int64_t> &axes) {
  int64_t ranks = extentAlong(axes);
  if (block.dtype() != whole.dtype() ||
      whole.numElements() != block.numElements() * ranks) {
    return Status::error(StatusCode::Internal,
                         "all_gather: the result is not the operand's blocks");
  }
  if (ranks == 1) {
    std::memmove(whole.data(), block.data(), block.byteSize());
    return Status::ok();
  }
  StatusOr<void *> made = groupFor(axes, static_cast<int64_t>(block.byteSize()),
                                   "all_gather of a block of bytes");
  if (!made) {
    return made.status();
  }
  // Every rank's block one after the other (the result may lie over the
  // operand, so not into it), then each put in its place along `dim`.
  uint8_t *blocks = scratch(block.byteSize() * ranks);
  int count = static_cast<int>(block.byteSize());
  if (MPI_Allgather(block.data(), count, MPI_BYTE, blocks, count, MPI_BYTE,
                    static_cast<MPI_Comm>(*made)) != MPI_SUCCESS) {
    return Status::error(StatusCode::Unavailable, "MPI_Allgather failed");
  }
  int64_t length = block.shape()[dim];
  for (int64_t r = 0; r < ranks; ++r) {
    copyBlock(blocks + r * block.byteSize(), whole.data(), whole.shape(), dim,
              r * length, length, dtypeSize(block.dtype()),
              /*intoWhole=*/true);
  }
  return Status::ok();
}

namespace {

/// Offsets `[S + 1]` that ascend from 0 to within [0, rows], cut into
/// `ranks` equal shares of segments; or why not.
Status checkSegments(const Tensor &offsets, int64_t rows, int64_t ranks,
                     const char *what) {
  int64_t segments = offsets.numElements() - 1;
  if (offsets.dtype() != DType::I32 || segments < 1 || segments % ranks != 0) {
    return Status::error(StatusCode::InvalidArgument,
                         std::string("all_to_all: ") + what +
                             " are not i32 segments, a share for each of " +
                             std::to_string(ranks) + " ranks");
  }
  const int32_t *at = offsets.as<int32_t>();
  if (at[0] != 0) {
    return Status::error(StatusCode::InvalidArgument,
                         std::string("all_to_all: ") + what + " start at row " +
                             std::to_string(at[0]) + ", not 0");
  }
  for (int64_t s = 0; s < segments; ++s) {
    if (at[s] < 0 || at[s + 1] < at[s] || at[s + 1] > rows) {
      return Status::error(StatusCode::InvalidArgument,
                           std::string("all_to_all: ") + what + " [" +
                               std::to_string(at[s]) + ", " +
                               std::to_string(at[s + 1]) + ") of segment " +
                               std::to_string(s) + " are not within the " +
                               std::to_string(rows) + " rows");
    }
  }
  return Status::ok();
}

} // namespace

Status Communicator::allToAllOffsets(const Tensor &sent, Tensor &received,
                                     const std::vector<int64_t> &axes) {
  int64_t ranks = extentAlong(axes);
  if (received.dtype() != DType::I32 ||
      received.numElements() != sent.numElements()) {
    return Status::error(StatusCode::Internal,
                         "all_to_all_offsets: the result is not the "
                         "operand's shape");
  }
  MFRT_RETURN_IF_ERROR(
      checkSegments(sent, INT32_MAX, ranks, "the offsets to send"));
  int64_t segments = sent.numElements() - 1;
  const int32_t *at = sent.as<int32_t>();
  std::vector<int32_t> counts(segments), arrive(segments);
  for (int64_t s = 0; s < segments; ++s) {
    counts[s] = at[s + 1] - at[s];
  }
  if (ranks == 1) {
    arrive = counts;
  } else {
    StatusOr<void *> made = group(axes);
    if (!made) {
      return made.status();
    }
    int share = static_cast<int>(segments / ranks);
    if (MPI_Alltoall(counts.data(), share, MPI_INT32_T, arrive.data(), share,
                     MPI_INT32_T,
                     static_cast<MPI_Comm>(*made)) != MPI_SUCCESS) {
      return Status::error(StatusCode::Unavailable, "MPI_Alltoall failed");
    }
  }
  int32_t *out = received.as<int32_t>();
  int64_t sum = 0;
  out[0] = 0;
  for (int64_t s = 0; s < segments; ++s) {
    sum += arrive[s];
    if (arrive[s] < 0 || sum > INT32_MAX) {
      return Status::error(StatusCode::InvalidArgument,
                           "all_to_all_offsets: the ranks send more rows than "
                           "i32 offsets count");
    }
    out[s + 1] = static_cast<int32_t>(sum);
  }
  return Status::ok();
}

Status Communicator::allToAll(const Tensor &rows, const Tensor &sendOffsets,
                              const Tensor &recvOffsets, Tensor &result,
                              const std::vector<int64_t> &axes) {
  int64_t ranks = extentAlong(axes);
  // The loader checked the shapes (no dimension is 0).
  if (rows.dtype() != result.dtype() || rows.shape().empty() ||
      result.shape().empty() ||
      rows.numElements() / rows.dim(0) !=
          result.numElements() / result.dim(0)) {
    return Status::error(StatusCode::Internal,
                         "all_to_all: the result's rows are not the operand's");
  }
  MFRT_RETURN_IF_ERROR(
      checkSegments(sendOffsets, rows.dim(0), ranks, "the rows to send"));
  MFRT_RETURN_IF_ERROR(
      checkSegments(recvOffsets, result.dim(0), ranks, "the rows to receive"));
  if (sendOffsets.numElements() != recvOffsets.numElements()) {
    return Status::error(StatusCode::Internal,
                         "all_to_all: send and receive segments differ");
  }
  size_t rowBytes = rows.byteSize() / rows.dim(0);
  int64_t share = (sendOffsets.numElements() - 1) / ranks;
  const int32_t *send = sendOffsets.as<int32_t>();
  const int32_t *recv = recvOffsets.as<int32_t>();
  // Each rank's rows in one run of segments: counts and places in rows.
  std::vector<int> sendCounts(ranks), sendPlaces(ranks), recvCounts(ranks),
      recvPlaces(ranks);
  for (int64_t j = 0; j < ranks; ++j) {
    sendPlaces[j] = send[j * share];
    sendCounts[j] = send[(j + 1) * share] - send[j * share];
    recvPlaces[j] = recv[j * share];
    recvCounts[j] = recv[(j + 1) * share] - recv[j * share];
  }
  // Into scratch: the memory plan may lay the result over the rows. Both
  // offsets start at row 0, so what arrives is rows [0, arriving).
  int64_t arriving = recv[ranks * share];
  uint8_t *staged = scratch(std::max<size_t>(1, arriving * rowBytes));
  if (ranks == 1) {
    if (sendCounts[0] != recvCounts[0]) {
      return Status::error(StatusCode::InvalidArgument,
                           "all_to_all: the receive offsets are not the sent "
                           "segments'");
    }
    std::memcpy(staged, rows.data(), arriving * rowBytes);
  } else {
    StatusOr<void *> made = group(axes);
    if (!made) {
      return made.status();
    }
    MPI_Comm comm = static_cast<MPI_Comm>(*made);
    // What each rank sends this one, against what the receive offsets
    // expect: offsets that are not the senders' would make MPI_Alltoallv
    // truncate (or wait), so they are an error here, on the rank that
    // holds them (mf-run then ends every rank).
    std::vector<int> sent(ranks);
    if (MPI_Alltoall(sendCounts.data(), 1, MPI_INT, sent.data(), 1, MPI_INT,
                     comm) != MPI_SUCCESS) {
      return Status::error(StatusCode::Unavailable, "MPI_Alltoall failed");
    }
    for (int64_t j = 0; j < ranks; ++j) {
      if (sent[j] != recvCounts[j]) {
        return Status::error(
            StatusCode::InvalidArgument,
            "all_to_all: rank " + std::to_string(j) + " of the group sends " +
                std::to_string(sent[j]) + " rows, the receive offsets expect " +
                std::to_string(recvCounts[j]));
      }
    }
    if (rowBytes > static_cast<size_t>(INT_MAX)) {
      return Status::error(StatusCode::Internal,
                           "all_to_all: a row is more bytes than MPI counts");
    }
    MPI_Datatype row;
    if (MPI_Type_contiguous(static_cast<int>(rowBytes), MPI_BYTE, &row) !=
            MPI_SUCCESS ||
        MPI_Type_commit(&row) != MPI_SUCCESS) {
      return Status::error(StatusCode::Unavailable,
                           "MPI_Type_contiguous failed");
    }
    int status =
        MPI_Alltoallv(rows.data(), sendCounts.data(), sendPlaces.data(), row,
                      staged, recvCounts.data(), recvPlaces.data(), row, comm);
    MPI_Type_free(&row);
    if (status != MPI_SUCCESS) {
      return Status::error(StatusCode::Unavailable, "MPI_Alltoallv failed");
    }
  }
  uint8_t *out = static_cast<uint8_t *>(result.data());
  std::memcpy(out, staged, arriving * rowBytes);
  std::memset(out + arriving * rowBytes, 0,
              (result.dim(0) - arriving) * rowBytes);
  return Status::ok();
}

Status Communicator::allToAllDims(const Tensor &input, Tensor &output,
                                  int64_t splitDim, int64_t concatDim,
                                  const std::vector<int64_t> &axes) {
  int64_t ranks = extentAlong(axes);
  if (input.dtype() != output.dtype() || splitDim == concatDim ||
      input.numElements() != output.numElements() ||
      input.shape()[splitDim] != output.shape()[splitDim] * ranks) {
    return Status::error(StatusCode::Internal,
                         "all_to_all_dims: the result is not the operand's "
                         "blocks moved from one dimension to another");
  }
  if (ranks == 1) {
    std::memmove(output.data(), input.data(), input.byteSize());
    return Status::ok();
  }
  int64_t blockBytes = static_cast<int64_t>(input.byteSize()) / ranks;
  StatusOr<void *> made =
      groupFor(axes, blockBytes, "all_to_all_dims of a block of bytes");
  if (!made) {
    return made.status();
  }
  // The blocks to send one after the other, then those received: the
  // result may lie over the operand.
  size_t elementBytes = dtypeSize(input.dtype());
  uint8_t *sent = scratch(2 * input.byteSize());
  uint8_t *received = sent + input.byteSize();
  int64_t length = output.shape()[splitDim];
  for (int64_t r = 0; r < ranks; ++r) {
    copyBlock(input.data(), sent + r * blockBytes, input.shape(), splitDim,
              r * length, length, elementBytes, /*intoWhole=*/false);
  }
  int count = static_cast<int>(blockBytes);
  if (MPI_Alltoall(sent, count, MPI_BYTE, received, count, MPI_BYTE,
                   static_cast<MPI_Comm>(*made)) != MPI_SUCCESS) {
    return Status::error(StatusCode::Unavailable, "MPI_Alltoall failed");
  }
  int64_t joined = input.shape()[concatDim];
  for (int64_t r = 0; r < ranks; ++r) {
    copyBlock(received + r * blockBytes, output.data(), output.shape(),
              concatDim, r * joined, joined, elementBytes, /*intoWhole=*/true);
  }
  return Status::ok();
}

Status Communicator::keepBlock(const Tensor &input, Tensor &output, int64_t dim,
                               const std::vector<int64_t> &axes) const {
  int64_t ranks = extentAlong(axes);
  if (input.dtype() != output.dtype() ||
      input.numElements() != output.numElements() * ranks) {
    return Status::error(StatusCode::Internal,
                         "scatter: the result is not one block of its operand");
  }
  // Through a copy: the result may lie over the operand.
  uint8_t *whole = scratch(input.byteSize());
  std::memcpy(whole, input.data(), input.byteSize());
  int64_t length = output.shape()[dim];
  copyBlock(whole, output.data(), input.shape(), dim, indexAlong(axes) * length,
            length, dtypeSize(input.dtype()),
            /*intoWhole=*/false);
  return Status::ok();
}

Status Communicator::reduceScatterSum(const Tensor &input, Tensor &output,
                                      int64_t dim,
                                      const std::vector<int64_t> &axes) {
  int64_t ranks = extentAlong(axes);
  if (input.dtype() != output.dtype() ||
      input.numElements() != output.numElements() * ranks) {
    return Status::error(
        StatusCode::Internal,
        "reduce_scatter: the result is not one block of its operand");
  }
  if (ranks == 1) {
    std::memmove(output.data(), input.data(), output.byteSize());
    return Status::ok();
  }
  StatusOr<void *> made =
      groupFor(axes, input.numElements(), "reduce_scatter of elements");
  if (!made) {
    return made.status();
  }
  // The blocks one after the other in rank order, as f32, then the rank's
  // sum: three regions of one scratch buffer.
  int64_t elements = input.numElements(), blockElements = output.numElements();
  float *values = reinterpret_cast<float *>(
      scratch((2 * elements + blockElements) * sizeof(float)));
  float *ordered = values + elements, *mine = ordered + elements;
  input.loadFloats(values);
  int64_t length = output.shape()[dim];
  for (int64_t r = 0; r < ranks; ++r) {
    copyBlock(values, ordered + r * blockElements, input.shape(), dim,
              r * length, length, sizeof(float), /*intoWhole=*/false);
  }
  if (MPI_Reduce_scatter_block(ordered, mine, static_cast<int>(blockElements),
                               MPI_FLOAT, MPI_SUM,
                               static_cast<MPI_Comm>(*made)) != MPI_SUCCESS) {
    return Status::error(StatusCode::Unavailable,
                         "MPI_Reduce_scatter_block failed");
  }
  output.storeFloats(mine);
  return Status::ok();
}

uint8_t *Communicator::scratch(size_t bytes) const {
  if (bytes > scratchBytes_) {
    // Left uninitialized: every caller writes what it reads.
    scratch_.reset(new uint8_t[bytes]);
    scratchBytes_ = bytes;
  }
  return scratch_.get();
}

void Communicator::abort(int exitCode) {
  if (groups_) {
    MPI_Abort(MPI_COMM_WORLD, exitCode);
  }
  std::exit(exitCode);
}
