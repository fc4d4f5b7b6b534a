//===- gpt.cpp - A GPT-2 style decoder, built with the DSL and run --------===//
//
// gpt-tiny of BENCHMARKS.md (65-character vocabulary, d = 128, 4 heads, 4
// layers): builds the model, compiles it in-process, runs the forward pass
// for two batch shapes through the same compiled function and prints shapes
// and a few values, as the seed documents do.
//
//===----------------------------------------------------------------------===//

#include <kiln/kiln.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

using namespace kiln;

int main(int argc, char **argv) try {
  dsl::Module module;
  dsl::models::GptConfig config = dsl::models::gptTiny();
  dsl::models::addGptForward(module, config);
  if (argc > 1 && std::string(argv[1]) == "--dump-ir") {
    fmt::print("{}\n", module.str());
  }

  CompiledModel model(module, /*seed=*/1234);
  fmt::print("gpt-tiny: V={} d={} heads={} layers={} d_ff={}, {} parameters\n",
             config.vocabSize, config.dModel, config.numHeads, config.numLayers,
             config.dFF, model.parameters().numParameters());
  fmt::print("compiled in {:.2f} s (MLIR pipeline) + {:.2f} s (LLVM)\n",
             model.jit().pipelineSeconds(), model.jit().codegenSeconds());

  for (auto [batch, length] : {std::pair<int64_t, int64_t>{1, 8}, {2, 5}}) {
    std::vector<int64_t> ids(batch * length);
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = int64_t((i * 7 + 3) % config.vocabSize);
    }
    Tensor idx = Tensor::fromVector<int64_t>({batch, length}, ids);
    Tensor logits = model.run("forward", {{"idx", idx}})[0];
    fmt::print("idx {} -> logits {}\n", formatShape(idx.shape()),
               formatShape(logits.shape()));
    const float *row = logits.data<float>();
    fmt::print("  logits[0, 0, :4] = [{:.4f}]\n",
               fmt::join(std::vector<float>(row, row + 4), ", "));
  }
  return 0;
} catch (const std::exception &e) { // kiln::Error, or bad_alloc and the like
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
