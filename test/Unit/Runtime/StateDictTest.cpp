//===- StateDictTest.cpp - Parameters saved under other names -------------===//
//
// A Hugging Face GPT-2 state dict (names under "transformer.", Conv1D
// weights stored [in, out], causal-mask buffers) written by the test, loaded
// into a store named as Kiln's GPT names its parameters; and every way a
// mapping or a file can be wrong.
//
//===----------------------------------------------------------------------===//

#include "runtime/StateDict.h"

#include "runtime/Safetensors.h"
#include "test/Unit/Runtime/ExpectError.h"
#include "test/Unit/Runtime/NearestBF16.h"
#include "test/Unit/Runtime/TempDirTest.h"

#include <gtest/gtest.h>

#include <regex>

using namespace kiln;

namespace {

constexpr int64_t kVocab = 5, kDim = 4, kFF = 8, kPositions = 3;

/// Kiln's GPT parameters, one block (compiler/DSL/Models.cpp's names and
/// [out, in] Linear weights), zero.
ParameterStore kilnGpt() {
  ParameterStore store;
  auto add = [&](const std::string &name, std::vector<int64_t> shape) {
    store.add(name, Tensor::zeros(std::move(shape), DType::f32));
  };
  add("wte.weight", {kVocab, kDim});
  add("wpe.weight", {kPositions, kDim});
  add("h.0.ln_1.weight", {kDim});
  add("h.0.ln_1.bias", {kDim});
  add("h.0.attn.c_attn.weight", {3 * kDim, kDim});
  add("h.0.attn.c_attn.bias", {3 * kDim});
  add("h.0.attn.c_proj.weight", {kDim, kDim});
  add("h.0.attn.c_proj.bias", {kDim});
  add("h.0.ln_2.weight", {kDim});
  add("h.0.ln_2.bias", {kDim});
  add("h.0.mlp.c_fc.weight", {kFF, kDim});
  add("h.0.mlp.c_fc.bias", {kFF});
  add("h.0.mlp.c_proj.weight", {kDim, kFF});
  add("h.0.mlp.c_proj.bias", {kDim});
  add("ln_f.weight", {kDim});
  add("ln_f.bias", {kDim});
  return store;
}

/// A tensor whose element i is base + i.
Tensor counting(std::vector<int64_t> shape, float base) {
  Tensor t = Tensor::empty(std::move(shape), DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data<float>()[i] = base + float(i);
  }
  return t;
}

/// What Hugging Face's GPT2LMHeadModel.state_dict() holds for that model:
/// every name under "transformer.", Conv1D weights [in, out], the attention
/// mask buffers, and the tied head.
NamedTensors huggingFaceGpt2() {
  NamedTensors file;
  float base = 0;
  auto add = [&](const std::string &name, std::vector<int64_t> shape) {
    Tensor t = counting(shape, base);
    base += 1000;
    file.emplace_back(name, t);
  };
  add("transformer.wte.weight", {kVocab, kDim});
  add("transformer.wpe.weight", {kPositions, kDim});
  add("transformer.h.0.ln_1.weight", {kDim});
  add("transformer.h.0.ln_1.bias", {kDim});
  add("transformer.h.0.attn.bias", {1, 1, kPositions, kPositions});
  add("transformer.h.0.attn.masked_bias", {});
  add("transformer.h.0.attn.c_attn.weight", {kDim, 3 * kDim});
  add("transformer.h.0.attn.c_attn.bias", {3 * kDim});
  add("transformer.h.0.attn.c_proj.weight", {kDim, kDim});
  add("transformer.h.0.attn.c_proj.bias", {kDim});
  add("transformer.h.0.ln_2.weight", {kDim});
  add("transformer.h.0.ln_2.bias", {kDim});
  add("transformer.h.0.mlp.c_fc.weight", {kDim, kFF});
  add("transformer.h.0.mlp.c_fc.bias", {kFF});
  add("transformer.h.0.mlp.c_proj.weight", {kFF, kDim});
  add("transformer.h.0.mlp.c_proj.bias", {kDim});
  add("transformer.ln_f.weight", {kDim});
  add("transformer.ln_f.bias", {kDim});
  add("lm_head.weight", {kVocab, kDim});
  return file;
}

StateDictMapping gpt2Mapping() {
  return {.renames = {{"transformer.**", "**"}},
          .ignore = {"transformer.h.*.attn.bias",
                     "transformer.h.*.attn.masked_bias", "lm_head.weight"},
          .transpose = {"h.*.attn.c_*.weight", "h.*.mlp.c_*.weight"}};
}

const Tensor &find(const NamedTensors &tensors, const std::string &name) {
  for (const auto &[n, t] : tensors) {
    if (n == name) {
      return t;
    }
  }
  throw std::runtime_error("no tensor " + name);
}

class StateDictTest : public kiln::test::TempDirTest {};

} // namespace

