// The Engram store: V4.1's n-gram tables (two of ~100 GB in the real checkpoint) placed in a tier
// under an exact byte budget, rows served to the forward by row id (deepseek-v4.md §4.5).
//
//   tier "ram": the budget holds every table -> they are read once at open (O_DIRECT) and every
//               lookup is a hit;
//   tier "ssd": a RAM row cache of n_slots = budget / (row bytes + bookkeeping) slots, one row
//               (values + scales, as stored) per slot, CLOCK replacement, over the checkpoint
//               file read with O_DIRECT by the expert store's pool of I/O threads
//               (memory/io_queue.h, io_file.h); a row is one job of two covering reads (values,
//               scales) into a staging buffer, copied into its slot on completion. Reads beyond the
//               staging buffers wait in the store's own two-level queue (urgent = rows() waits).
//
// Engram row ids depend on token ids only, so they are known as soon as a step's tokens are:
// the caller computes every Engram layer's row ids at the start of the step and hands them to
// prefetch(), which starts the reads of the rows not cached (into free or evictable slots, never
// evicting a row wanted by this step); when the layer runs, rows() waits only for what is still
// missing (promoting queued prefetches), records the stall, and dequantises like the resident
// path (memory/engram_table.h), so streamed rows are bit-identical to resident ones. With
// prefetch off, prefetch() does nothing and every read starts in rows() (all of a call's misses
// in parallel). A failed read is an error naming the file and offset, never wrong values.
//
// Step protocol (one compute thread): begin_step(n_tokens), prefetch(table, ids) for every
// table, rows(table, ids) as the layers run, end_step(). I/O threads complete reads concurrently.
#pragma once

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "memory/engram/engram_stats.h"
#include "memory/engram/engram_table.h"
#include "memory/io/io_file.h"
#include "memory/io/io_queue.h"

namespace strata {

struct EngramStoreOptions {
  uint64_t budget_bytes = 0;  // > 0 (no store at all = the model's resident tables)
  bool prefetch = true;
  int io_threads = 4;     // reader threads
  int io_depth = 64;      // reads queued or in flight at most (the staging pool: 2 x depth)
  bool direct_io = true;  // O_DIRECT (falls back to buffered + DONTNEED where refused)
  int min_slots = 1;      // smallest useful cache: one token's rows of one Engram layer
};

// Same alias as memory/expert_store.h (tests inject faulty files through it).
using IoOpener = std::function<Result<std::unique_ptr<IoFile>>(const std::string& path, bool direct)>;

class EngramStore {
 public:
  // Per-slot bookkeeping counted in the budget besides the row bytes (memory/engram_table.h).
  static constexpr uint64_t kSlotOverhead = kEngramSlotOverhead;

  // tables: one per Engram layer, in Engram order (table index = position). Errors: no tables, a
  // budget below min_slots rows (the message gives the minimum), files that do not open or are
  // shorter than their tables, I/O errors while loading a resident tier.
  static Result<std::unique_ptr<EngramStore>> open(std::vector<EngramTable> tables,
                                                   const EngramStoreOptions& o, IoOpener opener = nullptr);
  ~EngramStore();
  EngramStore(const EngramStore&) = delete;
  EngramStore& operator=(const EngramStore&) = delete;

  void begin_step(int64_t n_tokens);
  // Starts the reads of rows ids[0..n) of `table` that are not cached (no wait). Out-of-range ids
  // are ignored here (rows() reports them).
  void prefetch(int table, const int64_t* ids, int64_t n);
  // out[i * head_dim ..] = dequantised row ids[i] of `table`; waits for reads in flight. Errors:
  // table or row out of range (naming both), a failed read (file and offset).
  Status rows(int table, const int64_t* ids, int64_t n, float* out);
  void end_step();

  // Waits until no read is in flight (tests; a consistent snapshot before stats()).
  void wait_idle();
  EngramStats stats() const;
  const EngramStoreInfo& info() const { return info_; }
  const std::vector<EngramTable>& tables() const { return tables_; }
  bool is_cached(int table, int64_t row) const;  // ready in the RAM tier
  int64_t cached_rows() const;

 private:
  enum SlotState : uint8_t { slot_free, slot_filling, slot_ready, slot_failed };
  enum SlotIo : uint8_t { io_none, io_queued, io_submitted };

  EngramStore() = default;
  Status load_resident();
  static uint64_t key_of(int table, int64_t row) {
    return (static_cast<uint64_t>(table) << 48) | static_cast<uint64_t>(row);
  }
  // open-addressing index (linear probing, backward-shift deletion): key -> slot
  size_t home(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  int32_t find_locked(uint64_t key) const;
  void index_insert_locked(uint64_t key, int32_t slot);
  void index_erase_locked(uint64_t key);
  // A slot for a new row: free, or a CLOCK victim that is not filling and not touched by the
  // current rows() call; for_prefetch also spares rows wanted by this step. -1: none now.
  int32_t take_slot_locked(bool for_prefetch);
  void start_read_locked(int32_t slot, uint64_t key, bool urgent, bool prefetch);
  // Moves queued reads into free staging buffers and hands them to the I/O threads (urgent first).
  void dispatch_locked();
  void make_urgent_locked(int32_t slot);
  void read_stage(uint32_t stage);  // I/O thread: the two covering reads, then on_done
  void on_done(uint32_t stage, const Status& st, double seconds);
  uint8_t* slot_data(int32_t s) { return data_.get() + static_cast<size_t>(s) * slot_stride_; }
  Status rows_resident(int table, const int64_t* ids, int64_t n, float* out);
  EngramStepStats& step_locked();

  std::vector<EngramTable> tables_;
  EngramStoreOptions opts_;
  EngramStoreInfo info_;
  bool resident_ = false;
  std::vector<std::unique_ptr<IoFile>> files_;  // per distinct path
  std::vector<int> file_of_;                    // [table] -> files_ index

  // resident tier: per table the raw value bytes and the raw scale bytes
  std::vector<std::vector<uint8_t>> resident_values_, resident_scales_;

  // ssd tier
  std::unique_ptr<uint8_t[]> data_;  // [n_slots][slot_stride_]
  size_t slot_stride_ = 0;
  int32_t n_slots_ = 0;
  std::vector<uint64_t> slot_key_;
  std::vector<uint8_t> slot_state_, slot_ref_, slot_prefetched_, slot_io_;
  std::vector<uint32_t> slot_want_, slot_call_;
  std::vector<int32_t> index_;  // capacity 2^k >= 2 * n_slots, -1 = empty
  int shift_ = 63;
  std::vector<int32_t> free_;
  int32_t hand_ = 0;
  uint32_t step_epoch_ = 1, call_epoch_ = 1;
  int64_t inflight_ = 0;                             // slots filling (queued or submitted)
  std::unordered_map<int32_t, std::string> errors_;  // failed slots
  std::deque<int32_t> wait_urgent_, wait_normal_;    // reads waiting for a staging buffer
  std::unique_ptr<uint8_t, void (*)(void*)> staging_{nullptr, &std::free};
  size_t stage_bytes_ = 0;
  std::vector<int32_t> stage_slot_;  // [n_stages] slot being read, -1 free
  std::vector<int32_t> stage_free_;
  std::vector<int32_t> pending_;  // scratch: slots of the current rows() chunk

  mutable std::mutex mu_;
  std::condition_variable cv_;
  EngramStats stats_;

  std::unique_ptr<IoQueue> io_;  // last: its threads stop before anything above is destroyed
};

}  // namespace strata
