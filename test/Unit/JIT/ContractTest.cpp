//===- ContractTest.cpp - Every indexed dimension is checked before a call ===//
//
// Compiled code indexes operands by sizes it takes from other operands; a
// call whose dynamic sizes disagree must be refused before the code runs
// (it had read past the end of buffers: a decoder's key cache longer than
// its value cache, the gradient ops of a training step). Each test compiles
// one op with dynamic sizes, calls it with sizes that agree (it runs) and
// with each disagreement (a kiln::Error naming the dimension).
//
//===----------------------------------------------------------------------===//

#include "Reference.h"

#include "compiler/Target/JIT/Jit.h"
#include "dialects/Kiln/IR/KilnOps.h"
#include "runtime/Error.h"
#include "test/Unit/Runtime/ExpectError.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <string>

using namespace kiln;

namespace {

Tensor f32(std::vector<int64_t> shape) {
  return ref::randomTensor(std::move(shape), 7);
}

} // namespace

// A decoding step: key and value are each the cache plus the new position.
// A key cache longer than the value cache had passed every check (100000
// against 1 crashed; 4 against 3 read one row past the values).
TEST(Contract, DecoderCachesMustAgree) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%q: tensor<1x1x8xf32>, %pk: tensor<1x?x8xf32>,
                 %pv: tensor<1x?x8xf32>, %n: tensor<1x1x8xf32>) -> tensor<1x1x8xf32> {
      %k = kiln.concat %pk, %n {axis = 1 : i64} : (tensor<1x?x8xf32>, tensor<1x1x8xf32>) -> tensor<1x?x8xf32>
      %v = kiln.concat %pv, %n {axis = 1 : i64} : (tensor<1x?x8xf32>, tensor<1x1x8xf32>) -> tensor<1x?x8xf32>
      %0 = kiln.attention %q, %k, %v {num_heads = 2 : i64}
          : (tensor<1x1x8xf32>, tensor<1x?x8xf32>, tensor<1x?x8xf32>) -> tensor<1x1x8xf32>
      return %0 : tensor<1x1x8xf32>
    })");
  Tensor q = f32({1, 1, 8}), n = f32({1, 1, 8});
  jit->call("f", {q, f32({1, 4, 8}), f32({1, 4, 8}), n});
  EXPECT_KILN_ERROR(jit->call("f", {q, f32({1, 4, 8}), f32({1, 3, 8}), n}),
                    "the sizes given to 'f' do not fit: dimension 1 of "
                    "argument #1 'arg1' of 'f' (4) must equal dimension 1 of "
                    "argument #2 'arg2' of 'f' (3)");
  EXPECT_KILN_ERROR(jit->call("f", {q, f32({1, 100000, 8}), f32({1, 1, 8}), n}),
                    "must equal");
}

TEST(Contract, AttentionOperandsMustAgree) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%q: tensor<?x?x8xf32>, %k: tensor<?x?x8xf32>, %v: tensor<?x?x8xf32>,
                 %m: tensor<?x?xi1>) -> tensor<?x?x8xf32> {
      %0 = kiln.attention %q, %k, %v mask %m {num_heads = 2 : i64}
          : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi1>) -> tensor<?x?x8xf32>
      return %0 : tensor<?x?x8xf32>
    })");
  Tensor mask = Tensor::zeros({2, 5}, DType::i1);
  jit->call("f", {f32({2, 3, 8}), f32({2, 5, 8}), f32({2, 5, 8}), mask});
  EXPECT_KILN_ERROR(
      jit->call("f", {f32({2, 3, 8}), f32({2, 5, 8}), f32({2, 4, 8}), mask}),
      "dimension 1 of argument #2");
  EXPECT_KILN_ERROR(
      jit->call("f", {f32({2, 3, 8}), f32({3, 5, 8}), f32({3, 5, 8}), mask}),
      "dimension 0 of argument #1");
  EXPECT_KILN_ERROR(
      jit->call("f", {f32({2, 3, 8}), f32({2, 5, 8}), f32({2, 5, 8}),
                      Tensor::zeros({2, 6}, DType::i1)}),
      "dimension 1 of argument #3");
}

