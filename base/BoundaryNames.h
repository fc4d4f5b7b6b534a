//===- BoundaryNames.h - Names the compiler and the runtime share --------===//
//
// The spellings at the function boundary that both sides read: the entry
// functions of a training step (kiln-training-step builds them, the Trainer
// calls them), the roles of arguments (the IR's kiln.kind and the spec
// text's role), and the conditions on them (kiln.require and the spec
// text's). One definition for both; without dependencies, so that the
// dialect includes it as cheaply as the runtime does.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_BASE_BOUNDARYNAMES_H
#define KILN_BASE_BOUNDARYNAMES_H

namespace kiln::steps {

/// The fused step: forward, backward and the optimizer's update in one call.
inline constexpr const char kTrain[] = "train_step";
/// The split step (StepKind::split): the gradients, then the update (between
/// them, data-parallel training averages the gradients across processes).
inline constexpr const char kGrad[] = "grad_step";
inline constexpr const char kUpdate[] = "update_step";

} // namespace kiln::steps

namespace kiln::boundary {

/// An argument's role, in the order of kiln::ArgSpec::Role and
/// mlir::kiln::ArgKind: input (the caller's, by name), param, state, lr
/// (the learning rate), step (the step number), seed (dropout's), prepared
/// (a parameter's transpose, which kiln-prepare-weights adds: never
/// written in the IR a user compiles).
inline constexpr const char *kRoles[] = {"input", "param", "state",   "lr",
                                         "step",  "seed",  "prepared"};
/// A condition on an argument's values: an i64 scalar >= 1, an f32 tensor
/// of finite values >= 0.
inline constexpr const char kRequirePositive[] = "positive";
inline constexpr const char kRequireFiniteNonnegative[] = "finite-nonnegative";

} // namespace kiln::boundary

#endif // KILN_BASE_BOUNDARYNAMES_H
