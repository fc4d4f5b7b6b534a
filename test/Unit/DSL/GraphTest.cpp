//===- GraphTest.cpp - Modules, graphs, parameters and modes --------------===//
//
// Function arguments (inputs then parameters, named for the runtime), name
// scopes, the parameter table shared across graphs, finishing, training vs
// evaluation, and printed IR that parses back.
//
//===----------------------------------------------------------------------===//

#include "test/Unit/DSL/TestUtil.h"

#include "compiler/DSL/Models.h"
#include "compiler/InitAll.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

using namespace kiln::dsl;
using namespace kiln::dsl::testing;
using kiln::DType;
using kiln::Init;

namespace {
std::vector<std::string> names(const std::vector<Argument> &arguments) {
  std::vector<std::string> all;
  for (const Argument &argument : arguments) {
    all.push_back(argument.name);
  }
  return all;
}

/// A small pre-LN encoder block with dropout everywhere.
Var dropoutModel(Graph &graph) {
  Var x = graph.input("x", {kDyn, kDyn, 32}, DType::f32);
  nn::BlockConfig config;
  config.dModel = 32;
  config.numHeads = 4;
  config.dFF = 64;
  config.dropout = 0.1;
  nn::EncoderBlock block(graph, "block", config);
  return dropout(block(x), 0.2);
}
} // namespace

TEST(DslGraphTest, ArgumentsAreInputsThenParams) {
  Module module;
  Graph &graph = module.addGraph("forward");
  Var w = graph.param("w", {4, 8}, Init::xavierUniform());
  Var x = graph.input("x", {kDyn, kDyn, 8}, DType::f32);
  Var seed = graph.seed();
  EXPECT_EQ(graph.seed().value(), seed.value()); // Created once.
  Var offset = graph.scalarInput("offset");
  EXPECT_FALSE(offset.isTensor());
  EXPECT_EQ(offset.dtype(), DType::i64);
  graph.finish({linear(x, w)});

  EXPECT_EQ(names(graph.arguments()),
            (std::vector<std::string>{"x", "seed", "offset", "w"}));
  EXPECT_EQ(graph.lookup("w").value(), w.value());
  EXPECT_FALSE(graph.lookup("nope"));
  mlir::func::FuncOp func = graph.func();
  ASSERT_EQ(func.getNumArguments(), 4u);
  EXPECT_EQ(func.getArgument(3), w.value());
  auto attr = [&](unsigned i, const char *name) {
    return mlir::cast<mlir::StringAttr>(func.getArgAttr(i, name)).str();
  };
  EXPECT_EQ(attr(0, "kiln.name"), "x");
  EXPECT_EQ(attr(0, "kiln.kind"), "input");
  EXPECT_EQ(attr(3, "kiln.name"), "w");
  EXPECT_EQ(attr(3, "kiln.kind"), "param");
  EXPECT_EQ(func.getFunctionType().getNumResults(), 1u);
  std::string ir = module.str();
  EXPECT_TRUE(contains(ir, "func.func @forward(")) << ir;
  EXPECT_TRUE(contains(ir, "tensor<?x?x8xf32> {kiln.kind = \"input\", "
                           "kiln.name = \"x\"}"))
      << ir;
  // The seed a trainer passes (its role, whatever its name).
  EXPECT_TRUE(contains(ir, "i64 {kiln.kind = \"seed\", kiln.name = \"seed\"}"))
      << ir;
  EXPECT_TRUE(contains(ir, "tensor<4x8xf32> {kiln.kind = \"param\", "
                           "kiln.name = \"w\"}"))
      << ir;

  ASSERT_EQ(module.params().size(), 1u);
  EXPECT_EQ(module.params()[0].name, "w");
  EXPECT_EQ(module.params()[0].shape, (Shape{4, 8}));
  EXPECT_EQ(module.params()[0].init.kind, Init::Kind::xavierUniform);
  EXPECT_EQ(module.numParameters(), 32);
}

TEST(DslGraphTest, ScopesPrefixParameterNames) {
  Module module;
  Graph &graph = module.addGraph("forward");
  {
    auto encoder = graph.scope("encoder");
    for (int i = 0; i < 2; ++i) {
      auto layer = graph.scope("layers." + std::to_string(i));
      auto attn = graph.scope("attn");
      graph.param("wq", {8, 8}, Init::zeros());
      EXPECT_EQ(graph.qualify("wk"),
                "encoder.layers." + std::to_string(i) + ".attn.wk");
    }
    graph.param("norm.weight", {8}, Init::ones());
  }
  graph.param("head", {8}, Init::zeros());
  EXPECT_EQ(names(graph.params()),
            (std::vector<std::string>{"encoder.layers.0.attn.wq",
                                      "encoder.layers.1.attn.wq",
                                      "encoder.norm.weight", "head"}));
  EXPECT_NE(module.findParam("encoder.layers.1.attn.wq"), nullptr);
}

TEST(DslGraphTest, DuplicateParameterName) {
  Module module;
  Graph &graph = module.addGraph("forward");
  auto scope = graph.scope("attn");
  graph.param("wq", {8, 8}, Init::zeros());
  int line = 0;
  std::string message = errorOf([&] {
    line = __LINE__ + 1;
    graph.param("wq", {8, 8}, Init::zeros());
  });
  EXPECT_TRUE(message.starts_with(at(line))) << message;
  EXPECT_TRUE(contains(message, "error: parameter 'attn.wq' is already "
                                "declared in graph 'forward'"))
      << message;
}