TEST(Contract, AttentionGradientOperandsMustAgree) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%g: tensor<?x?x8xf32>, %q: tensor<?x?x8xf32>, %k: tensor<?x?x8xf32>,
                 %v: tensor<?x?x8xf32>, %o: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
      %0:3 = kiln.attention_grad %g, %q, %k, %v output %o {num_heads = 2 : i64}
          : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
          -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
      return %0#1 : tensor<?x?x8xf32>
    })");
  Tensor q = f32({2, 3, 8}), k = f32({2, 5, 8});
  jit->call("f", {q, q, k, k, q});
  EXPECT_KILN_ERROR(
      jit->call("f", {f32({2, 4, 8}), q, k, k, q}),
      "of argument #1 'arg1' of 'f' is 3 but must equal dimension "
      "of argument #0");
  EXPECT_KILN_ERROR(jit->call("f", {q, q, k, f32({2, 6, 8}), q}),
                    "dimension 1 of argument #3");
  EXPECT_KILN_ERROR(jit->call("f", {q, q, k, k, f32({2, 2, 8})}),
                    "dimension 1 of argument #4");
}

TEST(Contract, EmbeddingGradientIdsMustMatchAndBeInRange) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%g: tensor<?x4xf32>, %ids: tensor<?xi64>) -> tensor<6x4xf32> {
      %0 = kiln.embedding_grad %g, %ids {num_embeddings = 6 : i64}
          : (tensor<?x4xf32>, tensor<?xi64>) -> tensor<6x4xf32>
      return %0 : tensor<6x4xf32>
    })");
  Tensor ids = Tensor::fromVector<int64_t>({3}, {0, 5, 2});
  jit->call("f", {f32({3, 4}), ids});
  EXPECT_KILN_ERROR(jit->call("f", {f32({2, 4}), ids}),
                    "dimension 0 of argument #1");
  EXPECT_KILN_ERROR(jit->call("f", {f32({3, 4}), Tensor::fromVector<int64_t>(
                                                     {3}, {0, 6, 2})}),
                    "holds 6 at flat index 1, outside [0, 6)");
}

TEST(Contract, LossGradientTargetsMustMatchAndBeInRange) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%x: tensor<?x5xf32>, %t: tensor<?xi64>, %dl: tensor<f32>) -> tensor<?x5xf32> {
      %0 = kiln.loss_grad %x, %t, %dl {from_logits, ignore_index = -1 : i64}
          : (tensor<?x5xf32>, tensor<?xi64>, tensor<f32>) -> tensor<?x5xf32>
      return %0 : tensor<?x5xf32>
    })");
  Tensor t = Tensor::fromVector<int64_t>({3}, {4, -1, 0});
  Tensor dl = Tensor::full({}, 1.0f);
  jit->call("f", {f32({3, 5}), t, dl});
  EXPECT_KILN_ERROR(jit->call("f", {f32({4, 5}), t, dl}),
                    "dimension 0 of argument #1");
  EXPECT_KILN_ERROR(
      jit->call("f",
                {f32({3, 5}), Tensor::fromVector<int64_t>({3}, {5, 0, 0}), dl}),
      "holds 5 at flat index 0, outside [0, 5)");
}

TEST(Contract, ActivationAndNormGradientOperandsMustAgree) {
  auto jit = JitModule::compileSource(R"(
    func.func @act(%g: tensor<?x4xf32>, %x: tensor<?x4xf32>) -> tensor<?x4xf32> {
      %0 = kiln.activation_grad gelu %g, %x : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
      return %0 : tensor<?x4xf32>
    }
    func.func @norm(%g: tensor<?x?xf32>, %x: tensor<?x?xf32>, %gamma: tensor<?xf32>) -> tensor<?x?xf32> {
      %0:3 = kiln.layernorm_grad %g, %x, %gamma
          : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>)
      return %0#0 : tensor<?x?xf32>
    })");
  jit->call("act", {f32({3, 4}), f32({3, 4})});
  EXPECT_KILN_ERROR(jit->call("act", {f32({3, 4}), f32({2, 4})}),
                    "dimension 0 of argument #1");
  jit->call("norm", {f32({3, 4}), f32({3, 4}), f32({4})});
  EXPECT_KILN_ERROR(jit->call("norm", {f32({3, 4}), f32({3, 5}), f32({4})}),
                    "dimension 1 of argument #1");
  EXPECT_KILN_ERROR(jit->call("norm", {f32({3, 4}), f32({3, 4}), f32({5})}),
                    "dimension 0 of argument #2");
}

