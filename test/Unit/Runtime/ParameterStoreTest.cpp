//===- ParameterStoreTest.cpp - Tests of kiln::ParameterStore -------------===//

#include "runtime/ParameterStore.h"

#include "test/Unit/Runtime/ExpectError.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

/// A small store: two layers of attention weights plus an embedding.
ParameterStore makeStore(Rng &rng) {
  ParameterStore store;
  store.add("wte", {10, 4}, Init::normal(0, 0.02), rng);
  store.add("encoder.layers.0.attn.wq", {4, 4}, Init::xavierUniform(), rng);
  store.add("encoder.layers.0.attn.bq", {4}, Init::zeros(), rng);
  store.add("encoder.layers.1.attn.wq", {4, 4}, Init::xavierUniform(), rng);
  store.add("encoder.layers.10.attn.wq", {4, 4}, Init::xavierUniform(), rng);
  return store;
}

TEST(ParameterStoreTest, KeepsInsertionOrder) {
  Rng rng(0);
  ParameterStore store = makeStore(rng);
  EXPECT_EQ(store.names(),
            (std::vector<std::string>{
                "wte", "encoder.layers.0.attn.wq", "encoder.layers.0.attn.bq",
                "encoder.layers.1.attn.wq", "encoder.layers.10.attn.wq"}));
  std::vector<std::string> iterated;
  for (const Parameter &parameter : store) {
    iterated.push_back(parameter.name);
  }
  EXPECT_EQ(iterated, store.names());
  EXPECT_EQ(store.size(), 5u);
  EXPECT_EQ(store.numParameters(), 40 + 16 + 4 + 16 + 16);
  NamedTensors named = store.namedTensors();
  ASSERT_EQ(named.size(), 5u);
  EXPECT_EQ(named[1].first, "encoder.layers.0.attn.wq");
  EXPECT_EQ(named[1].second.raw(), store.get("encoder.layers.0.attn.wq").raw());
}

TEST(ParameterStoreTest, AddInitializesAndGetReturnsTheSameTensor) {
  Rng rng(0);
  ParameterStore store;
  Tensor &bias = store.add("bias", {3}, Init::constant(0.5), rng);
  EXPECT_EQ(bias.dtype(), DType::f32);
  EXPECT_EQ(bias.toVector<float>(), std::vector<float>(3, 0.5f));
  // References stay valid as the store grows.
  for (int i = 0; i < 100; ++i) {
    store.add("extra." + std::to_string(i), {1}, Init::zeros(), rng);
  }
  EXPECT_EQ(&bias, &store.get("bias"));
  EXPECT_TRUE(store.contains("extra.99"));
  EXPECT_FALSE(store.contains("extra"));

  Tensor ids = Tensor::zeros({2}, DType::i64);
  EXPECT_EQ(store.add("ids", ids).raw(), ids.raw());
}

TEST(ParameterStoreTest, SameSeedSameParameters) {
  Rng a(9), b(9);
  ParameterStore first = makeStore(a);
  ParameterStore second = makeStore(b);
  for (const std::string &name : first.names()) {
    EXPECT_EQ(first.get(name).toVector<float>(),
              second.get(name).toVector<float>())
        << name;
  }
}

TEST(ParameterStoreTest, Under) {
  Rng rng(0);
  ParameterStore store = makeStore(rng);
  NamedTensors layer1 = store.under("encoder.layers.1");
  ASSERT_EQ(layer1.size(), 1u) << "'encoder.layers.10' is not under it";
  EXPECT_EQ(layer1[0].first, "encoder.layers.1.attn.wq");
  EXPECT_EQ(store.under("encoder.layers.0").size(), 2u);
  EXPECT_EQ(store.under("wte").size(), 1u);
  EXPECT_TRUE(store.under("decoder").empty());
}

TEST(ParameterStoreTest, RefusesDuplicatesAndBadNames) {
  Rng rng(0);
  ParameterStore store = makeStore(rng);
  EXPECT_KILN_ERROR(store.add("wte", {10, 4}, Init::zeros(), rng),
                    "parameter 'wte' is already defined (shape [10, 4])");
  EXPECT_KILN_ERROR(store.add("wte", Tensor::zeros({1}, DType::f32)),
                    "already defined");
  for (const char *name : {"", ".a", "a.", "a..b"}) {
    EXPECT_KILN_ERROR(store.add(name, {1}, Init::zeros(), rng),
                      "invalid parameter name");
  }
  EXPECT_KILN_ERROR(store.add("bias", Tensor()), "undefined");
  EXPECT_KILN_ERROR(store.add("w", {3}, Init::xavierUniform(), rng),
                    "parameter 'w': xavierUniform(gain=1) needs a tensor of "
                    "rank >= 2");
  EXPECT_KILN_ERROR(store.add("v", {2, -2}, Init::zeros(), rng),
                    "parameter 'v': Tensor::empty: shape [2, -2] has a "
                    "negative size");
  EXPECT_FALSE(store.contains("w"));
  EXPECT_FALSE(store.contains("v"));
  EXPECT_EQ(store.size(), 5u);
}