TEST(DslGraphTest, ParametersAreSharedAcrossGraphs) {
  Module module;
  Graph &forward = module.addGraph("forward");
  Graph &loss = module.addGraph("loss");
  forward.param("w", {8, 4}, Init::normal(0, 0.02));
  loss.param("w", {8, 4}, Init::normal(0, 0.02));
  EXPECT_EQ(module.params().size(), 1u);
  EXPECT_EQ(module.numParameters(), 32);
  int line = 0;
  std::string message = errorOf([&] {
    line = __LINE__ + 1;
    Graph &eval = module.addGraph("eval");
    eval.param("w", {4, 8}, Init::normal(0, 0.02));
  });
  EXPECT_TRUE(message.starts_with(at(line + 1))) << message;
  EXPECT_TRUE(contains(message, "error: parameter 'w' is declared with shape "
                                "[4, 8] but has shape [8, 4] in another graph "
                                "of this module"))
      << message;
}

TEST(DslGraphTest, GraphNamesAreUnique) {
  Module module;
  module.addGraph("forward");
  int line = 0;
  std::string message = errorOf([&] {
    line = __LINE__ + 1;
    module.addGraph("forward");
  });
  EXPECT_TRUE(message.starts_with(at(line))) << message;
  EXPECT_TRUE(contains(message, "already has a graph named 'forward'"));
  EXPECT_EQ(module.findGraph("forward"), module.graphs()[0]);
}

TEST(DslGraphTest, FinishOnce) {
  Module module;
  Graph &graph = module.addGraph("forward");
  Var x = graph.input("x", {kDyn, 8}, DType::f32);
  Var y = relu(x);
  graph.finish({y});
  EXPECT_TRUE(graph.finished());

  int line = 0;
  std::string message = errorOf([&] {
    line = __LINE__ + 1;
    graph.finish({y});
  });
  EXPECT_TRUE(message.starts_with(at(line))) << message;
  EXPECT_TRUE(contains(message, "error: graph 'forward' is already finished"))
      << message;

  message = errorOf([&] {
    line = __LINE__ + 1;
    relu(y);
  });
  EXPECT_TRUE(message.starts_with(at(line))) << message;
  EXPECT_TRUE(contains(message, "graph 'forward' is already finished"));
  EXPECT_THROW(graph.param("w", {1}, Init::zeros()), kiln::Error);
  module.verify();
}

TEST(DslGraphTest, OutputsMustBelongToTheGraph) {
  Module module;
  Graph &a = module.addGraph("a");
  Graph &b = module.addGraph("b");
  Var x = a.input("x", {2}, DType::f32);
  int line = 0;
  std::string message = errorOf([&] {
    line = __LINE__ + 1;
    b.finish({x});
  });
  EXPECT_TRUE(message.starts_with(at(line))) << message;
  EXPECT_TRUE(contains(message, "output #0 belongs to graph 'a', not to "
                                "graph 'b'"));
  EXPECT_THROW(b.finish({}), kiln::Error);
  EXPECT_THROW(b.finish({Var()}), kiln::Error);
  EXPECT_FALSE(b.finished());
}

TEST(DslGraphTest, TrainingEmitsDropoutWithSeedAndStreams) {
  Module module;
  Graph &graph = module.addGraph("train", {.training = true});
  graph.finish({dropoutModel(graph)});
  module.verify();
  std::string ir = module.str();
  // Residual dropouts (2) and the final one are kiln.dropout; the attention
  // and feed-forward ones are attributes of kiln.mha / kiln.ffn.
  EXPECT_EQ(count(ir, "kiln.dropout"), 3) << ir;
  for (int stream = 1; stream <= 5; ++stream) {
    EXPECT_EQ(count(ir, "stream = " + std::to_string(stream) + " : i64"), 1)
        << "stream " << stream << "\n"
        << ir;
  }
  EXPECT_EQ(count(ir, "dropout = 1.000000e-01"), 2) << ir;
  ASSERT_TRUE(graph.lookup("seed"));
  EXPECT_EQ(graph.inputs().size(), 2u);
  EXPECT_EQ(graph.inputs()[1].name, "seed");
  EXPECT_FALSE(graph.inputs()[1].isTensor);
}

TEST(DslGraphTest, EvaluationEmitsNoDropout) {
  Module module;
  Graph &graph = module.addGraph("eval");
  EXPECT_FALSE(graph.training());
  graph.finish({dropoutModel(graph)});
  module.verify();
  std::string ir = module.str();
  EXPECT_EQ(count(ir, "dropout"), 0) << ir;
  EXPECT_EQ(count(ir, "seed"), 0) << ir;
  EXPECT_FALSE(graph.lookup("seed"));
}

TEST(DslGraphTest, PrintedIRParsesBack) {
  Module module;
  models::GptConfig config = models::gptTiny();
  config.numLayers = 1;
  config.dropout = 0.1;
  models::addGptForward(module, config);
  models::addGptLoss(module, config, {.training = true});
  for (bool withLocations : {false, true}) {
    std::string ir = module.str(withLocations);
    mlir::DialectRegistry registry;
    kiln::registerAllDialects(registry);
    mlir::MLIRContext context(registry);
    std::string diagnostics;
    mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
      diagnostics += d.str() + "\n";
      return mlir::success();
    });
    mlir::OwningOpRef<mlir::ModuleOp> parsed =
        mlir::parseSourceString<mlir::ModuleOp>(ir, &context);
    ASSERT_TRUE(parsed) << diagnostics << ir;
    EXPECT_TRUE(succeeded(mlir::verify(*parsed))) << diagnostics;
    auto funcs = parsed->getOps<mlir::func::FuncOp>();
    EXPECT_EQ(std::distance(funcs.begin(), funcs.end()), 2);
    if (withLocations) {
      EXPECT_TRUE(contains(ir, "GraphTest.cpp")) << ir;
    }
  }
}
