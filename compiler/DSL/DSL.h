//===- DSL.h - The C++ model DSL: everything a model file needs --*- C++
//-*-===//
//
// Include this to write a transformer model as plain C++: Module, Graph and
// Var (Graph.h), one function per kiln op and the arithmetic operators
// (Ops.h), and the PyTorch-style modules (NN.h). The reference models are in
// Models.h.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_DSL_DSL_H
#define KILN_COMPILER_DSL_DSL_H

#include "compiler/DSL/Graph.h"
#include "compiler/DSL/NN.h"
#include "compiler/DSL/Ops.h"

#endif // KILN_COMPILER_DSL_DSL_H
