//===- FunctionTest.cpp - Specs, checked calls and AOT model loading ------===//
//
// The calling side of compiled code without a compiler: a hand-written
// packed function stands for compiled code and records what it was given.
//
//===----------------------------------------------------------------------===//

#include "runtime/SpecText.h"
#include "runtime/Aot.h"

#include "test/Unit/Runtime/ExpectError.h"

#include <gtest/gtest.h>

#include <climits>
#include <cmath>

using namespace kiln;

namespace {

int calls = 0;
void countingFunction(void **) { ++calls; }

/// decode(ids: i64 [?, ?] in [0, 10), pos: i64 scalar) with a learned
/// position table of 8 rows over the ids' dim 1.
FunctionSpec decodeSpec() {
  FunctionSpec spec;
  spec.name = "decode";
  ArgSpec ids;
  ids.name = "ids";
  ids.dtype = DType::i64;
  ids.shape = {-1, -1};
  ids.idBound = 10;
  ArgSpec pos;
  pos.name = "pos";
  pos.isScalar = true;
  ArgSpec table;
  table.name = "wpe.weight";
  table.role = ArgSpec::Role::param;
  table.shape = {8, 4};
  spec.args = {ids, pos, table};
  spec.groups = {{{{0, 0}}, -1}, {{{0, 1}}, -1}, {{{2, 0}}, 8}, {{{2, 1}}, 4}};
  spec.positionLimits = {{1, 1, 8}};
  return spec;
}

} // namespace

TEST(Function, SpecsRoundTripThroughText) {
  FunctionSpec spec = decodeSpec();
  spec.results = {{"loss", {-1, -1, 10}}, {"grad.w", {8, 4}, 2}};
  FunctionSpec back = parseFunctionSpec(serialize(spec));
  ASSERT_EQ(back.results.size(), 2u);
  EXPECT_EQ(back.results[0].updates, -1);
  EXPECT_EQ(back.results[1].updates, 2);
  EXPECT_EQ(back.results[1].shape, (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(back.results[0].name, "loss");
  EXPECT_EQ(back.results[1].name, "grad.w");
  EXPECT_EQ(serialize(back), serialize(spec));
  ASSERT_EQ(back.args.size(), 3u);
  EXPECT_TRUE(back.args[1].isScalar);
  EXPECT_TRUE(back.args[2].role == ArgSpec::Role::param);
  EXPECT_EQ(back.args[0].idBound, 10);
  EXPECT_EQ(back.positionLimits[0].maxLen, 8);
  EXPECT_EQ(back.positionLimits[0].length, -1);
  // A static length (a gradient's) survives the text.
  spec.positionLimits.push_back({0, 1, 8, 5});
  back = parseFunctionSpec(serialize(spec));
  ASSERT_EQ(back.positionLimits.size(), 2u);
  EXPECT_EQ(back.positionLimits[1].length, 5);
  EXPECT_EQ(back.positionLimits[1].offsetArg, 1);
  EXPECT_EQ(serialize(back), serialize(spec));
  spec.positionLimits.pop_back();
  // A least size survives the text.
  spec.groups[1].minSize = 3;
  EXPECT_EQ(parseFunctionSpec(serialize(spec)).groups[1].minSize, 3);
  // Roles survive the text.
  FunctionSpec roles = parseFunctionSpec(
      "function f\narg a input f32 [2] -1 none -\narg w param f32 [2] -1 "
      "none -\narg m state f32 [2] -1 none -\narg rate lr f32 [] -1 none "
      "finite-nonnegative\narg n step scalar [] -1 none positive\narg s seed "
      "scalar [] -1 none -\narg w prepared f32 [3,2] -1 none -\n");
  using R = ArgSpec::Role;
  std::vector<R> kinds;
  for (const ArgSpec &a : roles.args) {
    kinds.push_back(a.role);
  }
  EXPECT_EQ(kinds,
            (std::vector<R>{R::input, R::param, R::state, R::learningRate,
                            R::step, R::seed, R::prepared}));
  EXPECT_EQ(serialize(parseFunctionSpec(serialize(roles))), serialize(roles));
  // A prepared parameter is a transposed matrix: 2-D f32.
  for (const char *bad : {"function f\narg w prepared f32 [2] -1 none -\n",
                          "function f\narg w prepared i32 [2,2] -1 none -\n"}) {
    EXPECT_THROW(parseFunctionSpec(bad), Error) << bad;
  }
  // Size checks survive the text.
  spec.sizeChecks = {{{{{0, 1}, {1, -2}}, -7}, {{}, 3}, true},
                     {{{{3, 1}}, 0}, {{{2, 2}}, 1}, false}};
  EXPECT_EQ(parseFunctionSpec(serialize(spec)).sizeChecks, spec.sizeChecks);
  // Element checks too: products of expressions.
  spec.elementChecks = {{{{{{0, 1}}, 0}, {{{1, 1}}, -1}}, {{{}, 8}}}};
  EXPECT_EQ(parseFunctionSpec(serialize(spec)).elementChecks,
            spec.elementChecks);
  // Blank and white-space-only lines say nothing.
  EXPECT_EQ(
      serialize(parseFunctionSpec("function f\n  \n\t\nresult r [2] -1 f32\n")),
      "function f\nresult r [2] -1 f32\n");

  std::vector<ParamSpec> params = {
      {"wte.weight", {10, 4}, Init::normal(0.0, 0.02)},
      {"ln.bias", {4}, Init::zeros()}};
  std::vector<ParamSpec> read = parseParamSpecs(serialize(params));
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0].name, "wte.weight");
  EXPECT_EQ(read[0].shape, (std::vector<int64_t>{10, 4}));
  EXPECT_EQ(read[0].init.kind, Init::Kind::normal);
  EXPECT_EQ(read[0].init.b, 0.02);
}

