//===- KilnDialect.cpp - The kiln dialect ---------------------------------===//
//
// Registers the kiln operations and attributes.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnDialect.h"
#include "dialects/Kiln/IR/KilnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::kiln;

#include "dialects/Kiln/IR/KilnInterfaces.cpp.inc"
#include "dialects/Kiln/IR/KilnOpsDialect.cpp.inc"
#include "dialects/Kiln/IR/KilnOpsEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Kiln/IR/KilnOpsAttributes.cpp.inc"

void KilnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Kiln/IR/KilnOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Kiln/IR/KilnOpsAttributes.cpp.inc"
      >();
}

Operation *KilnDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type) {
    return nullptr;
  }
  return ConstantOp::create(builder, loc, elements);
}

//===----------------------------------------------------------------------===//
// The function boundary
//===----------------------------------------------------------------------===//

// ArgKind's values are in the order of the shared spellings.
static_assert(std::size(::kiln::boundary::kRoles) ==
              size_t(ArgKind::prepared) + 1);

std::optional<ArgKind> mlir::kiln::symbolizeArgKind(StringRef text) {
  for (auto [i, spelling] : llvm::enumerate(::kiln::boundary::kRoles)) {
    if (text == spelling) {
      return ArgKind(i);
    }
  }
  return std::nullopt;
}

StringRef mlir::kiln::stringifyArgKind(ArgKind kind) {
  return ::kiln::boundary::kRoles[size_t(kind)];
}

std::string mlir::kiln::checkBoundaryName(StringRef name) {
  if (name.empty()) {
    return "is empty";
  }
  if (name.size() > kMaxBoundaryNameLength) {
    return "has " + std::to_string(name.size()) + " characters, more than " +
           std::to_string(kMaxBoundaryNameLength);
  }
  for (auto [i, c] : llvm::enumerate(name)) {
    auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte >= 0x7f) {
      return "has byte " + std::to_string(byte) + " at " + std::to_string(i) +
             ": names are printable ASCII without spaces";
    }
  }
  return {};
}

/// The codegen passes' own markers (compiler/Codegen/Common/Attributes.h and
/// the tiling and parallelization passes), not part of the boundary.
static bool isCodegenMarker(StringRef name) {
  return llvm::is_contained({"kiln.noalias", "kiln.noalias_args", "kiln.serial",
                             "kiln.fill", "kiln.fill_first_block",
                             "kiln.parallel", "kiln.tile", "kiln.tile_loop",
                             "kiln.panel_reads", "kiln.panel_buffer"},
                            name);
}

static LogicalResult verifyName(Operation *op, NamedAttribute attribute,
                                StringRef where) {
  auto name = dyn_cast<StringAttr>(attribute.getValue());
  if (!name) {
    return op->emitOpError() << where << ": '" << kNameAttr
                             << "' must be a string";
  }
  if (std::string why = checkBoundaryName(name.getValue()); !why.empty()) {
    return op->emitOpError() << where << ": '" << kNameAttr << "' " << why;
  }
  return success();
}

