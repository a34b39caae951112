//===- BlasThread.h - a thread's first OpenBLAS product ---------*- C++ -*-===//
//
// Debian 12's OpenBLAS (0.3.21, its Zen and Haswell kernels) runs every
// sgemm of a thread at about a third of its rate when that thread's first
// sgemm had fewer than ~384 rows or columns: measured on an AMD EPYC
// without AVX-512, one thread, 256 x 256 tiles of a 1024 x 768 x 2048
// product: 13.6 GFLOP/s, against 39.4 after one 512 x 512 x 64 product
// (the state of the thread's buffer outlives the call). The kernels' BLAS
// services run one such product first on each thread (about a
// millisecond), once OpenBLAS is serial (GraphExecutor): a threaded
// OpenBLAS called from several threads at start-up hung.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_HAL_BLASTHREAD_H
#define MFC_RUNTIME_HAL_BLASTHREAD_H

namespace mfrt {

class ThreadPool;

/// Runs one 512 x 512 x 64 sgemm on this thread, once per thread.
void prepareBlasThread();

/// Makes OpenBLAS serial and stops its server threads: Graph Mode's pool
/// runs products in parallel instead, each serial. (Its idle server
/// threads would spin for ~0.1 s next to the pool's.)
void makeBlasSerial();

/// makeBlasSerial(), then prepareBlasThread() on each of `pool`'s threads
/// now (best effort: a late worker prepares at its first product), so
/// that their scratch (1 MB a thread, freed at once) is gone before the
/// weights and arenas take their memory instead of adding to the peak.
void prepareBlasThreads(ThreadPool &pool);

} // namespace mfrt

#endif // MFC_RUNTIME_HAL_BLASTHREAD_H
