//===- TempDirTest.h - A test fixture with its own directory -----*- C++
//-*-===//

#ifndef KILN_TEST_UNIT_RUNTIME_TEMPDIRTEST_H
#define KILN_TEST_UNIT_RUNTIME_TEMPDIRTEST_H

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <unistd.h>

namespace kiln::test {

/// Every test works in its own empty directory, removed afterwards.
class TempDirTest : public ::testing::Test {
protected:
  void SetUp() override {
    const ::testing::TestInfo *info =
        ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ = std::filesystem::temp_directory_path() /
                 ("kiln-test-" + std::to_string(::getpid()) + "-" +
                  info->test_suite_name() + "-" + info->name());
    std::filesystem::remove_all(directory_);
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  /// `name` inside the test's directory.
  std::string path(const std::string &name) const {
    return (directory_ / name).string();
  }

  std::filesystem::path directory_;
};

} // namespace kiln::test

#endif // KILN_TEST_UNIT_RUNTIME_TEMPDIRTEST_H
