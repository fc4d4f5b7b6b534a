//===- RowGroups.h - Linalg ops one GPU block per row can run ---*- C++ -*-===//
//
// Softmax, layer norm and a loss are short chains of linalg ops over the same
// rows: reductions along each row, and elementwise work on the rows and on
// what the reductions produced. A GPU runs such a chain as one kernel with a
// block per row, the ops one after the other with a barrier between them,
// where one kernel per op would launch several times and write every
// intermediate result to memory and read it back. kiln-outline-kernels
// {group-rows} puts such chains into one kernel; kiln-gpu-kernels builds it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CODEGEN_COMMON_ROWGROUPS_H
#define KILN_COMPILER_CODEGEN_COMMON_ROWGROUPS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace mlir::kiln {

/// The number r of row dimensions with which `ops` (linalg ops on buffers,
/// in program order) form a row group, or nothing. In a row group:
///  - every op with reduction loops has r parallel loops, first, and reduces
///    over all of its others (a block reduces each row); there is at least
///    one such op, and at least two ops that are not fills;
///  - every other op has at least r loops (exactly 0 where r is 0: a group
///    over the whole tensor only does scalar work after its reductions);
///  - every operand is indexed by the op's first r loops, in order, as its
///    first r indices (row-local), or by none of them (the same for every
///    row), and an operand of the second kind, or a buffer an op's body
///    reads from outside it, is not written by any op of the group;
///  - an op that reads a buffer it writes reads it with the map it writes
///    it with (each element by the thread that writes it);
///  - the ops are connected through buffers that they both index row-locally
///    (so the rows of each op are the same rows), and their bodies write
///    nothing.
/// Row i of every buffer that the group writes is then only touched by
/// block i. Different values are taken to be different memory: the caller
/// makes sure that no two of the ops' buffers overlap where one is written.
std::optional<unsigned> rowGroupRank(ArrayRef<linalg::LinalgOp> ops);

} // namespace mlir::kiln

#endif // KILN_COMPILER_CODEGEN_COMMON_ROWGROUPS_H
