//===- OpLevelProgram.cpp - an entry as PyNative Mode runs it -------------===//

#include "dialects/MF/IR/OpLevelProgram.h"

using namespace mlir;
using namespace mlir::mf;

OpLevelProgram::OpLevelProgram(func::FuncOp entry) {
  for (BlockArgument argument : entry.getArguments()) {
    ids_[argument] = values_.size();
    values_.push_back(argument);
  }
  add(entry.getBody().front());
}

void OpLevelProgram::add(Block &block) {
  for (Operation &op : block) {
    if (isa<func::ReturnOp, YieldOp>(op)) {
      continue;
    }
    if (auto fusion = dyn_cast<FusionOp>(op)) {
      Block &body = fusion.getBody().front();
      for (auto [argument, input] :
           llvm::zip(body.getArguments(), fusion.getInputs())) {
        ids_[argument] = ids_.at(input);
      }
      uint32_t first = ops_.size();
      add(body);
      ranges_[fusion] = {first, static_cast<uint32_t>(ops_.size()) - first};
      for (auto [result, yielded] :
           llvm::zip(fusion.getResults(),
                     cast<YieldOp>(body.getTerminator()).getValues())) {
        ids_[result] = ids_.at(yielded);
      }
      continue;
    }
    index_[&op] = ops_.size();
    ops_.push_back(&op);
    for (Value result : op.getResults()) {
      ids_[result] = values_.size();
      values_.push_back(result);
    }
  }
}
