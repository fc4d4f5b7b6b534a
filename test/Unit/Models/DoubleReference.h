//===- DoubleReference.h - The reference models in double precision -*- C++
//-*-===//
//
// Naive double-precision forward passes and losses of the DSL's GPT, Llama
// and encoder-decoder (post-LN, shared embedding, tied head), written from the
// papers' equations independently of Kiln's lowering, for central finite
// differences that are accurate to ~1e-9: the whole-model gradient checks
// compare Kiln's compiled gradients against them.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_MODELS_DOUBLEREFERENCE_H
#define KILN_TEST_UNIT_MODELS_DOUBLEREFERENCE_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::dref {

using Vec = std::vector<double>;
/// Parameters by name, flattened row-major.
using Params = std::map<std::string, Vec>;

inline const Vec &get(const Params &p, const std::string &name) {
  auto it = p.find(name);
  if (it == p.end()) {
    throw std::runtime_error("reference: no parameter '" + name + "'");
  }
  return it->second;
}

/// x [n, in] · w[out, in]ᵀ (+ b).
inline Vec linear(const Vec &x, int64_t n, int64_t in, const Vec &w,
                  int64_t out, const Vec *b) {
  Vec y(n * out);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = b ? (*b)[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) {
        acc += x[r * in + i] * w[o * in + i];
      }
      y[r * out + o] = acc;
    }
  }
  return y;
}

inline Vec layerNorm(const Vec &x, int64_t n, int64_t d, const Vec &g,
                     const Vec &b, double eps) {
  Vec y(x.size());
  for (int64_t r = 0; r < n; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) {
      mean += x[r * d + i];
    }
    mean /= double(d);
    for (int64_t i = 0; i < d; ++i) {
      var += (x[r * d + i] - mean) * (x[r * d + i] - mean);
    }
    var /= double(d);
    for (int64_t i = 0; i < d; ++i) {
      y[r * d + i] = (x[r * d + i] - mean) / std::sqrt(var + eps) * g[i] + b[i];
    }
  }
  return y;
}

/// Scaled dot-product attention of projected q [B, Tq, D] and k, v
/// [B, Tk, D] in `heads` heads. mask [B, Tk]: non-zero attends; causal lets
/// query i see key j <= i + (Tk - Tq); masked scores are -1e9. `dropScale`,
/// when given, is the attention-dropout scale of the probability at flat
/// index ((b·heads + h)·Tq + i)·Tk + j. With `kvHeads` (grouped-query
/// attention) k and v are [B, Tk, kvHeads·D/heads] and query head h reads
/// key/value head h / (heads / kvHeads).
inline Vec attention(const Vec &q, const Vec &k, const Vec &v, const Vec *mask,
                     int64_t batch, int64_t tq, int64_t tk, int64_t d,
                     int64_t heads, bool causal,
                     const std::function<double(int64_t)> &dropScale = {},
                     int64_t kvHeads = 0) {
  int64_t dh = d / heads;
  kvHeads = kvHeads == 0 ? heads : kvHeads;
  int64_t dkv = dh * kvHeads, group = heads / kvHeads;
  Vec o(batch * tq * d), s(tk);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < tq; ++i) {
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < tk; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < dh; ++c) {
            acc += q[(n * tq + i) * d + h * dh + c] *
                   k[(n * tk + j) * dkv + h / group * dh + c];
          }
          bool keep = (!mask || (*mask)[n * tk + j] != 0) &&
                      !(causal && j > i + (tk - tq));
          s[j] = keep ? acc / std::sqrt(double(dh)) : -1e9;
          mx = std::max(mx, s[j]);
        }
        for (int64_t j = 0; j < tk; ++j) {
          s[j] = std::exp(s[j] - mx);
          sum += s[j];
        }
        for (int64_t j = 0; j < tk; ++j) {
          s[j] /= sum;
          if (dropScale) {
            s[j] *= dropScale(((n * heads + h) * tq + i) * tk + j);
          }
        }
        for (int64_t c = 0; c < dh; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < tk; ++j) {
            acc += s[j] * v[(n * tk + j) * dkv + h / group * dh + c];
          }
          o[(n * tq + i) * d + h * dh + c] = acc;
        }
      }
    }
  }
  return o;
}

