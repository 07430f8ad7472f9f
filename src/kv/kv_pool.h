// KvPool: the paged KV memory of an engine's sequences under one byte budget. Every part of the
// KV spec that grows one row per position (kind full: K and V of full-attention layers) is paged:
// the pool is ONE allocation of a device (Device::alloc), a region per (layer, paged part) of
// n_blocks · block_size rows, and a block id names block_size rows in every region at once, so a
// sequence needs one block table (kv/block_pool.h) for all its paged parts. Window rings and
// other parts stay in each sequence's own KvCache (kv/kv_cache.h).
//
// The bookkeeping is kv/BlockPool's; this class adds the bytes, the views (KvCache::paged's
// RowCaches over the regions, addressed through a sequence's table: kernels/kv_rows.h) and the
// sequence-level operations the engine calls: reserve (plan, then apply), release, and the prefix
// cache — adopt_prefix hands a new sequence the cached blocks of its longest cached prefix,
// commit names a sequence's full blocks so later sequences can adopt them. The prefix cache is on
// when every part is paged, or when the others are all window rings and checkpoints are kept
// (kv/kv_checkpoints.h: a ring cannot be rebuilt from blocks, so a prefix ends at the last block
// boundary whose window rows were saved).
//
// Spill (kv/kv_spill.h): with a RAM tier (--cache-ram) or an SSD tier (--prefix-cache-dir), a
// cached block the pool evicts is copied out under its hash, and adopt_prefix continues a prefix
// past the pool's last hit with blocks loaded back from those tiers when the cost model says a
// load is cheaper than recomputing them; persist() writes every cached block to SSD (shutdown).
// The SSD writes run on KvSpill's writer thread: an evicted block's rows are copied out (device to
// host) before its id is handed out again, and the file is written later.
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "kernels/device.h"
#include "kv/block_pool.h"
#include "kv/kv_checkpoints.h"
#include "kv/kv_spec.h"
#include "kv/kv_spill.h"
#include "kv/row_cache.h"

