//===- ModelNumericsTest.cpp - Whole models against naive references ------===//
//
// The reference models of the DSL (BERT embeddings of seed 003, a GPT-2
// style decoder, a Llama-architecture decoder, the encoder-decoder with
// padding and causal masks) built,
// JIT-compiled and run for several (B, T) through one compiled function, and
// compared with naive C++ loops over the same parameters.
//
//===----------------------------------------------------------------------===//

#include "../JIT/Reference.h"
#include "DoubleReference.h"

#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "compiler/Target/JIT/CompiledModel.h"
#include "runtime/Error.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace kiln;

namespace {

/// Gives every parameter random values (LayerNorm ones/zeros and zero
/// biases would hide a mix-up of weight and bias).
void randomizeParameters(CompiledModel &model, uint32_t seed) {
  for (const std::string &name : model.parameters().names()) {
    Tensor &t = model.parameters().get(name);
    Tensor r = ref::randomTensor(t.shape(), seed++, -0.5f, 0.5f);
    std::copy(r.data<float>(), r.data<float>() + r.numel(), t.data<float>());
  }
}

Tensor add(const Tensor &a, const Tensor &b) {
  Tensor y = a.clone();
  for (int64_t i = 0; i < y.numel(); ++i) {
    y.data<float>()[i] += b.data<float>()[i];
  }
  return y;
}

Tensor gelu(const Tensor &x) {
  Tensor y = x.clone();
  for (int64_t i = 0; i < y.numel(); ++i) {
    y.data<float>()[i] = float(ref::gelu(y.data<float>()[i], false));
  }
  return y;
}

Tensor relu(const Tensor &x) {
  Tensor y = x.clone();
  for (int64_t i = 0; i < y.numel(); ++i) {
    y.data<float>()[i] = std::max(0.0f, y.data<float>()[i]);
  }
  return y;
}

/// Rows [begin, end) of a [R, C] weight or elements of a vector.
Tensor rows(const Tensor &t, int64_t begin, int64_t end) {
  int64_t width = t.rank() == 2 ? t.shape()[1] : 1;
  std::vector<int64_t> shape = t.shape();
  shape[0] = end - begin;
  Tensor r = Tensor::empty(shape, DType::f32);
  std::copy(t.data<float>() + begin * width, t.data<float>() + end * width,
            r.data<float>());
  return r;
}

Tensor embed(const Tensor &ids, const Tensor &table) {
  int64_t d = table.shape()[1];
  std::vector<int64_t> shape = ids.shape();
  shape.push_back(d);
  Tensor y = Tensor::empty(shape, DType::f32);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    std::copy(table.data<float>() + ids.data<int64_t>()[i] * d,
              table.data<float>() + (ids.data<int64_t>()[i] + 1) * d,
              y.data<float>() + i * d);
  }
  return y;
}

} // namespace