/// Expects `store` to hold the file's GPT-2 tensors (huggingFaceGpt2),
/// renamed and transposed by gpt2Mapping, each value as `stored` makes it.
static void expectGpt2(const ParameterStore &store, const NamedTensors &file,
                       float (*stored)(float)) {
  for (const Parameter &p : store) {
    const Tensor &source = find(file, "transformer." + p.name);
    bool transposed = p.name.find(".c_") != std::string::npos &&
                      p.name.ends_with(".weight");
    const float *got = p.tensor.data<float>();
    const float *want = source.data<float>();
    if (!transposed) {
      ASSERT_EQ(p.tensor.shape(), source.shape()) << p.name;
      for (int64_t i = 0; i < p.tensor.numel(); ++i) {
        ASSERT_EQ(got[i], stored(want[i])) << p.name << " element " << i;
      }
      continue;
    }
    // Kiln's [out, in] from the file's [in, out].
    int64_t out = p.tensor.shape()[0], in = p.tensor.shape()[1];
    ASSERT_EQ(source.shape(), (std::vector<int64_t>{in, out})) << p.name;
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t i = 0; i < in; ++i) {
        ASSERT_EQ(got[o * in + i], stored(want[i * out + o]))
            << p.name << " [" << o << ", " << i << "]";
      }
    }
  }
}

TEST_F(StateDictTest, LoadsAHuggingFaceGpt2StateDict) {
  NamedTensors file = huggingFaceGpt2();
  saveSafetensors(path("gpt2.safetensors"), file, {{"format", "pt"}});
  ParameterStore store = kilnGpt();
  auto metadata =
      loadParameters(path("gpt2.safetensors"), store, gpt2Mapping());
  EXPECT_EQ(metadata.at("format"), "pt");
  expectGpt2(store, file, [](float v) { return v; });
}

TEST_F(StateDictTest, LoadsABF16StateDictIntoF32Parameters) {
  // Published weights are usually BF16: written so here (rounded to
  // nearest even), they load widened into the model's F32 parameters,
  // renamed and transposed as the F32 ones.
  NamedTensors file = huggingFaceGpt2();
  saveSafetensors(path("gpt2-bf16.safetensors"), file, {}, FloatStorage::bf16);
  ParameterStore store = kilnGpt();
  loadParameters(path("gpt2-bf16.safetensors"), store, gpt2Mapping());
  expectGpt2(store, file, test::nearestBF16);
}

