//===- Data.cpp - Training datasets --------------------------------------===//
//
// Random choices use Rng::next() modulo the range: the bias is below
// range / 2^64, and the result is the same on every platform (no
// std::uniform_int_distribution, whose algorithm differs between libraries).
//
//===----------------------------------------------------------------------===//

#include "runtime/Data.h"

#include "runtime/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <iterator>
#include <map>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace kiln;

const char *kiln::name(Split split) {
  switch (split) {
  case Split::train:
    return "train";
  case Split::validation:
    return "validation";
  }
  return "?";
}

std::string kiln::readFile(const std::string &path) {
  auto fail = [&](const std::string &why) {
    return Error(fmt::format("cannot read '{}': {}", path, why));
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw Error(
        fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat status;
  if (::fstat(fd, &status) != 0) {
    throw fail(std::strerror(errno));
  }
  if (!S_ISREG(status.st_mode)) {
    throw fail(S_ISDIR(status.st_mode)
                   ? "it is a directory"
                   : "it is not a regular file (a device, pipe or socket)");
  }
  auto size = static_cast<uint64_t>(status.st_size);
  if (size > kMaxDataFileBytes) {
    throw fail(fmt::format("it is {} bytes, more than the {} MiB a data file "
                           "may have",
                           size, kMaxDataFileBytes >> 20));
  }
  std::string contents(size, '\0');
  uint64_t done = 0;
  while (done < size) {
    ssize_t got = ::read(fd, contents.data() + done, size - done);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got < 0) {
      throw fail(std::strerror(errno));
    }
    if (got == 0) {
      throw fail("it became shorter while being read");
    }
    done += static_cast<uint64_t>(got);
  }
  return contents;
}

/// Refuses text holding a NUL byte: a binary file, not a corpus.
static void checkText(std::string_view text, const std::string &name) {
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    throw Error(fmt::format("{}: a NUL byte at offset {}: this is a binary "
                            "file, not text",
                            name, nul));
  }
}

/// A byte as it appears in an error message: 'a', or '\x0a' when it is not
/// printable ASCII.
static std::string describeByte(unsigned char byte) {
  if (byte >= 0x20 && byte < 0x7f) {
    return fmt::format("'{}'", static_cast<char>(byte));
  }
  return fmt::format("'\\x{:02x}'", byte);
}

/// Checks a train fraction; `what` names the dataset.
static void checkFraction(double trainFraction, const std::string &what) {
  if (!(trainFraction > 0.0 && trainFraction <= 1.0)) {
    throw Error(fmt::format("{}: the train fraction must be in (0, 1], not {}",
                            what, trainFraction));
  }
}

/// A uniform integer in [0, range) (range > 0).
static uint64_t uniformBelow(Rng &rng, uint64_t range) {
  return rng.next() % range;
}

//===----------------------------------------------------------------------===//
// CharVocab
//===----------------------------------------------------------------------===//

CharVocab::CharVocab(std::string_view text) {
  std::array<bool, 256> seen{};
  for (char c : text) {
    seen[static_cast<unsigned char>(c)] = true;
  }
  index_.fill(-1);
  for (int byte = 0; byte < 256; ++byte) {
    if (seen[byte]) {
      index_[byte] = static_cast<int32_t>(chars_.size());
      chars_.push_back(static_cast<char>(byte));
    }
  }
}

std::vector<int64_t> CharVocab::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    auto byte = static_cast<unsigned char>(text[i]);
    int32_t id = chars_.empty() ? -1 : index_[byte];
    if (id < 0) {
      throw Error(fmt::format("CharVocab::encode: character {} at position {} "
                              "is not in the vocabulary of {} characters",
                              describeByte(byte), i, chars_.size()));
    }
    ids.push_back(id);
  }
  return ids;
}

