//===- runtime.h - Kiln's runtime, for programs running models ---*- C++ -*-===//
//
// The one include of a C++ program that runs models compiled ahead of time
// (link Kiln::Runtime; no LLVM or MLIR): tensors, parameters and their
// files (safetensors, PyTorch state dicts), the compiled model of a
// kiln-compile header (AotModule), training (Trainer, runTraining,
// checkpoints, data, schedules), sampling and generation. A C program
// includes the header kiln-compile generates instead, which is
// self-contained.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_H
#define KILN_RUNTIME_H

#include "runtime/Allocator.h"
#include "runtime/Aot.h"
#include "runtime/Checkpoint.h"
#include "runtime/Communicator.h"
#include "runtime/Data.h"
#include "runtime/Error.h"
#include "runtime/Files.h"
#include "runtime/Function.h"
#include "runtime/Generate.h"
#include "runtime/Init.h"
#include "runtime/ParameterStore.h"
#include "runtime/PreparedWeights.h"
#include "runtime/Safetensors.h"
#include "runtime/Sampling.h"
#include "runtime/Schedule.h"
#include "runtime/StateDict.h"
#include "runtime/Tensor.h"
#include "runtime/Trainer.h"
#include "runtime/TrainingLoop.h"

#endif // KILN_RUNTIME_H
