// The read engines (io_uring, the pread thread pool, and sync: blocking preads in the caller's
// thread): exact bytes for batches of multi-segment jobs at any depth, and the fault-injection cases
// of io_fault_test (short reads, EIO, end of file, a file that changed size) through every backend:
// an error naming file and offset, never wrong bytes, and every job completes exactly once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "memory/io/io_engine.h"
#include "memory/io_test_util.h"

namespace strata {
namespace {

struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint32_t, Status> done;
  std::map<uint32_t, int> times;
  IoEngine::Done fn() {
    return [this](uint32_t id, const Status& st, uint64_t, double) {
      std::lock_guard<std::mutex> lk(mu);
      done[id] = st;
      times[id]++;
      cv.notify_all();
    };
  }
  void wait(size_t n) {
    std::unique_lock<std::mutex> lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(30), [&] { return done.size() >= n; })) << "jobs hang";
  }
};

class IoEngineTest : public ::testing::TestWithParam<const char*> {
 protected:
  // Null (test skipped) when io_uring cannot be set up here.
  std::unique_ptr<IoEngine> make(IoFile& f, int depth, Collector& c) {
    IoBackend b;
    EXPECT_TRUE(io_backend_from_name(GetParam(), &b));
    auto e = io_engine_make(b, f, 3, depth, c.fn());
    if (!e.ok()) {
      if (b == IoBackend::io_backend_uring) return nullptr;
      ADD_FAILURE() << e.message();
      return nullptr;
    }
    EXPECT_STREQ((*e)->name(), GetParam());
    return std::move(e).value();
  }
};

#define MAKE_OR_SKIP(var, file, depth, coll) \
  auto var = make(file, depth, coll);        \
  if (!var) GTEST_SKIP() << "io_uring is not available here (the threads backend is tested)"

TEST_P(IoEngineTest, BatchesOfMultiSegmentJobsGiveExactBytes) {
  TempFile tf(2 << 20, 11);
  for (int depth : {1, 2, 5, 64}) {
    auto f = io_open_file(tf.path, true);
    ASSERT_TRUE(f.ok()) << f.message();
    Collector c;
    MAKE_OR_SKIP(e, **f, depth, c);
    std::mt19937 rng(depth);
    const int n_jobs = 24;
    const size_t seg_cap = 64 * 1024 + 2 * kIoAlign;
    AlignedBuf buf(static_cast<size_t>(n_jobs) * IoJob::kMaxSegments * seg_cap);
    std::vector<IoJob> jobs(static_cast<size_t>(n_jobs));
    for (int j = 0; j < n_jobs; ++j) {
      IoJob& job = jobs[static_cast<size_t>(j)];
      job.id = static_cast<uint32_t>(j);
      job.n = 1 + static_cast<int>(rng() % IoJob::kMaxSegments);
      for (int s = 0; s < job.n; ++s) {
        const size_t len = 1 + rng() % (64 * 1024);
        const uint64_t off = rng() % (tf.bytes.size() - len);
        job.seg[s] =
            IoSegment{buf.p + (static_cast<size_t>(j) * IoJob::kMaxSegments + s) * seg_cap, off, len};
      }
    }
    e->submit(jobs.data(), 10, /*urgent=*/false);  // two submissions, one urgent
    e->submit(jobs.data() + 10, jobs.size() - 10, /*urgent=*/true);
    c.wait(jobs.size());
    for (const IoJob& job : jobs) {
      ASSERT_TRUE(c.done[job.id].ok()) << c.done[job.id].message();
      EXPECT_EQ(c.times[job.id], 1);
      for (int s = 0; s < job.n; ++s) {
        const IoSegment& sg = job.seg[s];
        ASSERT_EQ(0, memcmp(sg.dst + (sg.off - io_align_down(sg.off)), tf.bytes.data() + sg.off, sg.len))
            << "depth " << depth << " job " << job.id << " segment " << s;
      }
    }
  }
}

