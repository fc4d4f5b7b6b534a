//===- Graph.cpp - Modules, graphs and values of the model DSL ------------===//
//
// Function building (arguments named for the runtime), name scopes, the
// parameter table, and the checks that turn user mistakes into kiln::Error
// messages naming the user's source line.
//
//===----------------------------------------------------------------------===//

#include "compiler/DSL/Graph.h"
#include "compiler/DSL/Internal.h"
#include "dialects/Kiln/IR/DTypes.h"
#include "dialects/Kiln/IR/KilnDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/Verifier.h"

#include "llvm/Support/raw_ostream.h"

namespace kiln::dsl {

static_assert(kDynamic == mlir::ShapedType::kDynamic,
              "kiln::dsl::kDynamic must match MLIR's dynamic size marker");

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static Shape shapeOf(mlir::Type type) {
  if (auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type)) {
    return Shape(tensor.getShape().begin(), tensor.getShape().end());
  }
  return {};
}

/// The first error (with its location when it has one) reported while
/// verifying `op`; empty when it verifies.
static std::string verifyMessage(mlir::Operation *op, bool withLocation) {
  std::string message;
  mlir::ScopedDiagnosticHandler handler(
      op->getContext(), [&](mlir::Diagnostic &diag) {
        if (message.empty() &&
            diag.getSeverity() == mlir::DiagnosticSeverity::Error) {
          if (auto file =
                  mlir::dyn_cast<mlir::FileLineColLoc>(diag.getLocation());
              file && withLocation) {
            message = file.getFilename().str() + ":" +
                      std::to_string(file.getLine()) + ":" +
                      std::to_string(file.getColumn()) + ": error: ";
          }
          message += diag.str();
        }
        return mlir::success();
      });
  if (succeeded(mlir::verify(op))) {
    return "";
  }
  return message.empty() ? "'" + op->getName().getStringRef().str() +
                               "' op failed to verify"
                         : message;
}

