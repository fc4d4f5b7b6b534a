//===- Graph.h - Modules, graphs and values of the C++ model DSL -*- C++
//-*-===//
//
// The core of the model DSL: a Module owns the MLIR context and module; a
// Graph builds one func.func (an entry point such as "forward" or "loss")
// whose arguments are the graph's inputs followed by its parameters; a Var is
// a value of a graph. Users never see MLIR: this header only forward-declares
// the MLIR types that the escape hatches (Var::value(), Module::op()) return.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_DSL_GRAPH_H
#define KILN_COMPILER_DSL_GRAPH_H

#include "runtime/Error.h"
#include "runtime/Init.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

namespace mlir {
class MLIRContext;
class ModuleOp;
class Value;
namespace func {
class FuncOp;
} // namespace func
} // namespace mlir

namespace kiln::dsl {

/// The location of a DSL call in the user's source; every DSL function takes
/// one as its last parameter, defaulted to the caller's location.
using SourceLoc = std::source_location;

/// A size known only at run time (batch, sequence). Equal to MLIR's
/// ShapedType::kDynamic.
inline constexpr int64_t kDynamic = std::numeric_limits<int64_t>::min();

/// A tensor shape; entries are sizes >= 0 or kDynamic.
using Shape = std::vector<int64_t>;

/// The runtime's element types and initializers, usable unqualified by a
/// model file that says `using namespace kiln::dsl;`.
using kiln::DType;
using kiln::Init;
using kiln::formatShape; ///< "[?, ?, 128]"

class Graph;
class Module;
namespace detail {
struct Access;
} // namespace detail

//===----------------------------------------------------------------------===//
// Var
//===----------------------------------------------------------------------===//

/// A value of a graph: a ranked tensor (f32 activations and parameters, i32/i64
/// ids, i1/i32/i64 masks) or an i64 scalar (a dropout seed, a position
/// offset). Vars are cheap handles that stay valid as long as their Module.
/// A default-constructed Var is null and means "absent" where an operand is
/// optional (a bias, a mask).
class Var {
public:
  Var() = default;

  /// False for a null Var.
  bool defined() const { return impl_ != nullptr; }
  explicit operator bool() const { return defined(); }

  /// The graph this value belongs to; throws kiln::Error on a null Var.
  Graph &graph() const;
  /// The sizes (kDynamic where unknown); empty for scalars and rank 0.
  Shape shape() const;
  int64_t rank() const;
  /// Size of dimension `i` (negative counts from the end); throws when out
  /// of range.
  int64_t dim(int64_t i) const;
  DType dtype() const;
  /// False for the i64 scalars (seed, offset), true for every tensor.
  bool isTensor() const;
  /// "tensor<?x?x128xf32>", for messages.
  std::string typeString() const;

  /// The underlying MLIR value (include "mlir/IR/Value.h" to use it).
  mlir::Value value() const;

private:
  friend struct detail::Access;
  Var(Graph *graph, void *impl) : graph_(graph), impl_(impl) {}

  Graph *graph_ = nullptr;
  void *impl_ = nullptr; // mlir::Value's opaque pointer.
};

//===----------------------------------------------------------------------===//
// Graph
//===----------------------------------------------------------------------===//

/// Options of one graph (entry point).
struct GraphOptions {
  /// Training mode: dropout sites are emitted (with a "seed" input and one
  /// `stream` per site). In evaluation mode (the default) dropout is the
  /// identity and emits nothing.
  bool training = false;
};

/// What a function argument is.
enum class ArgKind { input, param };

/// One argument of a graph's function, in argument order.
struct Argument {
  /// Full name: "idx", "seed",
  /// "encoder.layers.0.self_attention_block.w_q.weight".
  std::string name = {};
  ArgKind kind = ArgKind::input;
  Shape shape = {};
  DType dtype = DType::f32;
  /// False for i64 scalar inputs (seed, offsets).
  bool isTensor = true;
};

class Scope;

/// Builds one func.func of a Module. Created by Module::addGraph; lives as
/// long as the Module. The function's arguments are the inputs (in
/// declaration order) followed by the parameters (in declaration order), each
/// carrying `kiln.kind = "input" | "param"` and `kiln.name = "<full name>"`.
class Graph {
public:
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;
  ~Graph();

  const std::string &name() const;
  bool training() const;
  Module &module() const;

