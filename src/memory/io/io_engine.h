// The backing tier's reads: jobs of up to four covering reads (memory/io_file.h) each, run by one of
// three backends.
//
//   uring    one thread owning an io_uring of `depth` entries: every job handed to submit() in one
//            call goes to the kernel in one io_uring_submit, so all of a layer's missing experts are
//            in flight at once, up to `depth` raw reads (a job's segments are separate reads).
//   threads  a pool of `threads` threads, each running one job at a time with pread (the fallback
//            where io_uring is unavailable: old kernels, seccomp, a file with no descriptor).
//   sync     no threads, no rings: submit() itself reads each job, segment after segment, with
//            blocking pread in the caller's thread (queue depth 1) and calls `done` before it
//            returns. The baseline every offloading engine starts from ("naive": a miss stops the
//            compute thread until its bytes are in); never chosen by auto.
//
// The asynchronous two order work the same way: urgent jobs (a compute thread waits: a demand miss)
// start before normal ones (prefetches); promote() moves a queued normal job up when someone starts
// waiting for it (sync queues nothing: it has nothing to promote). All three follow
// io_read_covering's rules (retry short reads, EINTR / EAGAIN; an error names the file and offset; a
// file that changed size is an error) and call `done` once per job: uring and threads from an I/O
// thread, sync from the thread inside submit() — so submit() must not be called holding a lock that
// `done` takes. Jobs still queued when an engine is destroyed are dropped; jobs in flight finish first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "memory/io/io_file.h"

namespace strata {

struct IoSegment {
  uint8_t* dst = nullptr;  // 4 KiB aligned; receives the aligned range covering [off, off + len)
  uint64_t off = 0;
  size_t len = 0;
  // The file to read from (it must outlive the engine; for io_uring it must have a descriptor);
  // null: the engine's own file. A job's segments may read different files (the shards of a
  // checkpoint directory).
  IoFile* file = nullptr;
};

struct IoJob {
  static constexpr int kMaxSegments = 16;
  uint32_t id = 0;
  int n = 0;
  IoSegment seg[kMaxSegments];
};

enum class IoBackend : uint8_t { io_backend_auto, io_backend_uring, io_backend_threads, io_backend_sync };
// "auto" | "uring" | "threads" | "sync"; false for anything else.
bool io_backend_from_name(const std::string& name, IoBackend* out);
const char* io_backend_name(IoBackend b);

class IoEngine {
 public:
  // id, the first error of the job's segments (ok when all arrived), bytes wanted (sum of segment
  // lengths), seconds from the job's first read to its last completion.
  using Done = std::function<void(uint32_t id, const Status& st, uint64_t bytes, double seconds)>;

  virtual ~IoEngine() = default;
  virtual const char* name() const = 0;  // "uring" | "threads" | "sync"
  virtual int depth() const = 0;         // raw reads in flight at most
  // Bytes the engine allocated for its own bookkeeping (rings, queues, thread stacks), for the
  // memory report's io_buffers (reads land in the caller's buffers).
  virtual uint64_t overhead_bytes() const = 0;
  // Queues n jobs (1 <= job.n <= kMaxSegments) and starts as many as the depth allows, together.
  virtual void submit(const IoJob* jobs, size_t n, bool urgent) = 0;
  // If job `id` is still queued as normal, move it to the front of the urgent queue.
  virtual bool promote(uint32_t id) = 0;
};

// What an I/O thread's stack costs in RAM (the pages a reader touches), in overhead_bytes() and the
// plan alike.
inline constexpr uint64_t kIoThreadStackBytes = 64 * 1024;

// The bookkeeping bytes an engine will hold (its overhead_bytes() with empty queues), known before it
// exists: the planner's io_buffers (plan/planner.h).
//   threads  threads x kIoThreadStackBytes;
//   uring    the kernel's rings for depth + 1 entries as they are mapped into the process, page by
//            page (SQ and CQ rings, the CQ at twice the entries, in one mapping; the SQE array), the
//            engine's read and job tables for `depth` reads, and one thread's stack;
//   sync     nothing (it reads on the caller's stack; the engine object is runtime's).
// No registered buffers either way: reads land in the tier's slots.
uint64_t io_engine_planned_bytes(IoBackend backend, int threads, int depth);

// The engine for `f` (which must outlive it). auto: uring when it can be set up for this file, else
// threads (never sync). uring asked for explicitly but unavailable is an error saying why. threads >=
// 1, depth >= 1 (the uring depth; for threads the queue is unbounded and `threads` reads run at once;
// sync ignores both).
Result<std::unique_ptr<IoEngine>> io_engine_make(IoBackend backend, IoFile& f, int threads, int depth,
                                                 IoEngine::Done done);

Result<std::unique_ptr<IoEngine>> io_engine_make_threads(IoFile& f, int threads, IoEngine::Done done);
std::unique_ptr<IoEngine> io_engine_make_sync(IoFile& f, IoEngine::Done done);

// Splits segments in[0..n) into pieces of at most `chunk` bytes of cover each (chunk rounded up to
// kIoAlign), cut at aligned file offsets, so that the pieces' covering reads tile the segments' covers
// exactly (each piece lands where the whole segment's read would have put it); an asynchronous engine
// then reads one segment's pieces in parallel. chunk 0: no split. When more than max_out pieces would
// result the chunk is doubled until they fit (max_out >= n). Returns the number written to out.
int io_split_segments(const IoSegment* in, int n, size_t chunk, IoSegment* out, int max_out);

// A job's segments read one after another with io_read_covering (the threads and sync backends),
// each from its own file or else f: the first error, and *bytes = the segment lengths wanted.
Status io_read_job(IoFile& f, const IoJob& job, uint64_t* bytes);
// Errors: liburing not compiled in, io_uring_queue_init refused (message has the errno), no
// descriptor for the file.
Result<std::unique_ptr<IoEngine>> io_engine_make_uring(IoFile& f, int depth, IoEngine::Done done);
// io_engine_planned_bytes for the uring backend.
uint64_t io_uring_planned_bytes(int depth);
// Whether an io_uring can be set up in this process (compiled in and allowed by the kernel).
bool io_uring_usable();

}  // namespace strata