/// Multi-head attention of projected q [tq, d] over k, v [tk, d] of one
/// sequence; `keep[j]` false masks key j; causal: query i sees j <= i.
inline Vec attend(const Vec &q, const Vec &k, const Vec &v, int64_t tq,
                  int64_t tk, int64_t d, int64_t heads,
                  const std::vector<bool> &keep, bool causal) {
  int64_t dh = d / heads;
  Vec out(tq * d, 0.0);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < tq; ++i) {
      std::vector<double> s(tk, -INFINITY);
      double mx = -INFINITY;
      for (int64_t j = 0; j < tk; ++j) {
        if (!keep[j] || (causal && j > i)) {
          continue;
        }
        double acc = 0;
        for (int64_t c = 0; c < dh; ++c) {
          acc += q[i * d + h * dh + c] * k[j * d + h * dh + c];
        }
        s[j] = acc / std::sqrt(double(dh));
        mx = std::max(mx, s[j]);
      }
      double z = 0;
      for (int64_t j = 0; j < tk; ++j) {
        s[j] = std::isinf(s[j]) ? 0.0 : std::exp(s[j] - mx);
        z += s[j];
      }
      for (int64_t j = 0; j < tk; ++j) {
        for (int64_t c = 0; c < dh; ++c) {
          out[i * d + h * dh + c] += s[j] / z * v[j * d + h * dh + c];
        }
      }
    }
  }
  return out;
}

/// Mean cross-entropy of logits [n, vocab] against targets.
inline double crossEntropy(const Vec &logits, int64_t vocab,
                           const std::vector<int64_t> &targets) {
  double total = 0;
  int64_t n = int64_t(targets.size());
  for (int64_t r = 0; r < n; ++r) {
    double mx = -INFINITY, z = 0;
    for (int64_t c = 0; c < vocab; ++c) {
      mx = std::max(mx, logits[r * vocab + c]);
    }
    for (int64_t c = 0; c < vocab; ++c) {
      z += std::exp(logits[r * vocab + c] - mx);
    }
    total += mx + std::log(z) - logits[r * vocab + targets[r]];
  }
  return total / double(n);
}

inline Vec add(Vec a, const Vec &b) {
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] += b[i];
  }
  return a;
}

/// The GPT-2 loss (pre-LN blocks, fused QKV, exact GELU, learned positions,
/// tied head) over a batch of sequences of equal length.
inline double gptLoss(const Params &p, int64_t d, int64_t heads, int64_t layers,
                      int64_t dff, int64_t vocab,
                      const std::vector<std::vector<int64_t>> &idx,
                      const std::vector<std::vector<int64_t>> &targets) {
  const Vec &wte = get(p, "wte.weight"), &wpe = get(p, "wpe.weight");
  Vec allLogits;
  std::vector<int64_t> allTargets;
  for (size_t s = 0; s < idx.size(); ++s) {
    int64_t t = int64_t(idx[s].size());
    Vec x(t * d);
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t c = 0; c < d; ++c) {
        x[i * d + c] = wte[idx[s][i] * d + c] + wpe[i * d + c];
      }
    }
    std::vector<bool> keep(t, true);
    for (int64_t l = 0; l < layers; ++l) {
      std::string b = "h." + std::to_string(l) + ".";
      Vec h = layerNorm(x, t, d, get(p, b + "ln_1.weight"),
                        get(p, b + "ln_1.bias"), 1e-5);
      Vec qkv = linear(h, t, d, get(p, b + "attn.c_attn.weight"), 3 * d,
                       &get(p, b + "attn.c_attn.bias"));
      Vec q(t * d), k(t * d), v(t * d);
      for (int64_t i = 0; i < t; ++i) {
        for (int64_t c = 0; c < d; ++c) {
          q[i * d + c] = qkv[i * 3 * d + c];
          k[i * d + c] = qkv[i * 3 * d + d + c];
          v[i * d + c] = qkv[i * 3 * d + 2 * d + c];
        }
      }
      Vec a = attend(q, k, v, t, t, d, heads, keep, true);
      x = add(x, linear(a, t, d, get(p, b + "attn.c_proj.weight"), d,
                        &get(p, b + "attn.c_proj.bias")));
      Vec h2 = layerNorm(x, t, d, get(p, b + "ln_2.weight"),
                         get(p, b + "ln_2.bias"), 1e-5);
      Vec f = linear(h2, t, d, get(p, b + "mlp.c_fc.weight"), dff,
                     &get(p, b + "mlp.c_fc.bias"));
      for (double &e : f) {
        e = 0.5 * e * (1.0 + std::erf(e / std::sqrt(2.0)));
      }
      x = add(x, linear(f, t, dff, get(p, b + "mlp.c_proj.weight"), d,
                        &get(p, b + "mlp.c_proj.bias")));
    }
    Vec y =
        layerNorm(x, t, d, get(p, "ln_f.weight"), get(p, "ln_f.bias"), 1e-5);
    Vec logits = linear(y, t, d, wte, vocab, nullptr);
    allLogits.insert(allLogits.end(), logits.begin(), logits.end());
    allTargets.insert(allTargets.end(), targets[s].begin(), targets[s].end());
  }
  return crossEntropy(allLogits, vocab, allTargets);
}

