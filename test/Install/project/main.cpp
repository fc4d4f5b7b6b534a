// The application: trains the compiled model a few steps on a fixed batch
// and runs its forward pass, with Kiln's runtime only.
#include "tiny_model.h"

#include "runtime/Aot.h"
#include "runtime/Trainer.h"

#include <cstdio>
#include <memory>

int main() {
  auto model = std::make_shared<kiln::AotModule>(tiny_model_model);
  kiln::Trainer trainer(model, /*seed=*/1);
  kiln::Tensor idx = kiln::Tensor::fromVector<int64_t>(
      {2, 6}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2});
  kiln::Tensor targets = kiln::Tensor::fromVector<int64_t>(
      {2, 6}, {2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2, 3});
  float first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    last = trainer.step({{"idx", idx}, {"targets", targets}}, 0.5f);
    first = step == 0 ? last : first;
  }
  kiln::Tensor logits = trainer.run("forward", {{"idx", idx}})[0];
  std::printf("loss %.3f -> %.3f, logits [%lld, %lld, %lld]\n", first, last,
              (long long)logits.shape()[0], (long long)logits.shape()[1],
              (long long)logits.shape()[2]);
  return last < first ? 0 : 1;
}