TEST(ParameterStoreTest, MissingNameSuggestsNearNames) {
  Rng rng(0);
  ParameterStore store = makeStore(rng);
  EXPECT_KILN_ERROR(store.get("encoder.layer.0.attn.wq"),
                    "no parameter 'encoder.layer.0.attn.wq' among 5 "
                    "parameters; nearest: 'encoder.layers.0.attn.wq'");
  const ParameterStore &constStore = store;
  EXPECT_KILN_ERROR(constStore.get("wtf"), "nearest: 'wte'");
  EXPECT_KILN_ERROR(ParameterStore().get("wte"),
                    "no parameter 'wte': the store is empty");
}

TEST(ParameterStoreTest, SetFromCopiesIntoTheExistingStorage) {
  Rng rng(0);
  ParameterStore store;
  Tensor &weight = store.add("w", {2, 2}, Init::normal(0, 1), rng);
  store.add("b", {2}, Init::zeros(), rng);
  void *storage = weight.raw();
  store.setFrom(NamedTensors{
      {"b", Tensor::fromVector<float>({2}, {5, 6})},
      {"w", Tensor::fromVector<float>({2, 2}, {1, 2, 3, 4})},
  });
  EXPECT_EQ(weight.raw(), storage);
  EXPECT_EQ(weight.toVector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(store.get("b").toVector<float>(), (std::vector<float>{5, 6}));

  std::map<std::string, Tensor> values = {
      {"w", Tensor::zeros({2, 2}, DType::f32)}, {"b", Tensor::full({2}, 1.0f)}};
  store.setFrom(values);
  EXPECT_EQ(store.get("b").toVector<float>(), (std::vector<float>{1, 1}));
}

TEST(ParameterStoreTest, SetFromReportsEveryProblemAndChangesNothing) {
  Rng rng(0);
  ParameterStore store;
  store.add("w", {2, 2}, Init::ones(), rng);
  store.add("b", {2}, Init::ones(), rng);
  store.add("ids", Tensor::zeros({2}, DType::i32));

  EXPECT_KILN_ERROR(
      store.setFrom(NamedTensors{{"w", Tensor::zeros({2, 2}, DType::f32)},
                                 {"ids", Tensor::zeros({2}, DType::i32)}}),
      "missing tensor 'b' (shape [2])");
  EXPECT_KILN_ERROR(
      store.setFrom(NamedTensors{{"w", Tensor::zeros({4}, DType::f32)},
                                 {"b", Tensor::zeros({2}, DType::f32)},
                                 {"ids", Tensor::zeros({2}, DType::i32)}}),
      "'w' has shape [4] but the model expects [2, 2]");
  EXPECT_KILN_ERROR(
      store.setFrom(NamedTensors{{"w", Tensor::zeros({2, 2}, DType::f32)},
                                 {"b", Tensor::zeros({2}, DType::f32)},
                                 {"ids", Tensor::zeros({2}, DType::i64)}}),
      "'ids' has dtype i64 but the model expects i32");
  EXPECT_KILN_ERROR(
      store.setFrom(NamedTensors{{"w", Tensor::zeros({2, 2}, DType::f32)},
                                 {"b", Tensor::zeros({2}, DType::f32)},
                                 {"ids", Tensor::zeros({2}, DType::i32)},
                                 {"lm_head", Tensor::zeros({3}, DType::f32)}}),
      "unexpected tensor 'lm_head' (shape [3])");
  EXPECT_KILN_ERROR(
      store.setFrom(NamedTensors{{"w", Tensor::zeros({2, 2}, DType::f32)},
                                 {"w", Tensor::zeros({2, 2}, DType::f32)},
                                 {"b", Tensor::zeros({2}, DType::f32)},
                                 {"ids", Tensor::zeros({2}, DType::i32)}}),
      "'w' is given more than once");

  // All problems in one message.
  try {
    store.setFrom(NamedTensors{{"w", Tensor::zeros({3}, DType::f32)},
                               {"x", Tensor::zeros({1}, DType::f32)}});
    ADD_FAILURE() << "expected an error";
  } catch (const Error &error) {
    std::string message = error.what();
    EXPECT_NE(message.find("cannot set 3 parameters from 2 tensors"),
              std::string::npos)
        << message;
    for (const char *fragment :
         {"'w' has shape [3]", "unexpected tensor 'x'", "missing tensor 'b'",
          "missing tensor 'ids'"}) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << message << "\nlacks: " << fragment;
    }
  }
  // Nothing was copied by the failed calls.
  EXPECT_EQ(store.get("w").toVector<float>(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(store.get("b").toVector<float>(), std::vector<float>(2, 1.0f));
}

TEST(ParameterStoreTest, Describe) {
  Rng rng(0);
  ParameterStore store;
  store.add("wte", {10, 4}, Init::normal(0, 0.02), rng);
  store.add("ln.b", {4}, Init::zeros(), rng);
  EXPECT_EQ(store.describe(), "wte   f32 [10, 4]  normal(mean=0, std=0.02)\n"
                              "ln.b  f32 [4]  zeros\n"
                              "2 tensors, 44 parameters\n");
}

} // namespace
