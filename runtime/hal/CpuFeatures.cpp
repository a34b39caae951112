//===- CpuFeatures.cpp - what this CPU runs -------------------------------===//

#include "runtime/hal/CpuFeatures.h"

#include <cstdlib>
#include <cstring>

using namespace mfrt;

namespace {

struct Feature {
  const char *name; ///< LLVM's, which GCC's builtin shares for these
  bool present;
};

/// GCC 12's __builtin_cpu_supports takes only literal names, so the table
/// is spelled out; it is evaluated once.
const std::vector<Feature> &knownFeatures() {
#if defined(__x86_64__)
#define MFRT_FEATURE(name)                                                     \
  { name, __builtin_cpu_supports(name) != 0 }
  static const std::vector<Feature> features = {
      MFRT_FEATURE("cmov"),
      MFRT_FEATURE("mmx"),
      MFRT_FEATURE("popcnt"),
      MFRT_FEATURE("sse"),
      MFRT_FEATURE("sse2"),
      MFRT_FEATURE("sse3"),
      MFRT_FEATURE("ssse3"),
      MFRT_FEATURE("sse4.1"),
      MFRT_FEATURE("sse4.2"),
      MFRT_FEATURE("sse4a"),
      MFRT_FEATURE("avx"),
      MFRT_FEATURE("avx2"),
      MFRT_FEATURE("fma"),
      MFRT_FEATURE("fma4"),
      MFRT_FEATURE("xop"),
      MFRT_FEATURE("f16c"),
      MFRT_FEATURE("bmi"),
      MFRT_FEATURE("bmi2"),
      MFRT_FEATURE("lzcnt"),
      MFRT_FEATURE("movbe"),
      MFRT_FEATURE("aes"),
      MFRT_FEATURE("pclmul"),
      MFRT_FEATURE("vaes"),
      MFRT_FEATURE("vpclmulqdq"),
      MFRT_FEATURE("gfni"),
      MFRT_FEATURE("sha"),
      MFRT_FEATURE("adx"),
      MFRT_FEATURE("rdrnd"),
      MFRT_FEATURE("rdseed"),
      MFRT_FEATURE("xsave"),
      MFRT_FEATURE("avxvnni"),
      MFRT_FEATURE("avx512f"),
      MFRT_FEATURE("avx512vl"),
      MFRT_FEATURE("avx512bw"),
      MFRT_FEATURE("avx512dq"),
      MFRT_FEATURE("avx512cd"),
      MFRT_FEATURE("avx512er"),
      MFRT_FEATURE("avx512pf"),
      MFRT_FEATURE("avx512vbmi"),
      MFRT_FEATURE("avx512vbmi2"),
      MFRT_FEATURE("avx512ifma"),
      MFRT_FEATURE("avx512vnni"),
      MFRT_FEATURE("avx512bitalg"),
      MFRT_FEATURE("avx512vpopcntdq"),
      MFRT_FEATURE("avx512bf16"),
      MFRT_FEATURE("avx512fp16"),
      MFRT_FEATURE("avx512vp2intersect"),
      MFRT_FEATURE("amx-tile"),
      MFRT_FEATURE("amx-int8"),
      MFRT_FEATURE("amx-bf16"),
  };
#undef MFRT_FEATURE
#else
  static const std::vector<Feature> features;
#endif
  return features;
}

} // namespace

bool mfrt::hasAvx512() {
  static const bool has = [] {
    const char *disabled = std::getenv("MFRT_DISABLE_AVX512");
    return !(disabled && std::strcmp(disabled, "1") == 0) &&
           __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return has;
}

RowIsa mfrt::rowIsa() {
  static const RowIsa isa = hasAvx512()                      ? RowIsa::Avx512
                            : __builtin_cpu_supports("avx2") ? RowIsa::Avx2
                                                             : RowIsa::Portable;
  return isa;
}

const char *mfrt::hostArchitecture() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

std::vector<std::string>
mfrt::missingCpuFeatures(const std::vector<std::string> &features) {
  std::vector<std::string> missing;
  for (const std::string &name : features) {
    for (const Feature &known : knownFeatures()) {
      if (name == known.name && !known.present) {
        missing.push_back(name);
      }
    }
  }
  return missing;
}