TEST(ModelNumerics, GptDecoderMatchesReference) {
  dsl::Module module;
  dsl::models::GptConfig config = dsl::models::gptTiny();
  config.numLayers = 2;
  dsl::models::addGptForward(module, config);
  CompiledModel model(module, 7);
  randomizeParameters(model, 100);
  const ParameterStore &p = model.parameters();
  int64_t d = config.dModel;
  for (auto [b, t] : {std::pair<int64_t, int64_t>{1, 1}, {2, 7}, {3, 12}}) {
    Tensor idx = ref::randomIds({b, t}, config.vocabSize, 5);
    Tensor got = model.run("forward", {{"idx", idx}})[0];

    Tensor x = embed(idx, p.get("wte.weight"));
    const Tensor &wpe = p.get("wpe.weight");
    for (int64_t i = 0; i < b * t; ++i) {
      for (int64_t c = 0; c < d; ++c) {
        x.data<float>()[i * d + c] += wpe.data<float>()[(i % t) * d + c];
      }
    }
    for (int64_t l = 0; l < config.numLayers; ++l) {
      std::string h = "h." + std::to_string(l) + ".";
      Tensor n1 = ref::layerNorm(x, p.get(h + "ln_1.weight"),
                                 p.get(h + "ln_1.bias"), 1e-5, false);
      const Tensor &w = p.get(h + "attn.c_attn.weight");
      const Tensor &bias = p.get(h + "attn.c_attn.bias");
      Tensor wq = rows(w, 0, d), wk = rows(w, d, 2 * d),
             wv = rows(w, 2 * d, 3 * d);
      Tensor bq = rows(bias, 0, d), bk = rows(bias, d, 2 * d),
             bv = rows(bias, 2 * d, 3 * d);
      Tensor att = ref::attention(
          n1, n1, wq, wk, wv, p.get(h + "attn.c_proj.weight"), &bq, &bk, &bv,
          &p.get(h + "attn.c_proj.bias"), nullptr, config.numHeads, true);
      x = add(x, att);
      Tensor n2 = ref::layerNorm(x, p.get(h + "ln_2.weight"),
                                 p.get(h + "ln_2.bias"), 1e-5, false);
      Tensor hidden = gelu(ref::linear(n2, p.get(h + "mlp.c_fc.weight"),
                                       &p.get(h + "mlp.c_fc.bias")));
      x = add(x, ref::linear(hidden, p.get(h + "mlp.c_proj.weight"),
                             &p.get(h + "mlp.c_proj.bias")));
    }
    Tensor nf = ref::layerNorm(x, p.get("ln_f.weight"), p.get("ln_f.bias"),
                               1e-5, false);
    Tensor expected = ref::linear(nf, p.get("wte.weight"), nullptr);
    ref::expectClose(got, expected, 2e-4, 2e-4);
  }
}

// llamaTiny (4 query heads over 2 key/value heads of 16, rotary positions,
// SwiGLU) at lengths across 16 and 32, against the double reference.
TEST(ModelNumerics, LlamaMatchesReference) {
  dsl::Module module;
  dsl::models::LlamaConfig config = dsl::models::llamaTiny();
  dsl::models::addLlamaForward(module, config);
  CompiledModel model(module, 9);
  randomizeParameters(model, 200);
  dref::Params params;
  for (const std::string &name : model.parameters().names()) {
    std::vector<float> v = model.parameters().get(name).toVector<float>();
    params[name] = dref::Vec(v.begin(), v.end());
  }
  dref::LlamaSizes sizes{config.dModel,     config.numHeads,  config.numKvHeads,
                         config.numLayers,  config.dFF,       config.vocabSize,
                         config.rmsNormEps, config.ropeTheta, config.tiedHead};
  for (auto [b, t] : {std::pair<int64_t, int64_t>{1, 1}, {2, 17}, {1, 33}}) {
    Tensor idx = ref::randomIds({b, t}, config.vocabSize, 11);
    Tensor got = model.run("forward", {{"idx", idx}})[0];
    std::vector<std::vector<int64_t>> seqs;
    for (int64_t r = 0; r < b; ++r) {
      seqs.emplace_back(idx.data<int64_t>() + r * t,
                        idx.data<int64_t>() + (r + 1) * t);
    }
    std::vector<float> want;
    for (const dref::Vec &logits : dref::llamaLogits(params, sizes, seqs)) {
      want.insert(want.end(), logits.begin(), logits.end());
    }
    ref::expectClose(got,
                     Tensor::fromVector<float>({b, t, config.vocabSize}, want),
                     2e-4, 2e-4);
  }
}

