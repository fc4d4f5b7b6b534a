//===- Aot.cpp - Compile kiln IR ahead of time ----------------------------===//
//
// Lowers with Lowering.h, translates to LLVM IR, and adds per public
// function F of model N:
//   - F renamed to an internal N.F, so that models do not clash;
//   - an internal packed wrapper `void (void **)` (the calling convention of
//     runtime/Function.h, the same as MLIR's ExecutionEngine);
//   - a kiln_function entry (name, spec text, wrapper) in N_functions;
//   - the C entry point N_F, which calls kiln_call on that entry;
// and the model N_model. Then optimizes and emits an object for the CPU.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/AOT/Aot.h"

#include "compiler/Codegen/CPU/TargetInfo.h"

#include "runtime/AotAbi.h"
#include "runtime/Error.h"
#include "runtime/Files.h"
#include "runtime/SpecText.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Object/ArchiveWriter.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <cctype>
#include <chrono>
#include <fstream>

namespace kiln {

static const char kAbiHeader[] =
#include "compiler/Target/AOT/AotAbi.inc"
    ;

namespace {

bool isIdentifier(const std::string &s) {
  if (s.empty() ||
      !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) {
    return false;
  }
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') {
      return false;
    }
  }
  return true;
}

/// `text` (an argument name, a file name: untrusted) as it may appear in a
/// C comment of the generated header: printable ASCII but '*' and '\\',
/// every other byte as \xHH. A "*/" would close the comment and put the
/// rest into every program that includes the header.
std::string inComment(std::string_view text) {
  std::string out;
  for (char byte : text) {
    auto c = static_cast<unsigned char>(byte);
    if (c < 0x20 || c >= 0x7f || c == '\\' || c == '*') {
      const char *hex = "0123456789abcdef";
      out += {'\\', 'x', hex[c >> 4], hex[c & 15]};
    } else {
      out += char(c);
    }
  }
  return out;
}

std::string upper(std::string s) {
  for (char &c : s) {
    c = char(std::toupper(static_cast<unsigned char>(c)));
  }
  return s;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

/// A private constant C string.
llvm::Constant *cString(llvm::Module &m, const std::string &text,
                        const std::string &name) {
  auto *init = llvm::ConstantDataArray::getString(m.getContext(), text);
  auto *global = new llvm::GlobalVariable(
      m, init->getType(), true, llvm::GlobalValue::PrivateLinkage, init, name);
  global->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  return global;
}

/// `void wrapper(void **args)`: loads each argument of `fn` through
/// args[i] and stores the result through args[n].
llvm::Function *packedWrapper(llvm::Function *fn, const std::string &name) {
  llvm::Module &m = *fn->getParent();
  llvm::LLVMContext &ctx = m.getContext();
  auto *ptr = llvm::PointerType::get(ctx, 0);
  auto *wrapper = llvm::Function::Create(
      llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr}, false),
      llvm::GlobalValue::InternalLinkage, name, m);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", wrapper));
  llvm::Value *args = wrapper->getArg(0);
  std::vector<llvm::Value *> values;
  for (auto [i, arg] : llvm::enumerate(fn->args())) {
    llvm::Value *slot =
        b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, args, int64_t(i)), "slot");
    values.push_back(b.CreateLoad(arg.getType(), slot));
  }
  llvm::Value *result = b.CreateCall(fn, values);
  if (!fn->getReturnType()->isVoidTy()) {
    llvm::Value *slot = b.CreateLoad(
        ptr, b.CreateConstGEP1_64(ptr, args, int64_t(fn->arg_size())));
    b.CreateStore(result, slot);
  }
  b.CreateRetVoid();
  return wrapper;
}

/// Writes `bytes` to `path`.tmp (replacing what a killed run left there)
/// and returns that name.
std::string writeTemporary(const std::string &path, llvm::StringRef bytes) {
  std::string temp = path + ".tmp";
  std::error_code ec;
  llvm::raw_fd_ostream os(temp, ec);
  if (ec) {
    throw Error("kiln: cannot write '" + temp + "': " + ec.message());
  }
  os << bytes;
  os.close();
  if (os.has_error()) {
    llvm::sys::fs::remove(temp);
    throw Error("kiln: cannot write '" + temp + "'");
  }
  return temp;
}

