// 64-byte aligned, uninitialised buffers for weights, activations and scratch.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace strata {

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

template <class T>
using AlignedPtr = std::unique_ptr<T[], AlignedFree>;

template <class T>
AlignedPtr<T> aligned_alloc_array(size_t n, size_t align = 64) {
  size_t bytes = (n * sizeof(T) + align - 1) / align * align;
  if (bytes == 0) bytes = align;
  void* p = std::aligned_alloc(align, bytes);
  if (!p) throw std::bad_alloc();
  return AlignedPtr<T>(static_cast<T*>(p));
}

// A growable aligned byte buffer for scratch space: reserve() once at setup, reuse per step.
class ScratchBuffer {
 public:
  void* reserve(size_t bytes) {
    if (bytes > cap_) {
      buf_ = aligned_alloc_array<unsigned char>(bytes);
      cap_ = bytes;
    }
    return buf_.get();
  }
  void* data() const { return buf_.get(); }
  size_t capacity() const { return cap_; }

 private:
  AlignedPtr<unsigned char> buf_;
  size_t cap_ = 0;
};

}  // namespace strata
