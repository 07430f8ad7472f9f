// KvDiskTier: the SSD tier of the KV cache (--prefix-cache-dir DIR): one file per cached block,
// DIR/<chain hash, 16 hex digits>.kvb, written when the RAM tier (kv/kv_ram_tier.h) pushes a
// block out or when the pool persists its cached blocks at shutdown, and read back on a prefix hit
// (after a restart too). The file (little-endian):
//   0   "STRKVBLK"      magic
//   8   u32 version     the layout (kKvBlockLayout): a file of another layout is ignored
//   12  u32 header      bytes before the tokens (128)
//   16  u64 model       the model's fingerprint (runtime/engine_kv.cpp: shapes, metadata, weights' heads)
//   24  u64 salt        what else names the rows: the paged parts' KV types, rotation and widths
//   32  u32 block_size  positions per block;   36 u32 zero
//   40  u64 payload     bytes of rows;         48 u64 hash;   56 u64 parent hash
//   64  u64 checksum    of the whole file with this field zero (kv_checksum)
//   72  char[56]        the KV types in words ("k f16 v f16"), for the log line
//   128 i32 tokens[block_size], then the payload: each paged part's rows of the block, in the
//       pool's region order (layer, then part)
// At open the directory is scanned (headers only): a file made for another model, KV types, block
// size or layout is ignored with a log line; a file that is not one of these or has the wrong
// size is rejected with a message naming it. A read verifies the checksum: a corrupted file is an
// error naming it (the engine recomputes), never a crash. Writes go to a temporary file renamed
// into place (a crash leaves no half-written block under a block's name).
//
// A byte budget (--prefix-cache-dir-size; 0: none) bounds the files: past it the least recently
// used ones (written or read longest ago; after a restart, by modification time, which a read
// refreshes) are deleted, oldest first, and counted. Not thread-safe, except write_file, which
// touches no state of the tier (kv/KvSpill's writer thread calls it and then add()).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kv/kv_ram_tier.h"

namespace strata {

inline constexpr uint32_t kKvBlockLayout = 1;

uint64_t kv_checksum(const uint8_t* p, size_t n);

struct KvBlockFormat {
  uint64_t model = 0, salt = 0;
  int block_size = 0;
  uint64_t payload_bytes = 0;
  std::string types;  // in words, at most 55 characters kept
};

class KvDiskTier {
 public:
  // budget: bytes of block files at most (0: no limit); files past it at open are deleted.
  static Result<std::unique_ptr<KvDiskTier>> open(const std::string& dir, const KvBlockFormat& f,
                                                  uint64_t budget = 0);
  // The bytes of one block's file for this format (what the budget counts per block).
  static uint64_t file_bytes(const KvBlockFormat& f);
  const std::string& dir() const { return dir_; }
  std::string path_of(uint64_t hash) const;
  bool contains(uint64_t hash) const { return files_.count(hash) != 0; }
  int64_t blocks() const { return static_cast<int64_t>(files_.size()); }
  uint64_t bytes() const { return static_cast<uint64_t>(files_.size()) * file_bytes(); }
  uint64_t file_bytes() const { return file_bytes(f_); }
  uint64_t budget() const { return budget_; }
  bool fits_one() const { return budget_ == 0 || file_bytes() <= budget_; }  // a block file fits at all
  int64_t ignored() const { return ignored_; }    // files of another model / types / layout
  int64_t rejected() const { return rejected_; }  // unreadable or corrupted files
  int64_t evicted() const { return evicted_; }    // files deleted for the byte budget
  // The log lines so far (the first 32); stderr gets the first 8 (then a count at the scan's end).
  const std::vector<std::string>& messages() const { return messages_; }

  // r's file (nothing when the hash has one already); an error names the file. write_file then add.
  Status write(const KvBlockRecord& r);
  // Writes r's file without recording it (thread-safe: reads only the format and the directory).
  Status write_file(const KvBlockRecord& r) const;
  // Records a written file as the most recently used, then deletes the least recently used files
  // past the budget; returns how many it deleted.
  int64_t add(uint64_t hash);
  // The block of this hash, checked (header, size, checksum); an error names the file, which
  // leaves the index (the block is recomputed).
  Result<KvBlockRecord> read(uint64_t hash);

 private:
  KvDiskTier(std::string dir, KvBlockFormat f, uint64_t budget)
      : dir_(std::move(dir)), f_(std::move(f)), budget_(budget) {}
  // "": the header is one of ours, for this model; else why not (*ignore: another model / types).
  std::string check_header(const uint8_t* h, uint64_t file_size, bool* ignore) const;
  void note(const std::string& m, bool scan = true);  // scan: printed among the scan's first 8
  void forget(uint64_t hash);
  int64_t evict();  // past the budget: the least recently used files deleted
  std::string dir_;
  KvBlockFormat f_;
  uint64_t budget_ = 0;
  std::list<uint64_t> lru_;  // hashes with a file, front: least recently used
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> files_;
  int64_t ignored_ = 0, rejected_ = 0, evicted_ = 0, n_notes_ = 0;
  std::vector<std::string> messages_;
};

}  // namespace strata
