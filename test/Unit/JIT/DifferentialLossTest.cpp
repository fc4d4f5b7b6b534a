//===- DifferentialLossTest.cpp - Losses at every size, forward and back --===//
//
// The losses through Differential.h: every reduction, with and without
// ignore_index and label smoothing, from logits and from log-probabilities.
// A mean loss without ignore_index divides by the number of positions; its
// gradient was 16x too large once a row filled a 16-wide vector (the count
// of positions was a reduction of the constant 1, which the vectorizer
// applied once per tile).
//
//===----------------------------------------------------------------------===//

#include "Differential.h"

#include <optional>

using namespace kiln;
using diff::Case;
using diff::Operand;

namespace {

/// Per-position losses of [rows, C] scores and their mean or sum, as
/// PyTorch defines them: -(1-s)·logp[t] - s/C·sum(logp), 0 at ignored
/// positions; the mean divides by the number of positions not ignored.
diff::Values lossReference(const diff::Values &in, int64_t classes,
                           bool fromLogits, double smoothing,
                           std::optional<int64_t> ignore,
                           const std::string &reduction) {
  const std::vector<double> &x = in[0], &t = in[1];
  int64_t rows = int64_t(t.size());
  std::vector<double> losses(rows);
  double sum = 0, kept = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.data() + r * classes;
    double lse = 0;
    if (fromLogits) {
      double mx = -INFINITY, s = 0;
      for (int64_t c = 0; c < classes; ++c) {
        mx = std::max(mx, row[c]);
      }
      for (int64_t c = 0; c < classes; ++c) {
        s += std::exp(row[c] - mx);
      }
      lse = mx + std::log(s);
    }
    double all = 0;
    for (int64_t c = 0; c < classes; ++c) {
      all += row[c] - lse;
    }
    int64_t target = int64_t(t[r]);
    double loss = -(1 - smoothing) * (row[target] - lse) -
                  smoothing / double(classes) * all;
    if (ignore && target == *ignore) {
      loss = 0;
    } else {
      kept += 1;
    }
    losses[r] = loss;
    sum += loss;
  }
  if (reduction == "none") {
    return {losses};
  }
  return {{reduction == "mean" ? sum / kept : sum}};
}

/// A loss over [B, T, C] scores and [B, T] targets.
Case lossCase(const std::string &name, const std::string &op, bool fromLogits,
              double smoothing, std::optional<int64_t> ignore,
              const std::string &reduction, const std::string &idType) {
  Case c;
  c.name = name;
  Operand scores;
  scores.dims = {"B", "T", "C"};
  scores.lo = -3;
  scores.hi = 3;
  Operand targets;
  targets.dims = {"B", "T"};
  targets.kind = Operand::Ids;
  targets.elem = idType;
  // The first target is never ignored (ignore_index is 1, and there may be
  // one class only), so the mean never divides by zero.
  targets.bound = "C";
  targets.firstId = 0;
  c.operands = {scores, targets};
  c.results = {reduction == "none" ? std::vector<std::string>{"B", "T"}
                                   : std::vector<std::string>{}};
  std::string attrs = "reduction = #kiln<loss_reduction " + reduction + ">";
  if (smoothing > 0) {
    attrs += ", label_smoothing = " + std::to_string(smoothing) + " : f64";
  }
  if (ignore) {
    attrs += ", ignore_index = " + std::to_string(*ignore) + " : i64";
  }
  c.op = op + " %a0, %a1 {" + attrs + "}";
  c.reference = [=](const diff::Values &in, const diff::Sizes &s) {
    return lossReference(in, s.at("C"), fromLogits, smoothing, ignore,
                         reduction);
  };
  c.base = {{"B", 2}, {"T", 17}, {"C", 17}};
  c.sweep = {{"B", {1, 3, 16, 17}}};
  return c;
}

} // namespace

TEST(DifferentialLoss, CrossEntropyMean) {
  diff::run(lossCase("cross_entropy mean", "kiln.cross_entropy", true, 0.0,
                     std::nullopt, "mean", "i64"));
}

TEST(DifferentialLoss, CrossEntropyMeanIgnoreIndexSmoothing) {
  diff::run(lossCase("cross_entropy mean ignore smoothing",
                     "kiln.cross_entropy", true, 0.1, 1, "mean", "i64"));
}

TEST(DifferentialLoss, CrossEntropySum) {
  diff::run(lossCase("cross_entropy sum", "kiln.cross_entropy", true, 0.0,
                     std::nullopt, "sum", "i32"));
}

TEST(DifferentialLoss, NllLossNoneWithSmoothing) {
  diff::run(lossCase("nll_loss none smoothing", "kiln.nll_loss", false, 0.2,
                     std::nullopt, "none", "i64"));
}

TEST(DifferentialLoss, NllLossMeanIgnoreIndex) {
  diff::run(lossCase("nll_loss mean ignore", "kiln.nll_loss", false, 0.0, 1,
                     "mean", "i32"));
}