LogicalResult KilnDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned region,
                                                    unsigned index,
                                                    NamedAttribute attribute) {
  StringRef attr = attribute.getName().getValue();
  if (isCodegenMarker(attr)) {
    return success();
  }
  std::string where = "argument #" + std::to_string(index);
  if (attr == kNameAttr) {
    return verifyName(op, attribute, where);
  }
  // Types are checked while the function takes tensors: after
  // bufferization and conversion to LLVM the attributes ride along on
  // memrefs and their expanded words.
  Type type;
  if (auto fn = dyn_cast<FunctionOpInterface>(op);
      fn && region == 0 && index < fn.getNumArguments()) {
    type = fn.getArgumentTypes()[index];
  }
  if (type && !isa<RankedTensorType>(type) && !type.isInteger(64)) {
    type = Type();
  }
  auto isF32Scalar = [&] {
    auto t = dyn_cast_or_null<RankedTensorType>(type);
    return t && t.getRank() == 0 && t.getElementType().isF32();
  };
  bool isI64 = type && type.isInteger(64);
  if (attr == kKindAttr) {
    auto text = dyn_cast<StringAttr>(attribute.getValue());
    std::optional<ArgKind> kind =
        text ? symbolizeArgKind(text.getValue()) : std::nullopt;
    if (!kind) {
      return op->emitOpError()
             << where << ": '" << kKindAttr
             << "' must be one of input, param, state, lr, step, seed, "
                "prepared";
    }
    bool fits = true;
    switch (type ? *kind : ArgKind::input) {
    case ArgKind::lr:
      fits = isF32Scalar();
      break;
    case ArgKind::step:
    case ArgKind::seed:
      fits = isI64;
      break;
    case ArgKind::param:
    case ArgKind::state: {
      auto t = dyn_cast_or_null<RankedTensorType>(type);
      fits = t && t.getElementType().isF32();
      break;
    }
    case ArgKind::prepared: {
      auto t = dyn_cast_or_null<RankedTensorType>(type);
      fits = t && t.getElementType().isF32() && t.getRank() == 2;
      break;
    }
    case ArgKind::input:
      break;
    }
    if (!fits) {
      return op->emitOpError()
             << where << " of kind '" << stringifyArgKind(*kind)
             << "' has type " << type << " ("
             << (*kind == ArgKind::lr ? "an f32 scalar tensor"
                 : *kind == ArgKind::step || *kind == ArgKind::seed ? "an i64"
                 : *kind == ArgKind::prepared ? "a 2-D f32 tensor"
                                              : "an f32 tensor")
             << " expected)";
    }
    return success();
  }
  if (attr == kRequireAttr) {
    auto text = dyn_cast<StringAttr>(attribute.getValue());
    if (text && text.getValue() == kRequirePositive) {
      if (type && !isI64) {
        return op->emitOpError() << where << ": '" << kRequireAttr << "' = \""
                                 << kRequirePositive
                                 << "\" needs an i64 scalar, not " << type;
      }
      return success();
    }
    if (text && text.getValue() == kRequireFiniteNonnegative) {
      auto t = dyn_cast_or_null<RankedTensorType>(type);
      if (type && (!t || !t.getElementType().isF32())) {
        return op->emitOpError() << where << ": '" << kRequireAttr << "' = \""
                                 << kRequireFiniteNonnegative
                                 << "\" needs an f32 tensor, not " << type;
      }
      return success();
    }
    return op->emitOpError() << where << ": '" << kRequireAttr << "' must be \""
                             << kRequirePositive << "\" or \""
                             << kRequireFiniteNonnegative << "\"";
  }
  return op->emitOpError() << where << " has an unknown attribute '" << attr
                           << "'";
}

LogicalResult KilnDialect::verifyRegionResultAttribute(
    Operation *op, unsigned region, unsigned index, NamedAttribute attribute) {
  StringRef attr = attribute.getName().getValue();
  std::string where = "result #" + std::to_string(index);
  if (attr == kNameAttr) {
    return verifyName(op, attribute, where);
  }
  if (attr == kUpdatesAttr) {
    auto fn = dyn_cast<FunctionOpInterface>(op);
    auto updated = dyn_cast<IntegerAttr>(attribute.getValue());
    if (!fn || !updated) {
      return op->emitOpError() << where << ": '" << kUpdatesAttr
                               << "' must be an integer on a function result";
    }
    int64_t arg = updated.getInt();
    if (arg < 0 || arg >= int64_t(fn.getNumArguments())) {
      return op->emitOpError() << where << ": '" << kUpdatesAttr << "' = "
                               << arg << " names no argument";
    }
    Type argType = fn.getArgumentTypes()[arg];
    Type resultType =
        index < fn.getNumResults() ? fn.getResultTypes()[index] : Type();
    auto tensor = dyn_cast<RankedTensorType>(argType);
    bool tensors = tensor || isa_and_nonnull<RankedTensorType>(resultType);
    if (tensors && (argType != resultType || !tensor ||
                    !tensor.getElementType().isF32())) {
      return op->emitOpError()
             << where << " of type " << resultType << " updates argument #"
             << arg << " of type " << argType
             << ": it must be an f32 tensor of the same type";
    }
    for (unsigned r = 0; r < fn.getNumResults(); ++r) {
      auto other = fn.getResultAttrOfType<IntegerAttr>(r, kUpdatesAttr);
      if (r != index && other && other.getInt() == arg) {
        return op->emitOpError() << "results #" << std::min(r, index)
                                 << " and #" << std::max(r, index)
                                 << " both update argument #" << arg;
      }
    }
    return success();
  }
  return op->emitOpError() << where << " has an unknown attribute '" << attr
                           << "'";
}

/// Checks that `loops` (loop numbers of an op with `count` loops, or null)
/// ascend, each one of the op's loops.
static LogicalResult
verifyLoopList(function_ref<InFlightDiagnostic()> emitError, StringRef what,
               DenseI64ArrayAttr loops, int64_t count) {
  int64_t previous = -1;
  for (int64_t loop : loops ? loops.asArrayRef() : ArrayRef<int64_t>()) {
    if (loop <= previous || loop >= count) {
      return emitError() << "expects the " << what
                         << " ascending, each one of the " << count
                         << " loops, got " << loop;
    }
    previous = loop;
  }
  return success();
}

