//===- kiln-compile.cpp - Compile kiln IR to an object and a header -------===//
//
//   kiln-compile model.mlir -o model.o --header model.h --name model
//                [--cpu host|x86-64|x86-64-v2|x86-64-v3|x86-64-v4|<llvm cpu>]
//                [--functions forward,decode,train_step] [--gpu sm_90]
//                [--gpu-math fp32|tf32|tf32x3|bf16]
//
// Every public function of the module becomes a C entry point; see
// compiler/Target/AOT/Aot.h.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/AOT/Aot.h"
#include "runtime/Files.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"

#include <fmt/format.h>

using namespace llvm;

static cl::opt<std::string> input(cl::Positional, cl::desc("<model.mlir>"),
                                  cl::Required);
static cl::opt<std::string> output("o",
                                   cl::desc("Object file (.o) or static "
                                            "library (.a) to write"),
                                   cl::value_desc("file"), cl::Required);
static cl::opt<std::string> header("header", cl::desc("C/C++ header to write"),
                                   cl::value_desc("file"), cl::Required);
static cl::opt<std::string>
    name("name", cl::desc("C identifier prefixing every symbol"),
         cl::value_desc("identifier"), cl::Required);
static cl::opt<std::string>
    cpu("cpu",
        cl::desc("Target CPU: host (default) or an LLVM CPU name such as "
                 "x86-64-v3 for binaries that run on other machines"),
        cl::init("host"));
static cl::list<std::string>
    functions("functions",
              cl::desc("The functions to compile, comma-separated "
                       "(default: every public function)"),
              cl::CommaSeparated, cl::value_desc("name,..."));
static cl::opt<std::string>
    gpu("gpu",
        cl::desc("Run the model on an NVIDIA GPU of this architecture "
                 "(sm_80, sm_90): kernels in PTX, host code for --cpu"),
        cl::value_desc("sm_XX"), cl::init(""));
static cl::opt<std::string>
    gpuMath("gpu-math",
            cl::desc("With --gpu: the matrix products' arithmetic, fp32 "
                     "(default), tf32, tf32x3 or bf16 (tensor cores; sm_80 "
                     "and "
                     "newer)"),
            cl::value_desc("fp32|tf32|tf32x3|bf16"), cl::init("fp32"));
static cl::opt<std::string>
    precision("precision",
              cl::desc("CPU code's matrix products: fp32 (default), or bf16 "
                       "(bf16 values, f32 sums; needs AVX512-BF16)"),
              cl::value_desc("fp32|bf16"), cl::init("fp32"));
static cl::opt<std::string> bf16Kernels(
    "bf16-kernels",
    cl::desc("With --precision bf16: the products' kernels, auto (default: "
             "AMX tiles where the CPU has AMX, else vdpbf16ps), dot, amx, or "
             "amx-emulated (the AMX kernels on vdpbf16ps, for checking)"),
    cl::value_desc("auto|dot|amx|amx-emulated"), cl::init("auto"));
static cl::opt<unsigned> optLevel("O", cl::desc("LLVM optimization level"),
                                  cl::init(3), cl::Prefix);
static cl::opt<std::string>
    dumpDirectory("dump-dir", cl::desc("Write the IR of every stage here"),
                  cl::init(""));

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv,
                              "Kiln ahead-of-time compiler: kiln IR to an "
                              "object file and a C header\n");
  if (gpu.getNumOccurrences() > 0 && gpu.empty()) {
    fmt::print(stderr, "kiln-compile: --gpu needs an NVIDIA GPU architecture "
                       "(sm_80, sm_90, ...); leave it out for the CPU\n");
    return 1;
  }
  for (const cl::opt<std::string> *written : {&output, &header}) {
    if (input != "-" && kiln::sameFile(input, *written)) {
      fmt::print(stderr,
                 "kiln-compile: -{} '{}' names the input: it would be "
                 "overwritten\n",
                 written == &output ? "o" : "-header", written->getValue());
      return 1;
    }
  }
  auto buffer = MemoryBuffer::getFileOrSTDIN(input);
  if (!buffer) {
    fmt::print(stderr, "kiln-compile: cannot read '{}': {}\n", input.getValue(),
               buffer.getError().message());
    return 1;
  }
  kiln::AotOptions options;
  options.name = name;
  options.lowering.cpu = cpu;
  options.optLevel = optLevel;
  options.lowering.dumpDirectory = dumpDirectory;
  options.lowering.dumpStem = name;
  if (input != "-") {
    options.lowering.sourcePath = input;
  }
  options.lowering.functions.assign(functions.begin(), functions.end());
  options.lowering.gpuChip = gpu;
  options.lowering.gpuMath = gpuMath;
  options.lowering.precision = precision;
  options.lowering.bf16Kernels = bf16Kernels;
  try {
    kiln::AotResult result =
        kiln::compileAheadOfTime((*buffer)->getBuffer().str(),
                                 "'" + input + "'", options, output, header);
    fmt::print("kiln-compile: {} ({} functions, cpu {}{}) in {:.1f} s "
               "(MLIR {:.1f} s, LLVM {:.1f} s) -> {}, {}\n",
               name.getValue(), result.functions.size(), cpu.getValue(),
               gpu.empty() ? "" : ", gpu " + gpu.getValue(),
               result.pipelineSeconds + result.codegenSeconds,
               result.pipelineSeconds, result.codegenSeconds, output.getValue(),
               header.getValue());
    return 0;
  } catch (const std::exception &e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
}
