//===- Data.h - Training datasets -------------------------------*- C++ -*-===//
//
// Datasets for the examples: a character-level language-modelling corpus
// (CharVocab, CharDataset) and a sentence-pair translation corpus (WordVocab,
// PairDataset). Files are untrusted: anything missing or malformed is a
// kiln::Error naming the file (and line). Every random choice goes through a
// kiln::Rng, so batches are reproducible from a seed on any machine.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_H
#define KILN_RUNTIME_DATA_H

#include "runtime/Init.h"
#include "runtime/Tensor.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln {

/// Which part of a dataset to draw from.
enum class Split { train, validation };

/// "train" or "validation".
const char *name(Split split);

/// The largest file readFile reads: a character dataset holds 8 bytes of
/// token ids per byte of text.
inline constexpr uint64_t kMaxDataFileBytes = 256ull << 20;

/// Reads a whole file (binary). Throws kiln::Error naming the file when it
/// cannot be opened or read, is not a regular file (a directory, a device
/// such as /dev/zero, a pipe) or is larger than kMaxDataFileBytes.
std::string readFile(const std::string &path);

//===----------------------------------------------------------------------===//
// Character-level language modelling
//===----------------------------------------------------------------------===//

/// A byte-level vocabulary: the distinct bytes of a text, sorted, with ids
/// 0..size()-1 in that order.
class CharVocab {
public:
  CharVocab() = default;
  /// The sorted distinct bytes of `text`.
  explicit CharVocab(std::string_view text);

  int64_t size() const { return static_cast<int64_t>(chars_.size()); }
  /// The characters, in id order.
  const std::string &chars() const { return chars_; }
  /// The ids of the characters of `text`. Throws kiln::Error naming the first
  /// character that is not in the vocabulary and its position.
  std::vector<int64_t> encode(std::string_view text) const;
  /// The text of `ids`. Throws kiln::Error for an id out of range.
  std::string decode(const std::vector<int64_t> &ids) const;

private:
  std::string chars_;
  /// Byte -> id, or -1 for bytes not in the vocabulary.
  std::array<int32_t, 256> index_{};
};

/// A language-modelling batch: inputs [B, T] i64 and targets [B, T] i64,
/// where targets[b][t] is the token after inputs[b][t].
struct Batch {
  Tensor inputs;
  Tensor targets;
};

/// A text encoded with its own CharVocab, split into a training part (the
/// first `trainFraction` of the characters) and a validation part (the rest).
class CharDataset {
public:
  /// Loads a text file. Throws kiln::Error for a missing, unreadable or empty
  /// file, or a fraction outside (0, 1].
  static CharDataset fromFile(const std::string &path,
                              double trainFraction = 0.9);
  /// The same from a string; `name` is used in error messages.
  static CharDataset fromText(std::string text, double trainFraction = 0.9,
                              const std::string &name = "<text>");

  const CharVocab &vocab() const { return vocab_; }
  const std::string &text() const { return text_; }
  /// The number of characters in `split`.
  int64_t size(Split split) const;
  /// The token ids of `split`.
  std::vector<int64_t> tokens(Split split) const;

  /// `batch` windows of `length` + 1 consecutive characters of `split`, at
  /// uniformly random offsets drawn from `rng`: inputs are the first `length`
  /// of each window, targets the last `length`. Deterministic given the state
  /// of `rng`. Throws kiln::Error for a non-positive batch or length, or a
  /// length that the split is too short to provide.
  Batch sample(Split split, int64_t batch, int64_t length, Rng &rng) const;

private:
  std::string name_;
  std::string text_;
  CharVocab vocab_;
  std::vector<int64_t> ids_;
  /// ids_[0, trainSize_) is the training split, the rest validation.
  int64_t trainSize_ = 0;
};

//===----------------------------------------------------------------------===//
// Sentence pairs
//===----------------------------------------------------------------------===//

/// A word-level vocabulary with four special tokens. Sentences are lowercased
/// (ASCII letters only; other bytes, e.g. UTF-8 accents, are kept as they are)
/// and split at whitespace, every ASCII punctuation character being a token of
/// its own: "I'm here!" -> ["i", "'", "m", "here", "!"].
class WordVocab {
public:
  static constexpr int64_t pad = 0;
  static constexpr int64_t bos = 1;
  static constexpr int64_t eos = 2;
  static constexpr int64_t unk = 3;
  static constexpr int64_t numSpecial = 4;

