# -*- Python -*-
# lit configuration for Kiln's FileCheck tests.

import os

import lit.formats
from lit.llvm import llvm_config

config.name = "Kiln"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Unit"]

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["kiln-opt"], [config.kiln_tools_dir, config.llvm_tools_dir]
)
llvm_config.add_tool_substitutions(
    [
        "kiln-example-gpt",
        "kiln-example-bert-embeddings",
        "kiln-example-transformer",
        "kiln-example-tiny-lm",
        "kiln-example-shakespeare",
        "kiln-example-translate",
        "kiln-example-custom-loop",
    ],
    [os.path.join(config.kiln_obj_root, "examples")],
)