LogicalResult CpuTilesAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   DenseI64ArrayAttr tile,
                                   DenseI64ArrayAttr threads,
                                   DenseI64ArrayAttr blocks,
                                   DenseI64ArrayAttr blockThreads,
                                   ArrayAttr packs) {
  if (!tile || !threads || tile.empty()) {
    return emitError() << "expects a tile size for each loop";
  }
  int64_t loops = tile.size();
  for (auto [what, sizes] :
       {std::pair<StringRef, DenseI64ArrayAttr>{"tile", tile},
        {"block", blocks}}) {
    for (int64_t size : sizes ? sizes.asArrayRef() : ArrayRef<int64_t>()) {
      if (size < 0) {
        return emitError() << "expects " << what << " sizes >= 0, got " << size;
      }
    }
  }
  if (blocks && int64_t(blocks.size()) != loops) {
    return emitError() << "expects a block size for each of the " << loops
                       << " loops, got " << blocks.size();
  }
  if (failed(verifyLoopList(emitError, "thread loops", threads, loops)) ||
      failed(verifyLoopList(emitError, "block thread loops", blockThreads,
                            loops))) {
    return failure();
  }
  for (Attribute pack : packs ? packs.getValue() : ArrayRef<Attribute>()) {
    auto packAttr = dyn_cast<CpuPackAttr>(pack);
    if (!packAttr) {
      return emitError() << "expects 'packs' of #kiln.cpu_pack<...>, got "
                         << pack;
    }
    for (int64_t dim : packAttr.getDims().asArrayRef()) {
      if (dim >= loops) {
        return emitError() << "expects a pack's dims among the " << loops
                           << " loops, got " << dim;
      }
    }
  }
  return success();
}

LogicalResult CpuPackAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t operand, DenseI64ArrayAttr dims,
                                  bool transpose, int64_t panelDim,
                                  int64_t panelWidth, DenseI64ArrayAttr reuse,
                                  int64_t minReuse) {
  if (operand < 0) {
    return emitError() << "expects an operand number >= 0, got " << operand;
  }
  if (!dims || dims.size() != 2 || dims[0] < 0 || dims[1] < 0 ||
      dims[0] == dims[1]) {
    return emitError() << "expects 'dims' to be two different loops";
  }
  if ((panelWidth > 0) != (panelDim >= 0) || panelWidth < 0 ||
      (panelDim >= 0 && !llvm::is_contained(dims.asArrayRef(), panelDim))) {
    return emitError() << "expects 'panel_dim' (one of 'dims') and a "
                          "'panel_width' > 0 together, or neither";
  }
  if (reuse &&
      (reuse.empty() || minReuse <= 0 ||
       llvm::any_of(reuse.asArrayRef(), [](int64_t d) { return d < 0; }))) {
    return emitError() << "expects 'reuse' loops with a 'min_reuse' > 0";
  }
  return success();
}

unsigned mlir::kiln::gpuChipVersion(StringRef gpu) {
  unsigned version = 0;
  if (!gpu.consume_front("sm_") || gpu.getAsInteger(10, version) ||
      version < 50) {
    return 0;
  }
  return version;
}

bool mlir::kiln::isGpuChip(StringRef gpu) { return gpuChipVersion(gpu) != 0; }

std::string mlir::kiln::gpuMathError(StringRef math, StringRef gpu) {
  if (math == "fp32") {
    return "";
  }
  if (math != "tf32" && math != "tf32x3" && math != "bf16") {
    return "math '" + math.str() +
           "' is not a GPU math mode: use fp32 (the default), tf32, tf32x3 "
           "or bf16";
  }
  if (gpuChipVersion(gpu) < 80) {
    return "math " + math.str() +
           " (tensor cores, mma.sync) needs an NVIDIA GPU of sm_80 or newer, "
           "and the code is compiled for " +
           (gpu.empty() ? std::string("no GPU architecture (kiln.target)")
                        : "'" + gpu.str() + "'");
  }
  return "";
}

LogicalResult TargetAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef cpu, StringRef features,
                                 int64_t l1DataBytes, int64_t l2Bytes,
                                 StringRef gpu) {
  if (!gpu.empty() && !isGpuChip(gpu)) {
    return emitError() << "expects 'gpu' to be an NVIDIA GPU architecture "
                          "(sm_80, sm_90, ...), got '"
                       << gpu << "'";
  }
  auto isNameChar = [](char c) {
    return llvm::isAlnum(c) || c == '-' || c == '_' || c == '.';
  };
  if (cpu.empty() || cpu == "host" || !llvm::all_of(cpu, isNameChar)) {
    return emitError() << "expects a resolved LLVM CPU name, got '" << cpu
                       << "'";
  }
  llvm::SmallVector<StringRef> list;
  features.split(list, ',', -1, /*KeepEmpty=*/true);
  for (StringRef feature : list) {
    if (features.empty()) {
      break;
    }
    if (feature.size() < 2 || (feature[0] != '+' && feature[0] != '-') ||
        !llvm::all_of(feature.drop_front(), isNameChar)) {
      return emitError() << "expects features as +name or -name separated "
                            "by commas, got '"
                         << feature << "'";
    }
  }
  constexpr int64_t kMinCache = 1024, kMaxCache = int64_t(1) << 30;
  for (auto [name, bytes] :
       {std::pair<StringRef, int64_t>{"l1DataBytes", l1DataBytes},
        {"l2Bytes", l2Bytes}}) {
    if (bytes < kMinCache || bytes > kMaxCache) {
      return emitError() << "expects '" << name << "' in [" << kMinCache << ", "
                         << kMaxCache << "], got " << bytes;
    }
  }
  return success();
}

