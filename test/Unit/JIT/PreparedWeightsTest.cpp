//===- PreparedWeightsTest.cpp - Weights transposed once, not per call ----===//
//
// kiln-prepare-weights and the runtime's side of it: which functions gain
// prepared arguments, the numbers those functions compute (against naive
// double loops, at sizes that cross the register tiles and vectors), and
// when the copies are made again.
//
//===----------------------------------------------------------------------===//

#include "Reference.h"

#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "compiler/Target/JIT/CompiledModel.h"
#include "compiler/Target/JIT/Training.h"
#include "mlir/IR/BuiltinOps.h"
#include "runtime/Error.h"
#include "runtime/PreparedWeights.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln {
namespace {

/// JitOptions with the weights prepared whatever the host's default.
JitOptions prepared() {
  JitOptions options;
  options.prepareWeights = true;
  return options;
}

using dsl::kDynamic;

TEST(PreparedWeights, TransposeMatchesANaiveLoop) {
  for (auto [rows, columns] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1},
                                                {15, 17},
                                                {16, 16},
                                                {17, 33},
                                                {65, 64},
                                                {130, 3},
                                                {0, 5},
                                                {5, 0}}) {
    Tensor m = ref::randomTensor({rows, columns}, 3);
    Tensor t = transposeMatrix(m);
    ASSERT_EQ(t.shape(), (std::vector<int64_t>{columns, rows}));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < columns; ++c) {
        ASSERT_EQ(t.data<float>()[c * rows + r],
                  m.data<float>()[r * columns + c])
            << rows << "x" << columns << " at " << r << ", " << c;
      }
    }
  }
  for (const Tensor &bad :
       {Tensor::zeros({2, 3, 4}, DType::f32), Tensor::zeros({3}, DType::f32),
        Tensor::zeros({2, 2}, DType::i32), Tensor()}) {
    EXPECT_THROW(transposeMatrix(bad), Error);
  }
}

/// y = x·w1ᵀ + b1, then z = y·(rows of w2)ᵀ for each of two row blocks of
/// w2 (as a query/key weight is cut from one), and a product of w3 stored
/// [K, N] (read as stored: nothing to prepare).
struct Linears {
  int64_t k, n;
  dsl::Module module;
  Linears(int64_t k, int64_t n) : k(k), n(n) {
    dsl::Graph &g = module.addGraph("f");
    dsl::Var x = g.input("x", {kDynamic, kDynamic, k}, DType::f32);
    dsl::Var w1 = g.param("w1", {n, k}, Init::normal(0, 1));
    dsl::Var b1 = g.param("b1", {n}, Init::normal(0, 1));
    dsl::Var w2 = g.param("w2", {2 * n, n}, Init::normal(0, 1));
    dsl::Var w3 = g.param("w3", {n, n}, Init::normal(0, 1));
    dsl::Var y = dsl::linear(x, w1, b1);
    dsl::Var z0 = dsl::linear(y, dsl::slice(w2, 0, 0, n));
    dsl::Var z1 = dsl::linear(y, dsl::slice(w2, 0, n, 2 * n));
    dsl::Var z3 = dsl::linear(y, dsl::transpose(w3, {1, 0}));
    g.finish({y, z0, z1, z3});
  }
};

/// x·wᵀ (+ bias) over the last dimension of x, in double: w [N, K], or
/// with `storedKN` w [K, N] read as stored.
std::vector<double> naiveLinear(const std::vector<double> &x, int64_t rows,
                                int64_t k, const float *w, int64_t n,
                                const float *bias, bool storedKN = false) {
  std::vector<double> y(rows * n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = bias ? bias[j] : 0.0;
      for (int64_t i = 0; i < k; ++i) {
        sum += x[r * k + i] * (storedKN ? w[i * n + j] : w[j * k + i]);
      }
      y[r * n + j] = sum;
    }
  }
  return y;
}