TEST(Function, MalformedSpecsAreRefused) {
  EXPECT_KILN_ERROR(parseFunctionSpec(""), "must start with 'function <name>'");
  // Size checks: a kind, two expressions over the groups there are, with
  // bounded coefficients.
  const std::string g = "function f\narg a input f32 [-1] -1 none -\n"
                        "group -1 0:0\n";
  EXPECT_EQ(parseFunctionSpec(g + "check eq 1,1*g0 3\n").sizeChecks.size(), 1u);
  EXPECT_KILN_ERROR(parseFunctionSpec(g + "check le 1 2\n"),
                    "a size check is 'eq' or 'ge', got 'le'");
  EXPECT_KILN_ERROR(parseFunctionSpec(g + "check eq 1,1*g1 2\n"),
                    "'1,1*g1' names no group");
  for (const char *bad : {"", "x", "1,", "1,1*", "1,1*g", "1,1*gx", "1,*g0",
                          "1,1g0", "1,1*g0x", "1,1*g-1", "1x",
                          "99999999999999999999", "1,4294967296*g0"}) {
    SCOPED_TRACE(bad);
    EXPECT_KILN_ERROR(
        parseFunctionSpec(g + "check eq " + std::string(bad) + " 2\n"),
        "malformed function spec");
  }
  EXPECT_KILN_ERROR(parseFunctionSpec(g + "check eq 1 2 3\n"),
                    "expected 4 fields");
  EXPECT_EQ(parseFunctionSpec(g + "elements 0,1*g0;2 8\n")
                .elementChecks[0]
                .lhs.size(),
            2u);
  for (const char *bad : {";", "1;", ";1", "1;;2", "0,1*g1"}) {
    SCOPED_TRACE(bad);
    EXPECT_KILN_ERROR(
        parseFunctionSpec(g + "elements " + std::string(bad) + " 8\n"),
        "malformed function spec");
    EXPECT_KILN_ERROR(
        parseFunctionSpec(g + "divides " + std::string(bad) + " 8\n"),
        "malformed function spec");
  }
  // A reshape's inferred size: the elements a multiple of the other sizes;
  // written and read back alike.
  FunctionSpec divides = parseFunctionSpec(g + "divides 0,1*g0 4\n");
  ASSERT_EQ(divides.elementChecks.size(), 1u);
  EXPECT_TRUE(divides.elementChecks[0].divides);
  EXPECT_FALSE(parseFunctionSpec(g + "elements 0,1*g0 4\n")
                   .elementChecks[0]
                   .divides);
  EXPECT_EQ(parseFunctionSpec(serialize(divides)).elementChecks,
            divides.elementChecks);
  EXPECT_NE(serialize(divides).find("divides 0,1*g0 4\n"), std::string::npos)
      << serialize(divides);
  // Roles of the wrong type, names twice, names that are not printable.
  EXPECT_KILN_ERROR(
      parseFunctionSpec("function f\narg r lr f32 [2] -1 none -\n"),
      "the learning rate must be an f32 scalar tensor");
  EXPECT_KILN_ERROR(
      parseFunctionSpec("function f\narg n step f32 [] -1 none -\n"),
      "a step number or seed must be an i64 scalar");
  EXPECT_KILN_ERROR(
      parseFunctionSpec("function f\narg w param i64 [2] -1 none -\n"),
      "a parameter or optimizer state must be an f32 tensor");
  EXPECT_KILN_ERROR(parseFunctionSpec("function f\narg a input f32 [2] -1 "
                                      "none -\narg a input f32 [2] -1 none "
                                      "-\n"),
                    "two arguments are called 'a'");
  EXPECT_KILN_ERROR(
      parseFunctionSpec(std::string("function f\narg a\0b input f32 [2] -1 "
                                    "none -\n",
                                    43)),
      "an argument name must be printable ASCII without spaces");
  FunctionSpec named;
  named.name = "f";
  named.results = {{std::string("a\0b", 3), {2}}};
  EXPECT_KILN_ERROR(serialize(named), "must be non-empty printable ASCII "
                                      "without spaces");
  EXPECT_KILN_ERROR(parseFunctionSpec("function f\nbogus 1\n"),
                    "unknown entry 'bogus'");
  EXPECT_KILN_ERROR(parseFunctionSpec("function f\nresult r [2,x] -1 f32\n"),
                    "is not a shape");
  EXPECT_KILN_ERROR(parseFunctionSpec("function f\nresult r [2] -1\n"),
                    "expected 5 fields");
  // Results are f32 or bf16 tensors.
  EXPECT_EQ(
      parseFunctionSpec("function f\nresult r [2] -1 bf16\n").results[0].dtype,
      DType::bf16);
  EXPECT_KILN_ERROR(parseFunctionSpec("function f\nresult r [2] -1 i64\n"),
                    "result 'r' is not an f32 or bf16 tensor");
  EXPECT_KILN_ERROR(parseFunctionSpec("function f\nresult r [2] -1 f16\n"),
                    "unknown dtype 'f16'");
  EXPECT_KILN_ERROR(
      parseFunctionSpec(
          "function f\nresult r [2] -1 f32\nresult r [3] -1 f32\n"),
      "two results are called 'r'");
  // A result updating an argument in place: one that exists, is a tensor
  // of the result's dtype and shape, and no other result updates.
  const std::string w = "function f\narg w param f32 [2] -1 none -\n"
                        "arg s input scalar [] -1 none -\n";
  EXPECT_KILN_ERROR(parseFunctionSpec(w + "result r [2] 2 f32\n"),
                    "updates no argument");
  EXPECT_KILN_ERROR(parseFunctionSpec(w + "result r [2] -2 f32\n"),
                    "updates no argument");
  EXPECT_KILN_ERROR(parseFunctionSpec(w + "result r [] 1 f32\n"),
                    "not a tensor of the result's dtype and shape");
  EXPECT_KILN_ERROR(parseFunctionSpec(w + "result r [3] 0 f32\n"),
                    "not a tensor of the result's dtype and shape");
  EXPECT_KILN_ERROR(parseFunctionSpec(w + "result r [2] 0 bf16\n"),
                    "not a tensor of the result's dtype and shape");
  EXPECT_KILN_ERROR(
      parseFunctionSpec(w + "result r [2] 0 f32\nresult s [2] 0 f32\n"),
      "two results update argument 'w'");
  EXPECT_EQ(parseFunctionSpec(w + "result r [2] 0 f32\n").results[0].updates,
            0);
  EXPECT_KILN_ERROR(parseFunctionSpec("function f\narg a input f32 [2] -1 0\n"),
                    "expected 8 fields");
  EXPECT_KILN_ERROR(
      parseFunctionSpec("function f\narg a input f64 [2] -1 0 -\n"),
      "unknown dtype 'f64'");
  EXPECT_KILN_ERROR(
      parseFunctionSpec("function f\narg a input f32 [2] -1 x -\n"),
      "'x' is not an integer");
  EXPECT_KILN_ERROR(
      parseFunctionSpec("function f\narg a input f32 [2] -1 0 odd\n"),
      "unknown requirement 'odd'");
  EXPECT_KILN_ERROR(
      parseFunctionSpec("function f\narg a input f32 [2] -1 0 positive\n"),
      "argument 'a' cannot be required to be positive");
  EXPECT_KILN_ERROR(parseFunctionSpec("function f\narg a input i64 [2] -1 0 "
                                      "finite-nonnegative\n"),
                    "cannot be required to be finite-nonnegative");
  EXPECT_KILN_ERROR(
      parseFunctionSpec(
          "function f\narg a input f32 [2] -1 0 -\ngroup -1 0:1\n"),
      "'0:1' is not an argument dimension");
  EXPECT_KILN_ERROR(parseFunctionSpec("function f\nlimit 0 -1 8\n"),
                    "no such group");
  EXPECT_KILN_ERROR(parseFunctionSpec("function f\nlimit 0 -1 8 -2\n"),
                    "a static length is at least 0");
  EXPECT_KILN_ERROR(parseFunctionSpec("function f\nlimit 0 -1 8 2 1\n"),
                    "expected 4 fields");
  EXPECT_KILN_ERROR(parseFunctionSpec("function f\nmin 0 4\n"),
                    "no such group");
  EXPECT_KILN_ERROR(parseFunctionSpec("function f\narg a input f32 [-1] -1 "
                                      "none -\ngroup -1 0:0\nmin 0 -1\n"),
                    "a negative least size");
  EXPECT_KILN_ERROR(parseParamSpecs("param w [-1] 0 0 0\n"),
                    "needs a static shape");
  EXPECT_KILN_ERROR(parseParamSpecs("param w [2] 99 0 0\n"),
                    "unknown initializer");
  EXPECT_KILN_ERROR(serialize(std::vector<ParamSpec>{{"a b", {1}, {}}}),
                    "printable ASCII without spaces");
}

