//===- Schedule.h - Learning-rate schedules ----------------------*- C++
//-*-===//
//
// The learning rate of optimizer step s (counted from 1): constant, linear
// warm-up then cosine decay, and the inverse-square-root schedule of
// "Attention is all you need". A schedule is a pure function of the step, so
// a resumed run sees exactly the rates of an uninterrupted one.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SCHEDULE_H
#define KILN_RUNTIME_SCHEDULE_H

#include <cstdint>
#include <string>

namespace kiln {

class LrSchedule {
public:
  /// `lr` at every step.
  static LrSchedule constant(double lr);
  /// Rises linearly from peak/warmupSteps to `peak` over `warmupSteps`, then
  /// follows half a cosine down to `minLr` at `totalSteps` and stays there.
  static LrSchedule warmupCosine(double peak, int64_t warmupSteps,
                                 int64_t totalSteps, double minLr = 0.0);
  /// scale · dModel^-0.5 · min(s^-0.5, s · warmupSteps^-1.5) (Vaswani et al.,
  /// section 5.3, with scale 1).
  static LrSchedule inverseSqrt(int64_t dModel, int64_t warmupSteps,
                                double scale = 1.0);

  /// The rate of step `step` >= 1. Throws kiln::Error for step < 1.
  double operator()(int64_t step) const;
  /// "warmup-cosine(peak=0.003, warmup=100, total=2000, min=0.0003)".
  std::string describe() const;

private:
  enum class Kind { constant, warmupCosine, inverseSqrt };
  LrSchedule(Kind kind, double a, double b, int64_t warmup, int64_t total)
      : kind_(kind), a_(a), b_(b), warmup_(warmup), total_(total) {}

  Kind kind_;
  double a_;       ///< lr | peak | dModel^-0.5 · scale
  double b_;       ///< minLr
  int64_t warmup_; ///< warm-up steps
  int64_t total_;  ///< the cosine's last step
};

} // namespace kiln

#endif // KILN_RUNTIME_SCHEDULE_H
