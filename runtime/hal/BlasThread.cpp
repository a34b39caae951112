//===- BlasThread.cpp - a thread's first OpenBLAS product -----------------===//

#include "runtime/hal/BlasThread.h"

#include "runtime/hal/ThreadPool.h"

#include <cblas.h>

#include <mutex>
#include <vector>

void mfrt::prepareBlasThread() {
  thread_local bool prepared = false;
  if (prepared) {
    return;
  }
  prepared = true;
  constexpr int kSide = 512, kDepth = 64;
  std::vector<float> a(kSide * kDepth, 0.0f), c(kSide * kSide);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kSide, kSide, kDepth,
              1.0f, a.data(), kDepth, a.data(), kDepth, 0.0f, c.data(), kSide);
}

// OpenBLAS (pthread build): stops its server threads. Not in cblas.h, so
// weak: a BLAS without it keeps its threads.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

void mfrt::makeBlasSerial() {
  // Once: OpenBLAS 0.3.21's openblas_set_num_threads starts the servers
  // again when they are stopped (a thread that starts to stop).
  static std::once_flag once;
  std::call_once(once, [] {
    // With one thread set, no product starts the servers again.
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_) {
      blas_thread_shutdown_();
    }
  });
}

void mfrt::prepareBlasThreads(ThreadPool &pool) {
  // Serial first: a threaded OpenBLAS called from several threads at
  // start-up hung.
  makeBlasSerial();
  // One tile per thread, each taken first by the thread that owns it.
  pool.parallelFor(
      pool.threads(),
      [](const void *, int64_t, int64_t) { prepareBlasThread(); }, nullptr);
}
