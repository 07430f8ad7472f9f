// Backing-tier reads: exact bytes at unaligned offsets, and faults (short reads, EIO, a file that
// changed size, end of file) become errors naming the file and offset — never wrong bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "memory/io/io_file.h"
#include "memory/io_test_util.h"

namespace strata {
namespace {

TEST(IoFile, ReadsExactBytesAtUnalignedOffsets) {
  TempFile tf(300000, 7);
  for (bool direct : {true, false}) {
    auto f = io_open_file(tf.path, direct);
    ASSERT_TRUE(f.ok()) << f.message();
    EXPECT_EQ((*f)->opened_size(), tf.bytes.size());
    std::mt19937 rng(3);
    AlignedBuf buf(tf.bytes.size() + 2 * kIoAlign);
    for (int i = 0; i < 50; ++i) {
      const uint64_t off = rng() % tf.bytes.size();
      const size_t len = 1 + rng() % (tf.bytes.size() - off);
      ASSERT_TRUE(io_read_covering(**f, buf.p, off, len).ok());
      const uint8_t* got = buf.p + (off - io_align_down(off));
      ASSERT_EQ(0, memcmp(got, tf.bytes.data() + off, len)) << "off " << off << " len " << len;
    }
  }
}

TEST(IoFile, ShortReadsAreRetried) {
  TempFile tf(200000, 9);
  for (int mode : {1, 2}) {
    auto inner = io_open_file(tf.path, true);
    ASSERT_TRUE(inner.ok());
    FaultyFile f(std::move(inner).value());
    f.short_reads = mode;  // 1: random short lengths (often unaligned), 2: one byte less than asked
    AlignedBuf buf(tf.bytes.size() + 2 * kIoAlign);
    const uint64_t off = 12345;
    const size_t len = 150001;
    ASSERT_TRUE(io_read_covering(f, buf.p, off, len).ok());
    EXPECT_GT(f.calls, 1);
    EXPECT_EQ(0, memcmp(buf.p + (off - io_align_down(off)), tf.bytes.data() + off, len));
  }
}

TEST(IoFile, EioNamesFileAndOffset) {
  TempFile tf(100000, 1);
  auto inner = io_open_file(tf.path, true);
  ASSERT_TRUE(inner.ok());
  FaultyFile f(std::move(inner).value());
  f.fail_errno = EIO;
  AlignedBuf buf(200000);
  Status s = io_read_covering(f, buf.p, 5000, 1000);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(tf.path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("offset 4096"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Input/output error"), std::string::npos) << s.message();
}

TEST(IoFile, ChangedSizeIsAnError) {
  TempFile tf(100000, 2);
  auto f = io_open_file(tf.path, true);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(0, ::truncate(tf.path.c_str(), 50000));
  AlignedBuf buf(200000);
  Status s = io_read_covering(**f, buf.p, 1000, 1000);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("changed size"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(tf.path), std::string::npos) << s.message();
}

TEST(IoFile, UnexpectedEofIsAnError) {
  TempFile tf(100000, 3);
  auto inner = io_open_file(tf.path, true);
  ASSERT_TRUE(inner.ok());
  FaultyFile f(std::move(inner).value());
  f.eof_at = 65536;  // reads at or past this offset return 0 (the file "shrank" under us)
  AlignedBuf buf(200000);
  Status s = io_read_covering(f, buf.p, 60000, 20000);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unexpected end of file at offset 65536"), std::string::npos) << s.message();
}

TEST(IoFile, PastEndIsAnError) {
  TempFile tf(10000, 4);
  auto f = io_open_file(tf.path, true);
  ASSERT_TRUE(f.ok());
  AlignedBuf buf(64 * 1024);
  Status s = io_read_covering(**f, buf.p, 9000, 2000);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("past the end"), std::string::npos) << s.message();
  // The last byte exactly is fine (the kernel returns a short tail at EOF).
  ASSERT_TRUE(io_read_covering(**f, buf.p, 9000, 1000).ok());
  EXPECT_EQ(0, memcmp(buf.p + (9000 - 8192), tf.bytes.data() + 9000, 1000));
}

TEST(IoFile, MissingFileIsAnError) {
  auto f = io_open_file("/nonexistent/strata/x.gguf", true);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.message().find("/nonexistent/strata/x.gguf"), std::string::npos);
}

}  // namespace
}  // namespace strata
