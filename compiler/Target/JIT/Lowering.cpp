//===- Lowering.cpp - Kiln IR to the LLVM dialect, for JIT and AOT --------===//
//
// The pipeline is the same as kiln-opt --kiln-to-llvm. Before lowering, an
// input contract is read off the kiln IR (which arguments are token ids of
// which table, which dynamic sizes must agree, how long a learned position
// table is); the runtime checks every call against it (runtime/Function.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/JIT/Lowering.h"

#include "compiler/Codegen/CPU/TargetInfo.h"
#include "compiler/Codegen/Common/Attributes.h"

#include "compiler/InitAll.h"
#include "compiler/Pipelines/Pipelines.h"
#include "dialects/Kiln/IR/KilnOps.h"
#include "runtime/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

using namespace mlir;
using namespace mlir::kiln;

namespace kiln {

namespace {

/// Collects diagnostics while alive so they can be put in a kiln::Error.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext *context)
      : handler(context, [this](Diagnostic &diag) {
          std::string text;
          llvm::raw_string_ostream os(text);
          os << diag.getLocation() << ": " << diag.str();
          for (Diagnostic &note : diag.getNotes()) {
            os << "\n  note: " << note.str();
          }
          messages.push_back(text);
          return success();
        }) {}

  std::string str() const {
    std::string text;
    for (const std::string &m : messages) {
      text += "\n  " + m;
    }
    return text;
  }

private:
  ScopedDiagnosticHandler handler;
  std::vector<std::string> messages;
};

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

DType dtypeOf(Type type) {
  if (type.isF32()) {
    return DType::f32;
  }
  if (type.isInteger(1)) {
    return DType::i1;
  }
  if (type.isInteger(32)) {
    return DType::i32;
  }
  if (type.isInteger(64)) {
    return DType::i64;
  }
  throw Error("kiln: unsupported element type in a compiled function");
}

//===----------------------------------------------------------------------===//
// Input contract
//===----------------------------------------------------------------------===//

/// A dynamic size of a value: (value, dimension).
using DimKey = std::pair<void *, int64_t>;

class ContractBuilder {
public:
  explicit ContractBuilder(func::FuncOp func) : func(func) {}

  /// Fills the groups and position limits of `spec`.
  void build(FunctionSpec &spec) {
    func.walk([&](Operation *op) { visit(op, spec); });
    uniteConcatenatedParts();
    // Group argument dims by class.
    std::map<DimKey, size_t> groupOf;
    for (auto [index, arg] : llvm::enumerate(func.getArguments())) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type) {
        continue;
      }
      for (int64_t d = 0; d < type.getRank(); ++d) {
        DimKey leader = classes.getOrInsertLeaderValue(key(arg, d));
        auto [it, inserted] = groupOf.try_emplace(leader, spec.groups.size());
        if (inserted) {
          spec.groups.push_back({{}, staticSize(leader)});
        }
        spec.groups[it->second].dims.push_back({index, d});
      }
    }
    for (auto &[pe, offsetArg, maxLen] : positionLimits) {
      DimKey leader = classes.getOrInsertLeaderValue(pe);
      auto it = groupOf.find(leader);
      if (it != groupOf.end()) {
        spec.positionLimits.push_back({it->second, offsetArg, maxLen});
      }
    }
  }

