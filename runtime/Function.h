//===- Function.h - Call compiled kiln functions ----------------*- C++ -*-===//
//
// The calling side of compiled code, shared by the JIT and ahead-of-time
// objects, with no LLVM or MLIR dependency. A compiled function is reached
// through its packed entry point, `void fn(void **args)`: one pointer per
// word of the expanded arguments (a memref is allocated, aligned, offset,
// sizes, strides; an i64 is itself) and, last, a pointer to the results'
// descriptor words. Its FunctionSpec says what the arguments must be; every
// call is checked against it before the compiled code runs, so that code only
// ever sees inputs it can process without reading out of bounds.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_FUNCTION_H
#define KILN_RUNTIME_FUNCTION_H

#include "runtime/Init.h"
#include "runtime/ParameterStore.h"
#include "runtime/Tensor.h"

#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

namespace memory {
class CallPlans;
} // namespace memory

class PreparedWeights;

/// One argument of a compiled function: a tensor or an i64 scalar (a dropout
/// seed, a start position).
struct Arg {
  Arg(Tensor tensor) : tensor(std::move(tensor)) {}
  Arg(int64_t scalar) : scalar(scalar), isScalar(true) {}
  Tensor tensor;
  int64_t scalar = 0;
  bool isScalar = false;
};

/// What a function argument must be.
struct ArgSpec {
  std::string name;           ///< kiln.name if the IR has one, else "arg<i>".
  /// Who passes the argument (the IR's kiln.kind): the caller by name, the
  /// parameter store, or a trainer (its optimizer state, learning rate,
  /// step number and dropout seed), whatever the argument is called.
  enum class Role {
    input,        ///< the caller, by name
    param,        ///< a parameter store, by name
    state,        ///< a trainer's optimizer state, by name
    learningRate, ///< a trainer's learning rate (f32 scalar tensor)
    step,         ///< a trainer's step number (i64 scalar)
    seed,         ///< a trainer's dropout seed (i64 scalar)
    /// The transpose of the 2-D parameter called `name` (an f32 [in, out]
    /// tensor): what the products of CPU code compiled with
    /// JitOptions::prepareWeights read instead of the parameter
    /// (kiln-prepare-weights). run() makes it from the parameter store, or
    /// takes it from a PreparedWeights that keeps it across calls.
    prepared,
  } role = Role::input;
  bool isScalar = false;      ///< An i64 scalar rather than a tensor.
  DType dtype = DType::f32;   ///< Element type of a tensor argument.
  std::vector<int64_t> shape; ///< -1 for a dynamic size.
  int64_t idBound = -1;       ///< When >= 0: values must lie in [0, idBound).
  std::optional<int64_t> ignoredId; ///< A value exempt from idBound.
  /// What every call must pass (IR attribute kiln.require).
  enum class Require {
    any,
    positive,          ///< an i64 scalar >= 1 (a training step's `step`)
    finiteNonnegative, ///< an f32 tensor, every element finite and >= 0
  } require = Require::any;
  /// GPU code compiled with its state resident (a JIT on a GPU,
  /// JitOptions::gpu): the argument (a parameter, optimizer state, or what a
  /// result updates: a decoder's key/value cache) is read from device memory.
  /// A tensor on the GPU is passed as it is; a host tensor is copied to the
  /// device for the call.
  bool onDevice = false;
};

/// The role spelled `text` ("input", "param", "state", "lr", "step",
/// "seed": the IR's kiln.kind and the spec text say them alike), or nothing.
std::optional<ArgSpec::Role> parseRole(std::string_view text);

/// Sizes that must agree at run time.
struct DimGroup {
  std::vector<std::pair<size_t, int64_t>> dims; ///< (argument, dim)
  int64_t size = -1;   ///< A static size the group must have, or -1.
  int64_t minSize = 0; ///< The least size (a slice of static length).
};

/// Positions that must lie in [0, maxLen): those of a learned position
/// table, of a key/value cache of fixed capacity written or read at an
/// offset. The positions are [offset, offset + length), the length being a
/// group's size or a static one.
struct PositionLimit {
  size_t group = 0;       ///< Whose size is the length (unless `length`).
  int64_t offsetArg = -1; ///< The scalar argument holding the offset, or -1.
  int64_t maxLen = 0;
  /// When >= 0: the length, static (a gradient's: its size is no
  /// argument's); `group` is unused.
  int64_t length = -1;
};

/// A linear combination of the sizes of dimension groups (each group's
/// size is that of its dimensions), plus a constant: the length of a
/// concatenation, of a slice, of a slice of a concatenation.
struct SizeExpr {
  /// Bounds that keep every evaluation exact in 128 bits.
  static constexpr size_t kMaxTerms = 1 << 16;
  static constexpr int64_t kMaxCoefficient = int64_t(1) << 31;
  std::vector<std::pair<size_t, int64_t>> terms; ///< (group, coefficient)
  int64_t constant = 0;
  bool operator==(const SizeExpr &) const = default;
};

/// A condition on sizes that are not those of single argument dimensions
/// (what DimGroup says of those): `lhs == rhs`, or with `atLeast`
/// `lhs >= rhs`. Compiled code relies on it (the key and value caches of a
/// decoder, each a concatenation of two arguments, read together).
struct SizeCheck {
  SizeExpr lhs, rhs;
  bool atLeast = false;
  bool operator==(const SizeCheck &) const = default;
};

