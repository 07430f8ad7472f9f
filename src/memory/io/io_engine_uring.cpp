// The io_uring backend of memory/io_engine.h: one thread owns a ring of `depth` read entries plus
// one read on an eventfd that submit() writes to wake it. Each loop it takes as many queued jobs as
// it has free entries (urgent first), prepares their reads, and hands them all to the kernel with
// one io_uring_submit_and_wait; completions advance each read's IoCoverRead (short reads and EAGAIN
// re-issue the rest from the same entry; a finished segment's entry goes on to the job's next one).
#include "memory/io/io_engine.h"

#ifdef STRATA_HAVE_LIBURING

#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "base/assert.h"
#include "base/clock.h"

namespace strata {

namespace {

constexpr uint64_t kEventTag = ~uint64_t{0};

uint64_t page_up(uint64_t x) {
  return (x + 4095) & ~uint64_t{4095};
}

// The kernel's ring sizes for an io_uring of `entries` (a power of two) submission entries: one
// mapping holds the ring heads (kRingHeader bounds them: liburing 2.x / Linux 5.x-6.x use < 512), the
// CQEs (2 x entries, 16 bytes) and the SQ index array (4 bytes each); the SQEs (64 bytes) are apart.
constexpr uint64_t kRingHeader = 512;
uint64_t rings_planned(uint64_t entries) {
  return page_up(kRingHeader + 2 * entries * 16 + entries * 4) + page_up(entries * 64);
}
uint64_t ring_entries(int depth) {  // depth reads + the eventfd read, rounded up as the kernel does
  uint64_t e = 1;
  while (e < static_cast<uint64_t>(depth) + 1) e <<= 1;
  return e;
}

class UringEngine final : public IoEngine {
 public:
  UringEngine(IoFile& f, int depth, Done done) : f_(f), depth_(depth), done_(std::move(done)) {}

  Status init() {
    efd_ = ::eventfd(0, EFD_CLOEXEC);
    if (efd_ < 0) return err("io_uring: eventfd failed: %s", std::strerror(errno));
    const int r = io_uring_queue_init(static_cast<unsigned>(depth_ + 1), &ring_, 0);
    if (r < 0) return err("io_uring: io_uring_queue_init(%d) failed: %s", depth_ + 1, std::strerror(-r));
    ring_ok_ = true;
    ops_.resize(static_cast<size_t>(depth_));
    active_.resize(static_cast<size_t>(depth_));
    free_ops_.reserve(static_cast<size_t>(depth_));
    free_active_.reserve(static_cast<size_t>(depth_));
    for (int i = depth_ - 1; i >= 0; --i) {
      free_ops_.push_back(i);
      free_active_.push_back(i);
    }
    take_.reserve(static_cast<size_t>(depth_));
    arm_event();
    thread_ = std::thread([this] { run(); });
    return {};
  }

  ~UringEngine() override {
    if (thread_.joinable()) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
      }
      wake();
      thread_.join();
    }
    if (ring_ok_) io_uring_queue_exit(&ring_);
    if (efd_ >= 0) ::close(efd_);
  }

  const char* name() const override { return "uring"; }
  int depth() const override { return depth_; }
  uint64_t overhead_bytes() const override {
    // The rings as the kernel mapped them (liburing records the sizes), the tables, queued jobs.
    const bool one_map = (ring_.features & IORING_FEAT_SINGLE_MMAP) != 0;
    const uint64_t rings = one_map ? page_up(std::max(ring_.sq.ring_sz, ring_.cq.ring_sz))
                                   : page_up(ring_.sq.ring_sz) + page_up(ring_.cq.ring_sz);
    std::lock_guard<std::mutex> lk(mu_);
    return rings + page_up(uint64_t{ring_.sq.ring_entries} * sizeof(io_uring_sqe)) + tables_bytes(depth_) +
           (urgent_.size() + normal_.size()) * sizeof(IoJob) + kIoThreadStackBytes;
  }

  // The engine's own tables for `depth` reads (as init() sizes them).
  static uint64_t tables_bytes(int depth) {
    const uint64_t d = static_cast<uint64_t>(depth);
    return d * (sizeof(Op) + sizeof(Active) + 2 * sizeof(int) + sizeof(IoJob));
  }

