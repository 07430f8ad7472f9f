// libFuzzer target for the GGUF reader: parse arbitrary bytes, then touch everything a user of a
// successfully parsed file may touch (all metadata through every getter, every tensor's bytes),
// and check that writing a parsed file back and re-reading it gives the same content.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "format/gguf.h"

namespace {

using namespace strata;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "gguf_fuzz: invariant violated: %s\n", what);
  std::abort();
}

unsigned touch(const GgufFile& f) {
  unsigned acc = 0;
  for (const GgufKv& kv : f.metadata()) {
    if (f.find(kv.key) != &kv.value) die("find(key) does not return the key's value");
    acc += static_cast<unsigned>(kv.value.to_display(16).size());
    // Every getter on every key: each either succeeds or returns an error, never crashes.
    acc += f.get_int(kv.key).ok() + f.get_float(kv.key).ok() + f.get_bool(kv.key).ok();
    acc += f.get_string(kv.key).ok() + f.get_int_array(kv.key).ok() + f.get_float_array(kv.key).ok();
    acc += f.get_string_array(kv.key).ok() + (f.get_array(kv.key) != nullptr);
  }
  for (const TensorView& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) die("find_tensor(name) does not return the tensor");
    const auto* p = static_cast<const uint8_t*>(t.data);
    if (t.nbytes) {
      acc += p[0] + p[t.nbytes - 1];  // ASan checks both ends lie in the input
      // A few rows spread over the tensor, addressed through (i1, i2, i3) and the strides.
      for (int64_t r = 0; r < t.rows(); r += 1 + t.rows() / 4)
        acc += t.row(r % t.ne[1], (r / t.ne[1]) % t.ne[2], r / (t.ne[1] * t.ne[2]))[0];
    }
    if (t.n_dims == 3 && t.ne[2] > 0) acc += static_cast<unsigned>(t.slice2d(t.ne[2] - 1).nbytes);
    acc += static_cast<unsigned>(t.shape_string().size());
  }
  return acc;
}

void round_trip(const GgufFile& f) {
  if (f.alignment() > 4096) return;  // the writer would pad to it: not worth the memory here
  GgufWriter w;
  for (const GgufKv& kv : f.metadata()) w.set_value(kv.key, kv.value);
  for (const TensorView& t : f.tensors()) {
    std::vector<int64_t> ne(t.ne, t.ne + (t.n_dims > 0 ? t.n_dims : 1));
    if (!w.add_tensor(t.name, t.type, ne, t.data).ok()) return;  // e.g. a name llama.cpp rejects
  }
  std::vector<uint8_t> out;
  if (!w.write_to_memory(&out).ok()) die("writer rejected a file the reader accepted");
  auto g = GgufFile::from_memory(out.data(), out.size(), "<rewritten>");
  if (!g.ok()) {
    std::fprintf(stderr, "%s\n", g.message().c_str());
    die("reader rejected the writer's output");
  }
  const GgufFile& h = **g;
  if (h.metadata().size() != f.metadata().size() || h.tensors().size() != f.tensors().size())
    die("round trip changed counts");
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    if (h.metadata()[i].key != f.metadata()[i].key) die("round trip changed a key");
    if (!gguf_value_equal(h.metadata()[i].value, f.metadata()[i].value)) die("round trip changed a value");
  }
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const TensorView& a = f.tensors()[i];
    const TensorView& b = h.tensors()[i];
    if (a.name != b.name || a.type != b.type || a.nbytes != b.nbytes) die("round trip changed a tensor");
    for (int d = 0; d < kMaxDims; ++d)
      if (a.ne[d] != b.ne[d]) die("round trip changed a shape");
    if (a.nbytes && std::memcmp(a.data, b.data, a.nbytes) != 0) die("round trip changed tensor bytes");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = GgufFile::from_memory(data, size, "fuzz");
  if (!f.ok()) {
    if (f.message().rfind("gguf: fuzz: ", 0) != 0) die("error message lacks the 'gguf: <name>: ' prefix");
    return 0;
  }
  volatile unsigned sink = touch(**f);
  (void)sink;
  round_trip(**f);
  return 0;
}
