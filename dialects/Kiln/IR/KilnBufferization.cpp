//===- KilnBufferization.cpp - Bufferizing the kiln kernel ops ------------===//
//
// kiln.flash_attention and kiln.flash_attention_grad (the GPU pipeline's
// attention kernels) are destination-style: on buffers they read their
// inputs and write their inits in place, which one-shot bufferization
// learns from the external models registered here.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnOps.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"

using namespace mlir;
using namespace mlir::bufferization;

namespace {

/// The op on the buffers of its tensors, its inits' buffers replacing its
/// results.
template <typename Op>
struct KernelOpBufferization
    : DstBufferizableOpInterfaceExternalModel<KernelOpBufferization<Op>, Op> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto dps = cast<DestinationStyleOpInterface>(op);
    SmallVector<Value> operands, inits;
    for (OpOperand &operand : op->getOpOperands()) {
      Value v = operand.get();
      if (isa<TensorType>(v.getType())) {
        FailureOr<Value> buffer = getBuffer(rewriter, v, options, state);
        if (failed(buffer)) {
          return failure();
        }
        v = *buffer;
      }
      operands.push_back(v);
      if (dps.isDpsInit(&operand)) {
        inits.push_back(v);
      }
    }
    rewriter.setInsertionPoint(op);
    OperationState bufferized(op->getLoc(), op->getName(), operands,
                              TypeRange(), op->getAttrs());
    rewriter.create(bufferized);
    replaceOpWithBufferizedValues(rewriter, op, inits);
    return success();
  }
};

} // namespace

void mlir::kiln::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, KilnDialect *) {
    FlashAttentionOp::attachInterface<KernelOpBufferization<FlashAttentionOp>>(
        *context);
    FlashAttentionGradOp::attachInterface<
        KernelOpBufferization<FlashAttentionGradOp>>(*context);
  });
}
