// Arena: the per-session scratch of a forward step (design.md principle 3). Blocks and device ops carve
// buffers with alloc<T>(n) during a step and release everything with reset() at its start.
// The arena is sized at session creation; if a step ever needs more (it should not), it takes
// an overflow chunk once and grows its main buffer at the next reset, so a warmed session
// never allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/aligned.h"

namespace strata {

class Arena {
 public:
  explicit Arena(size_t bytes = 0) { grow(bytes); }

  void reset() {
    if (!overflow_.empty()) {
      size_t need = cap_ + overflow_bytes_;
      overflow_.clear();
      overflow_bytes_ = 0;
      grow(need + need / 4);
    }
    used_ = 0;
  }

  template <class T>
  T* alloc(size_t n) {
    const size_t bytes = align_up(n * sizeof(T));
    if (used_ + bytes <= cap_) {
      T* p = reinterpret_cast<T*>(buf_.get() + used_);
      used_ += bytes;
      return p;
    }
    overflow_.push_back(aligned_alloc_array<unsigned char>(bytes));
    overflow_bytes_ += bytes;
    return reinterpret_cast<T*>(overflow_.back().get());
  }

  // Stack-like reuse inside a step: rewind(mark()) frees what was carved since the mark.
  size_t mark() const { return used_; }
  void rewind(size_t m) { used_ = m; }

  size_t capacity() const { return cap_; }
  // The capacity an Arena(bytes) has (what a plan prices).
  static size_t capacity_for(size_t bytes) { return align_up(bytes); }
  size_t used() const { return used_; }

 private:
  static size_t align_up(size_t b) { return (b + 63) / 64 * 64; }
  void grow(size_t bytes) {
    cap_ = align_up(bytes);
    buf_ = aligned_alloc_array<unsigned char>(cap_ ? cap_ : 64);
    used_ = 0;
  }

  AlignedPtr<unsigned char> buf_;
  size_t cap_ = 0;
  size_t used_ = 0;
  std::vector<AlignedPtr<unsigned char>> overflow_;
  size_t overflow_bytes_ = 0;
};

}  // namespace strata