private:
  /// Two concatenations whose results must be equally long along their
  /// axes (a decoder's key and value caches, each the past plus the new
  /// positions, read together by attention), made of static parts of equal
  /// sizes and one dynamic part at the same place: then those dynamic parts
  /// must be equally long (exactly). A sum has no dimension of its own to
  /// check; without this, a key cache longer than the value cache passed and
  /// attention read past the end of the values.
  void uniteConcatenatedParts() {
    auto axisSize = [](Value v, int64_t axis) {
      return cast<RankedTensorType>(v.getType()).getDimSize(axis);
    };
    // The position of the one dynamic part when every other part of `a`
    // and `b` is static and equal, else nullopt.
    auto dynamicPart = [&](ConcatOp a, int64_t axisA, ConcatOp b,
                           int64_t axisB) -> std::optional<size_t> {
      if (a.getInputs().size() != b.getInputs().size()) {
        return std::nullopt;
      }
      std::optional<size_t> part;
      for (auto [i, x, y] : llvm::enumerate(a.getInputs(), b.getInputs())) {
        int64_t sx = axisSize(x, axisA), sy = axisSize(y, axisB);
        if (ShapedType::isDynamic(sx) && ShapedType::isDynamic(sy) && !part) {
          part = i;
        } else if (ShapedType::isDynamic(sx) || ShapedType::isDynamic(sy) ||
                   sx != sy) {
          return std::nullopt;
        }
      }
      return part;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (auto [a, axisA] : concats) {
        for (auto [b, axisB] : concats) {
          std::optional<size_t> part;
          if (a == b ||
              classes.getOrInsertLeaderValue(key(a.getResult(), axisA)) !=
                  classes.getOrInsertLeaderValue(key(b.getResult(), axisB)) ||
              !(part = dynamicPart(a, axisA, b, axisB))) {
            continue;
          }
          Value x = a.getInputs()[*part], y = b.getInputs()[*part];
          if (classes.getOrInsertLeaderValue(key(x, axisA)) !=
              classes.getOrInsertLeaderValue(key(y, axisB))) {
            unite(x, axisA, y, axisB);
            changed = true;
          }
        }
      }
    }
  }

  DimKey key(Value v, int64_t d) {
    DimKey k{v.getAsOpaquePointer(), d};
    classes.insert(k);
    auto type = cast<RankedTensorType>(v.getType());
    if (!type.isDynamicDim(d)) {
      sizes[k] = type.getDimSize(d);
    }
    return k;
  }

  int64_t staticSize(DimKey leader) {
    for (auto it = classes.findLeader(leader); it != classes.member_end();
         ++it) {
      auto found = sizes.find(*it);
      if (found != sizes.end()) {
        return found->second;
      }
    }
    return -1;
  }

  void unite(Value a, int64_t da, Value b, int64_t db) {
    classes.unionSets(key(a, da), key(b, db));
  }
  /// Result dim i == operand dim i for the trailing-aligned dims.
  void uniteAligned(Value a, Value b) {
    auto ta = cast<RankedTensorType>(a.getType());
    auto tb = cast<RankedTensorType>(b.getType());
    int64_t rank = std::min(ta.getRank(), tb.getRank());
    for (int64_t i = 1; i <= rank; ++i) {
      int64_t da = ta.getRank() - i, db = tb.getRank() - i;
      // A static 1 broadcasts; everything else must agree.
      if (ta.getDimSize(da) == 1 || tb.getDimSize(db) == 1) {
        continue;
      }
      unite(a, da, b, db);
    }
  }
  void uniteAll(Value a, Value b) {
    auto ta = cast<RankedTensorType>(a.getType());
    for (int64_t d = 0; d < ta.getRank(); ++d) {
      unite(a, d, b, d);
    }
  }

  std::optional<size_t> argIndex(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner()->getParentOp() == func.getOperation()) {
        return arg.getArgNumber();
      }
    }
    return std::nullopt;
  }

  void visit(Operation *op, FunctionSpec &spec) {
    Value result = op->getNumResults() == 1 ? op->getResult(0) : Value();
    if (isa<AddOp, SubOp, MulOp, DivOp>(op)) {
      uniteAligned(op->getOperand(0), op->getOperand(1));
      uniteAligned(result, op->getOperand(0));
      uniteAligned(result, op->getOperand(1));
    } else if (isa<ReluOp, TanhOp, ExpOp, LogOp, GeluOp, ScaleOp, DropoutOp,
                   SoftmaxOp, LogSoftmaxOp, LayerNormOp, FeedForwardOp>(op)) {
      uniteAll(result, op->getOperand(0));
      int64_t rank = cast<RankedTensorType>(result.getType()).getRank();
      if (auto ffn = dyn_cast<FeedForwardOp>(op)) {
        // w1 [d_ff, d], w2 [d, d_ff], b1 [d_ff], b2 [d].
        unite(ffn.getInput(), rank - 1, ffn.getW1(), 1);
        unite(ffn.getInput(), rank - 1, ffn.getW2(), 0);
        unite(ffn.getW1(), 0, ffn.getW2(), 1);
        if (Value b1 = ffn.getB1()) {
          unite(b1, 0, ffn.getW1(), 0);
        }
        if (Value b2 = ffn.getB2()) {
          unite(b2, 0, ffn.getW2(), 0);
        }
      } else if (auto ln = dyn_cast<LayerNormOp>(op)) {
        unite(ln.getInput(), rank - 1, ln.getGamma(), 0);
        unite(ln.getInput(), rank - 1, ln.getBeta(), 0);
      }
    } else if (auto emb = dyn_cast<EmbeddingOp>(op)) {
      int64_t rank = cast<RankedTensorType>(emb.getIds().getType()).getRank();
      for (int64_t d = 0; d < rank; ++d) {
        unite(result, d, emb.getIds(), d);
      }
      unite(result, rank, emb.getTable(), 1);
      auto table = cast<RankedTensorType>(emb.getTable().getType());
      if (auto index = argIndex(emb.getIds());
          index && !table.isDynamicDim(0)) {
        spec.args[*index].idBound = table.getDimSize(0);
      }
    } else if (auto pe = dyn_cast<PositionalEncodingOp>(op)) {
      uniteAll(result, pe.getInput());
      auto input = cast<RankedTensorType>(pe.getInput().getType());
      if (pe.getTable()) {
        unite(pe.getInput(), input.getRank() - 1, pe.getTable(), 1);
        auto table = cast<RankedTensorType>(pe.getTable().getType());
        if (!table.isDynamicDim(0)) {
          int64_t offsetArg = -1;
          if (pe.getOffset()) {
            auto index = argIndex(pe.getOffset());
            offsetArg = index ? int64_t(*index) : -2; // -2: not checkable
          }
          if (offsetArg != -2) {
            positionLimits.push_back({key(pe.getInput(), input.getRank() - 2),
                                      offsetArg, table.getDimSize(0)});
          }
        }
      }
    } else if (auto lin = dyn_cast<LinearOp>(op)) {
      int64_t rank = cast<RankedTensorType>(result.getType()).getRank();
      for (int64_t d = 0; d + 1 < rank; ++d) {
        unite(result, d, lin.getInput(), d);
      }
      unite(lin.getInput(), rank - 1, lin.getWeight(), 1);
      unite(result, rank - 1, lin.getWeight(), 0);
      if (Value bias = lin.getBias()) {
        unite(bias, 0, lin.getWeight(), 0);
      }
    } else if (auto mm = dyn_cast<MatmulOp>(op)) {
      int64_t rank = cast<RankedTensorType>(result.getType()).getRank();
      for (int64_t d = 0; d + 2 < rank; ++d) {
        unite(mm.getLhs(), d, mm.getRhs(), d);
        unite(result, d, mm.getLhs(), d);
      }
      int64_t lk = mm.getTransposeLhs() ? rank - 2 : rank - 1;
      int64_t lm = mm.getTransposeLhs() ? rank - 1 : rank - 2;
      int64_t rk = mm.getTransposeRhs() ? rank - 1 : rank - 2;
      int64_t rn = mm.getTransposeRhs() ? rank - 2 : rank - 1;
      unite(mm.getLhs(), lk, mm.getRhs(), rk);
      unite(result, rank - 2, mm.getLhs(), lm);
      unite(result, rank - 1, mm.getRhs(), rn);
    } else if (auto mha = dyn_cast<MultiHeadAttentionOp>(op)) {
      uniteAll(result, mha.getQuery());
      unite(mha.getQuery(), 0, mha.getKeyValue(), 0);
      if (Value mask = mha.getKeyPaddingMask()) {
        unite(mask, 0, mha.getQuery(), 0);
        unite(mask, 1, mha.getKeyValue(), 1);
      }
      // wq, wo [dim, dim]; wk, wv [dim, kv_dim]; biases [dim].
      Value query = mha.getQuery(), kv = mha.getKeyValue();
      for (Value w : {mha.getWq(), mha.getWk(), mha.getWv(), mha.getWo()}) {
        unite(w, 0, query, 2);
      }
      unite(mha.getWq(), 1, query, 2);
      unite(mha.getWo(), 1, query, 2);
      unite(mha.getWk(), 1, kv, 2);
      unite(mha.getWv(), 1, kv, 2);
      for (Value bias : {mha.getBq(), mha.getBk(), mha.getBv(), mha.getBo()}) {
        if (bias) {
          unite(bias, 0, query, 2);
        }
      }
    } else if (isa<AttentionOp, AttentionGradOp>(op)) {
      // query [B, Tq, E], key = value [B, Tk, E], mask [B, Tk]; the result
      // (and grad, output) like query; the gradients like their operands.
      auto attention = dyn_cast<AttentionOp>(op);
      auto grad = dyn_cast<AttentionGradOp>(op);
      Value query = attention ? attention.getQuery() : grad.getQuery();
      Value key = attention ? attention.getKey() : grad.getKey();
      Value value = attention ? attention.getValue() : grad.getValue();
      Value mask =
          attention ? attention.getKeyPaddingMask() : grad.getKeyPaddingMask();
      uniteAll(key, value);
      unite(query, 0, key, 0);
      unite(query, 2, key, 2);
      if (mask) {
        unite(mask, 0, query, 0);
        unite(mask, 1, key, 1);
      }
      if (attention) {
        uniteAll(result, query);
      } else {
        uniteAll(grad.getGrad(), query);
        if (Value output = grad.getOutput()) {
          uniteAll(output, query);
        }
        uniteAll(op->getResult(0), query);
        uniteAll(op->getResult(1), key);
        uniteAll(op->getResult(2), value);
      }
    } else if (isa<ActivationGradOp>(op)) {
      uniteAll(op->getOperand(0), op->getOperand(1));
      uniteAll(result, op->getOperand(0));
    } else if (auto lng = dyn_cast<LayerNormGradOp>(op)) {
      int64_t rank = cast<RankedTensorType>(lng.getInput().getType()).getRank();
      uniteAll(lng.getGrad(), lng.getInput());
      uniteAll(op->getResult(0), lng.getInput());
      unite(lng.getGamma(), 0, lng.getInput(), rank - 1);
      uniteAll(op->getResult(1), lng.getGamma());
      uniteAll(op->getResult(2), lng.getGamma());
    } else if (auto eg = dyn_cast<EmbeddingGradOp>(op)) {
      // grad [ids..., width] scattered into [num_embeddings, width] by id.
      int64_t rank = cast<RankedTensorType>(eg.getIds().getType()).getRank();
      for (int64_t d = 0; d < rank; ++d) {
        unite(eg.getGrad(), d, eg.getIds(), d);
      }
      unite(result, 1, eg.getGrad(), rank);
      if (auto index = argIndex(eg.getIds())) {
        spec.args[*index].idBound = int64_t(eg.getNumEmbeddings());
      }
    } else if (auto lg = dyn_cast<LossGradOp>(op)) {
      // input [..., classes], targets [...], loss_grad [] or like targets.
      auto tt = cast<RankedTensorType>(lg.getTargets().getType());
      for (int64_t d = 0; d < tt.getRank(); ++d) {
        unite(lg.getInput(), d, lg.getTargets(), d);
      }
      auto lossGrad = cast<RankedTensorType>(lg.getLossGrad().getType());
      if (lossGrad.getRank() == tt.getRank()) {
        uniteAll(lg.getLossGrad(), lg.getTargets());
      }
      uniteAll(result, lg.getInput());
      auto it = cast<RankedTensorType>(lg.getInput().getType());
      if (auto index = argIndex(lg.getTargets());
          index && !it.isDynamicDim(it.getRank() - 1)) {
        spec.args[*index].idBound = it.getDimSize(it.getRank() - 1);
        if (std::optional<int64_t> ignore = lg.getIgnoreIndex()) {
          spec.args[*index].ignoredId = *ignore;
        }
      }
    } else if (auto rmg = dyn_cast<ReduceMaxGradOp>(op)) {
      // grad is the input reduced over `axes` (kept as 1s with keep_dims).
      auto type = cast<RankedTensorType>(rmg.getInput().getType());
      std::set<int64_t> axes;
      for (int64_t a : rmg.getAxes()) {
        axes.insert(a < 0 ? a + type.getRank() : a);
      }
      int64_t out = 0;
      for (int64_t d = 0; d < type.getRank(); ++d) {
        if (!axes.count(d)) {
          unite(rmg.getGrad(), out++, rmg.getInput(), d);
        } else if (rmg.getKeepDims()) {
          ++out;
        }
      }
      uniteAll(result, rmg.getInput());
    } else if (auto peg = dyn_cast<PositionalEncodingGradOp>(op)) {
      // The positions [offset, offset + seq) of grad lie in the table.
      auto grad = cast<RankedTensorType>(peg.getGrad().getType());
      unite(result, 1, peg.getGrad(), grad.getRank() - 1);
      int64_t offsetArg = -1;
      if (peg.getOffset()) {
        auto index = argIndex(peg.getOffset());
        offsetArg = index ? int64_t(*index) : -2; // -2: not checkable
      }
      if (offsetArg != -2) {
        positionLimits.push_back({key(peg.getGrad(), grad.getRank() - 2),
                                  offsetArg, int64_t(peg.getMaxLen())});
      }
    } else if (isa<AdamUpdateOp, SgdUpdateOp>(op)) {
      // param, grad and the state (and the results) have one shape.
      int64_t tensors = isa<AdamUpdateOp>(op) ? 4 : 3;
      for (int64_t i = 1; i < tensors; ++i) {
        uniteAll(op->getOperand(0), op->getOperand(i));
      }
      for (Value r : op->getResults()) {
        uniteAll(r, op->getOperand(0));
      }
    } else if (auto tr = dyn_cast<TransposeOp>(op)) {
      for (auto [i, p] : llvm::enumerate(tr.getPermutation())) {
        unite(result, i, tr.getInput(), p);
      }
    } else if (auto rs = dyn_cast<ReshapeOp>(op)) {
      for (auto [i, entry] : llvm::enumerate(rs.getShape())) {
        if (entry == 0) {
          unite(result, i, rs.getInput(), i);
        }
      }
    } else if (auto red = dyn_cast<ReduceOp>(op)) {
      auto type = cast<RankedTensorType>(red.getInput().getType());
      std::set<int64_t> axes;
      for (int64_t a : red.getAxes()) {
        axes.insert(a < 0 ? a + type.getRank() : a);
      }
      int64_t out = 0;
      for (int64_t d = 0; d < type.getRank(); ++d) {
        if (!axes.count(d)) {
          unite(result, out++, red.getInput(), d);
        } else if (red.getKeepDims()) {
          ++out;
        }
      }
    } else if (auto sl = dyn_cast<SliceOp>(op)) {
      int64_t rank = cast<RankedTensorType>(result.getType()).getRank();
      int64_t axis = int64_t(sl.getAxis());
      axis = axis < 0 ? axis + rank : axis;
      for (int64_t d = 0; d < rank; ++d) {
        if (d != axis) {
          unite(result, d, sl.getInput(), d);
        }
      }
    } else if (auto cat = dyn_cast<ConcatOp>(op)) {
      int64_t rank = cast<RankedTensorType>(result.getType()).getRank();
      int64_t axis = int64_t(cat.getAxis());
      axis = axis < 0 ? axis + rank : axis;
      concats.push_back({cat, axis});
      for (Value input : cat.getInputs()) {
        for (int64_t d = 0; d < rank; ++d) {
          if (d != axis) {
            unite(result, d, input, d);
          }
        }
      }
    } else if (isa<CrossEntropyOp, NLLLossOp>(op)) {
      Value input = op->getOperand(0), targets = op->getOperand(1);
      auto tt = cast<RankedTensorType>(targets.getType());
      for (int64_t d = 0; d < tt.getRank(); ++d) {
        unite(input, d, targets, d);
      }
      auto it = cast<RankedTensorType>(input.getType());
      if (auto index = argIndex(targets);
          index && !it.isDynamicDim(it.getRank() - 1)) {
        spec.args[*index].idBound = it.getDimSize(it.getRank() - 1);
        if (auto ignore = op->getAttrOfType<IntegerAttr>("ignore_index")) {
          spec.args[*index].ignoredId = ignore.getInt();
        }
      }
    }
  }

  func::FuncOp func;
  llvm::EquivalenceClasses<DimKey> classes;
  std::map<DimKey, int64_t> sizes;
  struct PendingLimit {
    DimKey dim;
    int64_t offsetArg;
    int64_t maxLen;
  };
  std::vector<PendingLimit> positionLimits;
  /// Every kiln.concat with its (non-negative) axis.
  std::vector<std::pair<ConcatOp, int64_t>> concats;
};

} // namespace