namespace detail {

std::string where(const SourceLoc &loc) {
  return std::string(loc.file_name()) + ":" + std::to_string(loc.line()) + ":" +
         std::to_string(loc.column());
}

void fail(const SourceLoc &loc, const std::string &message) {
  throw Error(where(loc) + ": error: " + message);
}

std::string typeOf(mlir::Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

static mlir::Location location(mlir::MLIRContext *context,
                               const SourceLoc &loc) {
  return mlir::FileLineColLoc::get(context, loc.file_name(), loc.line(),
                                   loc.column());
}

mlir::Location location(Graph &graph, const SourceLoc &loc) {
  return location(&graph.module().context(), loc);
}

void checkOpen(Graph &graph, const SourceLoc &loc) {
  if (graph.finished()) {
    fail(loc, "graph '" + graph.name() +
                  "' is already finished; nothing can be added to it");
  }
}

Graph &checkOperands(const SourceLoc &loc, const char *op,
                     std::initializer_list<Operand> operands) {
  Graph *graph = nullptr;
  const char *graphOperand = nullptr;
  for (const Operand &operand : operands) {
    bool optional = operand.role == Role::optionalTensor ||
                    operand.role == Role::optionalScalar;
    if (!operand.var.defined()) {
      if (optional) {
        continue;
      }
      fail(loc,
           std::string(op) + ": operand '" + operand.name + "' is a null Var");
    }
    Graph *owner = Access::graphOf(operand.var);
    if (!graph) {
      graph = owner;
      graphOperand = operand.name;
    } else if (owner != graph) {
      fail(loc, std::string(op) + ": operand '" + operand.name +
                    "' belongs to graph '" + owner->name() + "' but operand '" +
                    graphOperand + "' to graph '" + graph->name() +
                    "'; Vars cannot cross graphs");
    }
    bool wantTensor =
        operand.role == Role::tensor || operand.role == Role::optionalTensor;
    if (wantTensor != operand.var.isTensor()) {
      fail(loc, std::string(op) + ": expects '" + operand.name + "' to be " +
                    (wantTensor ? "a tensor" : "an i64 scalar") + ", got " +
                    operand.var.typeString());
    }
  }
  if (!graph) {
    fail(loc, std::string(op) + ": expects at least one operand");
  }
  checkOpen(*graph, loc);
  return *graph;
}

void verifyOrThrow(mlir::Operation *op, const SourceLoc &loc) {
  std::string message = verifyMessage(op, /*withLocation=*/false);
  if (!message.empty()) {
    op->erase();
    fail(loc, message);
  }
}

} // namespace detail

using detail::Access;
using detail::fail;

//===----------------------------------------------------------------------===//
// Var
//===----------------------------------------------------------------------===//

static void checkDefined(const Var &var, const char *what) {
  if (!var.defined()) {
    throw Error(std::string("error: ") + what + " of a null Var");
  }
}

Graph &Var::graph() const {
  checkDefined(*this, "graph()");
  return *graph_;
}

mlir::Value Var::value() const {
  return mlir::Value::getFromOpaquePointer(impl_);
}

Shape Var::shape() const {
  checkDefined(*this, "shape()");
  return shapeOf(value().getType());
}

int64_t Var::rank() const { return static_cast<int64_t>(shape().size()); }

int64_t Var::dim(int64_t i) const {
  int64_t r = rank();
  int64_t index = i < 0 ? i + r : i;
  if (index < 0 || index >= r) {
    throw Error("error: dim(" + std::to_string(i) +
                ") is out of range for a value of rank " + std::to_string(r));
  }
  return shape()[index];
}

DType Var::dtype() const {
  checkDefined(*this, "dtype()");
  if (std::optional<DType> dtype = mlir::kiln::dtypeOf(value().getType())) {
    return *dtype;
  }
  throw Error("error: dtype(): " + typeString() +
              " is not a type Kiln's tensors hold");
}

bool Var::isTensor() const {
  checkDefined(*this, "isTensor()");
  return mlir::isa<mlir::RankedTensorType>(value().getType());
}

std::string Var::typeString() const {
  return defined() ? detail::typeOf(value().getType()) : "<null>";
}

//===----------------------------------------------------------------------===//
// Graph
//===----------------------------------------------------------------------===//

Graph::Graph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Graph::~Graph() = default;

const std::string &Graph::name() const { return impl_->name; }

bool Graph::training() const { return impl_->options.training; }

Module &Graph::module() const { return *impl_->module; }

/// Adds a function argument at `index` with the kiln.kind / kiln.name
/// attributes and records it.
static Var addArgument(Graph &graph, unsigned index, Argument argument,
                       mlir::Type type, const SourceLoc &loc) {
  Graph::Impl &impl = Access::impl(graph);
  mlir::Builder b(type.getContext());
  mlir::NamedAttribute attrs[] = {
      b.getNamedAttr(mlir::kiln::kKindAttr,
                     b.getStringAttr(mlir::kiln::stringifyArgKind(
                         argument.kind == ArgKind::input
                             ? mlir::kiln::ArgKind::input
                             : mlir::kiln::ArgKind::param))),
      b.getNamedAttr(mlir::kiln::kNameAttr, b.getStringAttr(argument.name))};
  if (failed(impl.func.insertArgument(index, type, b.getDictionaryAttr(attrs),
                                      detail::location(graph, loc)))) {
    fail(loc, "cannot add argument '" + argument.name + "' to graph '" +
                  impl.name + "'");
  }
  Var var = Access::wrap(graph, impl.func.getArgument(index));
  impl.arguments[argument.name] = var;
  (argument.kind == ArgKind::input ? impl.inputs : impl.params)
      .push_back(std::move(argument));
  return var;
}

/// Checks that `name` is a fresh, non-empty argument name of `graph`.
static void checkNewName(Graph &graph, const std::string &name,
                         const char *what, const SourceLoc &loc) {
  detail::checkOpen(graph, loc);
  if (name.empty()) {
    fail(loc, std::string(what) + " names must not be empty");
  }
  if (Access::impl(graph).arguments.count(name)) {
    fail(loc, std::string(what) + " '" + name +
                  "' is already declared in graph '" + graph.name() + "'");
  }
}

Var Graph::input(std::string name, Shape shape, DType dtype, SourceLoc loc) {
  checkNewName(*this, name, "input", loc);
  for (int64_t size : shape) {
    if (size < 0 && size != kDynamic) {
      fail(loc, "input '" + name + "' has a negative size in its shape " +
                    formatShape(shape));
    }
  }
  mlir::MLIRContext *context = &module().context();
  auto type = mlir::RankedTensorType::get(shape, mlir::kiln::elementTypeOf(context, dtype));
  auto index = static_cast<unsigned>(impl_->inputs.size());
  return addArgument(*this, index, {name, ArgKind::input, shape, dtype, true},
                     type, loc);
}

Var Graph::scalarInput(std::string name, SourceLoc loc) {
  checkNewName(*this, name, "input", loc);
  auto type = mlir::IntegerType::get(&module().context(), 64);
  auto index = static_cast<unsigned>(impl_->inputs.size());
  return addArgument(*this, index,
                     {name, ArgKind::input, {}, DType::i64, false}, type, loc);
}

/// Appends `param` to the module's `kiln.parameters` attribute, which carries
/// the declared parameters and their initializers to the compilers.
static void recordParameter(Module &module, const ParamSpec &param) {
  mlir::ModuleOp op = module.op();
  mlir::Builder b(op.getContext());
  llvm::SmallVector<mlir::Attribute> all;
  if (auto existing =
          op->getAttrOfType<mlir::ArrayAttr>(mlir::kiln::kParametersAttr)) {
    all.append(existing.begin(), existing.end());
  }
  all.push_back(b.getDictionaryAttr({
      b.getNamedAttr("name", b.getStringAttr(param.name)),
      b.getNamedAttr("shape", b.getDenseI64ArrayAttr(param.shape)),
      b.getNamedAttr("init", b.getI64IntegerAttr(int64_t(param.init.kind))),
      b.getNamedAttr("a", b.getF64FloatAttr(param.init.a)),
      b.getNamedAttr("b", b.getF64FloatAttr(param.init.b)),
  }));
  op->setAttr(mlir::kiln::kParametersAttr, b.getArrayAttr(all));
}

Var Graph::param(std::string name, Shape shape, Init init, SourceLoc loc) {
  if (name.empty()) {
    fail(loc, "parameter names must not be empty");
  }
  std::string fullName = qualify(name);
  checkNewName(*this, fullName, "parameter", loc);
  for (int64_t size : shape) {
    if (size < 0) {
      fail(loc, "parameter '" + fullName +
                    "' must have a static shape of "
                    "sizes >= 0, got " +
                    formatShape(shape));
    }
  }
  Module::Impl &table = Access::impl(module());
  auto it = table.paramIndex.find(fullName);
  if (it != table.paramIndex.end()) {
    const ParamSpec &existing = table.params[it->second];
    if (existing.shape != shape) {
      fail(loc, "parameter '" + fullName + "' is declared with shape " +
                    formatShape(shape) + " but has shape " +
                    formatShape(existing.shape) +
                    " in another graph of this module");
    }
  } else {
    table.paramIndex[fullName] = table.params.size();
    table.params.push_back({fullName, shape, init});
    recordParameter(module(), table.params.back());
  }
  auto type = mlir::RankedTensorType::get(
      shape, mlir::Float32Type::get(&module().context()));
  return addArgument(*this, impl_->func.getNumArguments(),
                     {fullName, ArgKind::param, shape, DType::f32, true}, type,
                     loc);
}

Var Graph::lookup(std::string_view fullName) const {
  auto it = impl_->arguments.find(llvm::StringRef(fullName));
  return it == impl_->arguments.end() ? Var() : it->second;
}

Scope Graph::scope(std::string name, SourceLoc loc) {
  if (name.empty()) {
    fail(loc, "scope names must not be empty");
  }
  size_t depth = impl_->scopes.size();
  impl_->scopes.push_back(std::move(name));
  return Scope(*this, depth);
}

Scope::~Scope() {
  auto &scopes = Access::impl(graph_).scopes;
  if (scopes.size() > depth_) {
    scopes.resize(depth_);
  }
}

std::string Graph::qualify(std::string_view name) const {
  std::string full;
  for (const std::string &scope : impl_->scopes) {
    full += scope;
    full += '.';
  }
  full += name;
  return full;
}

Var Graph::seed(SourceLoc loc) {
  if (!impl_->seed) {
    // A scalar input the user declared as "seed" is the seed.
    Var declared = lookup("seed");
    impl_->seed =
        declared && !declared.isTensor() ? declared : scalarInput("seed", loc);
    // The trainer passes its dropout seed there (ArgKind::seed).
    auto arg = mlir::cast<mlir::BlockArgument>(impl_->seed.value());
    impl_->func.setArgAttr(
        arg.getArgNumber(), mlir::kiln::kKindAttr,
        mlir::StringAttr::get(&module().context(),
                              mlir::kiln::stringifyArgKind(
                                  mlir::kiln::ArgKind::seed)));
  }
  return impl_->seed;
}

int64_t Graph::nextDropoutStream() { return impl_->nextStream++; }

void Graph::finish(const std::vector<Var> &outputs, SourceLoc loc) {
  finish(outputs, {}, loc);
}

void Graph::finish(const std::vector<Var> &outputs,
                   const std::vector<std::pair<size_t, Var>> &inPlace,
                   SourceLoc loc) {
  detail::checkOpen(*this, loc);
  if (outputs.empty()) {
    fail(loc, "graph '" + name() + "' needs at least one output");
  }
  llvm::SmallVector<mlir::Value> values;
  llvm::SmallVector<mlir::Type> types;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Var &output = outputs[i];
    if (!output.defined()) {
      fail(loc, "output #" + std::to_string(i) + " of graph '" + name() +
                    "' is a null Var");
    }
    if (Access::graphOf(output) != this) {
      fail(loc, "output #" + std::to_string(i) + " belongs to graph '" +
                    Access::graphOf(output)->name() + "', not to graph '" +
                    name() + "'");
    }
    values.push_back(output.value());
    types.push_back(output.value().getType());
  }
  // Outputs that update inputs: checked before anything is added.
  std::vector<bool> taken(outputs.size(), false);
  std::vector<std::pair<size_t, unsigned>> updates;
  for (const auto &[output, input] : inPlace) {
    if (output >= outputs.size()) {
      fail(loc, "graph '" + name() + "' has no output #" +
                    std::to_string(output) + " to write in place");
    }
    auto arg = input.defined()
                   ? mlir::dyn_cast<mlir::BlockArgument>(input.value())
                   : mlir::BlockArgument();
    bool isInput =
        arg && Access::graphOf(input) == this && input.isTensor() &&
        llvm::any_of(impl_->inputs, [&](const Argument &a) {
          return a.isTensor && lookup(a.name).value() == input.value();
        });
    if (!isInput) {
      fail(loc, "output #" + std::to_string(output) + " of graph '" + name() +
                    "' can only replace a tensor input of this graph");
    }
    if (taken[output]) {
      fail(loc, "output #" + std::to_string(output) + " of graph '" + name() +
                    "' replaces two inputs");
    }
    taken[output] = true;
    updates.emplace_back(output, arg.getArgNumber());
  }
  auto oldType = impl_->func.getFunctionType();
  auto ret = mlir::func::ReturnOp::create(impl_->builder,
                                          detail::location(*this, loc), values);
  impl_->func.setFunctionType(
      mlir::FunctionType::get(&module().context(), oldType.getInputs(), types));
  mlir::OpBuilder attrs(&module().context());
  for (const auto &[output, argument] : updates) {
    impl_->func.setResultAttr(output, mlir::kiln::kUpdatesAttr,
                              attrs.getI64IntegerAttr(argument));
  }
  std::string message = verifyMessage(impl_->func, /*withLocation=*/false);
  if (!message.empty()) {
    ret->erase();
    for (const auto &[output, argument] : updates) {
      impl_->func.removeResultAttr(
          output, mlir::StringAttr::get(&module().context(),
                                        mlir::kiln::kUpdatesAttr));
    }
    impl_->func.setFunctionType(oldType);
    fail(loc, message);
  }
  impl_->finished = true;
}

