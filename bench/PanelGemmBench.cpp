//===- PanelGemmBench.cpp - the panel microkernel against OpenBLAS --------===//
//
// One core, the matmul tiles Graph Mode runs (rows x columns of the
// product, depth K): OpenBLAS's sgemm on the weight as stored (it packs
// both operands in every call) against mfrt_gemm_panels_f32 on the weight
// packed once (runtime/kernels/PanelGemm.h), and the f16 / bf16 panel services
// against OpenBLAS on the same values in f32. Medians of 50 calls after a
// warm-up; prints GFLOP/s and the ratio (> 1: the panels are faster).
// With --avx2, what an AVX2 machine runs, on this one: OpenBLAS's Haswell
// kernels (OPENBLAS_CORETYPE=Haswell) against the AVX2 microkernel.
//
//   mf-panel-gemm-bench [--avx2]
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/Int8DotGemm.h"
#include "runtime/kernels/PanelGemm.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

using namespace mfrt;

namespace {

template <typename Call> double medianSeconds(Call call) {
  std::vector<double> times;
  for (int i = 0; i < 55; ++i) {
    auto start = std::chrono::steady_clock::now();
    call();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
  times.erase(times.begin(), times.begin() + 5); // warm-up
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

using Service = void (*)(PanelIsa, const mfrt_gemm_args_v1 &);

void measure(PanelIsa isa, DType dtype, Service service, int64_t rows,
             int64_t cols, int64_t depth) {
  std::mt19937 generator(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> a(rows * depth), w(cols * depth), c(rows * cols);
  for (float &x : a) x = uniform(generator);
  for (float &x : w) x = uniform(generator);
  size_t size = dtypeSize(dtype);
  std::vector<char> storedA(a.size() * size), storedW(w.size() * size),
      panels(w.size() * size);
  fromFloats(dtype, a.data(), storedA.data(), a.size());
  fromFloats(dtype, w.data(), storedW.data(), w.size());
  packPanels(dtype, storedW.data(), cols, depth, panels.data(), 0,
             panelCount(cols));
  double flops = 2.0 * rows * cols * depth;
  double blas = flops / medianSeconds([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, depth,
                1.0f, a.data(), depth, w.data(), depth, 0.0f, c.data(), cols);
  }) / 1e9;
  double ours = flops / medianSeconds([&] {
                  service(isa, {storedA.data(), panels.data(), c.data(), cols,
                                0, 0, rows, cols, depth, cols, /*trans_b=*/1,
                                /*trans_a=*/0, rows, nullptr, 0, nullptr,
                                nullptr});
                }) /
                1e9;
  std::printf("%-5s %4lld x %4lld x %4lld  openblas %6.1f  panels %6.1f GFLOP/s  %5.2fx\n",
              dtypeName(dtype), static_cast<long long>(rows),
              static_cast<long long>(cols), static_cast<long long>(depth), blas,
              ours, ours / blas);
}

} // namespace

/// W8A8's product (f32 rows quantized per token, times an int8 weight's
/// dot panels, scaled) against W8A16's (f32 rows times the i8 weight's
/// panels, the scales the caller's): giga multiply-adds x 2 per second,
/// and the ratio.
void measureInt8(DotIsa dotIsaUsed, PanelIsa panelIsaUsed, int64_t rows,
                 int64_t cols, int64_t depth) {
  std::mt19937 generator(2);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::vector<int8_t> a(rows * depth), w(cols * depth), dot(w.size()),
      panels(w.size());
  for (int8_t &x : a) x = static_cast<int8_t>(byte(generator));
  for (int8_t &x : w) x = static_cast<int8_t>(byte(generator));
  std::vector<float> rowsF32(a.begin(), a.end()), scales(cols, 0.01f),
      c(rows * cols);
  packDotPanels(w.data(), cols, depth, dot.data(), 0, panelCount(cols));
  packPanels(DType::I8, w.data(), cols, depth, panels.data(), 0,
             panelCount(cols));
  mfrt_gemm_args_v1 int8Args{rowsF32.data(), dot.data(), c.data(), cols,
                             0, 0, rows, cols, depth, cols, 1, 0, rows,
                             scales.data(), 0, nullptr, nullptr};
  mfrt_gemm_args_v1 floatArgs{rowsF32.data(), panels.data(), c.data(), cols,
                              0, 0, rows, cols, depth, cols, 1, 0, rows,
                              nullptr, 0, nullptr, nullptr};
  double ops = 2.0 * rows * cols * depth;
  double int8 = medianSeconds(
      [&] { gemmInt8DotWith<DType::F32>(dotIsaUsed, int8Args); });
  double widened = medianSeconds(
      [&] { gemmPanelsWith<DType::I8>(panelIsaUsed, floatArgs); });
  std::printf("%5lld x %4lld x %4lld  i8 x i8 dot %7.1f GOP/s   f32 x i8 "
              "panels %7.1f GFLOP/s   ratio %.2f\n",
              static_cast<long long>(rows), static_cast<long long>(cols),
              static_cast<long long>(depth), ops / int8 * 1e-9,
              ops / widened * 1e-9, widened / int8);
}

int main(int argc, char **argv) {
  bool avx2 = argc > 1 && std::string(argv[1]) == "--avx2";
  if (argc > 2 || (argc == 2 && !avx2)) {
    std::fprintf(stderr, "usage: mf-panel-gemm-bench [--avx2]\n");
    return 2;
  }
  // This workplace pins OPENBLAS_CORETYPE for old OpenBLAS builds; OpenBLAS
  // reads it when it loads, so run again without it (as bench/*.py do), or
  // with Haswell's for --avx2.
  const char *coretype = std::getenv("OPENBLAS_CORETYPE");
  if (std::getenv("OPENBLAS_L2_SIZE") ||
      (avx2 ? !coretype || std::string(coretype) != "Haswell"
            : coretype != nullptr)) {
    unsetenv("OPENBLAS_L2_SIZE");
    if (avx2) {
      setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    } else {
      unsetenv("OPENBLAS_CORETYPE");
    }
    execv("/proc/self/exe", argv);
  }
  PanelIsa isa = avx2 ? PanelIsa::Avx2 : panelIsa();
  if (!runsPanelIsa(isa)) {
    std::fprintf(
        stderr,
        "mf-panel-gemm-bench: this CPU has no AVX2 with FMA and F16C\n");
    return 1;
  }
  openblas_set_num_threads(1); // Graph Mode runs one tile per core
  std::printf("one core; rows x columns x depth; OpenBLAS%s on f32 weights as "
              "stored, panels packed once (%s microkernel)\n",
              avx2 ? " (Haswell kernels)" : "",
              isa == PanelIsa::Avx512Bf16 ? "AVX-512 (AVX512-BF16 for bf16)"
              : isa == PanelIsa::Avx512   ? "AVX-512"
              : isa == PanelIsa::Avx2 ? "AVX2"
                                      : "portable");
  struct Shape { int64_t rows, cols, depth; };
  // llama-100m's prefill tiles (K = 768 and 2048), a short prompt's, a
  // narrow last panel (N = 344, llama-tiny's FFN).
  for (Shape s : {Shape{256, 128, 768}, Shape{256, 256, 768}, Shape{256, 128, 2048},
                  Shape{32, 256, 768}, Shape{128, 344, 128}}) {
    measure(isa, DType::F32, gemmPanelsWith<DType::F32>, s.rows, s.cols,
            s.depth);
  }
  measure(isa, DType::F16, gemmPanelsWith<DType::F16>, 256, 128, 1024);
  measure(isa, DType::BF16, gemmPanelsWith<DType::BF16>, 256, 128, 1024);
  if (isa == PanelIsa::Avx512Bf16) { // bf16 widened to f32, as before it
    std::printf("bf16 through the AVX-512 microkernel (widened to f32):\n");
    measure(PanelIsa::Avx512, DType::BF16, gemmPanelsWith<DType::BF16>, 256,
            128, 1024);
  }
  // (--avx2: W8A8's AVX2 microkernel against W8A16's AVX2 panels.)
  DotIsa dot = avx2 && runsDotIsa(DotIsa::Avx2) ? DotIsa::Avx2 : dotIsa();
  std::printf("W8A8 (%s) against W8A16:\n",
              dot == DotIsa::Avx512Vnni ? "AVX512-VNNI"
              : dot == DotIsa::Avx2     ? "AVX2"
                                        : "portable");
  for (Shape s : {Shape{256, 128, 768}, Shape{256, 128, 2048},
                  Shape{32, 256, 768}, Shape{1, 768, 768},
                  Shape{1, 2048, 768}, Shape{1, 768, 2048}}) {
    measureInt8(dot, isa, s.rows, s.cols, s.depth);
  }
  return 0;
}