void dumpStage(const LoweringOptions &options, const std::string &suffix,
               const std::function<void(llvm::raw_ostream &)> &print) {
  if (options.dumpDirectory.empty()) {
    return;
  }
  std::string path =
      options.dumpDirectory + "/" + options.dumpStem + "." + suffix;
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    throw Error("kiln: cannot write IR dump '" + path + "': " + ec.message());
  }
  print(os);
}

static std::unique_ptr<MLIRContext> makeContext() {
  DialectRegistry registry;
  registerAllDialects(registry);
  auto context = std::make_unique<MLIRContext>(registry);
  context->loadAllAvailableDialects();
  registerAllPasses();
  return context;
}

/// The parameters the DSL recorded in the module (none for hand-written IR).
static std::vector<ParamSpec> readParams(ModuleOp module) {
  std::vector<ParamSpec> params;
  auto list = module->getAttrOfType<ArrayAttr>(mlir::kiln::kParametersAttr);
  if (!list) {
    return params;
  }
  auto bad = [](const std::string &why) {
    return Error("kiln: malformed '" + mlir::kiln::kParametersAttr.str() +
                 "' module attribute: " + why);
  };
  for (Attribute entry : list) {
    auto dict = dyn_cast<DictionaryAttr>(entry);
    auto name = dict ? dict.getAs<StringAttr>("name") : StringAttr();
    auto shape =
        dict ? dict.getAs<DenseI64ArrayAttr>("shape") : DenseI64ArrayAttr();
    auto init = dict ? dict.getAs<IntegerAttr>("init") : IntegerAttr();
    auto a = dict ? dict.getAs<FloatAttr>("a") : FloatAttr();
    auto b = dict ? dict.getAs<FloatAttr>("b") : FloatAttr();
    if (!name || !shape || !init || !a || !b) {
      throw bad("each entry needs name, shape, init, a and b");
    }
    int64_t kind = init.getInt();
    if (kind < 0 || kind > int64_t(Init::Kind::xavierNormal)) {
      throw bad("unknown initializer " + std::to_string(kind) + " of '" +
                name.str() + "'");
    }
    ParamSpec p;
    p.name = name.str();
    p.shape.assign(shape.asArrayRef().begin(), shape.asArrayRef().end());
    for (int64_t size : p.shape) {
      if (size < 0) {
        throw bad("'" + p.name + "' has a negative size");
      }
    }
    p.init = {Init::Kind(kind), a.getValueAsDouble(), b.getValueAsDouble()};
    params.push_back(p);
  }
  return params;
}