std::string CharVocab::decode(const std::vector<int64_t> &ids) const {
  std::string text;
  text.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= size()) {
      throw Error(fmt::format("CharVocab::decode: id {} at position {} is out "
                              "of range for a vocabulary of {} characters",
                              ids[i], i, size()));
    }
    text.push_back(chars_[static_cast<size_t>(ids[i])]);
  }
  return text;
}

//===----------------------------------------------------------------------===//
// CharDataset
//===----------------------------------------------------------------------===//

CharDataset CharDataset::fromFile(const std::string &path,
                                  double trainFraction) {
  std::string text = readFile(path);
  if (text.empty()) {
    throw Error(
        fmt::format("'{}' is empty: a character dataset needs text", path));
  }
  return fromText(std::move(text), trainFraction, path);
}

CharDataset CharDataset::fromText(std::string text, double trainFraction,
                                  const std::string &name) {
  if (text.empty()) {
    throw Error(fmt::format("{}: a character dataset needs text", name));
  }
  checkFraction(trainFraction, name);
  checkText(text, name);
  CharDataset dataset;
  dataset.name_ = name;
  dataset.vocab_ = CharVocab(text);
  dataset.ids_ = dataset.vocab_.encode(text);
  dataset.text_ = std::move(text);
  auto total = static_cast<int64_t>(dataset.ids_.size());
  dataset.trainSize_ =
      std::min(total, static_cast<int64_t>(std::floor(
                          static_cast<double>(total) * trainFraction)));
  return dataset;
}

int64_t CharDataset::size(Split split) const {
  return split == Split::train ? trainSize_
                               : static_cast<int64_t>(ids_.size()) - trainSize_;
}

std::vector<int64_t> CharDataset::tokens(Split split) const {
  auto begin = ids_.begin() + (split == Split::train ? 0 : trainSize_);
  return std::vector<int64_t>(begin, begin + size(split));
}

Batch CharDataset::sample(Split split, int64_t batch, int64_t length,
                          Rng &rng) const {
  if (batch <= 0 || length <= 0) {
    throw Error(fmt::format("{}: CharDataset::sample needs a positive batch "
                            "size and length, not batch={} length={}",
                            name_, batch, length));
  }
  int64_t available = size(split);
  if (length >= available) {
    throw Error(fmt::format(
        "{}: the {} split has {} characters, too few for a window of length "
        "{} (which needs {}: the inputs and one more for the targets)",
        name_, name(split), available, length, length + 1));
  }
  int64_t offset = split == Split::train ? 0 : trainSize_;
  Batch result{Tensor::empty({batch, length}, DType::i64),
               Tensor::empty({batch, length}, DType::i64)};
  int64_t *inputs = result.inputs.data<int64_t>();
  int64_t *targets = result.targets.data<int64_t>();
  auto starts = static_cast<uint64_t>(available - length);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t *window =
        ids_.data() + offset + static_cast<int64_t>(uniformBelow(rng, starts));
    std::copy(window, window + length, inputs + b * length);
    std::copy(window + 1, window + length + 1, targets + b * length);
  }
  return result;
}

//===----------------------------------------------------------------------===//
// WordVocab
//===----------------------------------------------------------------------===//

WordVocab::WordVocab() : words_{"<pad>", "<bos>", "<eos>", "<unk>"} {
  for (size_t i = 0; i < words_.size(); ++i) {
    index_.emplace(words_[i], static_cast<int64_t>(i));
  }
}

std::vector<std::string> WordVocab::tokenize(std::string_view sentence) {
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  };
  for (char c : sentence) {
    auto byte = static_cast<unsigned char>(c);
    if (byte == ' ' || byte == '\t' || byte == '\n' || byte == '\r' ||
        byte == '\v' || byte == '\f') {
      flush();
    } else if (byte < 0x80 && std::ispunct(byte)) {
      flush();
      words.emplace_back(1, c);
    } else if (byte >= 'A' && byte <= 'Z') {
      word.push_back(static_cast<char>(byte - 'A' + 'a'));
    } else {
      word.push_back(c);
    }
  }
  flush();
  return words;
}