// The gradient of a maximum kept over an axis has size 1 there: a larger
// one had passed, and an empty one had its element 0 read (kiln-fuzz-ir,
// the JIT's sanitizer checks).
TEST(Contract, KeptReducedAxesHaveSizeOne) {
  auto jit = JitModule::compileSource(R"(
    func.func @max_grad(%g: tensor<?x?xf32>, %x: tensor<1x8xf32>) -> tensor<1x8xf32> {
      %0 = kiln.reduce_max_grad %g, %x {axes = array<i64: 1>, keep_dims} : (tensor<?x?xf32>, tensor<1x8xf32>) -> tensor<1x8xf32>
      return %0 : tensor<1x8xf32>
    })");
  jit->call("max_grad", {f32({1, 1}), f32({1, 8})});
  EXPECT_KILN_ERROR(jit->call("max_grad", {f32({0, 0}), f32({1, 8})}),
                    "of argument #0");
  EXPECT_KILN_ERROR(jit->call("max_grad", {f32({1, 0}), f32({1, 8})}),
                    "dimension 1 of argument #0");
  EXPECT_KILN_ERROR(jit->call("max_grad", {f32({1, 3}), f32({1, 8})}),
                    "dimension 1 of argument #0");
}

TEST(Contract, LayerWeightsMustMatchTheirInputs) {
  auto jit = JitModule::compileSource(R"(
    func.func @ln(%x: tensor<?x?xf32>, %g: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?x?xf32> {
      %0 = kiln.layernorm %x, %g, %b : (tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
      return %0 : tensor<?x?xf32>
    }
    func.func @linear(%x: tensor<?x4xf32>, %w: tensor<?x4xf32>, %b: tensor<?xf32>) -> tensor<?x?xf32> {
      %0 = kiln.linear %x, %w, %b : (tensor<?x4xf32>, tensor<?x4xf32>, tensor<?xf32>) -> tensor<?x?xf32>
      return %0 : tensor<?x?xf32>
    })");
  jit->call("ln", {f32({2, 4}), f32({4}), f32({4})});
  EXPECT_KILN_ERROR(jit->call("ln", {f32({2, 4}), f32({4}), f32({3})}),
                    "dimension 0 of argument #2");
  jit->call("linear", {f32({2, 4}), f32({3, 4}), f32({3})});
  EXPECT_KILN_ERROR(jit->call("linear", {f32({2, 4}), f32({3, 4}), f32({5})}),
                    "dimension 0 of argument #2");
}

// Compiled code cannot report an error: an allocation that fails ends the
// process with the reason (it had written through a null pointer). A 4 TB
// constant (a fill: it costs the compiler nothing) cannot be allocated.
TEST(ContractDeathTest, AnAllocationThatFailsEndsTheProcessWithTheReason) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto jit = JitModule::compileSource(R"(
    func.func @f() -> tensor<1099511627776xf32> {
      %0 = kiln.constant dense<1.0> : tensor<1099511627776xf32>
      return %0 : tensor<1099511627776xf32>
    })");
  EXPECT_DEATH(jit->call("f", {}),
               "kiln: out of memory: compiled code could not allocate "
               "4398046511104 bytes");
}

// A slice of static length from a dynamic dimension reads that many
// elements: the dimension must be at least as long (it had read past the
// end). From the front ([1:4]) and from the back ([-3:]).
TEST(Contract, StaticSlicesOfDynamicDimensionsNeedTheirLength) {
  auto jit = JitModule::compileSource(R"(
    func.func @front(%x: tensor<2x?xf32>) -> tensor<2x3xf32> {
      %0 = kiln.slice %x {axis = 1 : i64, start = 1 : i64, end = 4 : i64}
          : (tensor<2x?xf32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    }
    func.func @back(%x: tensor<?x2xf32>) -> tensor<3x2xf32> {
      %0 = kiln.slice %x {axis = 0 : i64, start = -3 : i64}
          : (tensor<?x2xf32>) -> tensor<3x2xf32>
      return %0 : tensor<3x2xf32>
    })");
  jit->call("front", {f32({2, 4})});
  EXPECT_KILN_ERROR(
      jit->call("front", {f32({2, 3})}),
      "dimension 1 of argument #0 'arg0' of 'front' is 3 but must "
      "be at least 4");
  jit->call("back", {f32({3, 2})});
  EXPECT_KILN_ERROR(jit->call("back", {f32({2, 2})}), "must be at least 3");
}

// Every kiln op states its shape contract: Kiln_Op adds the interface, so
// an op without addShapeContract does not link; this names any that would
// slip through another way.
TEST(Contract, EveryKilnOpStatesItsShapeContract) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::kiln::KilnDialect>();
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  int ops = 0;
  for (mlir::RegisteredOperationName name : context.getRegisteredOperations()) {
    if (name.getDialectNamespace() == "kiln") {
      ++ops;
      EXPECT_TRUE(name.hasInterface<mlir::kiln::ShapeContractOpInterface>())
          << name.getStringRef().str();
    }
  }
  EXPECT_GE(ops, 39);
}

// Key and value each the concatenation of two dynamic arguments: only
// their lengths must agree, whatever the parts (two unknown pairs had
// passed every check and attention read past the values).
TEST(Contract, ConcatenationsOfDynamicPartsMustAgreeInLength) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%q: tensor<1x1x8xf32>, %pk: tensor<1x?x8xf32>, %nk: tensor<1x?x8xf32>,
                 %pv: tensor<1x?x8xf32>, %nv: tensor<1x?x8xf32>) -> tensor<1x1x8xf32> {
      %k = kiln.concat %pk, %nk {axis = 1 : i64} : (tensor<1x?x8xf32>, tensor<1x?x8xf32>) -> tensor<1x?x8xf32>
      %v = kiln.concat %pv, %nv {axis = 1 : i64} : (tensor<1x?x8xf32>, tensor<1x?x8xf32>) -> tensor<1x?x8xf32>
      %0 = kiln.attention %q, %k, %v {num_heads = 2 : i64}
          : (tensor<1x1x8xf32>, tensor<1x?x8xf32>, tensor<1x?x8xf32>) -> tensor<1x1x8xf32>
      return %0 : tensor<1x1x8xf32>
    })");
  Tensor q = f32({1, 1, 8});
  jit->call("f", {q, f32({1, 3, 8}), f32({1, 2, 8}), f32({1, 3, 8}),
                  f32({1, 2, 8})});
  jit->call("f", {q, f32({1, 4, 8}), f32({1, 1, 8}), f32({1, 2, 8}),
                  f32({1, 3, 8})});
  EXPECT_KILN_ERROR(jit->call("f", {q, f32({1, 3, 8}), f32({1, 2, 8}),
                                    f32({1, 3, 8}), f32({1, 1, 8})}),
                    "dimension 1 of argument #1 'arg1' of 'f' + dimension 1 "
                    "of argument #2 'arg2' of 'f' (5) must equal dimension 1 "
                    "of argument #3 'arg3' of 'f' + dimension 1 of argument "
                    "#4 'arg4' of 'f' (4)");
  EXPECT_KILN_ERROR(jit->call("f", {q, f32({1, 100000, 8}), f32({1, 1, 8}),
                                    f32({1, 1, 8}), f32({1, 1, 8})}),
                    "(100001) must equal");
}