TEST(Function, LossTokensRoundTripAndAreChecked) {
  FunctionSpec spec = decodeSpec();
  spec.lossTokens = LossTokens{0, 7, false};
  FunctionSpec back = parseFunctionSpec(serialize(spec));
  ASSERT_TRUE(back.lossTokens);
  EXPECT_EQ(back.lossTokens->arg, 0);
  EXPECT_EQ(back.lossTokens->ignoreIndex, 7);
  EXPECT_FALSE(back.lossTokens->sum);
  spec.lossTokens->ignoreIndex.reset();
  spec.lossTokens->sum = true;
  back = parseFunctionSpec(serialize(spec));
  ASSERT_TRUE(back.lossTokens);
  EXPECT_FALSE(back.lossTokens->ignoreIndex);
  EXPECT_TRUE(back.lossTokens->sum);
  EXPECT_FALSE(parseFunctionSpec(serialize(decodeSpec())).lossTokens);

  std::string head = serialize(decodeSpec());
  // ids (0) is an i64 tensor; pos (1) a scalar; the table (2) f32.
  for (const char *bad : {"tokens 1 none mean\n", "tokens 2 0 mean\n",
                          "tokens 3 0 sum\n", "tokens -1 0 mean\n"}) {
    EXPECT_KILN_ERROR(parseFunctionSpec(head + bad),
                      "not an integer tensor argument");
  }
  EXPECT_KILN_ERROR(
      parseFunctionSpec(head + "tokens 0 0 mean\ntokens 0 1 mean\n"),
      "two loss token entries");
  EXPECT_KILN_ERROR(parseFunctionSpec(head + "tokens 0 0\n"),
                    "expected 4 fields");
  EXPECT_KILN_ERROR(parseFunctionSpec(head + "tokens 0 0 max\n"),
                    "must be mean or sum, got 'max'");

  // The tokens a mean loss averages over: those that are not ignored.
  Tensor targets = Tensor::fromVector<int64_t>({2, 3}, {7, 1, 7, 0, 2, 7});
  EXPECT_EQ(countTokens(LossTokens{0, 7, false}, targets), 3);
  EXPECT_EQ(countTokens(LossTokens{0, std::nullopt, false}, targets), 6);
  EXPECT_EQ(countTokens(LossTokens{0, 9, false},
                        Tensor::fromVector<int32_t>({2}, {9, 4})),
            1);
  EXPECT_KILN_ERROR(
      countTokens(LossTokens{0, 0, false}, Tensor::zeros({2}, DType::f32)),
      "must be an i32 or i64 tensor");
}