void expectNear(const Tensor &got, const std::vector<double> &want,
                const std::string &what) {
  ASSERT_EQ(got.numel(), int64_t(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    double tolerance = 1e-4 * (1 + std::fabs(want[i]));
    ASSERT_NEAR(got.data<float>()[i], want[i], tolerance)
        << what << " [" << i << "]";
  }
}

/// Runs `model`'s "f" on x [batch, t, k] and checks all four outputs.
void expectLinears(const CompiledModel &model, const Linears &l, int64_t batch,
                   int64_t t, uint32_t seed) {
  Tensor x = ref::randomTensor({batch, t, l.k}, seed);
  std::vector<Tensor> out = model.run("f", {{"x", x}});
  const ParameterStore &p = model.parameters();
  int64_t rows = batch * t;
  std::vector<double> xd(x.data<float>(), x.data<float>() + x.numel());
  std::vector<double> y = naiveLinear(xd, rows, l.k, p.get("w1").data<float>(),
                                      l.n, p.get("b1").data<float>());
  const float *w2 = p.get("w2").data<float>();
  std::string where = "k " + std::to_string(l.k) + " n " + std::to_string(l.n) +
                      " rows " + std::to_string(rows);
  expectNear(out[0], y, "y, " + where);
  expectNear(out[1], naiveLinear(y, rows, l.n, w2, l.n, nullptr),
             "z0, " + where);
  expectNear(out[2], naiveLinear(y, rows, l.n, w2 + l.n * l.n, l.n, nullptr),
             "z1, " + where);
  expectNear(out[3],
             naiveLinear(y, rows, l.n, p.get("w3").data<float>(), l.n, nullptr,
                         /*storedKN=*/true),
             "z3, " + where);
}

// The products read the transposes of w1 and w2 (appended arguments, one
// per parameter, [K, N]); w3, read as stored, is not prepared. At sizes
// that cross the register tiles and vectors along k, n and the rows
// (dynamic: 1 row, streamed sizes, several tiles, and none), the outputs
// match naive loops.
TEST(PreparedWeights, ProductsReadTransposesOfTheirWeights) {
  for (auto [k, n] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {15, 17}, {16, 16}, {33, 65}, {65, 33}}) {
    Linears l(k, n);
    CompiledModel model(l.module, 5, prepared());
    const FunctionSpec &spec = model.jit().spec("f");
    std::vector<std::pair<std::string, std::vector<int64_t>>> prepared;
    for (const ArgSpec &arg : spec.args) {
      if (arg.role == ArgSpec::Role::prepared) {
        prepared.push_back({arg.name, arg.shape});
      }
    }
    std::vector<std::pair<std::string, std::vector<int64_t>>> want = {
        {"w1", {k, n}}, {"w2", {n, 2 * n}}};
    EXPECT_EQ(prepared, want) << "k " << k << " n " << n;
    for (auto [batch, t] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {1, 4}, {1, 5}, {2, 17}, {3, 33}, {0, 3}}) {
      expectLinears(model, l, batch, t, uint32_t(k * 100 + n + batch + t));
    }
  }
}