// Slices of dynamic dimensions: `slice(v, 1:)` as attention's value and
// `add(x, slice(y, 1:))` had been accepted with any sizes and read out of
// bounds. The length n - 1 must equal what its users need, and the slice
// must lie within the dimension (it may be empty).
TEST(Contract, SlicesOfDynamicDimensionsHaveTheLengthTheirUsersNeed) {
  auto jit = JitModule::compileSource(R"(
    func.func @attend(%q: tensor<1x2x8xf32>, %k: tensor<1x?x8xf32>, %v: tensor<1x?x8xf32>) -> tensor<1x2x8xf32> {
      %s = kiln.slice %v {axis = 1 : i64, start = 1 : i64} : (tensor<1x?x8xf32>) -> tensor<1x?x8xf32>
      %0 = kiln.attention %q, %k, %s {num_heads = 2 : i64}
          : (tensor<1x2x8xf32>, tensor<1x?x8xf32>, tensor<1x?x8xf32>) -> tensor<1x2x8xf32>
      return %0 : tensor<1x2x8xf32>
    }
    func.func @add(%x: tensor<?x3xf32>, %y: tensor<?x3xf32>) -> tensor<?x3xf32> {
      %s = kiln.slice %y {axis = 0 : i64, start = 1 : i64} : (tensor<?x3xf32>) -> tensor<?x3xf32>
      %0 = kiln.add %x, %s : (tensor<?x3xf32>, tensor<?x3xf32>) -> tensor<?x3xf32>
      return %0 : tensor<?x3xf32>
    }
    func.func @middle(%x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
      %s = kiln.slice %y {axis = 0 : i64, start = -4 : i64, end = 3 : i64} : (tensor<?xf32>) -> tensor<?xf32>
      %0 = kiln.mul %x, %s : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
      return %0 : tensor<?xf32>
    })");
  Tensor q = f32({1, 2, 8});
  jit->call("attend", {q, f32({1, 4, 8}), f32({1, 5, 8})});
  EXPECT_KILN_ERROR(jit->call("attend", {q, f32({1, 4, 8}), f32({1, 4, 8})}),
                    "dimension 1 of argument #1 'arg1' of 'attend' + 1 (5) "
                    "must equal dimension 1 of argument #2 'arg2' of 'attend' "
                    "(4)");
  Tensor y = ref::randomTensor({4, 3}, 3);
  std::vector<Tensor> sum = jit->call("add", {f32({3, 3}), y});
  ASSERT_EQ(sum[0].shape(), (std::vector<int64_t>{3, 3}));
  EXPECT_KILN_ERROR(jit->call("add", {f32({4, 3}), y}), "must equal");
  // y[1:] of 1 row is empty, as x may be; of 0 rows it is out of range.
  EXPECT_EQ(jit->call("add", {f32({0, 3}), f32({1, 3})})[0].numel(), 0);
  EXPECT_KILN_ERROR(jit->call("add", {f32({0, 3}), f32({0, 3})}),
                    "dimension 0 of argument #0 'arg0' of 'add' + 1 (1) must "
                    "equal dimension 0 of argument #1 'arg1' of 'add' (0)");
  // [-4:3] of n elements: [n - 4, 3), 7 - n of them, for 4 <= n <= 7.
  jit->call("middle", {f32({2}), f32({5})});
  EXPECT_KILN_ERROR(jit->call("middle", {f32({1}), f32({7})}),
                    "dimension 0 of argument #0 'arg0' of 'middle' + "
                    "dimension 0 of argument #1 'arg1' of 'middle' (8) must "
                    "equal 7");
  EXPECT_EQ(jit->call("middle", {f32({0}), f32({7})})[0].numel(), 0);
  EXPECT_KILN_ERROR(jit->call("middle", {f32({0}), f32({8})}),
                    "(8) must equal 7");
  EXPECT_KILN_ERROR(jit->call("middle", {f32({4}), f32({3})}), "must be at "
                                                               "least 4");
}

