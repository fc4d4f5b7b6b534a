# Kiln's two commands (see README.md):
#   make run    install what is missing, build, and run the main example
#   make test   install what is missing, build, and run every test
# Everything else here is a step of those two.

BUILD_DIR ?= build
LLVM_DIR  ?= /usr/lib/llvm-22
CMAKE_FLAGS ?=
ARGS ?=

.PHONY: run test deps configure build clean format

run: build
	@bash examples/run-main.sh $(BUILD_DIR) $(ARGS)

test: build
	@bash test/run-all.sh $(BUILD_DIR)

deps:
	@bash cmake/install-deps.sh

configure: deps
	@cmake -G Ninja -S . -B $(BUILD_DIR) \
	  -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_C_COMPILER=$(LLVM_DIR)/bin/clang \
	  -DCMAKE_CXX_COMPILER=$(LLVM_DIR)/bin/clang++ \
	  -DLLVM_USE_LINKER=lld \
	  -DMLIR_DIR=$(LLVM_DIR)/lib/cmake/mlir \
	  -DLLVM_EXTERNAL_LIT=$(LLVM_DIR)/bin/lit \
	  $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)

# Reformat the C++ sources (needs Debian's clang-format-22).
format:
	@$(LLVM_DIR)/bin/clang-format -i $$(git ls-files '*.cpp' '*.h')
