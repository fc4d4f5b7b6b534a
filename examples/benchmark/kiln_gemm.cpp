//===- kiln_gemm.cpp - Kiln's contractions on the benchmark shapes --------===//
//
// Compiles each contraction of gemm_shapes.h as the models emit it (a
// kiln.linear for a weight product, kiln.matmul for the rest) and prints its
// median time and GFLOP/s, one `GEMM peer=kiln ...` line per shape; the
// thread count is libomp's (OMP_NUM_THREADS). run-gemm.sh runs it beside the
// BLAS libraries at 1 and 2 threads.
//
//===----------------------------------------------------------------------===//

#include "examples/benchmark/gemm_shapes.h"

#include "compiler/Target/JIT/Jit.h"
#include "runtime/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

using namespace kiln;
using kiln::bench::GemmShape;

namespace {

std::string tensorType(std::vector<int64_t> dims) {
  std::string s = "tensor<";
  for (int64_t d : dims) {
    s += fmt::format("{}x", d);
  }
  return s + "f32>";
}

/// The kiln IR of one shape and the shapes of its two operands.
std::string source(const GemmShape &s, std::vector<int64_t> &lhs,
                   std::vector<int64_t> &rhs) {
  std::string layout = s.layout;
  lhs = layout == "TN" ? std::vector<int64_t>{s.k, s.m}
                       : std::vector<int64_t>{s.m, s.k};
  rhs = layout == "NT" ? std::vector<int64_t>{s.n, s.k}
                       : std::vector<int64_t>{s.k, s.n};
  std::vector<int64_t> out = {s.m, s.n};
  if (s.batch > 1) {
    lhs.insert(lhs.begin(), s.batch);
    rhs.insert(rhs.begin(), s.batch);
    out.insert(out.begin(), s.batch);
  }
  std::string op;
  if (layout == "NT" && s.batch == 1) {
    op = "kiln.linear %a, %b";
  } else {
    op = "kiln.matmul %a, %b";
    if (layout == "NT") {
      op += " {transpose_rhs}";
    } else if (layout == "TN") {
      op += " {transpose_lhs}";
    }
  }
  return fmt::format("func.func @gemm(%a: {0}, %b: {1}) -> {2} {{\n"
                     "  %c = {3} : ({0}, {1}) -> {2}\n"
                     "  return %c : {2}\n}}\n",
                     tensorType(lhs), tensorType(rhs), tensorType(out), op);
}

Tensor filled(const std::vector<int64_t> &shape, float value) {
  Tensor t = Tensor::empty(shape, DType::f32);
  std::fill(t.data<float>(), t.data<float>() + t.numel(), value);
  return t;
}

} // namespace

int main(int argc, char **argv) {
  try {
    const char *threads = std::getenv("OMP_NUM_THREADS");
    fmt::print("Kiln contractions ({} threads)\n", threads ? threads : "all");
    for (const GemmShape &s : kiln::bench::kGemmShapes) {
      if (argc > 1 && std::string(argv[1]) != s.name) {
        continue;
      }
      std::vector<int64_t> lhsShape, rhsShape;
      auto module = JitModule::compileSource(source(s, lhsShape, rhsShape));
      const CompiledFunction &fn = module->function("gemm");
      std::vector<Arg> args = {filled(lhsShape, 0.5f), filled(rhsShape, 0.25f)};
      double flop = 2.0 * s.m * s.n * s.k * s.batch;
      int reps = std::max(5, int(4e9 / flop));
      std::vector<double> seconds;
      for (int r = 0; r < reps + 2; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        std::vector<Tensor> out = fn.call(args);
        auto t1 = std::chrono::steady_clock::now();
        if (r >= 2) {
          seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
        }
        if (r == 0 && out[0].data<float>()[0] != 0.125f * s.k) {
          throw Error(fmt::format("{}: wrong result {}", s.name,
                                  out[0].data<float>()[0]));
        }
      }
      std::sort(seconds.begin(), seconds.end());
      double median = seconds[seconds.size() / 2];
      fmt::print("{:<16} {}  {:>5} {:>5} {:>5} x{:<3} {:>9.3f} ms {:>7.1f} "
                 "GFLOP/s\n",
                 s.name, s.layout, s.m, s.n, s.k, s.batch, median * 1e3,
                 flop / median * 1e-9);
      fmt::print("GEMM peer=kiln shape=\"{}\" ms={:.4f} gflops={:.2f}\n",
                 s.name, median * 1e3, flop / median * 1e-9);
    }
  } catch (const std::exception &e) {
    fmt::print(stderr, "kiln-gemm: {}\n", e.what());
    return 1;
  }
  return 0;
}
