//===- DataTest.cpp - Tests of the training datasets ----------------------===//

#include "runtime/Data.h"

#include "test/Unit/Runtime/ExpectError.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <type_traits>

#include <unistd.h>

using namespace kiln;
namespace fs = std::filesystem;

namespace {

const std::string kText = "hello world, the quick brown fox jumps over the "
                          "lazy dog; hello again, world!";

/// The real corpora shipped with the examples.
std::string examplesData(const std::string &name) {
  return std::string(KILN_SOURCE_DIR) + "/examples/data/" + name;
}

/// Every test works in its own directory, removed afterwards.
class DataTest : public ::testing::Test {
protected:
  void SetUp() override {
    const ::testing::TestInfo *info =
        ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ =
        fs::temp_directory_path() /
        ("kiln-data-test-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(directory_);
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  /// Writes `contents` to a file in the test's directory; returns its path.
  std::string write(const std::string &name, const std::string &contents) {
    std::string path = (directory_ / name).string();
    std::ofstream out(path, std::ios::binary);
    out << contents;
    return path;
  }

private:
  fs::path directory_;
};

//===----------------------------------------------------------------------===//
// CharVocab and CharDataset
//===----------------------------------------------------------------------===//

TEST(CharVocabTest, SortedDistinctBytesAndRoundTrip) {
  CharVocab vocab("banana!");
  EXPECT_EQ(vocab.chars(), "!abn");
  EXPECT_EQ(vocab.size(), 4);
  EXPECT_EQ(vocab.encode("nab!"), (std::vector<int64_t>{3, 1, 2, 0}));
  EXPECT_EQ(vocab.decode({3, 1, 2, 0}), "nab!");
  CharVocab full(kText);
  EXPECT_EQ(full.decode(full.encode(kText)), kText);
}

TEST(CharVocabTest, UnknownCharacterAndBadId) {
  CharVocab vocab("abc");
  EXPECT_KILN_ERROR(vocab.encode("abxc"), "character 'x' at position 2");
  EXPECT_KILN_ERROR(vocab.encode("a\n"), "character '\\x0a' at position 1");
  EXPECT_KILN_ERROR(vocab.decode({0, 3}), "id 3 at position 1 is out of range");
  EXPECT_KILN_ERROR(vocab.decode({-1}), "id -1");
}

TEST(CharDatasetTest, SplitSizes) {
  std::string text(1000, 'a');
  CharDataset dataset = CharDataset::fromText(text);
  EXPECT_EQ(dataset.size(Split::train), 900);
  EXPECT_EQ(dataset.size(Split::validation), 100);
  CharDataset half = CharDataset::fromText(kText, 0.5);
  auto total = static_cast<int64_t>(kText.size());
  EXPECT_EQ(half.size(Split::train), total / 2);
  EXPECT_EQ(half.size(Split::train) + half.size(Split::validation), total);
  // The validation split is the end of the text.
  EXPECT_EQ(half.vocab().decode(half.tokens(Split::validation)),
            kText.substr(static_cast<size_t>(total / 2)));
  EXPECT_KILN_ERROR(CharDataset::fromText(kText, 0.0), "train fraction");
  EXPECT_KILN_ERROR(CharDataset::fromText(kText, 1.5), "train fraction");
  EXPECT_KILN_ERROR(CharDataset::fromText(""), "needs text");
}

TEST(CharDatasetTest, WindowsAreSubstringsWithShiftedTargets) {
  CharDataset dataset = CharDataset::fromText(kText, 0.75);
  std::string train = dataset.vocab().decode(dataset.tokens(Split::train));
  std::string validation =
      dataset.vocab().decode(dataset.tokens(Split::validation));
  Rng rng(7);
  for (Split split : {Split::train, Split::validation}) {
    const std::string &part = split == Split::train ? train : validation;
    Batch batch = dataset.sample(split, 16, 8, rng);
    ASSERT_EQ(batch.inputs.shape(), (std::vector<int64_t>{16, 8}));
    ASSERT_EQ(batch.targets.shape(), (std::vector<int64_t>{16, 8}));
    EXPECT_EQ(batch.inputs.dtype(), DType::i64);
    EXPECT_EQ(batch.targets.dtype(), DType::i64);
    std::vector<int64_t> inputs = batch.inputs.toVector<int64_t>();
    std::vector<int64_t> targets = batch.targets.toVector<int64_t>();
    for (int64_t b = 0; b < 16; ++b) {
      std::vector<int64_t> in(inputs.begin() + b * 8,
                              inputs.begin() + (b + 1) * 8);
      std::vector<int64_t> out(targets.begin() + b * 8,
                               targets.begin() + (b + 1) * 8);
      std::string window = dataset.vocab().decode(in);
      window.push_back(dataset.vocab().decode({out.back()})[0]);
      EXPECT_NE(part.find(window), std::string::npos)
          << "'" << window << "' is not in the " << name(split) << " split";
      EXPECT_TRUE(std::equal(in.begin() + 1, in.end(), out.begin()));
    }
  }
}

TEST(CharDatasetTest, DeterministicForASeed) {
  CharDataset dataset = CharDataset::fromText(kText);
  Rng a(42);
  Rng b(42);
  Rng c(43);
  Batch first = dataset.sample(Split::train, 8, 10, a);
  Batch second = dataset.sample(Split::train, 8, 10, b);
  Batch other = dataset.sample(Split::train, 8, 10, c);
  EXPECT_EQ(first.inputs.toVector<int64_t>(),
            second.inputs.toVector<int64_t>());
  EXPECT_EQ(first.targets.toVector<int64_t>(),
            second.targets.toVector<int64_t>());
  EXPECT_NE(first.inputs.toVector<int64_t>(), other.inputs.toVector<int64_t>());
  EXPECT_EQ(a.state(), b.state());
  // The generator advances: the next batch differs.
  EXPECT_NE(dataset.sample(Split::train, 8, 10, a).inputs.toVector<int64_t>(),
            first.inputs.toVector<int64_t>());
}

TEST(CharDatasetTest, RefusesLengthsTheSplitCannotProvide) {
  CharDataset dataset = CharDataset::fromText(std::string(100, 'x'));
  Rng rng(0);
  // 10 validation characters give windows of at most 9 + 1.
  EXPECT_NO_THROW(dataset.sample(Split::validation, 2, 9, rng));
  EXPECT_KILN_ERROR(dataset.sample(Split::validation, 2, 10, rng),
                    "the validation split has 10 characters, too few for a "
                    "window of length 10");
  EXPECT_KILN_ERROR(dataset.sample(Split::train, 1, 1000, rng),
                    "the train split has 90 characters");
  EXPECT_KILN_ERROR(dataset.sample(Split::train, 0, 4, rng), "batch=0");
  EXPECT_KILN_ERROR(dataset.sample(Split::train, 2, -1, rng), "length=-1");
}

TEST_F(DataTest, CharDatasetFiles) {
  EXPECT_KILN_ERROR(CharDataset::fromFile("/nonexistent/kiln/corpus.txt"),
                    "cannot open '/nonexistent/kiln/corpus.txt'");
  std::string empty = write("empty.txt", "");
  EXPECT_KILN_ERROR(CharDataset::fromFile(empty), "is empty");
  std::string path = write("corpus.txt", kText);
  CharDataset dataset = CharDataset::fromFile(path);
  EXPECT_EQ(dataset.text(), kText);
}

TEST(CharDatasetTest, TinyShakespeare) {
  CharDataset dataset =
      CharDataset::fromFile(examplesData("tinyshakespeare.txt"));
  EXPECT_EQ(dataset.text().size(), 1115394u);
  EXPECT_EQ(dataset.vocab().size(), 65);
  EXPECT_EQ(dataset.size(Split::train), 1003854);
  EXPECT_EQ(dataset.size(Split::validation), 111540);
  EXPECT_EQ(dataset.text().substr(0, 14), "First Citizen:");
  Rng rng(1);
  Batch batch = dataset.sample(Split::validation, 4, 256, rng);
  EXPECT_EQ(batch.inputs.shape(), (std::vector<int64_t>{4, 256}));
}

//===----------------------------------------------------------------------===//
// WordVocab and PairDataset
//===----------------------------------------------------------------------===//

TEST(WordVocabTest, Tokenize) {
  EXPECT_EQ(WordVocab::tokenize("  I'm HERE!\tOk."),
            (std::vector<std::string>{"i", "'", "m", "here", "!", "ok", "."}));
  // Non-ASCII bytes (UTF-8) stay inside words and are not lowercased.
  EXPECT_EQ(WordVocab::tokenize("Été désolée"),
            (std::vector<std::string>{"Été", "désolée"}));
  EXPECT_TRUE(WordVocab::tokenize(" \t ").empty());
}

TEST(WordVocabTest, BuildEncodeDecode) {
  WordVocab vocab = WordVocab::build({"b a c", "a b", "a d"}, 2);
  // Specials, then by count (a: 3, b: 2); c and d are below min count.
  ASSERT_EQ(vocab.size(), 6);
  EXPECT_EQ(vocab.word(0), "<pad>");
  EXPECT_EQ(vocab.word(1), "<bos>");
  EXPECT_EQ(vocab.word(2), "<eos>");
  EXPECT_EQ(vocab.word(3), "<unk>");
  EXPECT_EQ(vocab.word(4), "a");
  EXPECT_EQ(vocab.word(5), "b");
  EXPECT_EQ(vocab.encode("A b c"), (std::vector<int64_t>{4, 5, 3}));
  EXPECT_EQ(vocab.decode({1, 4, 5, 3, 2, 4, 0}), "a b <unk>");
  EXPECT_EQ(vocab.decode(vocab.encode("b, a")), "b <unk> a");
  EXPECT_KILN_ERROR(vocab.word(6), "id 6 is out of range");
}

TEST_F(DataTest, PairBatchLayout) {
  // Three pairs, all in training (fraction 1): the order is the seeded
  // shuffle, so the test looks each pair up by its source.
  std::string path = write("pairs.tsv", "Go.\tVa !\tattribution 1\n"
                                        "Hi there.\tSalut.\n"
                                        "Run now!\tCours !\r\n"
                                        "\n");
  PairOptions options;
  options.trainFraction = 1.0;
  PairDataset dataset = PairDataset::fromFile(path, options);
  ASSERT_EQ(dataset.size(Split::train), 3u);
  EXPECT_EQ(dataset.size(Split::validation), 0u);
  const WordVocab &sv = dataset.sourceVocab();
  const WordVocab &tv = dataset.targetVocab();

  PairBatch batch = dataset.batch(Split::train, 0, 3);
  // Longest source: "hi there ." / "run now !" = 3; longest target: "va !" /
  // "cours !" = 2, so T = 3.
  ASSERT_EQ(batch.src.shape(), (std::vector<int64_t>{3, 3}));
  ASSERT_EQ(batch.srcMask.shape(), (std::vector<int64_t>{3, 3}));
  ASSERT_EQ(batch.tgt.shape(), (std::vector<int64_t>{3, 3}));
  ASSERT_EQ(batch.targets.shape(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(batch.src.dtype(), DType::i64);
  EXPECT_EQ(batch.srcMask.dtype(), DType::i1);
  EXPECT_EQ(batch.tgt.dtype(), DType::i64);
  EXPECT_EQ(batch.targets.dtype(), DType::i64);

  std::vector<int64_t> src = batch.src.toVector<int64_t>();
  std::vector<bool> mask = batch.srcMask.toVector<bool>();
  std::vector<int64_t> tgt = batch.tgt.toVector<int64_t>();
  std::vector<int64_t> targets = batch.targets.toVector<int64_t>();
  std::set<std::string> seen;
  for (size_t row = 0; row < 3; ++row) {
    const SentencePair &pair = dataset.pair(Split::train, row);
    seen.insert(pair.source);
    std::vector<int64_t> s = sv.encode(pair.source);
    std::vector<int64_t> t = tv.encode(pair.target);
    std::vector<int64_t> wantSrc(3, 0);
    std::vector<bool> wantMask(3, false);
    for (size_t j = 0; j < s.size(); ++j) {
      wantSrc[j] = s[j];
      wantMask[j] = true;
    }
    std::vector<int64_t> wantTgt(3, 0);
    std::vector<int64_t> wantTargets(3, 0);
    wantTgt[0] = WordVocab::bos;
    for (size_t j = 0; j < t.size(); ++j) {
      wantTgt[j + 1] = t[j];
      wantTargets[j] = t[j];
    }
    wantTargets[t.size()] = WordVocab::eos;
    auto slice = [row](const auto &v) {
      using V = std::decay_t<decltype(v)>;
      return V(v.begin() + row * 3, v.begin() + (row + 1) * 3);
    };
    EXPECT_EQ(slice(src), wantSrc) << pair.source;
    EXPECT_EQ(slice(mask), wantMask) << pair.source;
    EXPECT_EQ(slice(tgt), wantTgt) << pair.source;
    EXPECT_EQ(slice(targets), wantTargets) << pair.source;
    // tgt[1:] == targets[:-1] within the real tokens (teacher forcing).
    EXPECT_TRUE(std::equal(wantTgt.begin() + 1,
                           wantTgt.begin() + 1 + static_cast<int64_t>(t.size()),
                           wantTargets.begin()));
  }
  EXPECT_EQ(seen, (std::set<std::string>{"Go.", "Hi there.", "Run now!"}));

  // "Go." -> [go, .] padded to 3 with a mask of 1 1 0, target "va !" ->
  // tgt = <bos> va ! and targets = va ! <eos>, checked by value.
  for (size_t row = 0; row < 3; ++row) {
    if (dataset.pair(Split::train, row).source != "Go.") {
      continue;
    }
    PairBatch one = dataset.batch(Split::train, row, 1);
    EXPECT_EQ(one.src.toVector<int64_t>(),
              (std::vector<int64_t>{sv.id("go"), sv.id(".")}));
    EXPECT_EQ(one.srcMask.toVector<bool>(), (std::vector<bool>{true, true}));
    EXPECT_EQ(one.tgt.toVector<int64_t>(),
              (std::vector<int64_t>{1, tv.id("va"), tv.id("!")}));
    EXPECT_EQ(one.targets.toVector<int64_t>(),
              (std::vector<int64_t>{tv.id("va"), tv.id("!"), 2}));
    EXPECT_GE(tv.id("va"), WordVocab::numSpecial);
  }
  EXPECT_KILN_ERROR(dataset.batch(Split::train, 2, 2), "batch [2, 4)");
  EXPECT_KILN_ERROR(dataset.batch(Split::train, 0, 0), "is empty");
  EXPECT_KILN_ERROR(dataset.pair(Split::validation, 0), "out of range");
}

TEST_F(DataTest, PairSplitShuffleAndVocabularies) {
  std::string tsv;
  for (int i = 0; i < 20; ++i) {
    tsv += "source" + std::to_string(i) + "\ttarget" + std::to_string(i) + "\n";
  }
  PairOptions options;
  options.seed = 5;
  PairDataset dataset = PairDataset::fromText(tsv, options);
  ASSERT_EQ(dataset.size(Split::train), 18u);
  ASSERT_EQ(dataset.size(Split::validation), 2u);
  // Vocabularies come from the training split: validation words are <unk>.
  EXPECT_EQ(dataset.sourceVocab().size(), WordVocab::numSpecial + 18);
  std::string held = dataset.pair(Split::validation, 0).source;
  EXPECT_EQ(dataset.sourceVocab().encode(held),
            (std::vector<int64_t>{WordVocab::unk}));
  PairBatch validation = dataset.batch(Split::validation, 0, 2);
  EXPECT_EQ(validation.src.toVector<int64_t>(),
            (std::vector<int64_t>{WordVocab::unk, WordVocab::unk}));

  // The same seed gives the same split; another seed another order.
  PairDataset again = PairDataset::fromText(tsv, options);
  options.seed = 6;
  PairDataset other = PairDataset::fromText(tsv, options);
  std::vector<std::string> order;
  std::vector<std::string> orderAgain;
  std::vector<std::string> orderOther;
  for (size_t i = 0; i < 18; ++i) {
    order.push_back(dataset.pair(Split::train, i).source);
    orderAgain.push_back(again.pair(Split::train, i).source);
    orderOther.push_back(other.pair(Split::train, i).source);
  }
  EXPECT_EQ(order, orderAgain);
  EXPECT_NE(order, orderOther);

  // shuffle() permutes the training split deterministically.
  Rng a(9);
  Rng b(9);
  dataset.shuffle(a);
  again.shuffle(b);
  std::vector<std::string> shuffled;
  for (size_t i = 0; i < 18; ++i) {
    shuffled.push_back(dataset.pair(Split::train, i).source);
    EXPECT_EQ(shuffled.back(), again.pair(Split::train, i).source);
  }
  EXPECT_NE(shuffled, order);
  std::vector<std::string> sortedBefore = order;
  std::vector<std::string> sortedAfter = shuffled;
  std::sort(sortedBefore.begin(), sortedBefore.end());
  std::sort(sortedAfter.begin(), sortedAfter.end());
  EXPECT_EQ(sortedBefore, sortedAfter);
  EXPECT_EQ(dataset.pair(Split::validation, 0).source, held);
}

TEST_F(DataTest, PairErrors) {
  EXPECT_KILN_ERROR(PairDataset::fromFile("/nonexistent/kiln/pairs.tsv"),
                    "cannot open '/nonexistent/kiln/pairs.tsv'");
  std::string noTab = write("notab.tsv", "a\tb\nno tab here\n");
  EXPECT_KILN_ERROR(PairDataset::fromFile(noTab),
                    noTab + ":2: expected 'source<TAB>target'");
  std::string emptyTarget = write("empty.tsv", "a\tb\nc\td\nx\t \n");
  EXPECT_KILN_ERROR(PairDataset::fromFile(emptyTarget),
                    emptyTarget + ":3: the target sentence is empty");
  std::string emptySource = write("nosource.tsv", "\tb\n");
  EXPECT_KILN_ERROR(PairDataset::fromFile(emptySource),
                    emptySource + ":1: the source sentence is empty");
  std::string nothing = write("nothing.tsv", "\n\n");
  EXPECT_KILN_ERROR(PairDataset::fromFile(nothing), "no sentence pairs");
}

TEST(PairDatasetTest, Tatoeba) {
  PairDataset dataset =
      PairDataset::fromFile(examplesData("eng-fra-tatoeba-5k.tsv"));
  EXPECT_EQ(dataset.size(Split::train), 4500u);
  EXPECT_EQ(dataset.size(Split::validation), 500u);
  EXPECT_GT(dataset.sourceVocab().size(), 100);
  EXPECT_GT(dataset.targetVocab().size(), 100);
  PairBatch batch = dataset.batch(Split::train, 0, 32);
  EXPECT_EQ(batch.src.dim(0), 32);
  EXPECT_EQ(batch.tgt.dim(1), batch.targets.dim(1));
}

} // namespace