TEST_F(StateDictTest, RenamesWithWildcardsInsideComponents) {
  // Seed 002's style of renames: one component renamed in every layer,
  // the rule order deciding between overlapping patterns.
  ParameterStore store;
  store.add("encoder.layers.0.attn.w_q.weight",
            Tensor::zeros({2, 2}, DType::f32));
  store.add("encoder.layers.1.attn.w_q.weight",
            Tensor::zeros({2, 2}, DType::f32));
  store.add("encoder.norm.alpha", Tensor::zeros({2}, DType::f32));
  NamedTensors file = {
      {"encoder.layers.0.self_attention_block.w_q.weight", counting({2, 2}, 1)},
      {"encoder.layers.1.self_attention_block.w_q.weight", counting({2, 2}, 5)},
      {"encoder.norm.gamma", counting({2}, 9)}};
  StateDictMapping mapping = {
      .renames = {{"encoder.norm.gamma", "encoder.norm.alpha"},
                  {"*.layers.*.self_attention_block.**", "*.layers.*.attn.**"},
                  {"encoder.**", "never.**"}}};
  NamedTensors mapped = mapStateDict(file, mapping, store);
  ASSERT_EQ(mapped.size(), 3u);
  EXPECT_EQ(mapped[0].first, "encoder.layers.0.attn.w_q.weight");
  EXPECT_EQ(mapped[0].second.toVector<float>(),
            (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(mapped[1].second.toVector<float>(),
            (std::vector<float>{5, 6, 7, 8}));
  EXPECT_EQ(mapped[2].first, "encoder.norm.alpha");
  EXPECT_EQ(mapped[2].second.toVector<float>(), (std::vector<float>{9, 10}));
}

TEST_F(StateDictTest, RefusesWhatDoesNotFitAndChangesNothing) {
  saveSafetensors(path("gpt2.safetensors"), huggingFaceGpt2());
  ParameterStore store = kilnGpt();
  StateDictMapping mapping = gpt2Mapping();
  // Without the ignore list: the buffers and the head name no parameter.
  mapping.ignore.clear();
  EXPECT_KILN_ERROR(loadParameters(path("gpt2.safetensors"), store, mapping),
                    "'h.0.attn.bias' (file: 'transformer.h.0.attn.bias') "
                    "[1, 1, 3, 3] names no parameter of the model");
  EXPECT_KILN_ERROR(loadParameters(path("gpt2.safetensors"), store, mapping),
                    "'lm_head.weight' [5, 4] names no parameter");
  EXPECT_KILN_ERROR(loadParameters(path("gpt2.safetensors"), store, mapping),
                    "3 problems");
  // Without the transposes: Conv1D weights of the wrong shape.
  mapping = gpt2Mapping();
  mapping.transpose = {"h.*.attn.c_attn.weight"};
  EXPECT_KILN_ERROR(loadParameters(path("gpt2.safetensors"), store, mapping),
                    "'h.0.mlp.c_fc.weight' (file: "
                    "'transformer.h.0.mlp.c_fc.weight') has shape [4, 8] but "
                    "the model's parameter is [8, 4]");
  // A transpose that does not give the parameter's shape says so.
  mapping.transpose = {"h.*.attn.c_attn.weight", "h.*.mlp.c_*.weight",
                       "h.*.attn.c_proj.weight", "wte.weight"};
  EXPECT_KILN_ERROR(
      loadParameters(path("gpt2.safetensors"), store, mapping),
      "'wte.weight' (file: 'transformer.wte.weight') has shape [4, 5] "
      "(transposed from [5, 4]) but the model's parameter is [5, 4]");
  // Transposing what is not 2-D.
  mapping.transpose = {"**"};
  EXPECT_KILN_ERROR(loadParameters(path("gpt2.safetensors"), store, mapping),
                    "'h.0.ln_1.bias' (file: 'transformer.h.0.ln_1.bias') is "
                    "to be transposed but has shape [4], not 2-D");
  // A parameter nothing gives, and two file tensors for one parameter.
  mapping = gpt2Mapping();
  mapping.ignore.push_back("transformer.ln_f.bias");
  mapping.renames.insert(mapping.renames.begin(),
                         {"transformer.wpe.weight", "wte.weight"});
  EXPECT_KILN_ERROR(loadParameters(path("gpt2.safetensors"), store, mapping),
                    "no file tensor gives parameter 'ln_f.bias' [4]");
  EXPECT_KILN_ERROR(loadParameters(path("gpt2.safetensors"), store, mapping),
                    "'wte.weight' is given twice: by file tensors "
                    "'transformer.wte.weight' and 'transformer.wpe.weight'");
  // Each refusal changed nothing.
  for (const Parameter &p : store) {
    for (float v : p.tensor.toVector<float>()) {
      ASSERT_EQ(v, 0.0f) << p.name;
    }
  }
  // A dtype that differs.
  ParameterStore small;
  small.add("w", Tensor::zeros({2}, DType::f32));
  EXPECT_KILN_ERROR(
      mapStateDict({{"w", Tensor::zeros({2}, DType::i64)}}, {}, small),
      "'w' has dtype i64 but the model's parameter is f32");
}

TEST_F(StateDictTest, RefusesMalformedMappings) {
  ParameterStore store;
  store.add("w", Tensor::zeros({2}, DType::f32));
  NamedTensors file = {{"w", Tensor::zeros({2}, DType::f32)}};
  EXPECT_KILN_ERROR(mapStateDict(file, {.renames = {{"a.*.b", "a.b"}}}, store),
                    "rename rule 1 'a.*.b' -> 'a.b' has 1 wildcard(s) on the "
                    "left and 0 on the right");
  EXPECT_KILN_ERROR(mapStateDict(file, {.renames = {{"", "w"}}}, store),
                    "rename rule 1's 'from' is empty");
  EXPECT_KILN_ERROR(mapStateDict(file, {.ignore = {"a.***"}}, store),
                    "ignore pattern 1 'a.***' has '***'");
  EXPECT_KILN_ERROR(mapStateDict(file, {.transpose = {""}}, store),
                    "transpose pattern 1 is empty");
  // Regular-expression characters in a pattern stand for themselves.
  EXPECT_KILN_ERROR(mapStateDict({{"w", Tensor::zeros({2}, DType::f32)},
                                  {"x", Tensor::zeros({2}, DType::f32)}},
                                 {.ignore = {"(x|y)", "."}}, store),
                    "'x' [2] names no parameter");
  // A '*' stays within one component; a '**' crosses dots.
  EXPECT_KILN_ERROR(mapStateDict({{"x.w.b", Tensor::zeros({2}, DType::f32)}},
                                 {.renames = {{"*.b", "*"}}}, store),
                    "'x.w.b' [2] names no parameter");
  EXPECT_EQ(mapStateDict({{"x.w.b", Tensor::zeros({2}, DType::f32)}},
                         {.renames = {{"x.**.b", "**"}}}, store)[0]
                .first,
            "w");
}

namespace {

/// The reference matcher: the pattern as a greedy ECMAScript regular
/// expression ('*' one or more non-dots, '**' anything), only for the short
/// names of these tests.
std::regex asRegex(const std::string &pattern) {
  std::string regex;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '*') {
      bool anything = i + 1 < pattern.size() && pattern[i + 1] == '*';
      regex += anything ? "(.*)" : "([^.]+)";
      i += anything;
    } else {
      regex += pattern[i] == '.' ? std::string("\\.")
                                 : std::string(1, pattern[i]);
    }
  }
  return std::regex(regex);
}

std::optional<std::vector<std::string>> regexMatch(const std::regex &regex,
                                                   const std::string &name) {
  std::smatch m;
  if (!std::regex_match(name, m, regex)) {
    return std::nullopt;
  }
  std::vector<std::string> captures;
  for (size_t g = 1; g < m.size(); ++g) {
    captures.push_back(m[g].str());
  }
  return captures;
}

} // namespace