  /// Only the special tokens.
  WordVocab();

  /// The words of `sentence` as described above.
  static std::vector<std::string> tokenize(std::string_view sentence);
  /// The special tokens followed by every word that occurs at least
  /// `minCount` times in `sentences`, most frequent first (ties in byte
  /// order), so that the ids do not depend on the order of the sentences.
  static WordVocab build(const std::vector<std::string> &sentences,
                         int64_t minCount = 1);

  int64_t size() const { return static_cast<int64_t>(words_.size()); }
  /// The id of `word`, or `unk`.
  int64_t id(const std::string &word) const;
  /// The word of `id` ("<pad>", "<bos>", "<eos>", "<unk>" for the specials).
  /// Throws kiln::Error for an id out of range.
  const std::string &word(int64_t id) const;
  /// The ids of the words of `sentence` (no <bos>/<eos>).
  std::vector<int64_t> encode(std::string_view sentence) const;
  /// The words of `ids` joined by spaces, skipping <pad> and <bos> and
  /// stopping at the first <eos>.
  std::string decode(const std::vector<int64_t> &ids) const;

private:
  std::vector<std::string> words_;
  std::unordered_map<std::string, int64_t> index_;
};

/// One sentence pair of a translation corpus.
struct SentencePair {
  std::string source;
  std::string target;
};

/// A translation batch of B pairs. S is the longest source in the batch, T
/// one more than the longest target.
struct PairBatch {
  /// [B, S] i64: source ids, padded with <pad> (0).
  Tensor src;
  /// [B, S] i1: 1 for a real token, 0 for padding.
  Tensor srcMask;
  /// [B, T] i64: <bos> + target ids, padded with 0 (the decoder's input).
  Tensor tgt;
  /// [B, T] i64: target ids + <eos>, padded with 0 (= ignore_index).
  Tensor targets;
};

/// How a PairDataset is split and its vocabularies built.
struct PairOptions {
  /// The fraction of the (shuffled) pairs used for training, in (0, 1].
  double trainFraction = 0.9;
  /// Seeds the shuffle that precedes the split.
  uint64_t seed = 0;
  /// Words seen fewer times in the training split become <unk>.
  int64_t minCount = 1;
};

/// A tab-separated corpus of sentence pairs, one per line:
/// `source<TAB>target[<TAB>anything]` (further fields, such as Tatoeba's
/// attribution, are ignored; empty lines are skipped). The pairs are shuffled
/// with `seed`, then split; the source and target vocabularies are built
/// from the training split only.
class PairDataset {
public:
  /// Loads a TSV file. Throws kiln::Error for a missing or unreadable file, a
  /// file without pairs, or a malformed line (with file:line).
  static PairDataset fromFile(const std::string &path,
                              const PairOptions &options = {});
  /// The same from a string; `name` is used in error messages.
  static PairDataset fromText(std::string_view tsv,
                              const PairOptions &options = {},
                              const std::string &name = "<text>");

  const WordVocab &sourceVocab() const { return sourceVocab_; }
  const WordVocab &targetVocab() const { return targetVocab_; }
  /// The number of pairs in `split`.
  size_t size(Split split) const;
  /// The pair at `index` of `split` (in the current order of the training
  /// split). Throws kiln::Error for an index out of range.
  const SentencePair &pair(Split split, size_t index) const;

  /// Reorders the training split (a Fisher–Yates shuffle drawn from `rng`).
  void shuffle(Rng &rng);
  /// The pairs [first, first + count) of `split` as tensors (see PairBatch).
  /// Throws kiln::Error for an empty or out-of-range range.
  PairBatch batch(Split split, size_t first, size_t count) const;

private:
  struct Encoded {
    SentencePair pair;
    std::vector<int64_t> source;
    std::vector<int64_t> target;
  };
  const std::vector<size_t> &order(Split split) const;

  std::string name_;
  std::vector<Encoded> pairs_;
  /// Indices into pairs_ of each split, in their current order.
  std::vector<size_t> train_;
  std::vector<size_t> validation_;
  WordVocab sourceVocab_;
  WordVocab targetVocab_;
};

} // namespace kiln

#endif // KILN_RUNTIME_DATA_H