LogicalResult KilnDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attribute) {
  StringRef attr = attribute.getName().getValue();
  if (attr == kLossTokensAttr) {
    auto fn = dyn_cast<FunctionOpInterface>(op);
    auto fields = dyn_cast<DictionaryAttr>(attribute.getValue());
    auto arg = fields ? fields.getAs<IntegerAttr>("arg") : IntegerAttr();
    if (!fn || !arg || arg.getInt() < 0) {
      return op->emitOpError() << "'" << kLossTokensAttr
                               << "' must name an argument of the function "
                                  "({arg = <index>, ...})";
    }
    if (arg.getInt() >= int64_t(fn.getNumArguments())) {
      if (!llvm::any_of(fn.getArgumentTypes(),
                        [](Type t) { return isa<RankedTensorType>(t); }) &&
          fn.getNumArguments() > 0) {
        return success(); // lowered: arguments expanded
      }
      return op->emitOpError() << "'" << kLossTokensAttr
                               << "' must name an argument of the function "
                                  "({arg = <index>, ...})";
    }
    // Checked while the function takes tensors (not after bufferization
    // and conversion to LLVM, where the attribute rides along).
    Type type = fn.getArgumentTypes()[arg.getInt()];
    auto ids = dyn_cast<RankedTensorType>(type);
    bool tensors = llvm::any_of(fn.getArgumentTypes(), [](Type t) {
      return isa<RankedTensorType>(t);
    });
    if (tensors && (!ids || !(ids.getElementType().isInteger(32) ||
                              ids.getElementType().isInteger(64)))) {
      return op->emitOpError() << "'" << kLossTokensAttr << "' names argument #"
                               << arg.getInt()
                               << ", which is not an i32 or i64 tensor";
    }
    for (NamedAttribute field : fields) {
      StringRef key = field.getName().getValue();
      auto reduction = dyn_cast<StringAttr>(field.getValue());
      bool ok = key == "arg" ||
                (key == "ignore_index" && isa<IntegerAttr>(field.getValue())) ||
                (key == "reduction" && reduction &&
                 (reduction.getValue() == "mean" ||
                  reduction.getValue() == "sum"));
      if (!ok) {
        return op->emitOpError()
               << "'" << kLossTokensAttr << "' has a bad field '" << key
               << "' (arg, ignore_index: integers; reduction: \"mean\" or "
                  "\"sum\")";
      }
    }
    return success();
  }
  if (attr == kParametersAttr) {
    if (!isa<ModuleOp>(op) || !isa<ArrayAttr>(attribute.getValue())) {
      return op->emitOpError() << "'" << kParametersAttr
                               << "' must be an array on a module";
    }
    return success(); // entries: readParams in the lowering
  }
  if (attr == kTargetAttr) {
    if (!isa<ModuleOp>(op) || !isa<TargetAttr>(attribute.getValue())) {
      return op->emitOpError() << "'" << kTargetAttr
                               << "' must be a #kiln.target<...> on a module";
    }
    return success();
  }
  if (attr == kGpuCostAttr) {
    auto functions = dyn_cast<DictionaryAttr>(attribute.getValue());
    if (!isa<ModuleOp>(op) || !functions ||
        !llvm::all_of(functions, [](NamedAttribute f) {
          return isa<DictionaryAttr>(f.getValue());
        })) {
      return op->emitOpError() << "'" << kGpuCostAttr
                               << "' must be a dictionary of dictionaries "
                                  "(one per function) on a module";
    }
    return success();
  }
  if (attr == kCpuTilesAttr) {
    auto tiles = dyn_cast<CpuTilesAttr>(attribute.getValue());
    if (!tiles || op->getName().getDialectNamespace() != "linalg") {
      return op->emitOpError() << "'" << kCpuTilesAttr
                               << "' must be a #kiln.cpu_tiles<...> on a "
                                  "linalg op";
    }
    return success(); // its loop count: the passes that apply it
  }
  if (isCodegenMarker(attr)) {
    return success();
  }
  return op->emitOpError() << "has an unknown attribute '" << attr << "'";
}