// A table, a learned position table or a class count of dynamic size 0:
// compiled code clamps an index into [0, rows - 1], which was -1 (it read
// the row before the table). Refused at the call.
TEST(Contract, EmptyTablesAreRefused) {
  auto jit = JitModule::compileSource(R"(
    func.func @embed(%ids: tensor<2xi64>, %table: tensor<?x4xf32>) -> tensor<2x4xf32> {
      %0 = kiln.embedding %ids, %table : (tensor<2xi64>, tensor<?x4xf32>) -> tensor<2x4xf32>
      return %0 : tensor<2x4xf32>
    }
    func.func @loss(%x: tensor<3x?xf32>, %t: tensor<3xi64>) -> tensor<f32> {
      %0 = kiln.cross_entropy %x, %t : (tensor<3x?xf32>, tensor<3xi64>) -> tensor<f32>
      return %0 : tensor<f32>
    })");
  Tensor ids = Tensor::fromVector<int64_t>({2}, {0, 0});
  jit->call("embed", {ids, f32({1, 4})});
  EXPECT_KILN_ERROR(jit->call("embed", {ids, f32({0, 4})}),
                    "dimension 0 of argument #1 'arg1' of 'embed' is 0 but "
                    "must be at least 1");
  Tensor targets = Tensor::fromVector<int64_t>({3}, {0, 0, 0});
  jit->call("loss", {f32({3, 1}), targets});
  EXPECT_KILN_ERROR(jit->call("loss", {f32({3, 0}), targets}),
                    "dimension 1 of argument #0 'arg0' of 'loss' is 0 but "
                    "must be at least 1");
}

// A result written into an argument in place (kiln.updates) must have the
// argument's sizes: a longer one had written past the caller's buffer. A
// size that can be checked is checked before anything is written; one that
// can never agree is refused at compile time.
TEST(Contract, ResultsWrittenInPlaceHaveTheirArgumentsSizes) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%p: tensor<?xf32>, %q: tensor<?xf32>) -> (tensor<?xf32> {kiln.updates = 0 : i64}) {
      %0 = kiln.concat %p, %q {axis = 0 : i64} : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
      %1 = kiln.slice %0 {axis = 0 : i64, start = 1 : i64} : (tensor<?xf32>) -> tensor<?xf32>
      return %1 : tensor<?xf32>
    })");
  Tensor p = Tensor::fromVector<float>({3}, {1, 2, 3});
  std::vector<Tensor> out = jit->call("f", {p, Tensor::fromVector<float>({1}, {4})});
  EXPECT_EQ(p.toVector<float>(), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(out[0].raw(), p.raw());
  EXPECT_KILN_ERROR(jit->call("f", {p, f32({5})}),
                    "dimension 0 of argument #1 'arg1' of 'f' (5) must equal "
                    "1");
  EXPECT_EQ(p.toVector<float>(), (std::vector<float>{2, 3, 4}));
  EXPECT_KILN_ERROR(JitModule::compileSource(R"(
    func.func @f(%p: tensor<?xf32>) -> (tensor<?xf32> {kiln.updates = 0 : i64}) {
      %0 = kiln.slice %p {axis = 0 : i64, start = 1 : i64} : (tensor<?xf32>) -> tensor<?xf32>
      return %0 : tensor<?xf32>
    })"),
                    "has a size that differs from the one its users need by "
                    "-1 whatever the arguments");
}

