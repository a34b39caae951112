//===- MachineLimits.cpp - what this machine can do, measured now ---------===//
//
// The ceilings the benchmarks compare against, measured in the same run:
//   copy:  STREAM-style copy b[i] = a[i] over arrays far larger than the
//          caches, on every hardware thread; GB/s counts bytes read and
//          written, as STREAM does. Best of 5.
//   sgemm: OpenBLAS fp32 GEMM 2048^3 on every hardware thread. Best of 5.
// Prints one JSON object.
//
//===----------------------------------------------------------------------===//

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

double copyBandwidth(unsigned threads) {
  const size_t n = size_t(64) << 20; // 64 Mi floats: 256 MiB per array
  std::vector<float> a(n, 1.0f), b(n, 0.0f);
  double best = 0;
  for (int repeat = 0; repeat < 5; ++repeat) {
    auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        size_t begin = n * t / threads, end = n * (t + 1) / threads;
        std::copy(a.begin() + begin, a.begin() + end, b.begin() + begin);
      });
    }
    for (std::thread &worker : workers) {
      worker.join();
    }
    best = std::max(best, 2.0 * n * sizeof(float) / seconds(start) / 1e9);
  }
  return best + 0 * b[n / 2]; // keep the copy observable
}

double sgemmPeak() {
  const int n = 2048;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f),
      c(size_t(n) * n);
  double best = 0;
  for (int repeat = 0; repeat < 5; ++repeat) {
    auto start = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                a.data(), n, b.data(), n, 0.0f, c.data(), n);
    best = std::max(best, 2.0 * n * n * n / seconds(start) / 1e9);
  }
  return best;
}

} // namespace

int main() {
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  double copy = copyBandwidth(threads);
  double gemm = sgemmPeak();
  std::printf("{\"threads\": %u, \"copy_gbs\": %.2f, \"sgemm_gflops\": %.1f}\n",
              threads, copy, gemm);
  return 0;
}
