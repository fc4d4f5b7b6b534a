# -*- Python -*-
# lit configuration for Kiln's FileCheck tests.

import os
import shutil
import subprocess
import sys

import lit.formats
from lit.llvm import llvm_config

config.name = "Kiln"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_obj_root, "test")
# Inputs of other tests and the user project of test/Install are not tests.
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Unit",
                   "Inputs", "project"]

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["kiln-opt", "kiln-compile"], [config.kiln_tools_dir, config.llvm_tools_dir]
)
llvm_config.add_tool_substitutions(
    [
        "kiln-example-gpt",
        "kiln-example-bert-embeddings",
        "kiln-example-transformer",
        "kiln-example-tiny-lm",
        "kiln-example-shakespeare",
        "kiln-example-llama",
        "kiln-example-translate",
        "kiln-example-custom-loop",
        "kiln-precision-check",
        "kiln-shakespeare-train",
        "kiln-shakespeare-generate",
    ],
    [os.path.join(config.kiln_obj_root, "examples")],
)

# Data-parallel runs (test/Distributed): where Kiln::MPI was built. mpirun
# runs as root in CI, places 3 ranks on 2 cores, and ends a hung job.
mpirun = shutil.which("mpirun")
if mpirun and os.path.exists(os.path.join(config.kiln_tools_dir, "kiln-data-parallel-check")):
    config.available_features.add("mpi")
    config.substitutions.append(
        ("%mpirun", mpirun + " --allow-run-as-root --oversubscribe --bind-to none"
         " --timeout 120 -x OMP_NUM_THREADS=1"))
    llvm_config.add_tool_substitutions(["kiln-data-parallel-check"], [config.kiln_tools_dir])
else:
    lit_config.note("no mpirun or no Kiln::MPI: data-parallel runs are not tested")

# A plain C/C++ compiler, for the generated headers.
config.substitutions.append(("%clangxx", os.path.join(config.llvm_tools_dir, "clang++")))
config.substitutions.append(("%clang", os.path.join(config.llvm_tools_dir, "clang")))
config.substitutions.append(("%kiln_src", config.kiln_src_root))
config.substitutions.append(("%kiln_obj", config.kiln_obj_root))
# The include paths of the runtime and dialect layers, as clang response
# files (test/Layering/CMakeLists.txt).
config.substitutions.append(
    ("%kiln_layer_flags", os.path.join(config.kiln_obj_root, "test", "Layering")))

# ptxas (CUDA), for the PTX of kiln-to-gpu; tests that need it are
# UNSUPPORTED where it is absent.
ptxas = shutil.which("ptxas") or (
    "/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None)
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
else:
    lit_config.note("ptxas not found: the PTX of kiln-to-gpu is not checked")
config.substitutions.append(("%python", sys.executable))
# Private mount namespaces (root, or user namespaces), for the tests of
# read-only and full output directories.
try:
    if subprocess.run(["unshare", "-m", "true"], stderr=subprocess.DEVNULL).returncode == 0:
        config.available_features.add("mount-namespaces")
except OSError:
    pass
if "mount-namespaces" not in config.available_features:
    lit_config.note("no mount namespaces (unshare -m): read-only and full "
                    "output directories are not tested")
# The sanitizers of a KILN_SANITIZE build: programs that link Kiln's
# instrumented libraries need them too.
config.substitutions.append(("%kiln_sanitize", config.kiln_sanitize))
# Where kiln-to-gpu finds libdevice.
llvm_config.with_system_environment(["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"])

# The x86-64 levels this host runs (tests run code compiled for a level only
# where the CPU has its instructions).
try:
    with open("/proc/cpuinfo") as cpuinfo:
        flags = set()
        for line in cpuinfo:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
except OSError:
    flags = set()
if {"avx2", "fma", "bmi2", "movbe"} <= flags:
    config.available_features.add("x86-64-v3")
if {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"} <= flags:
    config.available_features.add("x86-64-v4")
# bf16 products (vdpbf16ps) run where the CPU has AVX512-BF16.
if "avx512_bf16" in flags:
    config.available_features.add("avx512bf16")