// A reshape's inferred size (the input's elements over the other sizes)
// cannot be evaluated by the call: two of them that divide the same sizes
// are equal, and one related to any other size is refused.
TEST(Contract, InferredReshapeSizesAreRelatedOnlyToLikeOnes) {
  // A weight gradient's flattened operands: both B * T.
  auto jit = JitModule::compileSource(R"(
    func.func @f(%a: tensor<?x?x4xf32>, %w: tensor<6x4xf32>) -> tensor<4x6xf32> {
      %b = kiln.linear %a, %w : (tensor<?x?x4xf32>, tensor<6x4xf32>) -> tensor<?x?x6xf32>
      %0 = kiln.reshape %a [-1, 4] : (tensor<?x?x4xf32>) -> tensor<?x4xf32>
      %1 = kiln.reshape %b [-1, 6] : (tensor<?x?x6xf32>) -> tensor<?x6xf32>
      %2 = kiln.matmul %0, %1 {transpose_lhs} : (tensor<?x4xf32>, tensor<?x6xf32>) -> tensor<4x6xf32>
      return %2 : tensor<4x6xf32>
    })");
  EXPECT_EQ(jit->call("f", {f32({2, 3, 4}), f32({6, 4})})[0].shape(),
            (std::vector<int64_t>{4, 6}));
  // Sizes of unrelated arguments: nothing makes 2 * 3 equal 3 * 3.
  EXPECT_KILN_ERROR(JitModule::compileSource(R"(
    func.func @f(%a: tensor<?x?x4xf32>, %b: tensor<?x?x6xf32>) -> tensor<4x6xf32> {
      %0 = kiln.reshape %a [-1, 4] : (tensor<?x?x4xf32>) -> tensor<?x4xf32>
      %1 = kiln.reshape %b [-1, 6] : (tensor<?x?x6xf32>) -> tensor<?x6xf32>
      %2 = kiln.matmul %0, %1 {transpose_lhs} : (tensor<?x4xf32>, tensor<?x6xf32>) -> tensor<4x6xf32>
      return %2 : tensor<4x6xf32>
    })"),
                    "infers a size that differs from the one 'kiln.reshape'");
  EXPECT_KILN_ERROR(JitModule::compileSource(R"(
    func.func @f(%a: tensor<?x?x4xf32>, %b: tensor<?x4xf32>) -> tensor<?x4xf32> {
      %0 = kiln.reshape %a [-1, 4] : (tensor<?x?x4xf32>) -> tensor<?x4xf32>
      %1 = kiln.add %0, %b : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
      return %1 : tensor<?x4xf32>
    })"),
                    "infers a size that another operand or result must equal");
}

// A reshape of dynamic sizes to sizes the code knows (static, or kept from
// other arguments) reads as many elements as the result has: the input must
// hold that many (3 elements reshaped to [2, 4] had read past them).
TEST(Contract, ReshapesKeepTheirElementCount) {
  auto jit = JitModule::compileSource(R"(
    func.func @fixed(%x: tensor<?xf32>) -> tensor<2x4xf32> {
      %0 = kiln.reshape %x [2, 4] : (tensor<?xf32>) -> tensor<2x4xf32>
      return %0 : tensor<2x4xf32>
    }
    func.func @rows(%x: tensor<?x?xf32>, %y: tensor<?x6xf32>) -> tensor<?x6xf32> {
      %0 = kiln.reshape %x [0, 6] : (tensor<?x?xf32>) -> tensor<?x6xf32>
      %1 = kiln.add %0, %y : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
      return %1 : tensor<?x6xf32>
    })");
  Tensor x = ref::randomTensor({8}, 4);
  EXPECT_EQ(jit->call("fixed", {x})[0].toVector<float>(), x.toVector<float>());
  EXPECT_KILN_ERROR(jit->call("fixed", {f32({3})}),
                    "the sizes given to 'fixed' do not fit: dimension 0 of "
                    "argument #0 'arg0' of 'fixed' (3) elements must equal 8 "
                    "(8): a reshape keeps its element count");
  jit->call("rows", {f32({2, 6}), f32({2, 6})});
  EXPECT_KILN_ERROR(jit->call("rows", {f32({2, 5}), f32({2, 6})}),
                    "dimension 1 of argument #0 'arg0' of 'rows' (5) elements "
                    "must equal 6 (6)");
}

