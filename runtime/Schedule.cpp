//===- Schedule.cpp - Learning-rate schedules -----------------------------===//
//
// Implements kiln::LrSchedule; every constructor validates its arguments.
//
//===----------------------------------------------------------------------===//

#include "runtime/Schedule.h"

#include "runtime/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

using namespace kiln;

static void checkRate(double value, const char *what) {
  if (!std::isfinite(value) || value < 0.0) {
    throw Error(fmt::format("kiln: the learning-rate schedule's {} must be a "
                            "finite number >= 0, got {}",
                            what, value));
  }
}

LrSchedule LrSchedule::constant(double lr) {
  checkRate(lr, "learning rate");
  return LrSchedule(Kind::constant, lr, 0.0, 0, 0);
}

LrSchedule LrSchedule::warmupCosine(double peak, int64_t warmupSteps,
                                    int64_t totalSteps, double minLr) {
  checkRate(peak, "peak rate");
  checkRate(minLr, "minimum rate");
  if (minLr > peak) {
    throw Error(fmt::format("kiln: warmup-cosine: the minimum rate {} is above "
                            "the peak {}",
                            minLr, peak));
  }
  if (warmupSteps < 0 || totalSteps <= warmupSteps) {
    throw Error(fmt::format("kiln: warmup-cosine needs 0 <= warm-up steps < "
                            "total steps, got {} and {}",
                            warmupSteps, totalSteps));
  }
  return LrSchedule(Kind::warmupCosine, peak, minLr, warmupSteps, totalSteps);
}

LrSchedule LrSchedule::inverseSqrt(int64_t dModel, int64_t warmupSteps,
                                   double scale) {
  checkRate(scale, "scale");
  if (dModel <= 0 || warmupSteps <= 0) {
    throw Error(fmt::format("kiln: inverse-sqrt needs d_model > 0 and warm-up "
                            "steps > 0, got {} and {}",
                            dModel, warmupSteps));
  }
  return LrSchedule(Kind::inverseSqrt, scale / std::sqrt(double(dModel)), 0.0,
                    warmupSteps, 0);
}

double LrSchedule::operator()(int64_t step) const {
  if (step < 1) {
    throw Error(fmt::format("kiln: learning-rate schedules count steps from "
                            "1, got {}",
                            step));
  }
  double s = double(step);
  switch (kind_) {
  case Kind::constant:
    return a_;
  case Kind::warmupCosine: {
    if (step <= warmup_) {
      return a_ * s / double(warmup_);
    }
    double progress =
        std::min(1.0, (s - double(warmup_)) / double(total_ - warmup_));
    return b_ + (a_ - b_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  }
  case Kind::inverseSqrt:
    return a_ *
           std::min(1.0 / std::sqrt(s), s * std::pow(double(warmup_), -1.5));
  }
  return a_;
}

std::string LrSchedule::describe() const {
  switch (kind_) {
  case Kind::constant:
    return fmt::format("constant({:g})", a_);
  case Kind::warmupCosine:
    return fmt::format(
        "warmup-cosine(peak={:g}, warmup={}, total={}, min={:g})", a_, warmup_,
        total_, b_);
  case Kind::inverseSqrt:
    return fmt::format("inverse-sqrt(d_model^-0.5*scale={:g}, warmup={})", a_,
                       warmup_);
  }
  return "";
}