/// The sizes of a Llama-architecture decoder (the DSL's LlamaConfig).
struct LlamaSizes {
  int64_t d, heads, kvHeads, layers, dff, vocab;
  double eps, theta;
  bool tied;
};

/// x·rsqrt(mean(x²) + eps)·w over rows of d.
inline Vec rmsNorm(const Vec &x, int64_t n, int64_t d, const Vec &w,
                   double eps) {
  Vec y(x.size());
  for (int64_t r = 0; r < n; ++r) {
    double sq = 0;
    for (int64_t i = 0; i < d; ++i) {
      sq += x[r * d + i] * x[r * d + i];
    }
    double inv = 1.0 / std::sqrt(sq / double(d) + eps);
    for (int64_t i = 0; i < d; ++i) {
      y[r * d + i] = x[r * d + i] * inv * w[i];
    }
  }
  return y;
}

/// Hugging Face Llama's rotary embedding (rotate_half) of t positions
/// [t, width] in heads of hd: features i and i + hd/2 of a head turn by
/// position · theta^(-2i/hd).
inline Vec ropeHalf(Vec x, int64_t t, int64_t width, int64_t hd, double theta) {
  int64_t half = hd / 2;
  for (int64_t p = 0; p < t; ++p) {
    for (int64_t h = 0; h < width / hd; ++h) {
      double *row = x.data() + p * width + h * hd;
      for (int64_t i = 0; i < half; ++i) {
        double angle = double(p) * std::pow(theta, -2.0 * double(i) / hd);
        double a = row[i], b = row[i + half];
        row[i] = a * std::cos(angle) - b * std::sin(angle);
        row[i + half] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  }
  return x;
}

/// The logits [t, vocab] of each sequence of a Llama-architecture decoder
/// (pre-RMSNorm, rotary positions, grouped-query causal attention, SwiGLU,
/// no biases) with Hugging Face's parameter names.
inline std::vector<Vec>
llamaLogits(const Params &p, const LlamaSizes &s,
            const std::vector<std::vector<int64_t>> &idx) {
  int64_t d = s.d, hd = d / s.heads, dkv = hd * s.kvHeads;
  const Vec &emb = get(p, "model.embed_tokens.weight");
  std::vector<Vec> out;
  for (const std::vector<int64_t> &seq : idx) {
    int64_t t = int64_t(seq.size());
    Vec x(t * d);
    for (int64_t i = 0; i < t; ++i) {
      std::copy(emb.begin() + seq[i] * d, emb.begin() + (seq[i] + 1) * d,
                x.begin() + i * d);
    }
    for (int64_t l = 0; l < s.layers; ++l) {
      std::string b = "model.layers." + std::to_string(l) + ".";
      Vec h = rmsNorm(x, t, d, get(p, b + "input_layernorm.weight"), s.eps);
      Vec q = ropeHalf(
          linear(h, t, d, get(p, b + "self_attn.q_proj.weight"), d, nullptr), t,
          d, hd, s.theta);
      Vec k = ropeHalf(
          linear(h, t, d, get(p, b + "self_attn.k_proj.weight"), dkv, nullptr),
          t, dkv, hd, s.theta);
      Vec v =
          linear(h, t, d, get(p, b + "self_attn.v_proj.weight"), dkv, nullptr);
      Vec a =
          attention(q, k, v, nullptr, 1, t, t, d, s.heads, true, {}, s.kvHeads);
      x = add(x, linear(a, t, d, get(p, b + "self_attn.o_proj.weight"), d,
                        nullptr));
      Vec h2 = rmsNorm(x, t, d, get(p, b + "post_attention_layernorm.weight"),
                       s.eps);
      Vec gate =
          linear(h2, t, d, get(p, b + "mlp.gate_proj.weight"), s.dff, nullptr);
      Vec up =
          linear(h2, t, d, get(p, b + "mlp.up_proj.weight"), s.dff, nullptr);
      for (size_t e = 0; e < gate.size(); ++e) {
        gate[e] = gate[e] / (1.0 + std::exp(-gate[e])) * up[e];
      }
      x = add(x, linear(gate, t, s.dff, get(p, b + "mlp.down_proj.weight"), d,
                        nullptr));
    }
    Vec y = rmsNorm(x, t, d, get(p, "model.norm.weight"), s.eps);
    out.push_back(linear(y, t, d, s.tied ? emb : get(p, "lm_head.weight"),
                         s.vocab, nullptr));
  }
  return out;
}

/// The mean cross-entropy of llamaLogits over every position.
inline double llamaLoss(const Params &p, const LlamaSizes &s,
                        const std::vector<std::vector<int64_t>> &idx,
                        const std::vector<std::vector<int64_t>> &targets) {
  Vec all;
  std::vector<int64_t> allTargets;
  std::vector<Vec> logits = llamaLogits(p, s, idx);
  for (size_t i = 0; i < logits.size(); ++i) {
    all.insert(all.end(), logits[i].begin(), logits[i].end());
    allTargets.insert(allTargets.end(), targets[i].begin(), targets[i].end());
  }
  return crossEntropy(all, s.vocab, allTargets);
}

/// The BENCHMARKS.md encoder-decoder's loss (post-LN, one embedding scaled
/// by √d plus sinusoidal positions for source and target, ReLU feed-forward,
/// attention with biases, logits = y·embᵀ) with a source padding mask.
inline double encdecLoss(const Params &p, int64_t d, int64_t heads,
                         int64_t layers, int64_t dff, int64_t vocab,
                         const std::vector<std::vector<int64_t>> &src,
                         const std::vector<std::vector<bool>> &srcKeep,
                         const std::vector<std::vector<int64_t>> &tgt,
                         const std::vector<std::vector<int64_t>> &targets) {
  const Vec &emb = get(p, "src_embed.embedding.weight");
  auto embed = [&](const std::vector<int64_t> &ids) {
    int64_t t = int64_t(ids.size());
    Vec x(t * d);
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t c = 0; c < d; ++c) {
        double div = std::exp(double(c / 2 * 2) * -(std::log(10000.0) / d));
        double pe = c % 2 ? std::cos(i * div) : std::sin(i * div);
        x[i * d + c] = emb[ids[i] * d + c] * std::sqrt(double(d)) + pe;
      }
    }
    return x;
  };
  auto mha = [&](const Vec &xq, int64_t tq, const Vec &xkv, int64_t tk,
                 const std::string &b, const std::vector<bool> &keep,
                 bool causal) {
    Vec q = linear(xq, tq, d, get(p, b + ".w_q.weight"), d,
                   &get(p, b + ".w_q.bias"));
    Vec k = linear(xkv, tk, d, get(p, b + ".w_k.weight"), d,
                   &get(p, b + ".w_k.bias"));
    Vec v = linear(xkv, tk, d, get(p, b + ".w_v.weight"), d,
                   &get(p, b + ".w_v.bias"));
    return linear(attend(q, k, v, tq, tk, d, heads, keep, causal), tq, d,
                  get(p, b + ".w_o.weight"), d, &get(p, b + ".w_o.bias"));
  };
  auto ffn = [&](const Vec &x, int64_t t, const std::string &b) {
    Vec h = linear(x, t, d, get(p, b + ".linear_1.weight"), dff,
                   &get(p, b + ".linear_1.bias"));
    for (double &e : h) {
      e = std::max(e, 0.0);
    }
    return linear(h, t, dff, get(p, b + ".linear_2.weight"), d,
                  &get(p, b + ".linear_2.bias"));
  };
  auto norm = [&](const Vec &x, int64_t t, const std::string &b) {
    return layerNorm(x, t, d, get(p, b + ".norm.weight"),
                     get(p, b + ".norm.bias"), 1e-5);
  };
  Vec allLogits;
  std::vector<int64_t> allTargets;
  for (size_t s = 0; s < src.size(); ++s) {
    int64_t ts = int64_t(src[s].size()), tt = int64_t(tgt[s].size());
    Vec x = embed(src[s]);
    for (int64_t l = 0; l < layers; ++l) {
      std::string e = "encoder.layers." + std::to_string(l);
      x = norm(add(x, mha(x, ts, x, ts, e + ".self_attention_block", srcKeep[s],
                          false)),
               ts, e + ".residual_connections.0");
      x = norm(add(x, ffn(x, ts, e + ".feed_forward_block")), ts,
               e + ".residual_connections.1");
    }
    Vec y = embed(tgt[s]);
    std::vector<bool> all(tt, true);
    for (int64_t l = 0; l < layers; ++l) {
      std::string e = "decoder.layers." + std::to_string(l);
      y = norm(
          add(y, mha(y, tt, y, tt, e + ".self_attention_block", all, true)), tt,
          e + ".residual_connections.0");
      y = norm(add(y, mha(y, tt, x, ts, e + ".cross_attention_block",
                          srcKeep[s], false)),
               tt, e + ".residual_connections.1");
      y = norm(add(y, ffn(y, tt, e + ".feed_forward_block")), tt,
               e + ".residual_connections.2");
    }
    Vec logits = linear(y, tt, d, emb, vocab, nullptr);
    allLogits.insert(allLogits.end(), logits.begin(), logits.end());
    allTargets.insert(allTargets.end(), targets[s].begin(), targets[s].end());
  }
  return crossEntropy(allLogits, vocab, allTargets);
}

} // namespace kiln::dref

#endif // KILN_TEST_UNIT_MODELS_DOUBLEREFERENCE_H