TEST(Function, CallsAreCheckedBeforeTheCodeRuns) {
  CompiledFunction fn(decodeSpec(), &countingFunction);
  Tensor ids = Tensor::zeros({2, 3}, DType::i64);
  Tensor table = Tensor::zeros({8, 4}, DType::f32);
  calls = 0;
  fn.call({ids, int64_t(5), table});
  EXPECT_EQ(calls, 1);
  // Positions [6, 9) pass the 8-row table; so would INT64_MAX - 1 with a
  // naive offset + length.
  EXPECT_KILN_ERROR(fn.call({ids, int64_t(6), table}), "positions [6, 9)");
  EXPECT_KILN_ERROR(fn.call({ids, int64_t(INT64_MAX - 1), table}),
                    "exceed the positions the model holds");
  EXPECT_KILN_ERROR(fn.call({ids, int64_t(-1), table}),
                    "exceed the positions the model holds");
  Tensor bad = Tensor::fromVector<int64_t>({1, 2}, {3, 10});
  EXPECT_KILN_ERROR(fn.call({bad, int64_t(0), table}),
                    "holds 10 at flat index 1, outside [0, 10)");
  EXPECT_KILN_ERROR(fn.call({ids, table, table}), "must be an i64 scalar");
  EXPECT_EQ(calls, 1);
}