/// The signature of `func` and its input contract. With `inPlace`, the
/// results marked kiln.updates are written into their arguments.
static FunctionSpec readSpec(func::FuncOp func, bool inPlace) {
  FunctionSpec spec;
  spec.name = func.getName().str();
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    ArgSpec arg;
    auto name = func.getArgAttrOfType<StringAttr>(i, "kiln.name");
    arg.name = name ? name.str() : "arg" + std::to_string(i);
    auto kind = func.getArgAttrOfType<StringAttr>(i, "kiln.kind");
    arg.isParam = kind && kind.getValue() == "param";
    arg.isState = kind && kind.getValue() == "state";
    if (auto require = func.getArgAttrOfType<StringAttr>(
            i, mlir::kiln::kRequireAttrName)) {
      if (require.getValue() == "positive") {
        arg.require = ArgSpec::Require::positive;
      } else if (require.getValue() == "finite-nonnegative") {
        arg.require = ArgSpec::Require::finiteNonnegative;
      } else {
        throw Error("kiln: function '" + spec.name + "' argument #" +
                    std::to_string(i) + " has an unknown kiln.require '" +
                    require.getValue().str() + "'");
      }
    }
    if (auto tensor = dyn_cast<RankedTensorType>(type)) {
      arg.dtype = dtypeOf(tensor.getElementType());
      for (int64_t size : tensor.getShape()) {
        arg.shape.push_back(ShapedType::isDynamic(size) ? -1 : size);
      }
    } else if (type.isInteger(64)) {
      arg.isScalar = true;
    } else {
      throw Error("kiln: function '" + spec.name + "' argument #" +
                  std::to_string(i) +
                  " must be a ranked tensor or an i64 scalar");
    }
    spec.args.push_back(arg);
  }
  for (auto [r, type] : llvm::enumerate(func.getResultTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.getElementType().isF32()) {
      throw Error("kiln: function '" + spec.name +
                  "' must return f32 tensors only");
    }
    ResultSpec result;
    for (int64_t size : tensor.getShape()) {
      result.shape.push_back(ShapedType::isDynamic(size) ? -1 : size);
    }
    auto updates =
        func.getResultAttrOfType<IntegerAttr>(r, mlir::kiln::kUpdatesAttrName);
    if (inPlace && updates) {
      result.updates = updates.getInt();
    }
    spec.results.push_back(result);
  }
  ContractBuilder(func).build(spec);
  return spec;
}