namespace strata {

struct KvPoolOptions {
  uint64_t budget_bytes = 0;  // the pool's bytes at most (whole blocks); > 0
  int block_size = 16;        // positions per block
  bool prefix_cache = true;
  bool rotate = true;              // quantized rows Hadamard-rotated (--kv-rotate), as KvCache's
  uint64_t ram_bytes = 0;          // --cache-ram: the RAM tier's bytes (0: none)
  std::string disk_dir = {};       // --prefix-cache-dir ("": none)
  uint64_t disk_bytes = 0;         // --prefix-cache-dir-size: its files' bytes at most (0: no limit)
  uint64_t model_fingerprint = 0;  // names the model in the SSD tier's files
  bool verbose = false;            // log every load-or-recompute decision (kv/kv_spill.h)
  // Window-ring snapshots kept at most (kv/kv_checkpoints.h; --ctx-checkpoints x sequences): a
  // model with sliding-window parts has a prefix cache only with some.
  int64_t checkpoints = 0;
};

// A window part a checkpoint saves: its last `keep` rows (window − 1) before the boundary.
struct KvWindowPart {
  int il = 0, part = 0;
  int64_t keep = 0;
  size_t row_bytes = 0;
};

// One part's bytes in the pool (summed over the layers that page it).
struct KvPartBytes {
  std::string name;                    // "k", "v"
  std::string type;                    // its storage type ("f16", "q8_0", ...)
  uint64_t bytes = 0, used_bytes = 0;  // the pool's region bytes, those of referenced blocks
  uint64_t bytes_per_token = 0;
};

// What a pool of these options allocates (KvPool::bill; `strata plan` bills it): the pool, and
// with the prefix cache on, its RAM tier's budget, the SSD write queue at most and one SSD file.
struct KvPoolBill {
  int32_t n_blocks = 0;
  uint64_t block_bytes = 0, pool_bytes = 0;
  bool prefix_cache = false, ssd = false;
  bool spill = false;        // the prefix cache's blocks spill to RAM / SSD (every part paged, a tier asked)
  uint64_t ram_tier = 0;     // --cache-ram bytes (RAM)
  uint64_t spill_queue = 0;  // the SSD writer's queue at most (RAM)
  uint64_t ssd_file = 0;     // one block's file on SSD
  uint64_t ssd_budget = 0;   // --prefix-cache-dir-size (0: no limit)
  uint64_t checkpoints = 0;  // the window-ring snapshots at most (RAM)
};

struct KvPoolStats {
  BlockCounts blocks;
  int block_size = 0;
  uint64_t bytes = 0, block_bytes = 0;
  double bytes_per_token = 0;  // of the paged parts
  bool prefix_cache = false;
  uint64_t pool_hits = 0;  // blocks a prefix lookup found in the pool (cumulative)
  // Fragmentation of a paged pool is internal only (any free block serves any sequence: no
  // external fragmentation, no "largest free run"): the rows of referenced blocks that no
  // sequence asked for (each sequence's last block's tail), of all rows of referenced blocks.
  int64_t unused_rows = 0;
  double fragmentation = 0;
  // The same over the pool's life, time-weighted: ∫ unused rows dt / ∫ rows of referenced blocks dt
  // (what a loadtest's fragmentation is; 0 before any block was referenced).
  double fragmentation_avg = 0;
  std::vector<KvPartBytes> parts;
  KvSpillStats spill;
  KvCheckpointStats checkpoints;
};

class KvPool {
 public:
  static Result<std::unique_ptr<KvPool>> create(const KvSpec& spec, Device& dev, const KvPoolOptions& o);
  // The parts a pool pages (those that grow one row per position), and their bytes per position
  // at the spec's types: what one position of one sequence costs the pool.
  static bool pages_part(const KvPartSpec& p) { return p.kind == KvPartKind::full && p.ratio == 1; }
  static uint64_t bytes_per_position(const KvSpec& spec);
  // The budget when none is given: n_seq sequences of n_ctx positions (whole blocks each).
  static uint64_t default_budget(const KvSpec& spec, int64_t n_ctx, int n_seq, int block_size);
  // What create(spec, dev, o) would allocate, without allocating; the same errors.
  static Result<KvPoolBill> bill(const KvSpec& spec, const KvPoolOptions& o);
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  Device& device() const { return dev_; }
  int block_size() const { return block_size_; }
  int32_t n_blocks() const { return n_blocks_; }
  uint64_t block_bytes() const { return block_bytes_; }  // one block of every paged part
  uint64_t bytes() const { return static_cast<uint64_t>(n_blocks_) * block_bytes_; }
  bool prefix_cache() const { return prefix_cache_; }
  bool pages(int il, int part) const { return region(il, part) >= 0; }
  // Part `part` of layer il is paged here in rows of this type and rotation.
  bool holds(int il, int part, GgmlType type, bool hadamard) const;
  // Blocks covering n positions.
  int32_t blocks_for(int64_t n) const { return static_cast<int32_t>((n + block_size_ - 1) / block_size_); }

  // A sequence of up to n_ctx positions: its (empty) table, and the rows of paged part `part` of
  // layer il through it (valid while the pool and the table live).
  BlockTable new_table(int64_t n_ctx) const;
  RowCache rows(int il, int part, const BlockTable& t) const;