// Learned positions over a length that is no argument's size (a
// concatenation's) were not checked: compiled code clamped the rows it read
// and repeated the last one. They are checked before the call (dynamic),
// proved or refused by the verifier (static), and refused with an offset
// argument, which the call checks only against an argument's size.
TEST(Contract, LearnedPositionsOverAComputedLengthFitTheTable) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%a: tensor<1x?x8xf32>, %b: tensor<1x?x8xf32>, %wpe: tensor<6x8xf32>) -> tensor<1x?x8xf32> {
      %x = kiln.concat %a, %b {axis = 1 : i64} : (tensor<1x?x8xf32>, tensor<1x?x8xf32>) -> tensor<1x?x8xf32>
      %0 = kiln.pe learned %x table %wpe : (tensor<1x?x8xf32>, tensor<6x8xf32>) -> tensor<1x?x8xf32>
      return %0 : tensor<1x?x8xf32>
    }
    func.func @fits(%a: tensor<1x4x8xf32>, %b: tensor<1x2x8xf32>, %wpe: tensor<6x8xf32>) -> tensor<1x6x8xf32> {
      %x = kiln.concat %a, %b {axis = 1 : i64} : (tensor<1x4x8xf32>, tensor<1x2x8xf32>) -> tensor<1x6x8xf32>
      %0 = kiln.pe learned %x table %wpe : (tensor<1x6x8xf32>, tensor<6x8xf32>) -> tensor<1x6x8xf32>
      return %0 : tensor<1x6x8xf32>
    })");
  Tensor wpe = f32({6, 8});
  std::vector<Tensor> out = jit->call("f", {f32({1, 4, 8}), f32({1, 2, 8}), wpe});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 6, 8}));
  EXPECT_EQ(jit->call("f", {f32({1, 0, 8}), f32({1, 0, 8}), wpe})[0].numel(), 0);
  EXPECT_KILN_ERROR(jit->call("f", {f32({1, 4, 8}), f32({1, 3, 8}), wpe}),
                    "the sizes given to 'f' do not fit");
  EXPECT_KILN_ERROR(jit->call("f", {f32({1, 1, 8}), f32({1, 100000, 8}), wpe}),
                    "the sizes given to 'f' do not fit");
  jit->call("fits", {f32({1, 4, 8}), f32({1, 2, 8}), wpe});

  EXPECT_KILN_ERROR(JitModule::compileSource(R"(
    func.func @g(%a: tensor<1x4x8xf32>, %b: tensor<1x3x8xf32>, %wpe: tensor<6x8xf32>) -> tensor<1x7x8xf32> {
      %x = kiln.concat %a, %b {axis = 1 : i64} : (tensor<1x4x8xf32>, tensor<1x3x8xf32>) -> tensor<1x7x8xf32>
      %0 = kiln.pe learned %x table %wpe : (tensor<1x7x8xf32>, tensor<6x8xf32>) -> tensor<1x7x8xf32>
      return %0 : tensor<1x7x8xf32>
    })"),
                    "expects the sequence length (7) to be at most the "
                    "learned table's max_len (6)");
  EXPECT_KILN_ERROR(JitModule::compileSource(R"(
    func.func @h(%a: tensor<1x?x8xf32>, %b: tensor<1x?x8xf32>, %wpe: tensor<6x8xf32>, %pos: i64) -> tensor<1x?x8xf32> {
      %x = kiln.concat %a, %b {axis = 1 : i64} : (tensor<1x?x8xf32>, tensor<1x?x8xf32>) -> tensor<1x?x8xf32>
      %0 = kiln.pe learned %x table %wpe offset %pos : (tensor<1x?x8xf32>, tensor<6x8xf32>, i64) -> tensor<1x?x8xf32>
      return %0 : tensor<1x?x8xf32>
    })"),
                    "start at an offset argument");
}

// Learned positions from an offset over a static length that no argument
// has (a concatenation of static parts; a gradient's result): the call
// checks the offset with that length. Rows past the table had been clamped
// into the last one silently.
TEST(Contract, LearnedPositionsFromAnOffsetOverAStaticLengthFitTheTable) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%a: tensor<1x2x8xf32>, %b: tensor<1x2x8xf32>, %wpe: tensor<6x8xf32>, %pos: i64) -> tensor<1x4x8xf32> {
      %x = kiln.concat %a, %b {axis = 1 : i64} : (tensor<1x2x8xf32>, tensor<1x2x8xf32>) -> tensor<1x4x8xf32>
      %0 = kiln.pe learned %x table %wpe offset %pos : (tensor<1x4x8xf32>, tensor<6x8xf32>, i64) -> tensor<1x4x8xf32>
      return %0 : tensor<1x4x8xf32>
    })");
  Tensor a = f32({1, 2, 8}), wpe = f32({6, 8});
  jit->call("f", {a, a, wpe, int64_t(2)});
  EXPECT_KILN_ERROR(jit->call("f", {a, a, wpe, int64_t(3)}),
                    "positions [3, 7) of 'f' exceed the positions the model "
                    "holds (a learned position table or a key/value cache "
                    "of 6)");
  EXPECT_KILN_ERROR(jit->call("f", {a, a, wpe, int64_t(-1)}),
                    "positions [-1, 3)");
}

