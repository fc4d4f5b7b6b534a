//===- kiln.h - Kiln for C++ programs that write models ----------*- C++ -*-===//
//
// The one include of a C++ program that writes models (link Kiln::Kiln): the
// DSL and the reference models, JIT compilation (CompiledModel: run graphs,
// gradients by parameter name), compiled training steps (compileTraining,
// then kiln::Trainer or runTraining), model generators for ahead-of-time
// compilation (generatorMain), and everything of <kiln/runtime.h>.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_KILN_H
#define KILN_KILN_H

#include "kiln/runtime.h"

#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "compiler/Target/AOT/Generator.h"
#include "compiler/Target/JIT/CompiledModel.h"
#include "compiler/Target/JIT/PrecisionCheck.h"
#include "compiler/Target/JIT/Training.h"

#endif // KILN_KILN_H