// nn::MultiHeadAttention with grouped-query heads (8 over 2) and rotary
// positions, with biases, against the double reference.
TEST(ModelNumerics, GroupedQueryRotaryAttentionModule) {
  dsl::Module module;
  dsl::Graph &graph = module.addGraph("forward");
  dsl::Var x = graph.input("x", {dsl::kDynamic, dsl::kDynamic, 32}, DType::f32);
  dsl::nn::MultiHeadAttention attn(
      graph, "attn",
      {.dModel = 32,
       .numHeads = 8,
       .numKvHeads = 2,
       .rotary = dsl::nn::RotaryConfig{.theta = 100.0}});
  graph.finish({attn(x, x, {.causal = true})});
  CompiledModel model(module, 3);
  randomizeParameters(model, 300);
  auto p = [&](const std::string &name) {
    std::vector<float> v =
        model.parameters().get("attn." + name).toVector<float>();
    return dref::Vec(v.begin(), v.end());
  };
  for (int64_t t : {1, 17, 33}) {
    Tensor in = ref::randomTensor({1, t, 32}, uint32_t(t), -1, 1);
    std::vector<float> xf = in.toVector<float>();
    dref::Vec xs(xf.begin(), xf.end());
    dref::Vec bq = p("w_q.bias"), bk = p("w_k.bias"), bv = p("w_v.bias"),
              bo = p("w_o.bias");
    dref::Vec q = dref::ropeHalf(
        dref::linear(xs, t, 32, p("w_q.weight"), 32, &bq), t, 32, 4, 100.0);
    dref::Vec k = dref::ropeHalf(
        dref::linear(xs, t, 32, p("w_k.weight"), 8, &bk), t, 8, 4, 100.0);
    dref::Vec v = dref::linear(xs, t, 32, p("w_v.weight"), 8, &bv);
    dref::Vec a =
        dref::attention(q, k, v, nullptr, 1, t, t, 32, 8, true, {}, 2);
    dref::Vec want = dref::linear(a, t, 32, p("w_o.weight"), 32, &bo);
    ref::expectClose(
        model.run("forward", {{"x", in}})[0],
        Tensor::fromVector<float>({1, t, 32},
                                  std::vector<float>(want.begin(), want.end())),
        2e-5, 2e-4);
  }
}

// A configuration that cannot be built is refused by name, before any
// parameter is declared.
TEST(ModelNumerics, LlamaConfigErrorsNameTheField) {
  auto expectRefused = [](dsl::models::LlamaConfig config,
                          const std::string &what) {
    dsl::Module module;
    try {
      dsl::models::addLlamaForward(module, config);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos)
          << e.what();
    }
  };
  dsl::models::LlamaConfig c = dsl::models::llamaTiny();
  c.numKvHeads = 3;
  expectRefused(c, "'numKvHeads' (3) must divide 'numHeads' (4)");
  c = dsl::models::llamaTiny();
  c.numHeads = 3;
  expectRefused(c, "'numHeads' (3) must divide 'dModel' (64)");
  c = dsl::models::llamaTiny();
  c.numKvHeads = 0;
  c.numHeads = 64; // heads of width 1: no rotary pairs
  expectRefused(c, "heads of even width");
  c = dsl::models::llamaTiny();
  c.ropeTheta = 0.0;
  expectRefused(c, "'ropeTheta' finite and > 0");
  c = dsl::models::llamaTiny();
  c.dFF = 0;
  expectRefused(c, "'dFF' must be positive, got 0");
}

TEST(ModelNumerics, BertEmbeddingsOfSeed003) {
  dsl::Module module;
  dsl::models::BertEmbeddingsConfig config = dsl::models::bertSeedEmbeddings();
  dsl::models::addBertEmbeddingsForward(module, config);
  CompiledModel model(module, 3);
  randomizeParameters(model, 200);
  const ParameterStore &p = model.parameters();
  const Tensor &word = p.get("word_embeddings.weight");
  int64_t d = word.shape()[1];
  for (auto [b, t] : {std::pair<int64_t, int64_t>{1, 4}, {2, 9}}) {
    Tensor ids = ref::randomIds({b, t}, word.shape()[0], 6);
    ids.data<int64_t>()[t - 1] = 0; // [PAD] reads its row normally
    Tensor types = ref::randomIds({b, t}, 2, 7);
    Tensor got = model.run("forward",
                           {{"input_ids", ids}, {"token_type_ids", types}})[0];
    Tensor x = add(embed(ids, word),
                   embed(types, p.get("token_type_embeddings.weight")));
    const Tensor &pos = p.get("position_embeddings.weight");
    for (int64_t i = 0; i < b * t; ++i) {
      for (int64_t c = 0; c < d; ++c) {
        x.data<float>()[i * d + c] += pos.data<float>()[(i % t) * d + c];
      }
    }
    Tensor expected = ref::layerNorm(x, p.get("LayerNorm.weight"),
                                     p.get("LayerNorm.bias"), 1e-12, false);
    ref::expectClose(got, expected, 1e-4, 1e-4);
  }
}