/// Writes each of `files` (path, bytes) to a temporary file, then renames
/// them all into place: a failure writes none of them.
void writeFilesAtomically(
    llvm::ArrayRef<std::pair<std::string, std::string>> files) {
  for (const auto &[path, bytes] : files) {
    if (llvm::sys::fs::is_directory(path)) {
      throw Error("kiln: cannot write '" + path + "': it is a directory");
    }
  }
  std::vector<std::string> temps;
  auto removeTemps = [&] {
    for (const std::string &temp : temps) {
      llvm::sys::fs::remove(temp);
    }
  };
  try {
    for (const auto &[path, bytes] : files) {
      temps.push_back(writeTemporary(path, bytes));
    }
  } catch (...) {
    removeTemps();
    throw;
  }
  for (auto [temp, file] : llvm::zip(temps, files)) {
    if (std::error_code ec = llvm::sys::fs::rename(temp, file.first)) {
      removeTemps();
      throw Error("kiln: cannot write '" + file.first + "': " + ec.message());
    }
  }
}

} // namespace

std::string aotHeader(const std::vector<FunctionSpec> &functions,
                      const AotOptions &options, const std::string &what) {
  const std::string &n = options.name;
  std::string guard = upper(n) + "_KILN_H";
  std::string h;
  h += "/* Generated by kiln-compile from " + inComment(what) +
       ". Do not edit.\n * Model '" + n + "', compiled for CPU '" +
       inComment(options.lowering.cpu) +
       "'. Link its object with Kiln's runtime (KilnRuntime, fmt, libomp). "
       "*/\n\n";
  h += "#ifndef " + guard + "\n#define " + guard + "\n\n";
  h += kAbiHeader;
  h += "\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  h += "/* The whole model (functions and parameters), for kiln::AotModule. "
       "*/\nextern const kiln_model " +
       n + "_model;\n";
  for (const FunctionSpec &f : functions) {
    std::string prefix = upper(n + "_" + f.name);
    h += "\n/* " + f.name + "\n * Arguments, in this order (args[i]):\n";
    for (size_t i = 0; i < f.args.size(); ++i) {
      const ArgSpec &a = f.args[i];
      h += " *   [" + std::to_string(i) + "] " + inComment(a.name) + ": ";
      if (a.isScalar) {
        h += "i64 scalar (a rank-0 KILN_I64 tensor)";
      } else {
        h += std::string(name(a.dtype)) + " " + formatShape(a.shape);
      }
      switch (a.role) {
      case ArgSpec::Role::param:
        h += ", parameter";
        break;
      case ArgSpec::Role::state:
        h += ", optimizer state";
        break;
      case ArgSpec::Role::learningRate:
        h += ", learning rate (finite, >= 0)";
        break;
      case ArgSpec::Role::step:
        h += ", step number (>= 1)";
        break;
      case ArgSpec::Role::seed:
        h += ", dropout seed";
        break;
      case ArgSpec::Role::prepared:
        h += ", the transpose of parameter " + inComment(a.name);
        break;
      case ArgSpec::Role::input:
        break;
      }
      if (a.idBound >= 0) {
        h += ", ids in [0, " + std::to_string(a.idBound) + ")";
      }
      h += "\n";
    }
    h += " * Results (results[i]; release each with "
         "kiln_tensor_release):\n";
    for (size_t i = 0; i < f.results.size(); ++i) {
      h += " *   [" + std::to_string(i) + "] " + inComment(f.results[i].name) +
           ": " + name(f.results[i].dtype) + " " +
           formatShape(f.results[i].shape);
      if (f.results[i].updates >= 0) {
        h += ", written into args[" + std::to_string(f.results[i].updates) +
             "] in place (the result is a view of it)";
      }
      h += "\n";
    }
    h += " * '?' sizes are free but must agree as the model needs; the "
         "arguments are\n * checked before the call. Returns 0 on success; "
         "otherwise nonzero, with the\n * results untouched and the reason "
         "in kiln_last_error(). */\n";
    h += "#define " + prefix + "_NUM_ARGS " + std::to_string(f.args.size()) +
         "\n";
    h += "#define " + prefix + "_NUM_RESULTS " +
         std::to_string(f.results.size()) + "\n";
    h += "int " + n + "_" + f.name +
         "(const kiln_tensor *args, size_t num_args,\n    kiln_tensor "
         "*results, size_t num_results);\n";
  }
  h += "\n#ifdef __cplusplus\n}\n#endif\n\n#endif /* " + guard + " */\n";
  return h;
}