/// Erases the public functions not in `names`; throws kiln::Error for a
/// name that is not a public function.
static void selectFunctions(ModuleOp module,
                            const std::vector<std::string> &names) {
  std::set<std::string> wanted(names.begin(), names.end());
  std::vector<func::FuncOp> unwanted;
  std::string known;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || func.isPrivate()) {
      continue;
    }
    std::string name = func.getName().str();
    known += (known.empty() ? "" : ", ") + name;
    if (!wanted.erase(name)) {
      unwanted.push_back(func);
    }
  }
  if (!wanted.empty()) {
    throw Error("kiln: no function '" + *wanted.begin() +
                "' to compile (the module has: " + known + ")");
  }
  for (func::FuncOp func : unwanted) {
    func.erase();
  }
}

/// Lowers `lowered.module` in place. `lowered` must outlive `diagnostics`
/// (whose handler lives in its context), also when this throws.
static void lower(LoweredModule &lowered, const LoweringOptions &options,
                  DiagnosticCollector &diagnostics) {
  MLIRContext *context = lowered.context.get();
  ModuleOp module = *lowered.module;
  if (!options.gpuChip.empty() && !mlir::kiln::isGpuChip(options.gpuChip)) {
    throw Error("kiln: '" + options.gpuChip +
                "' is not an NVIDIA GPU architecture (sm_80, sm_90, ...)");
  }
  if (failed(verify(module))) {
    throw Error("kiln: the module does not verify:" + diagnostics.str());
  }
  if (!options.prePipeline.empty()) {
    PassManager pre(context);
    if (failed(mlir::kiln::addPipeline(pre, options.prePipeline)) ||
        failed(pre.run(module))) {
      throw Error("kiln: the pipeline '" + options.prePipeline +
                  "' failed:" + diagnostics.str());
    }
  }
  dumpStage(options, "kiln.mlir",
            [&](llvm::raw_ostream &os) { module->print(os); });

  if (!options.functions.empty()) {
    selectFunctions(module, options.functions);
  }
  lowered.params = readParams(module);
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || func.isPrivate()) {
      continue;
    }
    // Compiled code writes no argument of the caller's but those that a
    // result updates in place, and only in CPU code
    // (kiln-mark-in-place-arguments in the pipelines).
    lowered.functions.push_back(readSpec(func, options.gpuChip.empty()));
  }

  auto start = std::chrono::steady_clock::now();
  PassManager linalg(context);
  PassManager llvmPm(context);
  std::string toLLVM = options.gpuChip.empty()
                           ? mlir::kiln::linalgToLLVMPipeline(options.cpu)
                           : mlir::kiln::linalgToGpuPipeline(options.gpuChip);
  int64_t attentionBlock =
      options.gpuChip.empty() ? mlir::kiln::kCpuAttentionBlock : 0;
  if (failed(mlir::kiln::addPipeline(
          linalg, mlir::kiln::kilnToLinalgPipeline(attentionBlock))) ||
      failed(mlir::kiln::addPipeline(llvmPm, toLLVM))) {
    throw Error("kiln: internal error: the pipelines do not parse");
  }
  if (failed(linalg.run(module))) {
    throw Error("kiln: lowering to linalg failed:" + diagnostics.str());
  }
  dumpStage(options, "linalg.mlir",
            [&](llvm::raw_ostream &os) { module->print(os); });
  if (failed(llvmPm.run(module))) {
    throw Error("kiln: lowering to LLVM failed:" + diagnostics.str());
  }
  dumpStage(options, "llvm.mlir",
            [&](llvm::raw_ostream &os) { module->print(os); });
  lowered.seconds = secondsSince(start);
}