/// A condition on element counts: the product of the `lhs` sizes equals
/// the product of the `rhs` sizes (a reshape of a tensor with dynamic sizes
/// keeps its element count: compiled code reads as many elements as the
/// result has).
struct ElementCheck {
  /// Bounds on the factors of a side, as SizeExpr's on its terms.
  static constexpr size_t kMaxFactors = 64;
  std::vector<SizeExpr> lhs, rhs;
  /// Instead of equal: the product of `lhs` is a multiple of the product of
  /// `rhs`, which is not 0 (a reshape's inferred size divides the elements
  /// by the other sizes exactly).
  bool divides = false;
  bool operator==(const ElementCheck &) const = default;
};

/// One result of a compiled function.
struct ResultSpec {
  /// kiln.name if the IR has one (a gradient's "grad.<parameter>", a
  /// training step's "param.<parameter>"), else "result<i>".
  std::string name;
  std::vector<int64_t> shape; ///< -1 for a dynamic size.
  /// When >= 0: the result is argument `updates`, which the function writes
  /// in place (the parameters and optimizer state of a CPU training step);
  /// the call returns that argument's tensor. Otherwise a fresh tensor.
  int64_t updates = -1;
  /// GPU code compiled with its state resident: the result (a training
  /// step's new parameter or optimizer state, a decoder's new cache: one
  /// that updates an argument, kiln.updates) is returned as a tensor in
  /// GPU memory (Tensor::onGpu(); runtime/Cuda.h copies it to the host).
  bool onDevice = false;
  DType dtype = DType::f32; ///< f32 or bf16.
};

/// The tokens a cross-entropy or NLL loss runs over (a data-parallel
/// gradient step's `kiln.loss_tokens`): the elements of integer argument
/// `arg` that are not `ignoreIndex`. The loss is their mean, or with `sum`
/// their sum.
struct LossTokens {
  int64_t arg = -1;
  std::optional<int64_t> ignoreIndex;
  bool sum = false;
};

struct FunctionSpec {
  std::string name;
  std::vector<ArgSpec> args;
  std::vector<ResultSpec> results;
  std::vector<DimGroup> groups;
  std::vector<PositionLimit> positionLimits;
  std::vector<SizeCheck> sizeChecks;
  std::vector<ElementCheck> elementChecks;
  /// Set when the function's first result is a mean loss over these tokens.
  std::optional<LossTokens> lossTokens;
};

/// How many of `targets`' elements `tokens` counts (those that are not the
/// ignored id). Throws kiln::Error when `targets` is not an i32/i64 tensor.
int64_t countTokens(const LossTokens &tokens, const Tensor &targets);

/// A parameter a model declares, in declaration order.
struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  Init init;
};

/// The packed entry point of a compiled function.
using PackedFunction = void (*)(void **);

class CompiledFunction {
public:
  CompiledFunction(FunctionSpec spec, PackedFunction fn);

  const FunctionSpec &spec() const { return spec_; }

  /// Calls the function. Throws kiln::Error for a wrong argument count,
  /// dtype, rank or static size, inconsistent dynamic sizes (DimGroup,
  /// SizeCheck), token ids
  /// outside their table, positions past a learned position table, and an
  /// argument the function updates in place (ResultSpec::updates) that
  /// shares memory with another argument. Such arguments are written: the
  /// call returns their tensors, holding the new values.
  std::vector<Tensor> call(const std::vector<Arg> &args) const;

  /// Calls the function with its parameters taken from `parameters`, their
  /// prepared layouts (ArgSpec::Role::prepared) from `prepared` (made from
  /// `parameters` there, or for this call alone when null), and every other
  /// argument from `inputs` by name. Throws kiln::Error for a missing or an
  /// unknown input, and whatever call() throws.
  std::vector<Tensor> run(const ParameterStore &parameters,
                          const std::map<std::string, Arg> &inputs,
                          PreparedWeights *prepared = nullptr) const;

private:
  FunctionSpec spec_;
  PackedFunction fn_;
  /// The memory plans of its calls (memory::PlannedCall), shared by copies.
  std::shared_ptr<memory::CallPlans> plans_;
};

/// A set of compiled functions and the parameters they share: what the JIT
/// produces, and what an ahead-of-time object holds.
class Executable {
public:
  virtual ~Executable();

  std::vector<Tensor> call(const std::string &name,
                           const std::vector<Arg> &args) const;
  std::vector<Tensor> run(const std::string &name,
                          const ParameterStore &parameters,
                          const std::map<std::string, Arg> &inputs,
                          PreparedWeights *prepared = nullptr) const;
  /// The function called `name`; throws kiln::Error listing the functions
  /// there are when there is none.
  const CompiledFunction &function(const std::string &name) const;
  const FunctionSpec &spec(const std::string &name) const {
    return function(name).spec();
  }
  bool contains(const std::string &name) const;
  std::vector<std::string> functions() const;

  /// The model's parameters, in declaration order, with their initializers.
  const std::vector<ParamSpec> &params() const { return params_; }
  /// A store holding every parameter, initialized as declared from a
  /// generator seeded with `seed`.
  ParameterStore initParameters(uint64_t seed) const;

protected:
  void add(CompiledFunction function);
  void setParams(std::vector<ParamSpec> params) { params_ = std::move(params); }

private:
  std::map<std::string, CompiledFunction> functions_;
  std::vector<ParamSpec> params_;
};

} // namespace kiln

#endif // KILN_RUNTIME_FUNCTION_H