WordVocab WordVocab::build(const std::vector<std::string> &sentences,
                           int64_t minCount) {
  std::map<std::string, int64_t> counts;
  for (const std::string &sentence : sentences) {
    for (std::string &word : tokenize(sentence)) {
      ++counts[std::move(word)];
    }
  }
  std::vector<std::pair<std::string, int64_t>> kept;
  for (auto &[word, count] : counts) {
    if (count >= minCount) {
      kept.emplace_back(word, count);
    }
  }
  // By count, ties in byte order (std::sort: std::stable_sort uses the
  // deprecated std::get_temporary_buffer in libstdc++ 12).
  std::sort(kept.begin(), kept.end(), [](const auto &a, const auto &b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  WordVocab vocab;
  for (auto &[word, count] : kept) {
    if (vocab.index_.count(word)) {
      continue; // A sentence that spells "<unk>" literally.
    }
    vocab.index_.emplace(word, vocab.size());
    vocab.words_.push_back(word);
  }
  return vocab;
}

int64_t WordVocab::id(const std::string &word) const {
  auto it = index_.find(word);
  return it == index_.end() ? unk : it->second;
}

const std::string &WordVocab::word(int64_t id) const {
  if (id < 0 || id >= size()) {
    throw Error(fmt::format("WordVocab::word: id {} is out of range for a "
                            "vocabulary of {} words",
                            id, size()));
  }
  return words_[static_cast<size_t>(id)];
}

std::vector<int64_t> WordVocab::encode(std::string_view sentence) const {
  std::vector<int64_t> ids;
  for (const std::string &w : tokenize(sentence)) {
    ids.push_back(id(w));
  }
  return ids;
}

std::string WordVocab::decode(const std::vector<int64_t> &ids) const {
  std::string text;
  for (int64_t i : ids) {
    if (i == eos) {
      break;
    }
    if (i == pad || i == bos) {
      continue;
    }
    if (!text.empty()) {
      text.push_back(' ');
    }
    text += word(i);
  }
  return text;
}

//===----------------------------------------------------------------------===//
// PairDataset
//===----------------------------------------------------------------------===//

PairDataset PairDataset::fromFile(const std::string &path,
                                  const PairOptions &options) {
  return fromText(readFile(path), options, path);
}

PairDataset PairDataset::fromText(std::string_view tsv,
                                  const PairOptions &options,
                                  const std::string &name) {
  checkFraction(options.trainFraction, name);
  checkText(tsv, name);
  PairDataset dataset;
  dataset.name_ = name;
  size_t lineNumber = 0;
  size_t position = 0;
  while (position < tsv.size()) {
    size_t end = tsv.find('\n', position);
    if (end == std::string_view::npos) {
      end = tsv.size();
    }
    std::string_view line = tsv.substr(position, end - position);
    position = end + 1;
    ++lineNumber;
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (line.empty()) {
      continue;
    }
    size_t tab = line.find('\t');
    if (tab == std::string_view::npos) {
      throw Error(fmt::format("{}:{}: expected 'source<TAB>target' but the "
                              "line has no tab",
                              name, lineNumber));
    }
    std::string_view source = line.substr(0, tab);
    std::string_view target = line.substr(tab + 1);
    target = target.substr(0, target.find('\t'));
    if (WordVocab::tokenize(source).empty()) {
      throw Error(
          fmt::format("{}:{}: the source sentence is empty", name, lineNumber));
    }
    if (WordVocab::tokenize(target).empty()) {
      throw Error(
          fmt::format("{}:{}: the target sentence is empty", name, lineNumber));
    }
    Encoded encoded;
    encoded.pair = {std::string(source), std::string(target)};
    dataset.pairs_.push_back(std::move(encoded));
  }
  if (dataset.pairs_.empty()) {
    throw Error(fmt::format("{}: no sentence pairs", name));
  }

  // Shuffle, then split.
  std::vector<size_t> order(dataset.pairs_.size());
  for (size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  Rng rng(options.seed);
  for (size_t i = order.size(); i > 1; --i) {
    std::swap(order[i - 1], order[uniformBelow(rng, i)]);
  }
  auto trainSize =
      std::min(order.size(),
               static_cast<size_t>(std::floor(
                   static_cast<double>(order.size()) * options.trainFraction)));
  dataset.train_.assign(order.begin(), order.begin() + trainSize);
  dataset.validation_.assign(order.begin() + trainSize, order.end());

  std::vector<std::string> sources;
  std::vector<std::string> targets;
  for (size_t i : dataset.train_) {
    sources.push_back(dataset.pairs_[i].pair.source);
    targets.push_back(dataset.pairs_[i].pair.target);
  }
  dataset.sourceVocab_ = WordVocab::build(sources, options.minCount);
  dataset.targetVocab_ = WordVocab::build(targets, options.minCount);
  for (Encoded &encoded : dataset.pairs_) {
    encoded.source = dataset.sourceVocab_.encode(encoded.pair.source);
    encoded.target = dataset.targetVocab_.encode(encoded.pair.target);
  }
  return dataset;
}

const std::vector<size_t> &PairDataset::order(Split split) const {
  return split == Split::train ? train_ : validation_;
}

size_t PairDataset::size(Split split) const { return order(split).size(); }

const SentencePair &PairDataset::pair(Split split, size_t index) const {
  if (index >= size(split)) {
    throw Error(fmt::format("{}: pair {} is out of range for the {} split of "
                            "{} pairs",
                            name_, index, name(split), size(split)));
  }
  return pairs_[order(split)[index]].pair;
}

void PairDataset::shuffle(Rng &rng) {
  for (size_t i = train_.size(); i > 1; --i) {
    std::swap(train_[i - 1], train_[uniformBelow(rng, i)]);
  }
}

PairBatch PairDataset::batch(Split split, size_t first, size_t count) const {
  const std::vector<size_t> &indices = order(split);
  if (count == 0 || first > indices.size() || count > indices.size() - first) {
    throw Error(fmt::format("{}: batch [{}, {}) is empty or outside the {} "
                            "split of {} pairs",
                            name_, first, first + count, name(split),
                            indices.size()));
  }
  size_t sourceLength = 0;
  size_t targetLength = 0;
  for (size_t i = first; i < first + count; ++i) {
    const Encoded &encoded = pairs_[indices[i]];
    sourceLength = std::max(sourceLength, encoded.source.size());
    targetLength = std::max(targetLength, encoded.target.size() + 1);
  }
  auto b = static_cast<int64_t>(count);
  auto s = static_cast<int64_t>(sourceLength);
  auto t = static_cast<int64_t>(targetLength);
  PairBatch result{
      Tensor::zeros({b, s}, DType::i64), Tensor::zeros({b, s}, DType::i1),
      Tensor::zeros({b, t}, DType::i64), Tensor::zeros({b, t}, DType::i64)};
  int64_t *src = result.src.data<int64_t>();
  bool *mask = result.srcMask.data<bool>();
  int64_t *tgt = result.tgt.data<int64_t>();
  int64_t *targets = result.targets.data<int64_t>();
  for (size_t row = 0; row < count; ++row) {
    const Encoded &encoded = pairs_[indices[first + row]];
    size_t srcRow = row * sourceLength;
    for (size_t j = 0; j < encoded.source.size(); ++j) {
      src[srcRow + j] = encoded.source[j];
      mask[srcRow + j] = true;
    }
    size_t tgtRow = row * targetLength;
    tgt[tgtRow] = WordVocab::bos;
    for (size_t j = 0; j < encoded.target.size(); ++j) {
      tgt[tgtRow + j + 1] = encoded.target[j];
      targets[tgtRow + j] = encoded.target[j];
    }
    targets[tgtRow + encoded.target.size()] = WordVocab::eos;
  }
  return result;
}