LoweredModule lowerToLLVMDialect(ModuleOp source,
                                 const LoweringOptions &options) {
  // Work in a context of our own so that the caller's module is untouched and
  // the result owns everything it needs.
  std::string text;
  {
    llvm::raw_string_ostream os(text);
    source->print(os, OpPrintingFlags().printGenericOpForm());
  }
  return lowerSourceToLLVMDialect(text, "the module", options);
}

LoweredModule lowerSourceToLLVMDialect(const std::string &source,
                                       const std::string &what,
                                       const LoweringOptions &options) {
  LoweredModule lowered;
  lowered.context = makeContext();
  DiagnosticCollector diagnostics(lowered.context.get());
  lowered.module = parseSourceString<ModuleOp>(source, lowered.context.get());
  if (!lowered.module) {
    throw Error("kiln: " + what + " does not parse:" + diagnostics.str());
  }
  lower(lowered, options, diagnostics);
  return lowered;
}

std::unique_ptr<llvm::TargetMachine> createTargetMachine(const std::string &cpu,
                                                         unsigned optLevel) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  llvm::Triple triple(llvm::sys::getProcessTriple());
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) {
    throw Error("kiln: no code generator for " + triple.str() + ": " + error);
  }
  std::string name = cpu == "host" ? llvm::sys::getHostCPUName().str() : cpu;
  std::string features;
  if (cpu == "host") {
    llvm::SubtargetFeatures list;
    for (const auto &feature : llvm::sys::getHostCPUFeatures()) {
      list.AddFeature(feature.getKey(), feature.getValue());
    }
    features = list.getString();
  } else if (llvm::Expected<mlir::kiln::cpu::TargetInfo> info =
                 mlir::kiln::cpu::lookupTarget(cpu);
             !info) {
    throw Error("kiln: " + llvm::toString(info.takeError()));
  }
  llvm::TargetOptions targetOptions;
  // Fuse multiply-adds into FMAs (as every BLAS does).
  targetOptions.AllowFPOpFusion = llvm::FPOpFusion::Fast;
  // Constructors (the GPU target's module loads) in .init_array, which the
  // C runtime runs; it ignores .ctors sections.
  targetOptions.UseInitArray = true;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, name, features, targetOptions, llvm::Reloc::PIC_, std::nullopt,
      optLevel >= 3 ? llvm::CodeGenOptLevel::Aggressive
                    : llvm::CodeGenOptLevel::Default));
  if (!machine) {
    throw Error("kiln: cannot create a target machine for '" + cpu + "'");
  }
  return machine;
}