AotResult compileAheadOfTime(const std::string &source, const std::string &what,
                             const AotOptions &options,
                             const std::string &objectPath,
                             const std::string &headerPath) {
  if (!isIdentifier(options.name)) {
    throw Error("kiln: the model name '" + options.name +
                "' must be a C identifier (letters, digits, '_')");
  }
  // Every symbol of the object starts with "<name>_": the C interface's own
  // start with "kiln_" (kiln_call, kiln_model), the compiler's with "_mlir".
  if (options.name == "kiln" || options.name.starts_with("kiln_") ||
      options.name.starts_with("_")) {
    throw Error("kiln: the model name '" + options.name +
                "' would give symbols of the C interface's or the "
                "compiler's own ('kiln_...', '_...'): choose another");
  }
  if (sameFile(objectPath, headerPath)) {
    throw Error("kiln: the object '" + objectPath + "' and the header '" +
                headerPath + "' are the same file");
  }
  // A bad CPU is reported before the pipelines run (the lowering resolves
  // it first).
  LoweredModule lowered =
      lowerSourceToLLVMDialect(source, what, options.lowering);
  std::unique_ptr<llvm::TargetMachine> machine = createTargetMachine(
      mlir::kiln::cpu::getTarget(*lowered.module), options.optLevel);
  AotResult result;
  result.pipelineSeconds = lowered.seconds;
  result.functions = lowered.functions;
  for (const FunctionSpec &f : lowered.functions) {
    if (!isIdentifier(f.name)) {
      throw Error("kiln: function '" + f.name +
                  "' needs a C identifier as its name");
    }
    // kiln_tensor holds KILN_MAX_RANK sizes: a call could take no larger
    // argument, and would write the arguments it updates in place before
    // failing to return a larger result.
    auto checkRank = [&](const char *what, const std::string &name,
                         const std::vector<int64_t> &shape) {
      if (shape.size() > KILN_MAX_RANK) {
        throw Error("kiln: " + std::string(what) + " '" + name +
                    "' of function '" + f.name + "' has rank " +
                    std::to_string(shape.size()) +
                    ", more than the C interface's KILN_MAX_RANK (" +
                    std::to_string(KILN_MAX_RANK) + ")");
      }
    };
    for (const ArgSpec &a : f.args) {
      checkRank("argument", a.name, a.shape);
    }
    for (const ResultSpec &r : f.results) {
      checkRank("result", r.name, r.shape);
    }
    // <name>_model and <name>_functions are the model's own symbols.
    if (f.name == "model" || f.name == "functions") {
      throw Error("kiln: a function cannot be called '" + f.name +
                  "' (the symbol " + options.name + "_" + f.name +
                  " is the model's own)");
    }
  }

  auto start = std::chrono::steady_clock::now();
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> m =
      mlir::translateModuleToLLVMIR(*lowered.module, llvmContext, options.name);
  if (!m) {
    throw Error("kiln: translating " + what + " to LLVM IR failed");
  }
  const std::string &n = options.name;
  auto *ptr = llvm::PointerType::get(llvmContext, 0);
  auto *i64 = llvm::Type::getInt64Ty(llvmContext);
  auto *i32 = llvm::Type::getInt32Ty(llvmContext);
  auto *functionType = llvm::StructType::get(llvmContext, {ptr, ptr, ptr});
  // Everything but the entry points and the model is internal.
  for (llvm::Function &fn : *m) {
    if (!fn.isDeclaration()) {
      fn.setLinkage(llvm::GlobalValue::InternalLinkage);
    }
  }
  auto *callee = llvm::Function::Create(
      llvm::FunctionType::get(i32, {ptr, ptr, i64, ptr, i64}, false),
      llvm::GlobalValue::ExternalLinkage, "kiln_call", *m);
  std::vector<llvm::Constant *> entries;
  for (const FunctionSpec &f : lowered.functions) {
    llvm::Function *fn = m->getFunction(f.name);
    if (!fn) {
      throw Error("kiln: internal error: no LLVM function '" + f.name + "'");
    }
    fn->setName(n + "." + f.name);
    llvm::Function *wrapper = packedWrapper(fn, n + "." + f.name + ".packed");
    entries.push_back(llvm::ConstantStruct::get(
        functionType,
        {cString(*m, f.name, n + "." + f.name + ".name"),
         cString(*m, serialize(f), n + "." + f.name + ".spec"), wrapper}));
  }
  auto *tableType = llvm::ArrayType::get(functionType, entries.size());
  auto *table = new llvm::GlobalVariable(
      *m, tableType, true, llvm::GlobalValue::InternalLinkage,
      llvm::ConstantArray::get(tableType, entries), n + "_functions");
  for (auto [index, f] : llvm::enumerate(lowered.functions)) {
    auto *entry = llvm::Function::Create(
        llvm::FunctionType::get(i32, {ptr, i64, ptr, i64}, false),
        llvm::GlobalValue::ExternalLinkage, n + "_" + f.name, *m);
    if (entry->getName() != n + "_" + f.name) {
      throw Error("kiln: internal error: the symbol " + n + "_" + f.name +
                  " is taken");
    }
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(llvmContext, "entry", entry));
    llvm::Value *fnEntry =
        b.CreateConstInBoundsGEP2_64(tableType, table, 0, uint64_t(index));
    b.CreateRet(
        b.CreateCall(callee, {fnEntry, entry->getArg(0), entry->getArg(1),
                              entry->getArg(2), entry->getArg(3)}));
  }
  auto *modelType =
      llvm::StructType::get(llvmContext, {i64, ptr, ptr, i64, ptr});
  new llvm::GlobalVariable(
      *m, modelType, true, llvm::GlobalValue::ExternalLinkage,
      llvm::ConstantStruct::get(
          modelType,
          {llvm::ConstantInt::get(i64, KILN_ABI_VERSION),
           cString(*m, n, n + ".model.name"),
           cString(*m, serialize(lowered.params), n + ".model.params"),
           llvm::ConstantInt::get(i64, entries.size()), table}),
      n + "_model");

  optimizeModule(*m, *machine, options.optLevel);
  dumpStage(options.lowering, "ll",
            [&](llvm::raw_ostream &os) { m->print(os, nullptr); });
  llvm::SmallVector<char, 0> object;
  {
    llvm::raw_svector_ostream os(object);
    llvm::legacy::PassManager pm;
    if (machine->addPassesToEmitFile(pm, os, nullptr,
                                     llvm::CodeGenFileType::ObjectFile)) {
      throw Error("kiln: the target cannot emit object files");
    }
    pm.run(*m);
  }
  result.codegenSeconds = secondsSince(start);

  std::string bytes(object.data(), object.size());
  if (llvm::StringRef(objectPath).ends_with(".a")) {
    std::string member = n + ".o";
    std::vector<llvm::NewArchiveMember> members;
    members.emplace_back(llvm::MemoryBufferRef(bytes, member));
    members.back().MemberName = member;
    llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> archive =
        llvm::writeArchiveToBuffer(
            members, llvm::SymtabWritingMode::NormalSymtab,
            llvm::object::Archive::K_GNU, /*Deterministic=*/true,
            /*Thin=*/false);
    if (!archive) {
      throw Error("kiln: cannot make the archive: " +
                  llvm::toString(archive.takeError()));
    }
    bytes = (*archive)->getBuffer().str();
  }
  writeFilesAtomically(
      {{objectPath, bytes},
       {headerPath, aotHeader(lowered.functions, options, what)}});
  return result;
}

} // namespace kiln
