//===- StepNames.h - The entry functions of a compiled training step -----===//
//
// kiln-training-step builds them and kiln::Trainer calls them: one
// definition of their names for both. Without dependencies, so that the
// dialect's transforms include it as cheaply as the runtime does.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_STEPNAMES_H
#define KILN_RUNTIME_STEPNAMES_H

namespace kiln::steps {

/// The fused step: forward, backward and the optimizer's update in one call.
inline constexpr const char kTrain[] = "train_step";
/// The split step (StepKind::split): the gradients, then the update (between
/// them, data-parallel training averages the gradients across processes).
inline constexpr const char kGrad[] = "grad_step";
inline constexpr const char kUpdate[] = "update_step";

} // namespace kiln::steps

#endif // KILN_RUNTIME_STEPNAMES_H
