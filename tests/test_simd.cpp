// The kernels' instruction set (common/simd.h): AC_CPU_ISA's values and refusals, the scoped
// override the kernel tests use, and that every variant below this CPU's widest is tested here.
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "common/simd.h"

namespace ac {
namespace {

// The ConfigError message of parse_kernel_isa(value, cpu), or "" when it does not throw.
std::string refusal(const char* value, CpuIsa cpu) {
  try {
    parse_kernel_isa(value, cpu);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(KernelIsa, AcCpuIsaLowersTheCpusWidestAndRefusesWhatItLacks) {
  // Unset or empty: the CPU's widest.
  EXPECT_EQ(parse_kernel_isa(nullptr, CpuIsa::avx512), CpuIsa::avx512);
  EXPECT_EQ(parse_kernel_isa("", CpuIsa::avx2), CpuIsa::avx2);
  // Lowered (an AVX-512 machine running what an AVX2 one runs), or the widest itself.
  EXPECT_EQ(parse_kernel_isa("avx2", CpuIsa::avx512), CpuIsa::avx2);
  EXPECT_EQ(parse_kernel_isa("scalar", CpuIsa::avx512), CpuIsa::scalar);
  EXPECT_EQ(parse_kernel_isa("scalar", CpuIsa::scalar), CpuIsa::scalar);
  EXPECT_EQ(parse_kernel_isa("avx512", CpuIsa::avx512), CpuIsa::avx512);
  // More than the CPU has: the variable, what was asked and what the CPU has.
  const std::string lacks = refusal("avx512", CpuIsa::avx2);
  EXPECT_NE(lacks.find("AC_CPU_ISA=avx512"), std::string::npos) << lacks;
  EXPECT_NE(lacks.find("has avx2"), std::string::npos) << lacks;
  EXPECT_NE(refusal("avx2", CpuIsa::scalar).find("has scalar"), std::string::npos);
  // Unknown (names are exact, lower case): the choices.
  for (const char* bad : {"sse", "AVX2", "avx-512", "avx2 "}) {
    const std::string e = refusal(bad, CpuIsa::avx512);
    EXPECT_NE(e.find("AC_CPU_ISA"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("avx512, avx2, scalar"), std::string::npos) << bad << ": " << e;
  }
  for (CpuIsa isa : {CpuIsa::scalar, CpuIsa::avx2, CpuIsa::avx512})
    EXPECT_EQ(parse_kernel_isa(isa_name(isa), CpuIsa::avx512), isa);
}

TEST(KernelIsa, ScopedOverrideSetsAndRestoresAndRefusesWhatTheCpuLacks) {
  const CpuIsa before = kernel_isa();
  EXPECT_LE(int(before), int(cpu_isa()));
  {
    ScopedKernelIsa use(CpuIsa::scalar);
    EXPECT_EQ(kernel_isa(), CpuIsa::scalar);
    {
      ScopedKernelIsa widest(cpu_isa());
      EXPECT_EQ(kernel_isa(), cpu_isa());
    }
    EXPECT_EQ(kernel_isa(), CpuIsa::scalar);
  }
  EXPECT_EQ(kernel_isa(), before);
  if (cpu_isa() != CpuIsa::avx512) {
    EXPECT_THROW(ScopedKernelIsa{CpuIsa::avx512}, ConfigError);
    EXPECT_EQ(kernel_isa(), before);
  }
}

TEST(KernelIsa, TheTestsRunEveryVariantBelowTheCpusWidest) {
  // The kernel tests loop over supported_isas(): on an AVX-512 CPU that includes AVX2, so the
  // AVX2 variants (AMD EPYC Zen 3's) are tested here too.
  std::vector<CpuIsa> want{CpuIsa::scalar};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) want.push_back(CpuIsa::avx2);
  if (__builtin_cpu_supports("avx512f")) want.push_back(CpuIsa::avx512);
  EXPECT_EQ(supported_isas(), want);
  EXPECT_EQ(cpu_isa(), want.back());
  EXPECT_STREQ(isa_name(CpuIsa::avx2), "avx2");
}

}  // namespace
}  // namespace ac