  void submit(const IoJob* jobs, size_t n, bool urgent) override {
    if (n == 0) return;
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (size_t i = 0; i < n; ++i) {
        STRATA_ASSERT(jobs[i].n >= 1 && jobs[i].n <= IoJob::kMaxSegments);
        (urgent ? urgent_ : normal_).push_back(jobs[i]);
      }
    }
    wake();
  }

  bool promote(uint32_t id) override {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = normal_.begin(); it != normal_.end(); ++it) {
      if (it->id != id) continue;
      const IoJob j = *it;
      normal_.erase(it);
      urgent_.push_front(j);
      return true;
    }
    return false;
  }

 private:
  struct Op {
    int active = -1;
    int seg = 0;
    IoFile* file = nullptr;  // the segment's file
    IoCoverRead rd;
  };
  struct Active {
    IoJob job;
    int next_seg = 0;
    int running = 0;  // entries working on this job
    Status st;
    uint64_t bytes = 0;
    double t0 = 0;
  };

  void wake() {
    const uint64_t one = 1;
    while (::write(efd_, &one, sizeof one) < 0 && errno == EINTR) {
    }
  }

  io_uring_sqe* sqe() {
    io_uring_sqe* s = io_uring_get_sqe(&ring_);
    if (!s) {  // cannot happen with depth + 1 entries; flush and retry rather than lose a read
      io_uring_submit(&ring_);
      s = io_uring_get_sqe(&ring_);
    }
    STRATA_ASSERT(s);
    return s;
  }

  void arm_event() {
    io_uring_sqe* s = sqe();
    io_uring_prep_read(s, efd_, &event_buf_, sizeof event_buf_, 0);
    io_uring_sqe_set_data64(s, kEventTag);
  }

  void issue(int o) {
    Op& op = ops_[static_cast<size_t>(o)];
    io_uring_sqe* s = sqe();
    io_uring_prep_read(s, op.file->fd(), op.rd.next_dst(), static_cast<unsigned>(op.rd.next_len()),
                       op.rd.next_off());
    io_uring_sqe_set_data64(s, static_cast<uint64_t>(o));
  }

  // Puts entry o to work on active job a's next segment. False (entry unused) when the job has no
  // segment left to start or has failed.
  bool start_segment(int a, int o) {
    Active& ac = active_[static_cast<size_t>(a)];
    while (ac.st.ok() && ac.next_seg < ac.job.n) {
      const IoSegment& sg = ac.job.seg[ac.next_seg];
      Op& op = ops_[static_cast<size_t>(o)];
      op.active = a;
      op.seg = ac.next_seg++;
      op.file = sg.file ? sg.file : &f_;
      Status st = op.file->fd() < 0
                      ? err("io_uring: %s has no file descriptor to read from", op.file->path().c_str())
                      : op.rd.start(*op.file, sg.dst, sg.off, sg.len);
      if (!st.ok()) {
        ac.st = st;
        break;
      }
      if (op.rd.done()) {  // empty segment
        ac.bytes += sg.len;
        continue;
      }
      issue(o);
      return true;
    }
    return false;
  }

  void finish_if_idle(int a) {
    Active& ac = active_[static_cast<size_t>(a)];
    if (ac.running > 0 || (ac.st.ok() && ac.next_seg < ac.job.n)) return;
    done_(ac.job.id, ac.st, ac.bytes, now_seconds() - ac.t0);
    ac = Active{};
    free_active_.push_back(a);
  }

  void start_job(const IoJob& job) {
    STRATA_ASSERT(!free_active_.empty() && !free_ops_.empty());
    const int a = free_active_.back();
    free_active_.pop_back();
    Active& ac = active_[static_cast<size_t>(a)];
    ac = Active{};
    ac.job = job;
    ac.t0 = now_seconds();
    while (!free_ops_.empty() && ac.st.ok() && ac.next_seg < ac.job.n) {
      const int o = free_ops_.back();
      if (!start_segment(a, o)) break;
      free_ops_.pop_back();
      ac.running++;
    }
    finish_if_idle(a);
  }

  void complete(int o, int res) {
    Op& op = ops_[static_cast<size_t>(o)];
    const int a = op.active;
    Active& ac = active_[static_cast<size_t>(a)];
    const int64_t r = op.file->on_async_result(op.rd.next_dst(), op.rd.next_len(), op.rd.next_off(), res);
    Status st = op.rd.advance(*op.file, r);
    if (st.ok() && !op.rd.done()) {  // short read, EINTR or EAGAIN: the rest from the same entry
      issue(o);
      return;
    }
    if (!st.ok()) {
      if (ac.st.ok()) ac.st = st;
    } else {
      ac.bytes += ac.job.seg[op.seg].len;
      if (start_segment(a, o)) return;
    }
    op.active = -1;
    free_ops_.push_back(o);
    ac.running--;
    finish_if_idle(a);
  }

  void run() {
    bool stopping = false;
    for (;;) {
      take_.clear();
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (stop_ && !stopping) {
          stopping = true;
          urgent_.clear();
          normal_.clear();
        }
        size_t ops = free_ops_.size();
        while (ops > 0 && !free_active_.empty() && take_.size() < free_active_.size() &&
               (!urgent_.empty() || !normal_.empty())) {
          std::deque<IoJob>& q = urgent_.empty() ? normal_ : urgent_;
          take_.push_back(q.front());
          q.pop_front();
          ops -= std::min<size_t>(ops, static_cast<size_t>(take_.back().n));
        }
      }
      for (const IoJob& j : take_) start_job(j);
      if (stopping && free_ops_.size() == ops_.size()) return;
      const int r = io_uring_submit_and_wait(&ring_, 1);
      if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
        // The ring itself failed: fail what is in flight by name rather than hang the waiters.
        fail_all(err("%s: io_uring_submit failed: %s", f_.path().c_str(), std::strerror(-r)));
        return;
      }
      io_uring_cqe* cqe = nullptr;
      unsigned head = 0, seen = 0;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        const uint64_t tag = io_uring_cqe_get_data64(cqe);
        if (tag == kEventTag) {
          if (!stopping) arm_event();
        } else {
          complete(static_cast<int>(tag), cqe->res);
        }
      }
      io_uring_cq_advance(&ring_, seen);
    }
  }

  void fail_all(const Status& st) {
    for (size_t a = 0; a < active_.size(); ++a) {
      Active& ac = active_[a];
      if (ac.running == 0) continue;
      done_(ac.job.id, st, ac.bytes, now_seconds() - ac.t0);
      ac = Active{};
    }
    std::deque<IoJob> queued;
    {
      std::lock_guard<std::mutex> lk(mu_);
      queued.swap(urgent_);
      queued.insert(queued.end(), normal_.begin(), normal_.end());
      normal_.clear();
    }
    for (const IoJob& j : queued) done_(j.id, st, 0, 0.0);  // not under mu_: done_ takes the caller's lock
  }

  IoFile& f_;
  const int depth_;
  Done done_;
  io_uring ring_{};
  bool ring_ok_ = false;
  int efd_ = -1;
  uint64_t event_buf_ = 0;
  std::vector<Op> ops_;
  std::vector<int> free_ops_;
  std::vector<Active> active_;
  std::vector<int> free_active_;
  std::vector<IoJob> take_;
  mutable std::mutex mu_;
  std::deque<IoJob> urgent_, normal_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<IoEngine>> io_engine_make_uring(IoFile& f, int depth, IoEngine::Done done) {
  if (depth < 1 || depth > 4096) return err("io_uring: depth %d must be in [1, 4096]", depth);
  if (f.fd() < 0) return err("io_uring: %s has no file descriptor to read from", f.path().c_str());
  std::unique_ptr<UringEngine> e(new UringEngine(f, depth, std::move(done)));
  STRATA_TRY(e->init());
  return std::unique_ptr<IoEngine>(std::move(e));
}

uint64_t io_uring_planned_bytes(int depth) {
  return rings_planned(ring_entries(depth)) + UringEngine::tables_bytes(depth) + kIoThreadStackBytes;
}

bool io_uring_usable() {
  io_uring r;
  if (io_uring_queue_init(2, &r, 0) < 0) return false;
  io_uring_queue_exit(&r);
  return true;
}

}  // namespace strata

#else  // no liburing

namespace strata {

Result<std::unique_ptr<IoEngine>> io_engine_make_uring(IoFile& f, int depth, IoEngine::Done done) {
  return err("io_uring: strata was built without liburing (install liburing-dev and reconfigure)");
}

uint64_t io_uring_planned_bytes(int depth) {  // never used without liburing; priced all the same
  uint64_t e = 1;
  while (e < static_cast<uint64_t>(depth) + 1) e <<= 1;
  const uint64_t pages = ((512 + 36 * e + 4095) / 4096 + (64 * e + 4095) / 4096) * 4096;
  return pages + static_cast<uint64_t>(depth) * 512 + kIoThreadStackBytes;
}

bool io_uring_usable() {
  return false;
}

}  // namespace strata

#endif
