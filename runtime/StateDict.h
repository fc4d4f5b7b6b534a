//===- StateDict.h - Parameters saved under other names ----------*- C++ -*-===//
//
// A state dict saved by PyTorch (or Hugging Face) names a model's tensors as
// its modules do ("transformer.h.0.attn.c_attn.weight") and may store some
// transposed (GPT-2's Conv1D weights are [in, out]). A StateDictMapping says
// how such a file's tensors become the parameters of a Kiln model: renaming
// rules with wildcards, file tensors to leave out, and parameters to
// transpose. Applying it refuses, with every problem listed, whatever is left
// unmatched or of the wrong shape, so a mapping is either right or an error.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_STATEDICT_H
#define KILN_RUNTIME_STATEDICT_H

#include "runtime/ParameterStore.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

/// The longest tensor name or pattern a mapping takes (PyTorch's names are
/// a few dozen characters); longer ones are refused, not matched.
inline constexpr size_t kMaxStateDictNameLength = 4096;

/// Patterns match whole names: `*` stands for one or more characters other
/// than '.', one component or part of one ("h.*.attn"); `**` for any run of
/// characters, dots included, possibly empty ("encoder.**"). Every other
/// character stands for itself. Each wildcard takes the longest run that
/// lets the rest of the pattern match. Matching takes time linear in the
/// name's length.
struct StateDictMapping {
  /// A renaming rule: a file name matching `from` becomes `to`, whose
  /// wildcards take what `from`'s matched, in order (both sides have the
  /// same wildcards: "transformer.h.*.ln_1.**" -> "h.*.ln1.**").
  struct Rename {
    std::string from;
    std::string to;
  };
  /// Tried in order on every file name; the first that matches renames it.
  /// Names no rule matches are kept as they are.
  std::vector<Rename> renames = {};
  /// File tensors to leave out (patterns on the file's names): buffers the
  /// model has no parameter for, like Hugging Face GPT-2's causal masks
  /// "h.*.attn.bias".
  std::vector<std::string> ignore = {};
  /// Parameters stored transposed in the file (patterns on the model's
  /// names, after renaming): each must be 2-D in the file, and is loaded as
  /// its transpose (Hugging Face GPT-2's Conv1D weights, [in, out], into
  /// Kiln's [out, in] Linear weights).
  std::vector<std::string> transpose = {};
};

/// What the wildcards of `pattern` (StateDictMapping's syntax) match in
/// `name`, in order, or nothing when it does not match the whole name.
/// Throws kiln::Error for a malformed pattern or a name or pattern longer
/// than kMaxStateDictNameLength.
std::optional<std::vector<std::string>>
matchStateDictPattern(const std::string &pattern, const std::string &name);

/// The tensors of a file (`tensors`, by the file's names) as the parameters
/// of `store`: renamed, filtered and transposed as `mapping` says, in the
/// store's order. Throws kiln::Error listing every problem: a malformed
/// pattern or rule, a file tensor that names no parameter after renaming, two
/// file tensors for one parameter, a transpose of a tensor that is not 2-D,
/// a shape or dtype that differs from the parameter's, and a parameter no
/// file tensor gives; each names the file's name and the model's.
NamedTensors mapStateDict(const NamedTensors &tensors,
                          const StateDictMapping &mapping,
                          const ParameterStore &store);

/// Loads the safetensors file `path` (or a sharded checkpoint's index:
/// loadCheckpointTensors) into `store` through `mapping`
/// (mapStateDict, then ParameterStore::setFrom: on any problem nothing is
/// changed) and returns the file's metadata.
std::map<std::string, std::string>
loadParameters(const std::string &path, ParameterStore &store,
               const StateDictMapping &mapping);

} // namespace kiln

#endif // KILN_RUNTIME_STATEDICT_H