TEST(ModelNumerics, EncoderDecoderWithPaddingAndCausalMasks) {
  dsl::Module module;
  auto config = dsl::models::encdecTiny();
  dsl::models::addEncDecForward(module, config);
  CompiledModel model(module, 11);
  randomizeParameters(model, 300);
  const ParameterStore &p = model.parameters();
  int64_t d = config.block.dModel;
  int64_t heads = config.block.numHeads;
  const Tensor &emb = p.get("src_embed.embedding.weight");
  auto embedWithPositions = [&](const Tensor &ids) {
    Tensor x = embed(ids, emb);
    int64_t t = ids.shape()[1];
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t c = i % d, pos = (i / d) % t;
      double div = std::exp((c / 2 * 2) * -(std::log(10000.0) / double(d)));
      double pe = c % 2 ? std::cos(pos * div) : std::sin(pos * div);
      x.data<float>()[i] =
          float(x.data<float>()[i] * std::sqrt(double(d)) + pe);
    }
    return x;
  };
  auto norm = [&](const Tensor &x, const std::string &prefix) {
    return ref::layerNorm(x, p.get(prefix + ".norm.weight"),
                          p.get(prefix + ".norm.bias"), 1e-5, false);
  };
  auto attention = [&](const Tensor &q, const Tensor &kv,
                       const std::string &prefix, const Tensor *mask,
                       bool causal) {
    return ref::attention(
        q, kv, p.get(prefix + ".w_q.weight"), p.get(prefix + ".w_k.weight"),
        p.get(prefix + ".w_v.weight"), p.get(prefix + ".w_o.weight"),
        &p.get(prefix + ".w_q.bias"), &p.get(prefix + ".w_k.bias"),
        &p.get(prefix + ".w_v.bias"), &p.get(prefix + ".w_o.bias"), mask, heads,
        causal);
  };
  auto ffn = [&](const Tensor &x, const std::string &prefix) {
    Tensor h = relu(ref::linear(x, p.get(prefix + ".linear_1.weight"),
                                &p.get(prefix + ".linear_1.bias")));
    return ref::linear(h, p.get(prefix + ".linear_2.weight"),
                       &p.get(prefix + ".linear_2.bias"));
  };
  for (auto [b, s, t] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 3, 2}, {2, 6, 5}}) {
    Tensor src = ref::randomIds({b, s}, config.srcVocab, 8);
    Tensor tgt = ref::randomIds({b, t}, config.tgtVocab, 9);
    // The second sentence is padded after 2 tokens.
    Tensor mask = Tensor::zeros({b, s}, DType::i1);
    Tensor mask64 = Tensor::zeros({b, s}, DType::i64);
    for (int64_t i = 0; i < b * s; ++i) {
      bool keep = i / s == 0 || i % s < 2;
      mask.data<bool>()[i] = keep;
      mask64.data<int64_t>()[i] = keep;
    }
    Tensor got = model.run("forward",
                           {{"src", src}, {"tgt", tgt}, {"src_mask", mask}})[0];

    Tensor x = embedWithPositions(src);
    for (int64_t l = 0; l < config.numEncoderLayers; ++l) {
      std::string e = "encoder.layers." + std::to_string(l);
      x = norm(
          add(x, attention(x, x, e + ".self_attention_block", &mask64, false)),
          e + ".residual_connections.0");
      x = norm(add(x, ffn(x, e + ".feed_forward_block")),
               e + ".residual_connections.1");
    }
    Tensor y = embedWithPositions(tgt);
    for (int64_t l = 0; l < config.numDecoderLayers; ++l) {
      std::string e = "decoder.layers." + std::to_string(l);
      y = norm(
          add(y, attention(y, y, e + ".self_attention_block", nullptr, true)),
          e + ".residual_connections.0");
      y = norm(
          add(y, attention(y, x, e + ".cross_attention_block", &mask64, false)),
          e + ".residual_connections.1");
      y = norm(add(y, ffn(y, e + ".feed_forward_block")),
               e + ".residual_connections.2");
    }
    Tensor expected = ref::linear(y, emb, nullptr);
    ref::expectClose(got, expected, 3e-4, 3e-4);
  }
}