// A cache is written and read at an offset the call checks: an offset that
// is not an argument (a constant, a sum) cannot be checked, so such a
// function is not compiled (a constant 200 into a cache of 130 positions
// would have written past it).
TEST(Contract, CacheOffsetsAreArguments) {
  for (const char *offset : {"%c = arith.constant 200 : i64",
                             "%c = arith.addi %pos, %pos : i64"}) {
    EXPECT_KILN_ERROR(JitModule::compileSource(std::string(R"(
        func.func @f(%cache: tensor<1x130x8xf32>, %x: tensor<1x1x8xf32>, %pos: i64) -> tensor<1x130x8xf32> {
          )") + offset + R"(
          %0 = kiln.update_slice %cache, %x, %c {axis = 1 : i64} : (tensor<1x130x8xf32>, tensor<1x1x8xf32>, i64) -> tensor<1x130x8xf32>
          return %0 : tensor<1x130x8xf32>
        })"),
                      "has an offset that is not an argument of the function");
  }
  EXPECT_KILN_ERROR(JitModule::compileSource(R"(
      func.func @f(%cache: tensor<1x130x8xf32>, %x: tensor<1x1x8xf32>) -> tensor<1x130x8xf32> {
        %c = arith.constant 200 : i64
        %0 = kiln.update_slice %cache, %x, %c {axis = 1 : i64} : (tensor<1x130x8xf32>, tensor<1x1x8xf32>, i64) -> tensor<1x130x8xf32>
        return %0 : tensor<1x130x8xf32>
      })"),
                    "function 'f': 'kiln.update_slice' at ");
  EXPECT_KILN_ERROR(JitModule::compileSource(R"(
      func.func @f(%q: tensor<1x1x8xf32>, %k: tensor<1x130x8xf32>) -> tensor<1x1x8xf32> {
        %c = arith.constant 129 : i64
        %0 = kiln.attention %q, %k, %k offset %c {num_heads = 2 : i64, causal} : (tensor<1x1x8xf32>, tensor<1x130x8xf32>, tensor<1x130x8xf32>, i64) -> tensor<1x1x8xf32>
        return %0 : tensor<1x1x8xf32>
      })"),
                    "has an offset that is not an argument of the function");
}

// A reshape's inferred size divides the input's elements by the other
// sizes: a count they do not divide (6 elements into rows of 4) had dropped
// the rest silently, and a kept size of 0 had divided 0 by 0.
TEST(Contract, InferredReshapeSizesDivideTheElements) {
  auto jit = JitModule::compileSource(R"(
    func.func @rows(%x: tensor<?xf32>) -> tensor<?x4xf32> {
      %0 = kiln.reshape %x [-1, 4] : (tensor<?xf32>) -> tensor<?x4xf32>
      return %0 : tensor<?x4xf32>
    }
    func.func @keep(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
      %0 = kiln.reshape %x [0, -1] : (tensor<?x?xf32>) -> tensor<?x?xf32>
      return %0 : tensor<?x?xf32>
    })");
  EXPECT_EQ(jit->call("rows", {f32({8})})[0].shape(),
            (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(jit->call("rows", {f32({0})})[0].shape(),
            (std::vector<int64_t>{0, 4}));
  EXPECT_KILN_ERROR(jit->call("rows", {f32({6})}), "do not fit");
  EXPECT_EQ(jit->call("keep", {f32({3, 5})})[0].shape(),
            (std::vector<int64_t>{3, 5}));
  // A kept size of 0 cancels: the rest is 5, not 0 / 0.
  EXPECT_EQ(jit->call("keep", {f32({0, 5})})[0].shape(),
            (std::vector<int64_t>{0, 5}));
  EXPECT_KILN_ERROR(jit->call("rows", {f32({6})}),
                    "the sizes given to 'rows' do not fit: dimension 0 of "
                    "argument #0 'arg0' of 'rows' (6) elements must be a "
                    "multiple of 4 (4), which is not 0: a reshape infers a "
                    "whole size");
}