void optimizeModule(llvm::Module &module, llvm::TargetMachine &machine,
                    unsigned optLevel) {
  // The packed wrappers (ExecutionEngine's _mlir_<name>, AOT's <name>.packed)
  // only move descriptor words, thousands of them for a deep model's
  // training step: optimizing them would cost more than it could save.
  for (llvm::Function &fn : module) {
    if (!fn.isDeclaration() && (fn.getName().starts_with("_mlir_") ||
                                fn.getName().ends_with(".packed"))) {
      fn.addFnAttr(llvm::Attribute::NoInline);
      fn.addFnAttr(llvm::Attribute::OptimizeNone);
    }
  }
  // Kernels (kiln-outline-kernels) are called only from the module: the
  // JIT's packed wrappers of them (_mlir_kiln_kernel_*) are never looked up,
  // and internal kernels get the same interprocedural optimization as in
  // ahead-of-time objects (which internalize everything), so that JIT and
  // AOT code compute bit-identical results (LLVM's argument promotion
  // changed how a 16-element optimizer update contracted its FMAs).
  std::vector<llvm::Function *> unused;
  for (llvm::Function &fn : module) {
    if (fn.getName().starts_with("_mlir_kiln_kernel_")) {
      unused.push_back(&fn);
    }
  }
  for (llvm::Function *fn : unused) {
    fn->eraseFromParent();
  }
  for (llvm::Function &fn : module) {
    if (!fn.isDeclaration() && fn.getName().starts_with("kiln_kernel_")) {
      fn.setLinkage(llvm::GlobalValue::InternalLinkage);
    }
  }
  module.setDataLayout(machine.createDataLayout());
  module.setTargetTriple(machine.getTargetTriple());
  auto transformer = makeOptimizingTransformer(optLevel, 0, &machine);
  if (llvm::Error err = transformer(&module)) {
    throw Error("kiln: LLVM optimization failed: " +
                llvm::toString(std::move(err)));
  }
}

} // namespace kiln