TEST(ModelNumerics, AModelCompilesOncePerProcess) {
  auto build = [](dsl::Module &module) {
    dsl::models::GptConfig config = dsl::models::gptTiny();
    config.numLayers = 1;
    dsl::models::addGptForward(module, config);
  };
  dsl::Module first, second;
  build(first);
  build(second);
  CompiledModel a(first, 1), b(second, 2);
  EXPECT_EQ(&a.jit(), &b.jit());
  // Unknown and missing inputs are named.
  Tensor idx = Tensor::zeros({1, 3}, DType::i64);
  try {
    a.run("forward", {{"idx", idx}, {"targets", idx}});
    ADD_FAILURE() << "expected an error";
  } catch (const kiln::Error &e) {
    EXPECT_NE(std::string(e.what()).find("has no input 'targets'"),
              std::string::npos);
  }
  try {
    a.run("forward", {});
    ADD_FAILURE() << "expected an error";
  } catch (const kiln::Error &e) {
    EXPECT_NE(std::string(e.what()).find("needs the input 'idx'"),
              std::string::npos);
  }
}

/// build_transformer of seed 002: pre-LN residuals with the from-scratch
/// LayerNorm (unbiased std, eps added to the std), final norms, separate
/// embeddings, attention without biases, projection + log_softmax; with
/// `targetMask`, decode(..., tgt_mask) with padded target positions.
static void checkSeed002Transformer(bool targetMask) {
  auto config = dsl::models::seed002Transformer(23, 29);
  config.targetMask = targetMask;
  config.numEncoderLayers = 2;
  config.numDecoderLayers = 2;
  config.block.dModel = 16;
  config.block.numHeads = 4;
  config.block.dFF = 24;
  dsl::Module module;
  dsl::models::addEncDecForward(module, config);
  CompiledModel model(module, 5);
  randomizeParameters(model, 400);
  const ParameterStore &p = model.parameters();
  int64_t d = config.block.dModel;
  double eps = config.block.eps;
  auto embedWithPositions = [&](const Tensor &ids, const std::string &table) {
    Tensor x = embed(ids, p.get(table));
    int64_t t = ids.shape()[1];
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t c = i % d, pos = (i / d) % t;
      double div = std::exp((c / 2 * 2) * -(std::log(10000.0) / double(d)));
      double pe = c % 2 ? std::cos(pos * div) : std::sin(pos * div);
      x.data<float>()[i] =
          float(x.data<float>()[i] * std::sqrt(double(d)) + pe);
    }
    return x;
  };
  auto norm = [&](const Tensor &x, const std::string &prefix) {
    return ref::layerNorm(x, p.get(prefix + ".alpha"), p.get(prefix + ".bias"),
                          eps,
                          /*stdEps=*/true);
  };
  auto attention = [&](const Tensor &q, const Tensor &kv,
                       const std::string &prefix, const Tensor *mask,
                       bool causal) {
    return ref::attention(
        q, kv, p.get(prefix + ".w_q.weight"), p.get(prefix + ".w_k.weight"),
        p.get(prefix + ".w_v.weight"), p.get(prefix + ".w_o.weight"), nullptr,
        nullptr, nullptr, nullptr, mask, config.block.numHeads, causal);
  };
  auto ffn = [&](const Tensor &x, const std::string &prefix) {
    Tensor h = relu(ref::linear(x, p.get(prefix + ".linear_1.weight"),
                                &p.get(prefix + ".linear_1.bias")));
    return ref::linear(h, p.get(prefix + ".linear_2.weight"),
                       &p.get(prefix + ".linear_2.bias"));
  };
  int64_t b = 2, s = 5, t = 4;
  Tensor src = ref::randomIds({b, s}, 23, 10);
  Tensor tgt = ref::randomIds({b, t}, 29, 11);
  Tensor mask = Tensor::zeros({b, s}, DType::i1);
  Tensor mask64 = Tensor::zeros({b, s}, DType::i64);
  for (int64_t i = 0; i < b * s; ++i) {
    bool keep = i / s == 0 || i % s < 3;
    mask.data<bool>()[i] = keep;
    mask64.data<int64_t>()[i] = keep;
  }
  // The second target row is padded after 2 tokens.
  Tensor tgtMask = Tensor::zeros({b, t}, DType::i1);
  Tensor tgtMask64 = Tensor::zeros({b, t}, DType::i64);
  for (int64_t i = 0; i < b * t; ++i) {
    bool keep = i / t == 0 || i % t < 2;
    tgtMask.data<bool>()[i] = keep;
    tgtMask64.data<int64_t>()[i] = keep;
  }
  std::map<std::string, Arg> inputs = {
      {"src", src}, {"tgt", tgt}, {"src_mask", mask}};
  if (targetMask) {
    inputs.emplace("tgt_mask", tgtMask);
  }
  Tensor got = model.run("forward", inputs)[0];

  Tensor x = embedWithPositions(src, "src_embed.embedding.weight");
  for (int64_t l = 0; l < config.numEncoderLayers; ++l) {
    std::string e = "encoder.layers." + std::to_string(l);
    Tensor h = norm(x, e + ".residual_connections.0.norm");
    x = add(x, attention(h, h, e + ".self_attention_block", &mask64, false));
    x = add(x, ffn(norm(x, e + ".residual_connections.1.norm"),
                   e + ".feed_forward_block"));
  }
  x = norm(x, "encoder.norm");
  Tensor y = embedWithPositions(tgt, "tgt_embed.embedding.weight");
  for (int64_t l = 0; l < config.numDecoderLayers; ++l) {
    std::string e = "decoder.layers." + std::to_string(l);
    Tensor h = norm(y, e + ".residual_connections.0.norm");
    y = add(y, attention(h, h, e + ".self_attention_block",
                         targetMask ? &tgtMask64 : nullptr, true));
    h = norm(y, e + ".residual_connections.1.norm");
    y = add(y, attention(h, x, e + ".cross_attention_block", &mask64, false));
    y = add(y, ffn(norm(y, e + ".residual_connections.2.norm"),
                   e + ".feed_forward_block"));
  }
  y = norm(y, "decoder.norm");
  Tensor logits = ref::linear(y, p.get("projection_layer.proj.weight"),
                              &p.get("projection_layer.proj.bias"));
  int64_t v = logits.shape().back();
  for (int64_t r = 0; r < logits.numel() / v; ++r) {
    float *row = logits.data<float>() + r * v;
    double mx = *std::max_element(row, row + v), sum = 0;
    for (int64_t k = 0; k < v; ++k) {
      sum += std::exp(row[k] - mx);
    }
    for (int64_t k = 0; k < v; ++k) {
      row[k] = float(row[k] - mx - std::log(sum));
    }
  }
  ref::expectClose(got, logits, 3e-4, 3e-4);
}

TEST(ModelNumerics, Seed002TransformerPreNormWithLogSoftmax) {
  checkSeed002Transformer(/*targetMask=*/false);
}

TEST(ModelNumerics, Seed002TransformerWithTargetPaddingMask) {
  checkSeed002Transformer(/*targetMask=*/true);
}
