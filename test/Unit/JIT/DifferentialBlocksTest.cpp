//===- DifferentialBlocksTest.cpp - Model blocks at every size, both ways -===//
//
// The building blocks through Differential.h: linear (with and without
// bias), batched matmul (plain and with either transpose), layernorm (both
// modes), RMS norm, rotary embeddings (both styles, forward and inverse),
// embedding (with and without padding_idx), positional encodings
// (sinusoidal and learned, with an offset), feed-forward blocks (each
// activation, with and without biases), multi-head attention (causal
// self-attention with a padding mask, cross-attention with another key
// length and width, with biases and without) and the attention core (with
// grouped-query and multi-query heads).
//
// Weights are drawn as nn.Linear initializes them, uniform in
// ±1/sqrt(fan_in), so that a dot product over 257 terms stays of order one
// and its float32 rounding (about sqrt(K)·2^-24 relative to the terms)
// remains well inside the harness's default tolerances; the inputs stay in
// [-1, 1].
//
//===----------------------------------------------------------------------===//

#include "Differential.h"

#include "../Models/DoubleReference.h"

#include <optional>
#include <sstream>

using namespace kiln;
using diff::Case;
using diff::Operand;

namespace {

using dref::Vec;

/// Sizes crossing 15/16/17, 31/32/33 and 65 without the 257 of
/// kBoundarySizes, for the symbols of the quadratic attention.
const std::vector<int64_t> kUpTo65 = {1, 7, 15, 16, 17, 31, 32, 33, 65};

//===----------------------------------------------------------------------===//
// Operands
//===----------------------------------------------------------------------===//

/// A differentiated f32 operand, uniform in [-1, 1].
Operand param(std::vector<std::string> dims) {
  Operand o;
  o.dims = std::move(dims);
  o.kind = Operand::Param;
  return o;
}

/// A differentiated weight, uniform in ±1/sqrt(size of `fanIn`).
Operand weight(std::vector<std::string> dims, std::string fanIn) {
  Operand o = param(std::move(dims));
  o.make = [fanIn](const std::vector<int64_t> &shape, uint32_t seed,
                   const diff::Sizes &sizes) {
    float bound = float(1.0 / std::sqrt(double(sizes.at(fanIn))));
    return ref::randomTensor(shape, seed, -bound, bound);
  };
  return o;
}

/// An i1 key padding mask (the harness keeps the first key of each row).
Operand mask(std::vector<std::string> dims) {
  Operand o;
  o.dims = std::move(dims);
  o.kind = Operand::Mask;
  return o;
}

/// Integer ids in [0, bound) with `first` at flat index 0 when given.
Operand ids(std::vector<std::string> dims, std::string bound, std::string elem,
            int64_t first = -1) {
  Operand o;
  o.dims = std::move(dims);
  o.kind = Operand::Ids;
  o.bound = bound;
  o.elem = elem;
  o.firstId = first;
  return o;
}

Operand scalar(int64_t value) {
  Operand o;
  o.kind = Operand::Scalar;
  o.scalar = value;
  return o;
}

//===----------------------------------------------------------------------===//
// Double references
//===----------------------------------------------------------------------===//

/// `batch` products of [M, K] and [K, N] matrices, each stored transposed
/// when asked.
Vec matmulRef(const Vec &a, const Vec &b, int64_t batch, int64_t m, int64_t k,
              int64_t n, bool transposeLhs, bool transposeRhs) {
  Vec y(batch * m * n);
  for (int64_t t = 0; t < batch; ++t) {
    const double *pa = a.data() + t * m * k, *pb = b.data() + t * k * n;
    // Row by row, each row's sums in the order of l (the rows of a
    // transposed A are read once per row, not once per element).
    for (int64_t i = 0; i < m; ++i) {
      double *row = y.data() + (t * m + i) * n;
      for (int64_t l = 0; l < k; ++l) {
        double lhs = transposeLhs ? pa[l * m + i] : pa[i * k + l];
        for (int64_t j = 0; j < n; ++j) {
          row[j] += lhs * (transposeRhs ? pb[j * k + l] : pb[l * n + j]);
        }
      }
    }
  }
  return y;
}

/// torch.nn.LayerNorm (biased variance inside the root), or the std_eps
/// form (unbiased standard deviation plus eps).
Vec layerNormRef(const Vec &x, const Vec &g, const Vec &b, int64_t d,
                 double eps, bool stdEps) {
  Vec y(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    const double *row = x.data() + r * d;
    double mean = 0;
    for (int64_t i = 0; i < d; ++i) {
      mean += row[i];
    }
    mean /= double(d);
    double sq = 0;
    for (int64_t i = 0; i < d; ++i) {
      sq += (row[i] - mean) * (row[i] - mean);
    }
    double inv = stdEps ? 1.0 / (std::sqrt(sq / double(d - 1)) + eps)
                        : 1.0 / std::sqrt(sq / double(d) + eps);
    for (int64_t i = 0; i < d; ++i) {
      y[r * d + i] = (row[i] - mean) * inv * g[i] + b[i];
    }
  }
  return y;
}

double geluRef(double x, bool tanhApprox) {
  if (tanhApprox) {
    return 0.5 * x *
           (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

//===----------------------------------------------------------------------===//
// kiln.linear
//===----------------------------------------------------------------------===//

/// [B, T, K] x [N, K] weights (+ [N] bias) -> [B, T, N].
Case linearCase(bool bias) {
  Case c;
  c.name = bias ? "linear bias" : "linear";
  c.operands = {param({"B", "T", "K"}), weight({"N", "K"}, "K")};
  c.op = "kiln.linear %a0, %a1";
  if (bias) {
    c.operands.push_back(weight({"N"}, "K"));
    c.op += ", %a2";
  }
  c.results = {{"B", "T", "N"}};
  c.reference = [bias](const diff::Values &in, const diff::Sizes &s) {
    int64_t rows = s.at("B") * s.at("T");
    return diff::Values{dref::linear(in[0], rows, s.at("K"), in[1], s.at("N"),
                                     bias ? &in[2] : nullptr)};
  };
  // kiln-autodiff flattens the input and the result's gradient to [-1, K]
  // and [-1, N] for the weight's gradient: reshapes that need K and N
  // static. Each static size is a compilation per CPU, so the case with a
  // bias sweeps K (257: the long reduction) and the one without sweeps N.
  c.alwaysStatic = {"K", "N"};
  c.base = {{"B", 2}, {"T", 17}, {"K", 17}, {"N", 17}};
  c.sweep = {{"B", {1, 3}}};
  c.sweep[bias ? "N" : "K"] = {17};
  return c;
}

TEST(DifferentialBlocks, LinearWithBias) { diff::run(linearCase(true)); }

TEST(DifferentialBlocks, LinearWithoutBias) { diff::run(linearCase(false)); }

// The output width dynamic as well: the weight's gradient then moves the
// width first instead of reshaping to [-1, N] (which had emitted an invalid
// reshape).
TEST(DifferentialBlocks, LinearDynamicWidth) {
  Case c = linearCase(true);
  c.name = "linear dynamic width";
  c.alwaysStatic = {"K"};
  c.sweep = {{"B", {1, 3}}, {"N", {1, 17, 33}}};
  diff::run(c);
}

//===----------------------------------------------------------------------===//
// kiln.matmul
//===----------------------------------------------------------------------===//

/// Batched [.., M, K] x [.., K, N] with the operands stored transposed when
/// asked; `heads` adds a literal batch dimension of 2 after B.
Case matmulCase(const std::string &name, bool transposeLhs, bool transposeRhs,
                bool heads, bool batched = true) {
  Case c;
  c.name = name;
  std::vector<std::string> lead;
  if (batched) {
    lead.push_back("B");
  }
  if (heads) {
    lead.push_back("2");
  }
  auto dims = [&](std::string a, std::string b) {
    std::vector<std::string> d = lead;
    d.push_back(a);
    d.push_back(b);
    return d;
  };
  c.operands = {param(transposeLhs ? dims("K", "M") : dims("M", "K")),
                weight(transposeRhs ? dims("N", "K") : dims("K", "N"), "K")};
  std::string attrs;
  if (transposeLhs) {
    attrs = " {transpose_lhs}";
  } else if (transposeRhs) {
    attrs = " {transpose_rhs}";
  }
  c.op = "kiln.matmul %a0, %a1" + attrs;
  c.results = {dims("M", "N")};
  int64_t extra = heads ? 2 : 1;
  c.reference = [=](const diff::Values &in, const diff::Sizes &s) {
    int64_t batch = batched ? s.at("B") * extra : 1;
    return diff::Values{matmulRef(in[0], in[1], batch, s.at("M"), s.at("K"),
                                  s.at("N"), transposeLhs, transposeRhs)};
  };
  c.base = {{"B", 2}, {"M", 17}, {"K", 17}, {"N", 17}};
  c.sweep = {{"B", {1, 3}}};
  return c;
}

TEST(DifferentialBlocks, MatmulBatched) {
  diff::run(matmulCase("matmul", false, false, false));
}

TEST(DifferentialBlocks, MatmulTransposeRhsWithHeads) {
  diff::run(matmulCase("matmul transpose_rhs", false, true, true));
}

TEST(DifferentialBlocks, MatmulTransposeLhs) {
  diff::run(matmulCase("matmul transpose_lhs", true, false, false));
}

/// Reductions longer than kiln-tile-and-vectorize's k-block (at most 512:
/// 513 is one block and one step, 1100 two blocks and a partial third) and
/// columns past its n-block (256 on a 1 MiB L2, 128 for the named CPUs:
/// 300 crosses one or two), so that accumulation across blocks and the
/// partial blocks run; plain (NN) and with the left operand transposed (a
/// weight gradient, TN).
Case acrossCacheBlocks(Case c) {
  c.base = {{"B", 1}, {"M", 17}, {"K", 17}, {"N", 17}};
  c.sweep = {{"B", {1}}, {"M", {17}}, {"K", {513, 1100}}, {"N", {300}}};
  return c;
}

TEST(DifferentialBlocks, MatmulAcrossCacheBlocks) {
  diff::run(acrossCacheBlocks(
      matmulCase("matmul across cache blocks", false, false, false)));
}

TEST(DifferentialBlocks, MatmulTransposeLhsAcrossCacheBlocks) {
  diff::run(acrossCacheBlocks(matmulCase(
      "matmul transpose_lhs across cache blocks", true, false, false)));
}

/// Blocks of an operand whose rows lie a multiple of 4 KiB apart, or a
/// dynamic stride apart, are copied contiguously before use (static strides
/// that are not such multiples are read in place).
///
/// An unbatched weight-gradient product Aᵀ·B with A [K, M] stored
/// transposed, as kiln-autodiff emits for a linear's weight: 300 rows cross
/// the row block (TargetInfo::blockM: 256 on a 1 MiB L2, 126 for named
/// AVX-512 CPUs; 252 for AVX2, whose dynamic reduction takes k-blocks of 256,
/// TargetInfo::blockKLongReduction), so with M dynamic each block of A (a
/// partial one last) is copied,
/// 40 columns (at least 32) making it worth copying; K through one block,
/// past it (600) and a short one (17).
TEST(DifferentialBlocks, MatmulTransposeLhsCopiedBlocks) {
  Case c = matmulCase("matmul transpose_lhs copied blocks", true, false, false,
                      /*batched=*/false);
  c.base = {{"M", 300}, {"K", 17}, {"N", 40}};
  c.sweep = {{"M", {300}}, {"K", {17, 600}}, {"N", {40}}};
  diff::run(c);
}

/// An unbatched product A·B whose B [513, N] is cut into column and
/// reduction blocks (a partial one of each): with N dynamic each block is
/// copied when there are at least 32 rows (M = 17 runs the uncopied branch
/// of the run-time test, 65 the copied one).
TEST(DifferentialBlocks, MatmulCopiedBlocks) {
  Case c = matmulCase("matmul copied blocks", false, false, false,
                      /*batched=*/false);
  c.base = {{"M", 17}, {"K", 513}, {"N", 300}};
  c.sweep = {{"M", {17, 65}}, {"K", {513}}, {"N", {300}}};
  diff::run(c);
}

/// Micro-panels of B (the register tiles' columns, contiguous): a B of
/// static width 300 (rows 1200 bytes apart, which do not alias in the
/// caches) is copied into panels only with at least 512 rows to read it:
/// 17 rows read B in place, 600 read the panels (two column blocks of 256
/// and 44 on a 1 MiB L2: a partial panel of 12 columns each time; with M
/// dynamic, a run-time test picks the branch); 513 = one reduction block
/// and one step, so the first block's tiles fill C and the second
/// accumulates.
TEST(DifferentialBlocks, MatmulPanels) {
  Case c = matmulCase("matmul panels", false, false, false,
                      /*batched=*/false);
  c.alwaysStatic = {"N"};
  c.base = {{"M", 17}, {"K", 513}, {"N", 300}};
  c.sweep = {{"M", {17, 600}}, {"K", {513}}, {"N", {300}}};
  diff::run(c);
}

/// A weight gradient Aᵀ·B (A [K, M] stored transposed) whose B [K, 300]
/// crosses the column block with 600 rows to read it: B's panels are
/// copied once per (column, reduction) block, before the row blocks.
TEST(DifferentialBlocks, MatmulTransposeLhsPanels) {
  Case c = matmulCase("matmul transpose_lhs panels", true, false, false,
                      /*batched=*/false);
  c.alwaysStatic = {"N"};
  c.base = {{"M", 600}, {"K", 17}, {"N", 300}};
  c.sweep = {{"M", {600}}, {"K", {17, 600}}, {"N", {300}}};
  diff::run(c);
}

/// A weight gradient Aᵀ·B whose A [K, 4096] (rows 16 KiB apart, copied
/// block by block) has at least 8 row blocks on every target (blockM is at
/// most 512): the row blocks run on all cores, each thread copying its
/// blocks of A into a buffer of its own and multiplying them. 600 crosses
/// the reduction block, so later blocks add to the tiles the first wrote;
/// 40 columns cross one register tile.
TEST(DifferentialBlocks, MatmulTransposeLhsRowBlocksOnAllCores) {
  Case c = matmulCase("matmul transpose_lhs row blocks on all cores", true,
                      false, false, /*batched=*/false);
  c.alwaysStatic = {"M"};
  c.base = {{"M", 4096}, {"K", 600}, {"N", 40}};
  c.sweep = {{"M", {4096}}, {"K", {17, 600}}, {"N", {40}}};
  diff::run(c);
}

/// Attention-like scores Q·Kᵀ, batched with heads, K read as stored
/// ([B, 2, N, K]): batch by batch, its blocks are copied transposed into
/// micro-panels (N = 33: one panel and one column; 300: two column blocks,
/// partial panels), K through a reduction block (17, 513).
TEST(DifferentialBlocks, MatmulTransposeRhsPanels) {
  Case c = matmulCase("matmul transpose_rhs panels", false, true, true);
  c.base = {{"B", 2}, {"M", 17}, {"K", 17}, {"N", 33}};
  c.sweep = {{"B", {1, 3}}, {"M", {17}}, {"K", {17, 513}}, {"N", {33, 300}}};
  diff::run(c);
}

/// A linear whose weight crosses the cache blocks: 1024 outputs and 513
/// inputs past the reduction block. The weight, read as stored ([N, K]), is
/// copied transposed into contiguous [kc, nc] blocks, whatever the number
/// of rows (B x T = 17, 34, 65). Its weight's gradient, Aᵀ·B with A = the
/// output gradient [B·T, 1024] (rows 4 KiB apart), copies A's blocks.
TEST(DifferentialBlocks, LinearAcrossCacheBlocks) {
  Case c = linearCase(true);
  c.name = "linear across cache blocks";
  c.base = {{"B", 1}, {"T", 17}, {"K", 513}, {"N", 1024}};
  c.sweep = {{"B", {1, 2}}, {"T", {17, 65}}, {"K", {513}}, {"N", {1024}}};
  diff::run(c);
}

/// The transposed copies of a linear's weight at the edges: 300 outputs (a
/// partial column block, then partial register tiles: 300 = 256 + 32 + 12
/// on a 1 MiB L2) and 513 inputs (a partial reduction block), for 1, 17
/// and 65 rows; and a weight within one block (33 x 17), copied whole.
TEST(DifferentialBlocks, LinearTransposedWeightBlocks) {
  Case c = linearCase(false);
  c.name = "linear transposed weight blocks";
  c.base = {{"B", 1}, {"T", 17}, {"K", 513}, {"N", 300}};
  c.sweep = {
      {"B", {1}}, {"T", {1, 17, 65}}, {"K", {17, 513}}, {"N", {33, 300}}};
  diff::run(c);
}

//===----------------------------------------------------------------------===//
// kiln.layernorm
//===----------------------------------------------------------------------===//

Case layerNormCase(bool stdEps) {
  Case c;
  c.name = stdEps ? "layernorm std_eps" : "layernorm";
  Operand x = param({"B", "T", "D"});
  x.lo = -3;
  x.hi = 3;
  c.operands = {x, param({"D"}), param({"D"})};
  c.results = {{"B", "T", "D"}};
  // The default mode keeps the default eps (1e-5); std_eps names its own.
  double eps = stdEps ? 1e-3 : 1e-5;
  c.op = "kiln.layernorm %a0, %a1, %a2";
  if (stdEps) {
    c.op += " {eps = 1.0e-3 : f64, mode = #kiln<norm_mode std_eps>}";
  }
  c.reference = [=](const diff::Values &in, const diff::Sizes &s) {
    return diff::Values{
        layerNormRef(in[0], in[1], in[2], s.at("D"), eps, stdEps)};
  };
  c.base = {{"B", 2}, {"T", 17}, {"D", 17}};
  c.sweep = {{"B", {1, 3}}};
  if (stdEps) {
    // The unbiased standard deviation needs two features (the verifier
    // rejects D = 1 when it is static).
    c.sweep["D"] = {2, 7, 15, 16, 17, 31, 32, 33, 65, 257};
  } else {
    // A row of one feature normalizes to beta whatever x is: the gradient
    // with respect to x is exactly 0, and the compiled fp32 code returns its
    // rounding, amplified by 1/sqrt(eps) (316). Summed along a direction over
    // the base's 34 rows it stays within the fixed tolerance, over 257 rows
    // it does not: D = 1 is not combined with more rows than the base has.
    c.admits = [](const diff::Sizes &s) {
      return s.at("D") > 1 || s.at("B") * s.at("T") <= 2 * 17;
    };
  }
  return c;
}

TEST(DifferentialBlocks, LayerNormStandard) { diff::run(layerNormCase(false)); }

TEST(DifferentialBlocks, LayerNormStdEps) { diff::run(layerNormCase(true)); }

//===----------------------------------------------------------------------===//
// kiln.rms_norm
//===----------------------------------------------------------------------===//

/// x·rsqrt(mean(x²) + eps)·w per row of `d`.
Vec rmsNormRef(const Vec &x, const Vec &w, int64_t d, double eps) {
  Vec y(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    const double *row = x.data() + r * d;
    double sq = 0;
    for (int64_t i = 0; i < d; ++i) {
      sq += row[i] * row[i];
    }
    double inv = 1.0 / std::sqrt(sq / double(d) + eps);
    for (int64_t i = 0; i < d; ++i) {
      y[r * d + i] = row[i] * inv * w[i];
    }
  }
  return y;
}

Case rmsNormCase(std::optional<double> eps) {
  Case c;
  c.name = eps ? "rms_norm eps" : "rms_norm";
  Operand x = param({"B", "T", "D"});
  x.lo = -3;
  x.hi = 3;
  c.operands = {x, param({"D"})};
  c.results = {{"B", "T", "D"}};
  c.op = "kiln.rms_norm %a0, %a1";
  if (eps) {
    c.op += " {eps = 1.0e-2 : f64}";
  }
  double e = eps.value_or(1e-6);
  c.reference = [=](const diff::Values &in, const diff::Sizes &s) {
    return diff::Values{rmsNormRef(in[0], in[1], s.at("D"), e)};
  };
  c.base = {{"B", 2}, {"T", 17}, {"D", 17}};
  c.sweep = {{"B", {1, 3}}};
  // One feature normalizes to ±w whatever x is: as layernorm's (above), the
  // gradient with respect to x is nearly 0 and the fp32 code returns the
  // rounding of 1 - x²/(x² + eps), amplified by 1/|x|; D = 1 is not combined
  // with more rows than the base has.
  c.admits = [](const diff::Sizes &s) {
    return s.at("D") > 1 || s.at("B") * s.at("T") <= 2 * 17;
  };
  return c;
}

TEST(DifferentialBlocks, RmsNorm) { diff::run(rmsNormCase(std::nullopt)); }

TEST(DifferentialBlocks, RmsNormLargeEps) { diff::run(rmsNormCase(1e-2)); }

//===----------------------------------------------------------------------===//
// kiln.rotary
//===----------------------------------------------------------------------===//

/// Rotary embedding of [rows of T positions, D] with heads of `hd`; pair i of
/// position p (offset + t) turns by p·theta^(-2i/hd), in double.
Vec rotaryRef(const Vec &x, int64_t t, int64_t d, int64_t hd, double theta,
              bool interleaved, int64_t offset, bool inverse) {
  Vec y(x.size());
  int64_t half = hd / 2;
  for (size_t e = 0; e < x.size(); ++e) {
    int64_t col = int64_t(e) % d, pos = (int64_t(e) / d) % t + offset;
    size_t head = e - size_t(col % hd);
    int64_t j = col % hd;
    int64_t pair = interleaved ? j / 2 : j % half;
    bool first = interleaved ? j % 2 == 0 : j < half;
    size_t a = head + size_t(interleaved ? 2 * pair : pair);
    size_t b = head + size_t(interleaved ? 2 * pair + 1 : pair + half);
    double angle =
        double(pos) * std::pow(theta, -2.0 * double(pair) / double(hd));
    double cs = std::cos(angle), sn = std::sin(angle) * (inverse ? -1 : 1);
    y[e] = first ? x[a] * cs - x[b] * sn : x[b] * cs + x[a] * sn;
  }
  return y;
}

/// [B, T, D] heads of `hd` rotated at positions 3 .. T + 2 (D static: the
/// heads' width is an attribute), swept over `widths`.
Case rotaryCase(bool interleaved, int64_t hd, std::vector<int64_t> widths,
                double theta, bool inverse) {
  const int64_t offset = 3;
  Case c;
  c.name = std::string("rotary ") + (interleaved ? "interleaved" : "half") +
           (inverse ? " inverse" : "");
  c.operands = {param({"B", "T", "D"}), scalar(offset)};
  c.results = {{"B", "T", "D"}};
  std::ostringstream op;
  op << "kiln.rotary %a0 offset %a1 {head_dim = " << hd
     << " : i64, theta = " << std::scientific << theta << " : f64"
     << (interleaved ? ", style = #kiln<rotary_style interleaved>" : "")
     << (inverse ? ", inverse" : "") << "}";
  c.op = op.str();
  c.reference = [=](const diff::Values &in, const diff::Sizes &s) {
    return diff::Values{rotaryRef(in[0], s.at("T"), s.at("D"), hd, theta,
                                  interleaved, offset, inverse)};
  };
  c.alwaysStatic = {"D"};
  c.base = {{"B", 2}, {"T", 17}, {"D", widths[widths.size() / 2]}};
  c.sweep = {{"B", {1, 3}}, {"D", widths}};
  // Positions reach 259: each f32 angle is off by up to about 6.1e-5 (see
  // PositionalEncodingSinusoidalOffset), and an output mixes two inputs of
  // magnitude <= 1 through it: |error| <= sqrt(2)·6.1e-5.
  c.atol = 8.7e-5;
  return c;
}

TEST(DifferentialBlocks, RotaryHalf) {
  // Heads of 6 (3 pairs: narrower than any vector), 1 to 11 heads.
  diff::run(rotaryCase(false, 6, {6, 18, 66}, 10000.0, false));
}

TEST(DifferentialBlocks, RotaryInterleavedInverse) {
  // Heads of 34 (17 pairs: across 16-lane vectors), Llama 3's theta.
  diff::run(rotaryCase(true, 34, {34, 68}, 500000.0, true));
}

//===----------------------------------------------------------------------===//
// kiln.embedding
//===----------------------------------------------------------------------===//

/// [B, T] ids into a [V, D] table. With padding_idx the row reads normally
/// but gets no gradient: the reference reads it from the table as the
/// harness made it, so that the differences of the loss do not see it move.
Case embeddingCase(std::optional<int64_t> padding) {
  Case c;
  c.name = padding ? "embedding padding_idx" : "embedding";
  std::string elem = padding ? "i64" : "i32";
  c.operands = {ids({"B", "T"}, "V", elem, padding ? *padding : -1),
                param({"V", "D"})};
  c.results = {{"B", "T", "D"}};
  c.op = "kiln.embedding %a0, %a1";
  if (padding) {
    c.op += " {padding_idx = " + std::to_string(*padding) + " : i64}";
  }
  std::string name = c.name;
  c.reference = [=](const diff::Values &in, const diff::Sizes &s) {
    int64_t d = s.at("D");
    Vec made;
    if (padding) {
      made = diff::detail::valuesOf(Arg(
          ref::randomTensor({s.at("V"), d}, diff::detail::seedOf(name, s, 1))));
    }
    Vec y(in[0].size() * d);
    for (size_t i = 0; i < in[0].size(); ++i) {
      int64_t id = int64_t(in[0][i]);
      const Vec &table = padding && id == *padding ? made : in[1];
      for (int64_t e = 0; e < d; ++e) {
        y[i * d + e] = table[id * d + e];
      }
    }
    return diff::Values{y};
  };
  // The table's row count is an attribute of embedding_grad.
  c.alwaysStatic = {"V"};
  c.base = {{"B", 2}, {"T", 17}, {"V", 17}, {"D", 17}};
  c.sweep = {{"B", {1, 3}}};
  if (padding) {
    c.sweep["V"] = {7, 15, 16, 17, 31, 32, 33, 65, 257};
  }
  return c;
}

TEST(DifferentialBlocks, Embedding) { diff::run(embeddingCase(std::nullopt)); }

TEST(DifferentialBlocks, EmbeddingPaddingIdx) {
  diff::run(embeddingCase(int64_t(5)));
}

//===----------------------------------------------------------------------===//
// kiln.pe
//===----------------------------------------------------------------------===//

TEST(DifferentialBlocks, PositionalEncodingSinusoidalOffset) {
  const int64_t offset = 3;
  Case c;
  c.name = "pe sinusoidal offset";
  c.operands = {param({"B", "T", "D"}), scalar(offset)};
  c.results = {{"B", "T", "D"}};
  c.op = "kiln.pe sinusoidal %a0 offset %a1";
  c.reference = [=](const diff::Values &in, const diff::Sizes &s) {
    int64_t t = s.at("T"), d = s.at("D");
    Vec y = in[0];
    for (size_t i = 0; i < y.size(); ++i) {
      int64_t col = int64_t(i) % d, pos = (int64_t(i) / d) % t + offset;
      double angle = double(pos) *
                     std::exp(double(col / 2 * 2) * -(std::log(10000.0) / d));
      y[i] += col % 2 ? std::cos(angle) : std::sin(angle);
    }
    return diff::Values{y};
  };
  c.base = {{"B", 2}, {"T", 17}, {"D", 17}};
  c.sweep = {{"B", {1, 3}}};
  // Positions reach 259: a float32 angle there is off by up to an ulp of
  // 256 (3.05e-5) from its rounding, and as much again from the product
  // that forms it; the sine inherits that absolute error.
  c.atol = 6.1e-5;
  diff::run(c);
}

TEST(DifferentialBlocks, PositionalEncodingLearnedOffset) {
  const int64_t offset = 2;
  Case c;
  c.name = "pe learned offset";
  c.operands = {param({"B", "T", "D"}), param({"L", "D"}), scalar(offset)};
  c.results = {{"B", "T", "D"}};
  c.op = "kiln.pe learned %a0 table %a1 offset %a2";
  c.reference = [=](const diff::Values &in, const diff::Sizes &s) {
    int64_t t = s.at("T"), d = s.at("D");
    Vec y = in[0];
    for (size_t i = 0; i < y.size(); ++i) {
      int64_t col = int64_t(i) % d, pos = (int64_t(i) / d) % t + offset;
      y[i] += in[1][pos * d + col];
    }
    return diff::Values{y};
  };
  // max_len is an attribute of pe_grad; every table holds T + offset rows.
  c.alwaysStatic = {"L"};
  c.admits = [=](const diff::Sizes &s) {
    return s.at("T") + offset <= s.at("L");
  };
  c.base = {{"B", 2}, {"T", 17}, {"D", 17}, {"L", 257}};
  c.sweep = {{"B", {1, 3}},
             {"T", {1, 7, 15, 16, 17, 31, 32, 33, 65, 255}},
             {"L", {19, 31, 32, 33, 65, 257}}};
  diff::run(c);
}

//===----------------------------------------------------------------------===//
// kiln.ffn
//===----------------------------------------------------------------------===//

/// [B, T, D] through w1 [F, D] (+ b1 [F]), the activation, and w2 [D, F]
/// (+ b2 [D]).
Case ffnCase(const std::string &activation, bool biases) {
  Case c;
  c.name = "ffn " + activation + (biases ? " biases" : "");
  Operand x = param({"B", "T", "D"});
  x.lo = -2;
  x.hi = 2;
  c.operands = {x, weight({"F", "D"}, "D"), weight({"D", "F"}, "F")};
  c.op = "kiln.ffn " + activation + " %a0, %a1, %a2";
  if (biases) {
    c.operands.push_back(weight({"F"}, "D"));
    c.operands.push_back(weight({"D"}, "F"));
    c.op += " biases(%a3, %a4)";
  }
  c.results = {{"B", "T", "D"}};
  c.reference = [=](const diff::Values &in, const diff::Sizes &s) {
    int64_t rows = s.at("B") * s.at("T"), d = s.at("D"), f = s.at("F");
    Vec h = dref::linear(in[0], rows, d, in[1], f, biases ? &in[3] : nullptr);
    for (double &v : h) {
      v = activation == "relu"   ? std::max(v, 0.0)
          : activation == "silu" ? v / (1.0 + std::exp(-v))
                                 : geluRef(v, activation == "gelu_tanh");
    }
    return diff::Values{
        dref::linear(h, rows, f, in[2], d, biases ? &in[4] : nullptr)};
  };
  // The inputs of both projections are flattened for the weights'
  // gradients (see linearCase).
  c.alwaysStatic = {"D", "F"};
  // Each static size is a compilation per CPU: the case with biases sweeps
  // the model width D, the one without the hidden width F.
  c.base = {{"B", 2}, {"T", 7}, {"D", 17}, {"F", 33}};
  c.sweep = {{"B", {1, 3}}};
  c.sweep[biases ? "F" : "D"] = {biases ? 33 : 17};
  if (activation == "relu") {
    // A step of 1e-6 along a random direction moved a pre-activation
    // across relu's kink (B=2 T=33 D=17 F=33), where central differences
    // are not a derivative.
    c.fdStep = 1e-8;
  }
  return c;
}

TEST(DifferentialBlocks, FeedForwardReluBiases) {
  diff::run(ffnCase("relu", true));
}

TEST(DifferentialBlocks, FeedForwardRelu) { diff::run(ffnCase("relu", false)); }

TEST(DifferentialBlocks, FeedForwardGeluBiases) {
  diff::run(ffnCase("gelu", true));
}

TEST(DifferentialBlocks, FeedForwardGelu) { diff::run(ffnCase("gelu", false)); }

TEST(DifferentialBlocks, FeedForwardGeluTanhBiases) {
  diff::run(ffnCase("gelu_tanh", true));
}

TEST(DifferentialBlocks, FeedForwardGeluTanh) {
  diff::run(ffnCase("gelu_tanh", false));
}

TEST(DifferentialBlocks, FeedForwardSilu) { diff::run(ffnCase("silu", false)); }

//===----------------------------------------------------------------------===//
// kiln.mha and kiln.attention
//===----------------------------------------------------------------------===//

/// Multi-head attention of query [B, Tq, D] over key_value [B, Tk, E]
/// (self-attention: the same value, Tk = Tq and E = D), with PyTorch-layout
/// weights, optional biases, an optional i1 mask [B, Tk] and causal.
Case mhaCase(const std::string &name, bool self, bool biases, bool masked,
             bool causal, int64_t heads) {
  Case c;
  c.name = name;
  std::string tk = self ? "T" : "S", e = self ? "D" : "E";
  c.operands = {param({"B", "T", "D"})};
  if (!self) {
    c.operands.push_back(param({"B", "S", "E"}));
  }
  int first = int(c.operands.size());
  auto id = [&](int i) { return "%a" + std::to_string(first + i); };
  c.operands.push_back(weight({"D", "D"}, "D"));
  c.operands.push_back(weight({"D", e}, e));
  c.operands.push_back(weight({"D", e}, e));
  c.operands.push_back(weight({"D", "D"}, "D"));
  c.op = std::string("kiln.mha %a0, ") + (self ? "%a0" : "%a1") + " weights(" +
         id(0) + ", " + id(1) + ", " + id(2) + ", " + id(3) + ")";
  if (biases) {
    c.operands.push_back(weight({"D"}, "D"));
    c.operands.push_back(weight({"D"}, e));
    c.operands.push_back(weight({"D"}, e));
    c.operands.push_back(weight({"D"}, "D"));
    c.op +=
        " biases(" + id(4) + ", " + id(5) + ", " + id(6) + ", " + id(7) + ")";
  }
  int maskIndex = int(c.operands.size());
  if (masked) {
    c.operands.push_back(mask({"B", tk}));
    c.op += " mask %a" + std::to_string(maskIndex);
  }
  c.op += " {num_heads = " + std::to_string(heads) + " : i64" +
          (causal ? ", causal}" : "}");
  c.results = {{"B", "T", "D"}};
  c.reference = [=](const diff::Values &in, const diff::Sizes &s) {
    int64_t b = s.at("B"), tq = s.at("T"), tkv = s.at(tk), d = s.at("D"),
            ekv = s.at(e);
    const Vec &x = in[0], &kv = self ? in[0] : in[1];
    auto bias = [&](int i) { return biases ? &in[first + 4 + i] : nullptr; };
    Vec q = dref::linear(x, b * tq, d, in[first], d, bias(0));
    Vec k = dref::linear(kv, b * tkv, ekv, in[first + 1], d, bias(1));
    Vec v = dref::linear(kv, b * tkv, ekv, in[first + 2], d, bias(2));
    Vec o = dref::attention(q, k, v, masked ? &in[maskIndex] : nullptr, b, tq,
                            tkv, d, heads, causal);
    return diff::Values{dref::linear(o, b * tq, d, in[first + 3], d, bias(3))};
  };
  // num_heads must divide the static model width; the key/value width is
  // flattened for the projections' gradients (see linearCase).
  c.alwaysStatic = {"D", "E"};
  if (self) {
    // The op reads %a0 twice.
    c.signature.push_back(0);
    for (size_t i = 0; i < c.operands.size(); ++i) {
      c.signature.push_back(i);
    }
  }
  c.base = {{"B", 2}, {"T", 17}, {"S", 9}, {"D", 9 * heads}, {"E", 17}};
  c.sweep = {{"B", {1, 3}}, {"T", kUpTo65}, {"S", kUpTo65}};
  return c;
}

/// Widths that are multiples of `heads` and put the model width (heads = 1)
/// or the head width across 15/16/17, 31/32/33 and 65.
std::vector<int64_t> widthsFor(int64_t heads) {
  std::vector<int64_t> out;
  for (int64_t dh : {1, 7, 15, 16, 17, 31, 32, 33, 65}) {
    if (heads == 1 || dh < 65) {
      out.push_back(dh * heads);
    }
  }
  return out;
}

TEST(DifferentialBlocks, MhaSelfCausalMaskBiases) {
  Case c = mhaCase("mha self causal mask biases", true, true, true, true, 2);
  c.sweep["D"] = widthsFor(2);
  diff::run(c);
}

TEST(DifferentialBlocks, MhaSelfCausalMask) {
  Case c = mhaCase("mha self causal mask", true, false, true, true, 1);
  c.base["D"] = 17;
  c.sweep["D"] = widthsFor(1);
  diff::run(c);
}

TEST(DifferentialBlocks, MhaCrossBiases) {
  Case c = mhaCase("mha cross biases", false, true, true, false, 4);
  c.sweep["D"] = widthsFor(4);
  diff::run(c);
}

TEST(DifferentialBlocks, MhaCross) {
  Case c = mhaCase("mha cross", false, false, false, false, 1);
  c.base["D"] = 17;
  c.sweep["D"] = widthsFor(1);
  diff::run(c);
}

/// The attention core: queries [B, Q, D] over keys and values [B, K, D]
/// (Q <= K where causal, aligned at the end).
Case attentionCase(const std::string &name, bool masked, bool causal,
                   int64_t heads) {
  Case c;
  c.name = name;
  c.operands = {param({"B", "Q", "D"}), param({"B", "K", "D"}),
                param({"B", "K", "D"})};
  c.op = "kiln.attention %a0, %a1, %a2";
  if (masked) {
    c.operands.push_back(mask({"B", "K"}));
    c.op += " mask %a3";
  }
  c.op += " {num_heads = " + std::to_string(heads) + " : i64" +
          (causal ? ", causal}" : "}");
  c.results = {{"B", "Q", "D"}};
  c.reference = [=](const diff::Values &in, const diff::Sizes &s) {
    return diff::Values{dref::attention(
        in[0], in[1], in[2], masked ? &in[3] : nullptr, s.at("B"), s.at("Q"),
        s.at("K"), s.at("D"), heads, causal)};
  };
  if (causal) {
    c.admits = [](const diff::Sizes &s) { return s.at("Q") <= s.at("K"); };
  }
  // num_heads must divide the static model width.
  c.alwaysStatic = {"D"};
  c.base = {{"B", 2}, {"Q", 17}, {"K", 33}, {"D", 9 * heads}};
  c.sweep = {{"B", {1, 3}},
             {"Q", {1, 7, 15, 16, 17, 31, 32, 33}},
             {"K", {17, 31, 32, 33, 65}},
             {"D", widthsFor(heads)}};
  return c;
}

TEST(DifferentialBlocks, AttentionCoreCausalMask) {
  diff::run(attentionCase("attention causal mask", true, true, 2));
}

/// Grouped-query attention: queries [B, Q, D] in `heads` heads of width dh
/// over keys and values [B, K, E] of `kvHeads` heads; widths static (the
/// heads' are attributes), Q and K across the 64-row blocks of CPU code.
Case gqaCase(const std::string &name, int64_t heads, int64_t kvHeads,
             int64_t dh, bool masked, bool causal) {
  Case c;
  c.name = name;
  int64_t d = heads * dh, e = kvHeads * dh;
  c.operands = {param({"B", "Q", std::to_string(d)}),
                param({"B", "K", std::to_string(e)}),
                param({"B", "K", std::to_string(e)})};
  c.op = "kiln.attention %a0, %a1, %a2";
  if (masked) {
    c.operands.push_back(mask({"B", "K"}));
    c.op += " mask %a3";
  }
  c.op += " {num_heads = " + std::to_string(heads) +
          " : i64, num_kv_heads = " + std::to_string(kvHeads) + " : i64" +
          (causal ? ", causal}" : "}");
  c.results = {{"B", "Q", std::to_string(d)}};
  c.reference = [=](const diff::Values &in, const diff::Sizes &s) {
    return diff::Values{dref::attention(
        in[0], in[1], in[2], masked ? &in[3] : nullptr, s.at("B"), s.at("Q"),
        s.at("K"), d, heads, causal, {}, kvHeads)};
  };
  if (causal) {
    c.admits = [](const diff::Sizes &s) { return s.at("Q") <= s.at("K"); };
  }
  // (K's base is the largest query length: a static step that cannot pair
  // a query length with a key length takes each with the other's base.)
  c.base = {{"B", 2}, {"Q", 17}, {"K", 65}};
  c.sweep = {{"B", {1, 3}}, {"Q", {1, 16, 17, 65}}, {"K", {17, 33, 130}}};
  return c;
}

TEST(DifferentialBlocks, AttentionGroupedQueryCausalMask) {
  // 4 query heads of width 17 share 2 key/value heads.
  diff::run(gqaCase("attention gqa causal mask", 4, 2, 17, true, true));
}

TEST(DifferentialBlocks, AttentionMultiQuery) {
  // 3 query heads of width 16 share one key/value head; not causal.
  diff::run(gqaCase("attention multi-query", 3, 1, 16, false, false));
}

/// Row b of a [B, K] padding mask pads its first 13·b keys, then one key in
/// three: causal rows that see no key at all attend uniformly to every key,
/// the rest skip the key blocks past their last visible key (CPU code's
/// flash attention).
Operand leftPaddedMask() {
  Operand o = mask({"B", "K"});
  o.make = [](const std::vector<int64_t> &shape, uint32_t,
              const diff::Sizes &) {
    Tensor m = Tensor::empty(shape, DType::i1);
    for (int64_t b = 0; b < shape[0]; ++b) {
      for (int64_t j = 0; j < shape[1]; ++j) {
        m.data<bool>()[b * shape[1] + j] = j >= 13 * b && j % 3 != 1;
      }
    }
    return m;
  };
  return o;
}

/// Causal attention with left padding and attention dropout, with query and
/// key lengths across CPU code's 64-row blocks.
TEST(DifferentialBlocks, AttentionCoreDropoutLeftPadding) {
  Case c = attentionCase("attention dropout left padding", true, true, 2);
  c.operands[3] = leftPaddedMask();
  c.operands.push_back(scalar(1234));
  c.op = "kiln.attention %a0, %a1, %a2 mask %a3 seed %a4 {num_heads = 2 : "
         "i64, causal, dropout = 0.25 : f64, stream = 3 : i64}";
  c.reference = [](const diff::Values &in, const diff::Sizes &s) {
    auto scale = [](int64_t index) {
      return double(ref::dropoutScale(1234, 3, 0.25, uint64_t(index)));
    };
    return diff::Values{dref::attention(in[0], in[1], in[2], &in[3], s.at("B"),
                                        s.at("Q"), s.at("K"), s.at("D"), 2,
                                        true, scale)};
  };
  c.base = {{"B", 2}, {"Q", 65}, {"K", 130}, {"D", 34}};
  c.sweep = {{"B", {1}}, {"Q", {1, 64, 129}}, {"K", {65}}, {"D", {2}}};
  diff::run(c);
}

} // namespace