// A training step's step and learning rate: step >= 1, lr finite and >= 0
// (kiln.require), checked before the code runs.
TEST(Function, RequiredValuesAreCheckedBeforeTheCodeRuns) {
  FunctionSpec spec;
  spec.name = "train_step";
  ArgSpec lr;
  lr.name = "lr";
  lr.require = ArgSpec::Require::finiteNonnegative;
  ArgSpec step;
  step.name = "step";
  step.isScalar = true;
  step.require = ArgSpec::Require::positive;
  spec.args = {lr, step};
  spec = parseFunctionSpec(serialize(spec)); // the text keeps them
  CompiledFunction fn(spec, &countingFunction);
  calls = 0;
  fn.call({Tensor::full({}, 0.0f), int64_t(1)});
  fn.call({Tensor::full({}, 3e-4f), int64_t(INT64_MAX)});
  EXPECT_EQ(calls, 2);
  EXPECT_KILN_ERROR(fn.call({Tensor::full({}, 1e-3f), int64_t(0)}),
                    "'step' of 'train_step' must be at least 1, got 0");
  EXPECT_KILN_ERROR(fn.call({Tensor::full({}, 1e-3f), int64_t(-1)}),
                    "must be at least 1, got -1");
  for (float bad : {NAN, INFINITY, -INFINITY, -1e-3f}) {
    EXPECT_KILN_ERROR(fn.call({Tensor::full({}, bad), int64_t(1)}),
                      "'lr' of 'train_step' must be finite and >= 0");
  }
  EXPECT_EQ(calls, 2);
}

