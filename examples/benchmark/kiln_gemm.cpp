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

#include <kiln/kiln.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

using namespace kiln;
using kiln::bench::GemmShape;

namespace {

/// One dimension of an operand: its size, and whether the models leave it
/// dynamic (batch and sequence dimensions are; weight dimensions are not).
struct Dim {
  int64_t size;
  bool dynamic;
};

std::string tensorType(const std::vector<Dim> &dims, bool dynamic) {
  std::string s = "tensor<";
  for (const Dim &d : dims) {
    s += dynamic && d.dynamic ? std::string("?x") : fmt::format("{}x", d.size);
  }
  return s + "f32>";
}

std::vector<int64_t> sizes(const std::vector<Dim> &dims) {
  std::vector<int64_t> out;
  for (const Dim &d : dims) {
    out.push_back(d.size);
  }
  return out;
}

/// The kiln IR of one shape and the shapes of its two operands. With
/// `dynamic`, the token dimension (M of NT/NN products, K of TN weight
/// gradients, and both sequence dimensions of batched attention products)
/// and the batch are dynamic, as in the models' compiled functions.
std::string source(const GemmShape &s, bool dynamic,
                   std::vector<int64_t> &lhsShape,
                   std::vector<int64_t> &rhsShape) {
  std::string layout = s.layout;
  bool batched = s.batch > 1;
  // In batched products M and N (scores) or M and K (attn·V) are sequence
  // lengths; in unbatched ones M (or K for TN) counts tokens.
  Dim m{s.m, layout != "TN"};
  Dim n{s.n, batched && layout == "NT"};
  Dim k{s.k, layout == "TN" || (batched && layout == "NN")};
  std::vector<Dim> lhs =
      layout == "TN" ? std::vector<Dim>{k, m} : std::vector<Dim>{m, k};
  std::vector<Dim> rhs =
      layout == "NT" ? std::vector<Dim>{n, k} : std::vector<Dim>{k, n};
  std::vector<Dim> out = {m, n};
  if (batched) {
    lhs.insert(lhs.begin(), Dim{s.batch, true});
    rhs.insert(rhs.begin(), Dim{s.batch, true});
    out.insert(out.begin(), Dim{s.batch, true});
  }
  lhsShape = sizes(lhs);
  rhsShape = sizes(rhs);
  std::string op;
  if (layout == "NT" && !batched) {
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
                     tensorType(lhs, dynamic), tensorType(rhs, dynamic),
                     tensorType(out, dynamic), op);
}

Tensor filled(const std::vector<int64_t> &shape, float value) {
  Tensor t = Tensor::empty(shape, DType::f32);
  std::fill(t.data<float>(), t.data<float>() + t.numel(), value);
  return t;
}

} // namespace

int main(int argc, char **argv) {
  try {
    JitOptions options;
    std::string only;
    bool dynamic = false;
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--cpu" && i + 1 < argc) {
        options.cpu = argv[++i];
      } else if (arg == "--precision" && i + 1 < argc) {
        options.precision = argv[++i];
      } else if (arg == "--bf16-kernels" && i + 1 < argc) {
        options.bf16Kernels = argv[++i];
      } else if (arg == "--dump" && i + 1 < argc) {
        options.dumpDirectory = argv[++i];
      } else if (arg == "--dynamic") {
        dynamic = true;
      } else if (arg == "--list") {
        for (const GemmShape &s : kiln::bench::kGemmShapes) {
          fmt::print("{}\n", s.name);
        }
        return 0;
      } else if (arg.rfind("--", 0) == 0) {
        fmt::print(stderr, "usage: kiln-gemm [--cpu host|x86-64-v3|x86-64-v4|"
                           "<llvm cpu>] [--precision fp32|bf16] "
                           "[--bf16-kernels auto|dot|amx|amx-emulated] "
                           "[--dynamic] "
                           "[--dump DIR] [--list] "
                           "[shape name]\n");
        return 2;
      } else {
        only = arg;
      }
    }
    const char *threads = std::getenv("OMP_NUM_THREADS");
    fmt::print("Kiln contractions ({} threads, cpu {}, {} shapes, {})\n",
               threads ? threads : "all", options.cpu,
               dynamic ? "dynamic" : "static", options.precision);
    // bf16 runs are reported as their own peer (the inputs, 0.5 and 0.25,
    // are exact in bf16, so the result check holds for both).
    // The kernels name the peer when chosen (kiln-bf16-amx, kiln-bf16-dot).
    std::string peer =
        options.precision == "fp32" ? "kiln" : "kiln-" + options.precision;
    if (options.bf16Kernels != "auto") {
      peer += "-" + options.bf16Kernels;
    }
    for (const GemmShape &s : kiln::bench::kGemmShapes) {
      if (!only.empty() && only != s.name) {
        continue;
      }
      std::vector<int64_t> lhsShape, rhsShape;
      auto module = JitModule::compileSource(
          source(s, dynamic, lhsShape, rhsShape), options);
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
      fmt::print("GEMM peer={} shape=\"{}\" ms={:.4f} gflops={:.2f}\n", peer,
                 s.name, median * 1e3, flop / median * 1e-9);
    }
  } catch (const std::exception &e) {
    fmt::print(stderr, "kiln-gemm: {}\n", e.what());
    return 1;
  }
  return 0;
}
