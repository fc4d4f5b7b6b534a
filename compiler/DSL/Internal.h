//===- Internal.h - Shared internals of the model DSL ------------*- C++
//-*-===//
//
// Not part of the public API: the state behind Module and Graph, and the
// helpers every DSL source file uses to check operands, stamp locations,
// verify new ops and report errors against the user's source line.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_DSL_INTERNAL_H
#define KILN_COMPILER_DSL_INTERNAL_H

#include "compiler/DSL/Graph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include "llvm/ADT/StringMap.h"

#include <initializer_list>

namespace kiln::dsl {

struct Module::Impl {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<std::unique_ptr<Graph>> graphs;
  /// Parameters in first-declaration order, and their index by name.
  std::vector<ParamSpec> params;
  llvm::StringMap<size_t> paramIndex;
};

struct Graph::Impl {
  Module *module = nullptr;
  std::string name;
  GraphOptions options;
  mlir::func::FuncOp func;
  mlir::OpBuilder builder;
  /// The scope components currently open ("encoder", "layers.0").
  std::vector<std::string> scopes;
  std::vector<Argument> inputs;
  std::vector<Argument> params;
  /// Every argument by full name.
  llvm::StringMap<Var> arguments;
  Var seed;
  /// Dropout streams start at 1: stream 0 is the op's default, left to
  /// hand-written IR.
  int64_t nextStream = 1;
  bool finished = false;

  explicit Impl(mlir::MLIRContext *context) : builder(context) {}
};

namespace detail {

/// "<file>:<line>:<column>".
std::string where(const SourceLoc &loc);

/// Throws kiln::Error("<file>:<line>:<column>: error: <message>").
[[noreturn]] void fail(const SourceLoc &loc, const std::string &message);

/// The MLIR type of a Var as text, for messages.
std::string typeOf(mlir::Type type);

/// Access to the private parts of Var, Graph and Module.
struct Access {
  static Graph::Impl &impl(Graph &graph) { return *graph.impl_; }
  static Module::Impl &impl(Module &module) { return *module.impl_; }
  static Var wrap(Graph &graph, mlir::Value value) {
    return Var(&graph, value.getAsOpaquePointer());
  }
  static Graph *graphOf(const Var &var) { return var.graph_; }
};

/// How an operand of a DSL op is checked.
enum class Role {
  tensor,         // a required tensor
  optionalTensor, // a tensor or a null Var
  scalar,         // a required i64 scalar
  optionalScalar, // an i64 scalar or a null Var
};

/// One operand of a DSL op, named as the op's ODS operand ("weight").
struct Operand {
  const Var &var;
  const char *name;
  Role role = Role::tensor;
};

/// Checks the operands of `op` (a DSL function name, for messages): required
/// ones defined, all in one unfinished graph, tensors where tensors are
/// expected and i64 scalars where scalars are. Returns that graph.
Graph &checkOperands(const SourceLoc &loc, const char *op,
                     std::initializer_list<Operand> operands);

/// Throws unless `graph` can still take new ops.
void checkOpen(Graph &graph, const SourceLoc &loc);

/// The MLIR location of a DSL call: file:line:col.
mlir::Location location(Graph &graph, const SourceLoc &loc);

/// Verifies a just-created op; on failure erases it and throws kiln::Error
/// naming the user's line and carrying the verifier's message.
void verifyOrThrow(mlir::Operation *op, const SourceLoc &loc);

/// Creates `OpTy` at the end of `graph`'s function, stamped with `loc`,
/// verifies it and returns its result.
template <typename OpTy, typename... Args>
Var emit(Graph &graph, const SourceLoc &loc, Args &&...args) {
  Graph::Impl &impl = Access::impl(graph);
  auto op = OpTy::create(impl.builder, location(graph, loc),
                         std::forward<Args>(args)...);
  verifyOrThrow(op.getOperation(), loc);
  return Access::wrap(graph, op->getResult(0));
}

} // namespace detail
} // namespace kiln::dsl

#endif // KILN_COMPILER_DSL_INTERNAL_H