// Without an ignore_index every id is bounds-checked, INT64_MIN included
// (it had been the "none" sentinel, and passed as id 0).
TEST(Function, EveryIdIsCheckedWithoutAnIgnoredId) {
  FunctionSpec spec = decodeSpec();
  spec = parseFunctionSpec(serialize(spec));
  ASSERT_FALSE(spec.args[0].ignoredId);
  CompiledFunction fn(spec, &countingFunction);
  Tensor table = Tensor::zeros({8, 4}, DType::f32);
  Tensor ids = Tensor::fromVector<int64_t>({1, 2}, {3, INT64_MIN});
  EXPECT_KILN_ERROR(fn.call({ids, int64_t(0), table}),
                    "holds -9223372036854775808 at flat index 1");
  // With one, that value (and only it) passes.
  spec.args[0].ignoredId = INT64_MIN;
  CompiledFunction ignoring(parseFunctionSpec(serialize(spec)),
                            &countingFunction);
  calls = 0;
  ignoring.call({ids, int64_t(0), table});
  EXPECT_EQ(calls, 1);
  EXPECT_KILN_ERROR(ignoring.call({Tensor::fromVector<int64_t>({1, 1}, {-1}),
                                   int64_t(0), table}),
                    "holds -1 at flat index 0");
}

TEST(Function, AnAotModelForAnotherInterfaceIsRefused) {
  FunctionSpec spec = decodeSpec();
  std::string text = serialize(spec);
  kiln_function function{"decode", text.c_str(), &countingFunction};
  std::string params = "param wpe.weight [8,4] 0 0 0\n";
  kiln_model model{KILN_ABI_VERSION, "m", params.c_str(), 1, &function};
  AotModule aot(model);
  EXPECT_EQ(aot.functions(), std::vector<std::string>{"decode"});
  EXPECT_EQ(aot.initParameters(0).get("wpe.weight").shape(),
            (std::vector<int64_t>{8, 4}));
  model.abi_version = KILN_ABI_VERSION + 1;
  EXPECT_KILN_ERROR(AotModule{model}, "compile it again with this Kiln");

  // The C entry: the same checks, reported through kiln_last_error.
  int64_t zeros[6] = {0}, pos = 7;
  float rows[32] = {0};
  kiln_tensor args[3] = {};
  args[0] = {zeros, KILN_I64, 2, {2, 3}, nullptr};
  args[1] = {&pos, KILN_I64, 0, {}, nullptr};
  args[2] = {rows, KILN_F32, 2, {8, 4}, nullptr};
  calls = 0;
  EXPECT_NE(kiln_call(&function, args, 3, nullptr, 0), 0);
  EXPECT_NE(std::string(kiln_last_error()).find("positions [7, 10)"),
            std::string::npos)
      << kiln_last_error();
  pos = 2;
  EXPECT_EQ(kiln_call(&function, args, 3, nullptr, 0), 0) << kiln_last_error();
  args[0].dtype = 42;
  EXPECT_NE(kiln_call(&function, args, 3, nullptr, 0), 0);
  EXPECT_NE(std::string(kiln_last_error()).find("unknown dtype code 42"),
            std::string::npos);
  EXPECT_EQ(calls, 1);
}
