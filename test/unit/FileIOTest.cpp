//===- FileIOTest.cpp - reading and writing user files --------------------===//

#include "runtime/base/FileIO.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

/// A fresh directory under the test's temporary directory.
std::string freshDirectory(const std::string &name) {
  const char *root = std::getenv("TMPDIR");
  std::string path = std::string(root ? root : "/tmp") + "/mfc-fileio-" + name +
                     "-" + std::to_string(getpid());
  std::string command = "rm -rf '" + path + "' && mkdir -p '" + path + "'";
  EXPECT_EQ(std::system(command.c_str()), 0);
  return path;
}

std::string contents(const std::string &path) {
  std::ifstream stream(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(stream), {});
}

std::vector<std::string> entries(const std::string &directory) {
  std::vector<std::string> names;
  DIR *dir = opendir(directory.c_str());
  while (dirent *entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") {
      names.push_back(name);
    }
  }
  closedir(dir);
  return names;
}

mfrt::Status writeText(const std::string &path, const std::string &text) {
  return mfrt::writeFileAtomically(path, "test file", [&](mfrt::FileWriter &out) {
    out.write(text);
    return mfrt::Status::ok();
  });
}

TEST(FileIO, AFailedWriteChangesNothingAndLeavesNoTemporary) {
  std::string dir = freshDirectory("failed");
  std::string path = dir + "/out.bin";
  ASSERT_TRUE(writeText(path, "previous"));
  mfrt::Status status =
      mfrt::writeFileAtomically(path, "test file", [](mfrt::FileWriter &out) {
        out.write("half of it");
        return mfrt::Status::error("the producer failed");
      });
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message(), "the producer failed");
  EXPECT_EQ(contents(path), "previous");
  EXPECT_EQ(entries(dir), std::vector<std::string>{"out.bin"});
}

TEST(FileIO, ConcurrentWritersNeverShareATemporary) {
  std::string dir = freshDirectory("concurrent");
  std::string path = dir + "/out.bin";
  std::string a(1 << 20, 'a'), b(1 << 20, 'b');
  std::vector<std::thread> writers;
  for (int i = 0; i < 8; ++i) {
    writers.emplace_back([&, i] { EXPECT_TRUE(writeText(path, i % 2 ? a : b)); });
  }
  for (std::thread &writer : writers) {
    writer.join();
  }
  std::string written = contents(path);
  EXPECT_TRUE(written == a || written == b) << "a mixed file of " << written.size();
  EXPECT_EQ(entries(dir), std::vector<std::string>{"out.bin"});
}

TEST(FileIO, WritesThroughLinksKeepsModesRefusesDirectories) {
  std::string dir = freshDirectory("targets");
  ASSERT_TRUE(writeText(dir + "/target", "old"));
  ASSERT_EQ(chmod((dir + "/target").c_str(), 0640), 0);
  ASSERT_EQ(symlink("target", (dir + "/link").c_str()), 0);
  ASSERT_TRUE(writeText(dir + "/link", "new"));
  struct stat info;
  ASSERT_EQ(lstat((dir + "/link").c_str(), &info), 0);
  EXPECT_TRUE(S_ISLNK(info.st_mode));
  EXPECT_EQ(contents(dir + "/target"), "new");
  ASSERT_EQ(stat((dir + "/target").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0640u);
  mfrt::Status refused = writeText(dir, "x");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("it is a directory"), std::string::npos)
      << refused.message();
  mfrt::Status full = writeText("/dev/full", "x");
  ASSERT_FALSE(full);
  EXPECT_NE(full.message().find("No space left on device"), std::string::npos)
      << full.message();
}

TEST(FileIO, ReadsOnlyBoundedRegularFiles) {
  std::string dir = freshDirectory("reads");
  ASSERT_TRUE(writeText(dir + "/ten", "0123456789"));
  mfrt::StatusOr<std::vector<uint8_t>> ten =
      mfrt::readRegularFile(dir + "/ten", "test file", 10);
  ASSERT_TRUE(ten) << ten.status().message();
  EXPECT_EQ(std::string(ten->begin(), ten->end()), "0123456789");
  for (auto [path, limit, why] :
       {std::tuple<std::string, uint64_t, std::string>{
            dir + "/ten", 9, "is 10 bytes; files of this kind are at most 9"},
        {dir, 100, "it is a directory, not a file"},
        {"/dev/zero", 100, "it is a device, not a file"},
        {dir + "/missing", 100, "No such file or directory"}}) {
    mfrt::StatusOr<std::vector<uint8_t>> read =
        mfrt::readRegularFile(path, "test file", limit);
    ASSERT_FALSE(read) << path;
    EXPECT_NE(read.status().message().find(why), std::string::npos)
        << read.status().message();
  }
}

} // namespace
