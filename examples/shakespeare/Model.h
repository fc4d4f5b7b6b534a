//===- Model.h - The Shakespeare example's model, built with the DSL
//-------===//
//
// Used by the JIT example and by the generator of the ahead-of-time model, so
// that both compile exactly the same module.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_EXAMPLES_SHAKESPEARE_MODEL_H
#define KILN_EXAMPLES_SHAKESPEARE_MODEL_H

#include "Shakespeare.h"

#include <kiln/kiln.h>

namespace kiln::shakespeare {

inline dsl::models::GptConfig modelConfig(const Options &o, int64_t vocab) {
  dsl::models::GptConfig config;
  config.vocabSize = vocab;
  config.dModel = o.dModel;
  config.numHeads = o.heads;
  config.numLayers = o.layers;
  config.dFF = 4 * o.dModel;
  config.maxSeqLen = o.context;
  config.dropout = o.dropout;
  return config;
}

/// The training loss (with dropout when asked), the evaluation loss and the
/// cached decoder, sharing their parameters by name.
inline void buildModel(dsl::Module &module, const Options &o, int64_t vocab) {
  dsl::models::GptConfig config = modelConfig(o, vocab);
  dsl::models::addGptLoss(module, config, {.training = o.dropout > 0}, "loss");
  if (o.dropout > 0) {
    dsl::models::addGptLoss(module, config, {}, "eval_loss");
  }
  dsl::models::addGptDecode(module, config);
}

inline OptimizerConfig optimizer(const Options &o) {
  OptimizerConfig adamw;
  adamw.beta2 = 0.99;
  adamw.weightDecay = o.weightDecay;
  adamw.clipNorm = 1.0;
  return adamw;
}

} // namespace kiln::shakespeare

#endif // KILN_EXAMPLES_SHAKESPEARE_MODEL_H
