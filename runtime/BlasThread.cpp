//===- BlasThread.cpp - a thread's first OpenBLAS product -----------------===//

#include "runtime/BlasThread.h"

#include <cblas.h>

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