// Every pattern of up to four tokens over {a, b, ., *, **} against every
// name of up to six characters over {a, b, .}: the same matches and the
// same captures as the greedy regular expression.
TEST(StateDictPattern, MatchesAndCapturesAsAGreedyRegularExpression) {
  const std::vector<std::string> tokens = {"a", "b", ".", "*", "**"};
  std::vector<std::string> patterns = {""}, names = {""};
  for (size_t len = 0, from = 0; len < 4; ++len) {
    size_t to = patterns.size();
    for (size_t i = from; i < to; ++i) {
      for (const std::string &t : tokens) {
        std::string p = patterns[i] + t;
        if (p.find("***") == std::string::npos) {
          patterns.push_back(p);
        }
      }
    }
    from = to;
  }
  for (size_t len = 0, from = 0; len < 6; ++len) {
    size_t to = names.size();
    for (size_t i = from; i < to; ++i) {
      for (char c : {'a', 'b', '.'}) {
        names.push_back(names[i] + c);
      }
    }
    from = to;
  }
  size_t compared = 0, matched = 0;
  for (size_t i = 1; i < patterns.size(); ++i) {
    std::regex regex = asRegex(patterns[i]);
    for (const std::string &name : names) {
      auto want = regexMatch(regex, name);
      auto got = matchStateDictPattern(patterns[i], name);
      ASSERT_EQ(got, want) << "pattern '" << patterns[i] << "' name '" << name
                           << "'";
      ++compared;
      matched += want.has_value();
    }
  }
  EXPECT_GT(compared, 500000u);
  EXPECT_GT(matched, 1000u);
}

// A long name (a backtracking matcher recursed once per character and
// overflowed the stack at 50,000) matches in linear time up to the bound,
// and a longer one is refused, by the matcher and by a mapping.
TEST(StateDictPattern, LongNamesMatchInLinearTimeAndTooLongOnesAreRefused) {
  std::string longName(kMaxStateDictNameLength - 2, 'a');
  auto captures = matchStateDictPattern("**.*", longName + ".b");
  ASSERT_TRUE(captures);
  EXPECT_EQ((*captures)[0], longName);
  EXPECT_FALSE(matchStateDictPattern("*.*.*.*.*.*.*.*.c", longName + ".b"));
  EXPECT_KILN_ERROR(
      matchStateDictPattern("**", std::string(50000, 'a')),
      "a name of 50000 characters is longer than 4096");
  ParameterStore store;
  store.add("w", Tensor::zeros({2}, DType::f32));
  EXPECT_KILN_ERROR(
      mapStateDict({{std::string(50000, 'x'), Tensor::zeros({2}, DType::f32)},
                    {"w", Tensor::zeros({2}, DType::f32)}},
                   {.renames = {{"transformer.**", "**"}}}, store),
      "a file tensor's name has 50000 characters, more than 4096");
  EXPECT_KILN_ERROR(
      mapStateDict({}, {.ignore = {std::string(5000, 'x')}}, store),
      "ignore pattern 1 has 5000 characters, more than 4096");
}
