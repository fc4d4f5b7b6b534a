//===- InitAll.h - Registration of everything Kiln provides ------*- C++
//-*-===//
//
// The one entry point every Kiln tool uses to register dialects, passes and
// pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_INITALL_H
#define KILN_COMPILER_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace kiln {

/// Adds the kiln dialect and the upstream dialects Kiln uses or lowers to.
void registerAllDialects(mlir::DialectRegistry &registry);

/// Registers every kiln pass and pipeline, and the upstream passes that
/// Kiln's pipelines are made of, with the global pass registry.
void registerAllPasses();

} // namespace kiln

#endif // KILN_COMPILER_INITALL_H