bool Graph::finished() const { return impl_->finished; }

std::vector<Argument> Graph::arguments() const {
  std::vector<Argument> all = impl_->inputs;
  all.insert(all.end(), impl_->params.begin(), impl_->params.end());
  return all;
}

const std::vector<Argument> &Graph::inputs() const { return impl_->inputs; }

const std::vector<Argument> &Graph::params() const { return impl_->params; }

mlir::func::FuncOp Graph::func() const { return impl_->func; }

//===----------------------------------------------------------------------===//
// Module
//===----------------------------------------------------------------------===//

int64_t ParamSpec::numel() const {
  int64_t count = 1;
  for (int64_t size : shape) {
    count *= size;
  }
  return count;
}

Module::Module() : impl_(std::make_unique<Impl>()) {
  // The dialects of the IR the DSL builds: kiln ops in the func.func of a
  // builtin module. A pass run on it (a generator's training step) loads
  // the dialects it declares; the JIT lowers a printed copy in a context
  // with every dialect (compiler/Target/Common/Lowering.cpp).
  mlir::DialectRegistry registry;
  registry.insert<mlir::kiln::KilnDialect, mlir::func::FuncDialect>();
  impl_->context.appendDialectRegistry(registry);
  impl_->context.loadAllAvailableDialects();
  impl_->module =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(&impl_->context));
}