// The copies are made again after parameters() hands the store out for
// writing; a JitModule run without a PreparedWeights transposes for the
// call; a positional call takes the transposes as arguments.
TEST(PreparedWeights, CopiesFollowTheParameters) {
  Linears l(17, 33);
  CompiledModel model(l.module, 2, prepared());
  expectLinears(model, l, 2, 9, 1);
  ParameterStore &store = model.parameters();
  Tensor w1 = store.get("w1");
  for (int64_t i = 0; i < w1.numel(); ++i) {
    w1.data<float>()[i] = -w1.data<float>()[i] * 0.5f + 0.25f;
  }
  store.get("w2") = ref::randomTensor({66, 33}, 12); // replaced, not written
  expectLinears(model, l, 2, 9, 2);

  Tensor x = ref::randomTensor({2, 9, 17}, 3);
  std::vector<Tensor> cached = model.run("f", {{"x", x}});
  std::vector<Tensor> fresh =
      model.jit().run("f", model.parameters(), {{"x", x}});
  ASSERT_EQ(cached.size(), fresh.size());
  for (size_t i = 0; i < cached.size(); ++i) {
    EXPECT_EQ(cached[i].toVector<float>(), fresh[i].toVector<float>()) << i;
  }
  std::vector<Arg> args;
  for (const ArgSpec &arg : model.jit().spec("f").args) {
    if (arg.role == ArgSpec::Role::param) {
      args.emplace_back(model.parameters().get(arg.name));
    } else if (arg.role == ArgSpec::Role::prepared) {
      args.emplace_back(transposeMatrix(model.parameters().get(arg.name)));
    } else {
      args.emplace_back(x);
    }
  }
  std::vector<Tensor> positional = model.jit().call("f", args);
  for (size_t i = 0; i < cached.size(); ++i) {
    EXPECT_EQ(positional[i].toVector<float>(), cached[i].toVector<float>())
        << i;
  }

  PreparedWeights prepared;
  EXPECT_EQ(prepared.bytes(), 0u);
  model.jit().run("f", model.parameters(), {{"x", x}}, &prepared);
  EXPECT_EQ(prepared.bytes(), size_t(17 * 33 + 33 * 66) * 4);
  prepared.clear();
  EXPECT_EQ(prepared.bytes(), 0u);
  EXPECT_THROW(prepared.get(model.parameters(), "b1"), Error); // 1-D
  EXPECT_THROW(prepared.get(model.parameters(), "w9"), Error);
}

// Steps that update their arguments in place keep their signatures: a
// decoding step (its products of a few rows stream the weights as stored)
// and a training step (its parameters change at every call); so do
// functions compiled without prepareWeights, and a CompiledModel's for an
// AVX-512 CPU unless its options ask for them. A prepared argument in the
// IR a user compiles is refused.
TEST(PreparedWeights, StepsThatUpdateInPlaceAreLeftAlone) {
  auto hasPrepared = [](const FunctionSpec &spec) {
    for (const ArgSpec &arg : spec.args) {
      if (arg.role == ArgSpec::Role::prepared) {
        return true;
      }
    }
    return false;
  };
  dsl::models::GptConfig config;
  config.vocabSize = 11;
  config.maxSeqLen = 8;
  config.dModel = 16;
  config.numHeads = 2;
  config.numLayers = 1;
  config.dFF = 32;
  dsl::Module decode;
  dsl::models::addGptDecode(decode, config);
  dsl::models::addGptLoss(decode, config);
  CompiledModel model(decode, 1, prepared());
  EXPECT_FALSE(hasPrepared(model.jit().spec("decode")));
  EXPECT_TRUE(hasPrepared(model.jit().spec("loss")));

  dsl::Module loss;
  dsl::models::addGptLoss(loss, config);
  auto training = compileTraining(loss, "loss", OptimizerConfig{});
  for (const std::string &name : training->functions()) {
    EXPECT_FALSE(hasPrepared(training->spec(name))) << name;
  }
  auto plain = JitModule::compile(loss.op(), JitOptions{});
  EXPECT_FALSE(hasPrepared(plain->spec("loss")));
  JitOptions off;
  off.prepareWeights = false;
  CompiledModel unprepared(loss, 1, off);
  EXPECT_FALSE(hasPrepared(unprepared.jit().spec("loss")));

  // Left open, a CompiledModel prepares them for CPUs without AVX-512
  // only (compiled here for both levels, whichever this host runs).
  for (auto [cpu, want] : std::vector<std::pair<std::string, bool>>{
           {"x86-64-v3", true}, {"x86-64-v4", false}}) {
    JitOptions open;
    open.cpu = cpu;
    CompiledModel byTarget(loss, 1, open);
    EXPECT_EQ(hasPrepared(byTarget.jit().spec("loss")), want) << cpu;
  }

  const char *ir = R"(
    func.func @f(%w: tensor<2x3xf32> {kiln.kind = "prepared", kiln.name = "w"})
        -> tensor<2x3xf32> {
      return %w : tensor<2x3xf32>
    })";
  try {
    JitModule::compileSource(ir, JitOptions{});
    FAIL() << "a prepared argument in the source was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("only the compiler adds"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
} // namespace kiln