  int32_t available() const;  // blocks an allocation can take now (free + cached)
  // Blocks t lacks to cover n positions.
  int32_t need(const BlockTable& t, int64_t n) const;
  // Plan, then apply: t covers n positions afterwards, or an error names the need and what is
  // available, and nothing changed.
  Status reserve(BlockTable& t, int64_t n);
  void release(BlockTable& t);  // every block (cached ones stay cached in the LRU)
  // t empty: appends the cached blocks of the longest cached prefix of `tokens` (whole blocks,
  // leaving at least the last token to evaluate) and returns the positions they hold (0 when the
  // prefix cache is off).
  int64_t adopt_prefix(BlockTable& t, std::span<const int32_t> tokens);
  // tokens: the sequence's first positions, all evaluated (their rows written): names t's full
  // blocks among them that are not named yet.
  void commit(BlockTable& t, std::span<const int32_t> tokens);
  // Checkpoints (a model with window parts): the parts a snapshot holds, in its byte order; where
  // a sequence of n_past evaluated positions would save one (the hash of its last named block at
  // or before n_past, and that block's end; none when that boundary has one already, or none is
  // named); store one; the one for t's prefix (its last block's), counted as restored.
  bool checkpoints_on() const { return checkpoints_ != nullptr; }
  const std::vector<KvWindowPart>& window_parts() const { return windows_; }
  std::optional<std::pair<uint64_t, int64_t>> checkpoint_wanted(const BlockTable& t, int64_t n_past) const;
  void put_checkpoint(uint64_t hash, KvCheckpoint c);
  std::optional<KvCheckpoint> checkpoint_of(const BlockTable& t);
  KvPoolStats stats() const;
  // The engine's measured prefill seconds for `tokens` prompt tokens (the cost model's recompute side).
  void observe_prefill(int64_t tokens, double seconds);
  // Every cached block (in the pool and in RAM) written to the SSD tier (waits for the writes);
  // nothing without one.
  Status persist();
  // Waits until the spilled blocks queued for SSD are written (kv/kv_spill.h).
  Status flush_spill() const;
  const KvDiskTier* disk_tier() const { return spill_ ? spill_->disk() : nullptr; }

 private:
  struct Region {
    int il = 0, part = 0;
    int64_t width = 0;
    GgmlType type = GgmlType::f32;  // the rows' storage type (kv_storage_type of the part's KV type)
    bool hadamard = false;
    size_t row_bytes = 0;
    size_t offset = 0;
    std::string name;
  };
  // The regions, block size in bytes, salt and spill format of a spec under options (create, bill).
  struct Layout {
    std::vector<Region> regions;
    std::vector<std::vector<int>> region_of;
    uint64_t salt = 0, block_bytes = 0;
    int32_t n_blocks = 0;
    bool prefix_cache = false, spill = false;
    KvBlockFormat format;
    std::vector<KvWindowPart> windows;  // with checkpoints: the unpaged window parts
    uint64_t checkpoint_bytes = 0;      // one snapshot's
  };
  static Result<Layout> layout(const KvSpec& spec, const KvPoolOptions& o);
  KvPool(Device& dev, int block_size, int32_t n_blocks)
      : dev_(dev), block_size_(block_size), n_blocks_(n_blocks), pool_(n_blocks, block_size) {}
  int region(int il, int part) const;
  // Block b's rows of every region, in region order (one block of payload), and back.
  Status read_block(int32_t b, std::vector<uint8_t>* out) const;
  Status write_block(int32_t b, const std::vector<uint8_t>& bytes) const;
  void spill_evicted(std::vector<EvictedBlock>& ev);  // mu_ held
  // Appends to t the blocks after its last one that RAM / SSD hold, if the cost model says so.
  void load_prefix(BlockTable& t, std::span<const int32_t> tokens);  // mu_ held
  void set_held(BlockTable& t, int64_t held);                        // mu_ held
  void tick();  // mu_ held, before a change of the referenced or unused rows: their time integrals

  Device& dev_;
  int block_size_;
  int32_t n_blocks_;
  uint64_t block_bytes_ = 0;
  double bytes_per_token_ = 0;
  uint64_t salt_ = 0;  // what else names a block's rows: the paged parts' types and widths
  bool prefix_cache_ = false;
  uint64_t pool_hits_ = 0;
  int64_t unused_rows_ = 0;                           // Σ over tables of rows() - held
  double t_last_ = 0, unused_row_s_ = 0, row_s_ = 0;  // tick(): ∫ unused_rows_ dt, ∫ referenced rows dt
  std::unique_ptr<KvSpill> spill_;
  std::unique_ptr<KvCheckpoints> checkpoints_;
  std::vector<KvWindowPart> windows_;
  std::vector<Region> regions_;
  std::vector<std::vector<int>> region_of_;  // [layer][part] -> region, -1: not paged
  DeviceBuffer buf_;
  mutable std::mutex mu_;
  BlockPool pool_;
};

}  // namespace strata