Module::~Module() = default;

Graph &Module::addGraph(std::string name, GraphOptions options, SourceLoc loc) {
  if (name.empty()) {
    fail(loc, "graph names must not be empty");
  }
  if (findGraph(name)) {
    fail(loc, "the module already has a graph named '" + name + "'");
  }
  auto impl = std::make_unique<Graph::Impl>(&impl_->context);
  impl->module = this;
  impl->name = name;
  impl->options = options;
  mlir::OpBuilder b(&impl_->context);
  b.setInsertionPointToEnd(impl_->module->getBody());
  impl->func =
      mlir::func::FuncOp::create(b, detail::location(&impl_->context, loc),
                                 name, b.getFunctionType({}, {}));
  impl->builder.setInsertionPointToEnd(impl->func.addEntryBlock());
  impl_->graphs.push_back(std::unique_ptr<Graph>(new Graph(std::move(impl))));
  return *impl_->graphs.back();
}

Graph *Module::findGraph(std::string_view name) const {
  for (const auto &graph : impl_->graphs) {
    if (graph->name() == name) {
      return graph.get();
    }
  }
  return nullptr;
}

std::vector<Graph *> Module::graphs() const {
  std::vector<Graph *> all;
  for (const auto &graph : impl_->graphs) {
    all.push_back(graph.get());
  }
  return all;
}

const std::vector<ParamSpec> &Module::params() const { return impl_->params; }

const ParamSpec *Module::findParam(std::string_view name) const {
  auto it = impl_->paramIndex.find(llvm::StringRef(name));
  return it == impl_->paramIndex.end() ? nullptr : &impl_->params[it->second];
}

int64_t Module::numParameters() const {
  int64_t count = 0;
  for (const ParamSpec &param : impl_->params) {
    count += param.numel();
  }
  return count;
}

void Module::verify() const {
  std::string message = verifyMessage(*impl_->module, /*withLocation=*/true);
  if (!message.empty()) {
    throw Error(message);
  }
}

std::string Module::str(bool withLocations) const {
  std::string text;
  llvm::raw_string_ostream os(text);
  // Every op was verified when it was created; only an unfinished graph's
  // missing terminator may fail the module verifier, and that must not make
  // the printer fall back to the generic form.
  mlir::OpPrintingFlags flags;
  flags.assumeVerified();
  if (withLocations) {
    flags.enableDebugInfo();
  }
  impl_->module->print(os, flags);
  return text;
}

mlir::MLIRContext &Module::context() const { return impl_->context; }

mlir::ModuleOp Module::op() const { return *impl_->module; }

} // namespace kiln::dsl