// One job of three segments over a faulty file; returns its status.
Status run_faulty(IoEngineTest& t, FaultyFile& f, const TempFile& tf, int depth, std::vector<uint8_t>* got,
                  bool* skipped) {
  Collector c;
  IoBackend b;
  EXPECT_TRUE(io_backend_from_name(t.GetParam(), &b));
  auto e = io_engine_make(b, f, 2, depth, c.fn());
  if (!e.ok()) {
    *skipped = true;
    return {};
  }
  const size_t stride = io_align_up(70000 + 2 * kIoAlign);  // O_DIRECT: every buffer 4 KiB aligned
  AlignedBuf buf(3 * stride);
  IoJob job;
  job.id = 7;
  job.n = 3;
  for (int s = 0; s < 3; ++s)
    job.seg[s] = IoSegment{buf.p + static_cast<size_t>(s) * stride, 12345 + 70000u * s, 70000};
  (*e)->submit(&job, 1, true);
  c.wait(1);
  EXPECT_EQ(c.times[7], 1);
  got->clear();
  for (int s = 0; s < 3 && c.done[7].ok(); ++s)
    got->insert(got->end(), job.seg[s].dst + (job.seg[s].off - io_align_down(job.seg[s].off)),
                job.seg[s].dst + (job.seg[s].off - io_align_down(job.seg[s].off)) + job.seg[s].len);
  return c.done[7];
}

TEST_P(IoEngineTest, ShortReadsAreRetried) {
  TempFile tf(300000, 9);
  for (int mode : {1, 2}) {
    FaultyFile f(io_open_file(tf.path, true).value());
    f.short_reads = mode;
    std::vector<uint8_t> got;
    bool skipped = false;
    Status st = run_faulty(*this, f, tf, 4, &got, &skipped);
    if (skipped) GTEST_SKIP() << "io_uring is not available here";
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_GT(f.calls.load(), 3);
    ASSERT_EQ(got.size(), 210000u);
    EXPECT_EQ(0, memcmp(got.data(), tf.bytes.data() + 12345, got.size())) << "mode " << mode;
  }
}

TEST_P(IoEngineTest, EioNamesFileAndOffset) {
  TempFile tf(300000, 1);
  FaultyFile f(io_open_file(tf.path, true).value());
  f.fail_errno = EIO;
  f.fail_from = 151552;  // the third segment (152345.., read from 151552) fails
  std::vector<uint8_t> got;
  bool skipped = false;
  Status st = run_faulty(*this, f, tf, 8, &got, &skipped);
  if (skipped) GTEST_SKIP() << "io_uring is not available here";
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(tf.path), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("offset 151552"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("Input/output error"), std::string::npos) << st.message();
}

TEST_P(IoEngineTest, UnexpectedEofIsAnError) {
  TempFile tf(300000, 3);
  FaultyFile f(io_open_file(tf.path, true).value());
  f.eof_at = 163840;  // the third segment (152345..) hits the "end" at 163840
  std::vector<uint8_t> got;
  bool skipped = false;
  Status st = run_faulty(*this, f, tf, 2, &got, &skipped);
  if (skipped) GTEST_SKIP() << "io_uring is not available here";
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("unexpected end of file at offset 163840"), std::string::npos) << st.message();
}

TEST_P(IoEngineTest, ChangedSizeIsAnError) {
  TempFile tf(300000, 2);
  FaultyFile f(io_open_file(tf.path, true).value());
  ASSERT_EQ(0, ::truncate(tf.path.c_str(), 250000));
  std::vector<uint8_t> got;
  bool skipped = false;
  Status st = run_faulty(*this, f, tf, 4, &got, &skipped);
  if (skipped) GTEST_SKIP() << "io_uring is not available here";
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("changed size"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(tf.path), std::string::npos) << st.message();
}

TEST_P(IoEngineTest, DestroyWithQueuedJobsDoesNotHang) {
  TempFile tf(1 << 20, 4);
  auto f = io_open_file(tf.path, true);
  ASSERT_TRUE(f.ok());
  Collector c;
  AlignedBuf buf(200 * (8192 + 2 * kIoAlign));
  {
    MAKE_OR_SKIP(e, **f, 2, c);
    std::vector<IoJob> jobs(200);
    for (uint32_t j = 0; j < jobs.size(); ++j) {
      jobs[j].id = j;
      jobs[j].n = 1;
      jobs[j].seg[0] = IoSegment{buf.p + j * (8192 + 2 * kIoAlign), 4096u * j, 8192};
    }
    e->submit(jobs.data(), jobs.size(), false);
  }  // dropped jobs never complete; started ones completed exactly once
  for (const auto& [id, n] : c.times) EXPECT_EQ(n, 1) << id;
}