  /// Declares a tensor input (`shape` may hold kDynamic sizes). Input names
  /// are global: scopes do not prefix them.
  Var input(std::string name, Shape shape, DType dtype,
            SourceLoc loc = SourceLoc::current());
  /// Declares an i64 scalar input (a start position for incremental
  /// decoding, say).
  Var scalarInput(std::string name, SourceLoc loc = SourceLoc::current());
  /// Declares a trainable f32 parameter named `<current scope>.<name>`, and
  /// records it in the Module's parameter table. A full name may be declared
  /// once per graph; another graph of the same Module may declare it again
  /// (shared weights across entry points) with the same shape.
  Var param(std::string name, Shape shape, Init init,
            SourceLoc loc = SourceLoc::current());
  /// An argument already declared in this graph, by full name; null if none.
  Var lookup(std::string_view fullName) const;

  /// Opens a name scope: parameters declared while the returned object lives
  /// are prefixed with `name` (which may itself be dotted, "layers.0").
  [[nodiscard]] Scope scope(std::string name,
                            SourceLoc loc = SourceLoc::current());
  /// `name` under the current scope: "encoder.layers.0." + name.
  std::string qualify(std::string_view name) const;

  /// The i64 dropout seed: the scalar input named "seed", declared on first
  /// use unless the user declared it with scalarInput("seed").
  Var seed(SourceLoc loc = SourceLoc::current());
  /// A fresh `stream` number for the next dropout site (1, 2, 3, ...).
  int64_t nextDropoutStream();

  /// Adds the return of `outputs` and verifies the function. A graph is
  /// finished once: afterwards nothing can be added to it.
  void finish(const std::vector<Var> &outputs,
              SourceLoc loc = SourceLoc::current());
  /// As finish(outputs), with outputs that replace inputs: each pair (k,
  /// input) makes output k (of `input`'s type; `input` a tensor input of
  /// this graph) update that input in place (`kiln.updates`): compiled CPU
  /// code writes it into the caller's tensor, and the call returns that
  /// tensor as output k (a key/value cache written at a position).
  void finish(const std::vector<Var> &outputs,
              const std::vector<std::pair<size_t, Var>> &inPlace,
              SourceLoc loc = SourceLoc::current());
  bool finished() const;

  /// The function's arguments, inputs first, then parameters.
  std::vector<Argument> arguments() const;
  const std::vector<Argument> &inputs() const;
  const std::vector<Argument> &params() const;

  /// The function being built (include "mlir/Dialect/Func/IR/FuncOps.h").
  mlir::func::FuncOp func() const;

  struct Impl;

private:
  friend class Module;
  friend class Scope;
  friend struct detail::Access;
  explicit Graph(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

/// RAII name prefix returned by Graph::scope. Scopes nest and must be closed
/// in reverse order of opening (which C++ scoping does by itself).
class Scope {
public:
  Scope(const Scope &) = delete;
  Scope &operator=(const Scope &) = delete;
  ~Scope();

private:
  friend class Graph;
  Scope(Graph &graph, size_t depth) : graph_(graph), depth_(depth) {}
  Graph &graph_;
  size_t depth_; // The number of scope components before this one.
};

//===----------------------------------------------------------------------===//
// Module
//===----------------------------------------------------------------------===//

/// A parameter of the Module, shared by every graph that declares it.
struct ParamSpec {
  std::string name;
  Shape shape;
  Init init;
  /// Element count.
  int64_t numel() const;
};

/// Owns the MLIR context (kiln, func, arith, tensor, ... loaded) and one
/// builtin.module holding one func.func per Graph, plus the table of
/// parameters that a runtime allocates and initializes.
class Module {
public:
  Module();
  ~Module();
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;

  /// Starts a new function `name` ("forward", "loss", ...). Names are unique
  /// within the Module.
  Graph &addGraph(std::string name, GraphOptions options = {},
                  SourceLoc loc = SourceLoc::current());
  /// The graph named `name`, or nullptr.
  Graph *findGraph(std::string_view name) const;
  /// The graphs, in creation order.
  std::vector<Graph *> graphs() const;

  /// Every parameter of every graph, in first-declaration order.
  const std::vector<ParamSpec> &params() const;
  /// The parameter named `name`, or nullptr.
  const ParamSpec *findParam(std::string_view name) const;
  /// The total number of parameter elements.
  int64_t numParameters() const;

  /// Verifies the whole module; throws kiln::Error with the first message.
  void verify() const;
  /// The module's IR in the custom assembly form (with `loc(...)` when
  /// `withLocations`), unfinished graphs included.
  std::string str(bool withLocations = false) const;

  mlir::MLIRContext &context() const;
  /// The builtin.module (include "mlir/IR/BuiltinOps.h").
  mlir::ModuleOp op() const;

  struct Impl;

private:
  friend class Graph;
  friend struct detail::Access;
  std::unique_ptr<Impl> impl_;
};

} // namespace kiln::dsl

#endif // KILN_COMPILER_DSL_GRAPH_H