// What `strata plan` bills as io_buffers is what the engine holds (empty queues): for io_uring the
// rings as the kernel mapped them (within a page, should a kernel lay out the ring heads
// differently), the tables and a stack; for threads the stacks.
TEST_P(IoEngineTest, PlannedBytesAreWhatTheEngineHolds) {
  TempFile tf(3 * kIoAlign, 2);
  auto f = io_open_file(tf.path, true).value();
  IoBackend b;
  ASSERT_TRUE(io_backend_from_name(GetParam(), &b));
  for (int depth : {1, 4, 32, 100, 512}) {
    Collector c;
    MAKE_OR_SKIP(e, *f, depth, c);
    const uint64_t planned = io_engine_planned_bytes(b, 3, depth), held = e->overhead_bytes();
    EXPECT_LE(held, planned + kIoAlign) << "depth " << depth;
    EXPECT_GE(held + kIoAlign, planned) << "depth " << depth;
    if (b != IoBackend::io_backend_uring) {
      EXPECT_EQ(held, planned);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, IoEngineTest, ::testing::Values("uring", "threads", "sync"),
                         [](const auto& info) { return std::string(info.param); });

// A split job reads exactly the bytes of the whole one, into the same places: each piece's covering
// read lands where the whole segment's would have put it, and the pieces fit the job.
TEST_P(IoEngineTest, SplitSegmentsGiveTheSameBytes) {
  TempFile tf(3 << 20, 12);
  auto f = io_open_file(tf.path, true);
  ASSERT_TRUE(f.ok()) << f.message();
  Collector c;
  MAKE_OR_SKIP(e, **f, 8, c);
  std::mt19937 rng(5);
  const size_t cap = 700 * 1024;
  AlignedBuf whole(3 * cap), split(3 * cap);
  uint32_t id = 0;
  for (size_t chunk : {size_t{1}, size_t{4096}, size_t{65536}, size_t{100000}, size_t{1} << 20}) {
    for (int rep = 0; rep < 4; ++rep) {
      IoSegment in[3];
      const int n = 1 + static_cast<int>(rng() % 3);
      for (int s = 0; s < n; ++s) {
        const size_t len = 1 + rng() % (cap - 2 * kIoAlign);
        in[s] = IoSegment{nullptr, rng() % (tf.bytes.size() - len), len};
      }
      IoJob a, b;
      a.n = n;
      for (int s = 0; s < n; ++s) {
        a.seg[s] = in[s];
        a.seg[s].dst = whole.p + s * cap;
        in[s].dst = split.p + s * cap;
      }
      b.n = io_split_segments(in, n, chunk, b.seg, IoJob::kMaxSegments);
      ASSERT_GE(b.n, n);
      ASSERT_LE(b.n, IoJob::kMaxSegments);
      uint64_t want = 0, got = 0;
      for (int s = 0; s < n; ++s) want += in[s].len;
      for (int s = 0; s < b.n; ++s) {
        got += b.seg[s].len;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(b.seg[s].dst) % kIoAlign, 0u);
      }
      EXPECT_EQ(got, want);
      a.id = id++;
      b.id = id++;
      memset(whole.p, 0, 3 * cap);
      memset(split.p, 0, 3 * cap);
      e->submit(&a, 1, true);
      e->submit(&b, 1, true);
      c.wait(id);
      ASSERT_TRUE(c.done[a.id].ok() && c.done[b.id].ok()) << c.done[b.id].message();
      for (int s = 0; s < n; ++s) {
        const size_t at = in[s].off - io_align_down(in[s].off);
        ASSERT_EQ(0, memcmp(split.p + s * cap + at, tf.bytes.data() + in[s].off, in[s].len))
            << "chunk " << chunk << " segment " << s;
        ASSERT_EQ(0, memcmp(whole.p + s * cap + at, split.p + s * cap + at, in[s].len));
      }
    }
  }
  // chunk 0 leaves the job alone; a 1 MiB segment at an unaligned offset in 256 KiB pieces is 5 reads.
  IoSegment one{nullptr, 12345, 1 << 20}, out[IoJob::kMaxSegments];
  EXPECT_EQ(io_split_segments(&one, 1, 0, out, IoJob::kMaxSegments), 1);
  EXPECT_EQ(io_split_segments(&one, 1, 256 * 1024, out, IoJob::kMaxSegments), 5);
  EXPECT_EQ(out[0].off, 12345u);
  EXPECT_EQ(out[1].off, 12288u + 256 * 1024);  // cut at the cover's aligned start + one chunk
}

// The sync engine is the naive baseline: no thread of its own, no queue. Every job is read, one read
// at a time, by the thread that calls submit(), and reported before submit() returns.
TEST(IoEngine, SyncReadsInTheCallersThreadOneAtATime) {
  TempFile tf(1 << 20, 6);
  FaultyFile f(io_open_file(tf.path, true).value());
  std::vector<std::thread::id> done_on;
  std::vector<int> calls_at_done;
  auto e = io_engine_make(IoBackend::io_backend_sync, f, 4, 32,
                          [&](uint32_t id, const Status& st, uint64_t bytes, double) {
                            EXPECT_TRUE(st.ok()) << st.message();
                            EXPECT_EQ(bytes, 3u * 10000);
                            done_on.push_back(std::this_thread::get_id());
                            calls_at_done.push_back(f.calls.load());
                          });
  ASSERT_TRUE(e.ok()) << e.message();
  EXPECT_STREQ((*e)->name(), "sync");
  EXPECT_EQ((*e)->depth(), 1);
  EXPECT_EQ((*e)->overhead_bytes(), 0u);
  const size_t stride = io_align_up(10000 + 2 * kIoAlign);
  AlignedBuf buf(5 * 3 * stride);
  std::vector<IoJob> jobs(5);
  for (uint32_t j = 0; j < jobs.size(); ++j) {
    jobs[j].id = j;
    jobs[j].n = 3;
    for (int s = 0; s < 3; ++s)
      jobs[j].seg[s] = IoSegment{buf.p + (j * 3 + s) * stride, 7777 + 150000u * j + 20000u * s, 10000};
  }
  (*e)->submit(jobs.data(), jobs.size(), /*urgent=*/false);
  ASSERT_EQ(done_on.size(), jobs.size()) << "every job reported before submit() returned";
  for (size_t j = 0; j < jobs.size(); ++j) {
    EXPECT_EQ(done_on[j], std::this_thread::get_id());
    EXPECT_EQ(calls_at_done[j], static_cast<int>(3 * (j + 1))) << "one pread per segment, in job order";
    for (int s = 0; s < 3; ++s) {
      const IoSegment& sg = jobs[j].seg[s];
      ASSERT_EQ(0, memcmp(sg.dst + (sg.off - io_align_down(sg.off)), tf.bytes.data() + sg.off, sg.len));
    }
  }
  EXPECT_FALSE((*e)->promote(0));
}

// A file an asynchronous backend cannot read (no descriptor): uring asked for is an error saying
// why, auto falls back to threads.
class NoFdFile final : public IoFile {
 public:
  explicit NoFdFile(std::unique_ptr<IoFile> in) : in_(std::move(in)) {}
  const std::string& path() const override { return in_->path(); }
  bool direct() const override { return in_->direct(); }
  uint64_t opened_size() const override { return in_->opened_size(); }
  Result<uint64_t> current_size() override { return in_->current_size(); }
  int64_t pread(void* dst, size_t len, uint64_t off) override { return in_->pread(dst, len, off); }
  void drop_cache(uint64_t off, size_t len) override { in_->drop_cache(off, len); }

 private:
  std::unique_ptr<IoFile> in_;
};

TEST(IoEngine, AutoFallsBackToThreads) {
  TempFile tf(100000, 5);
  NoFdFile f(io_open_file(tf.path, true).value());
  Collector c;
  auto u = io_engine_make(IoBackend::io_backend_uring, f, 2, 8, c.fn());
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.message().find("no file descriptor"), std::string::npos) << u.message();
  auto a = io_engine_make(IoBackend::io_backend_auto, f, 2, 8, c.fn());
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_STREQ((*a)->name(), "threads");
  IoBackend b;
  EXPECT_FALSE(io_backend_from_name("aio", &b));
  for (const char* n : {"auto", "uring", "threads", "sync"}) {
    ASSERT_TRUE(io_backend_from_name(n, &b)) << n;
    EXPECT_STREQ(io_backend_name(b), n);
  }
}

}  // namespace
}  // namespace strata
