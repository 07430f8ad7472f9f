// Writes a small seed corpus for gguf_fuzz: synthetic files covering every value type, nested
// arrays, every tensor rank and several tensor types, plus the real fixtures' metadata and tensor
// infos with each tensor shrunk to one block (so seeds stay a few KiB instead of megabytes).
//   gguf_fuzz_seeds <out_dir> [model.gguf ...]
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "format/gguf.h"

using namespace strata;
using VT = GgufValueType;

namespace {

int fail(const Status& st) {
  std::fprintf(stderr, "gguf_fuzz_seeds: %s\n", st.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gguf_fuzz_seeds <out_dir> [model.gguf ...]\n");
    return 2;
  }
  const std::string out = argv[1];
  std::filesystem::create_directories(out);
  std::vector<uint8_t> blob(4096);
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<uint8_t>(i * 31 + 7);

  {  // every value type, nested arrays, tensors of ranks 1..4
    GgufWriter w;
    w.set_string("general.architecture", "seed");
    w.set_alignment(16);
    const VT ints[] = {VT::u8, VT::i8, VT::u16, VT::i16, VT::u32, VT::i32, VT::u64, VT::i64};
    for (VT t : ints) w.set_value(std::string("k.") + gguf_value_type_name(t), gguf_make_int(t, 7));
    w.set_f32("k.f32", 0.5f);
    w.set_value("k.f64", gguf_make_float(VT::f64, -2.25));
    w.set_bool("k.bool", true);
    w.set_array_string("k.strs", {"a", "bc", ""});
    w.set_array_i32("k.i32s", {1, 2, 3});
    w.set_array_f32("k.f32s", {1.0f, -1.0f});
    w.set_value("k.nested", gguf_make_array(VT::array, {gguf_make_array(VT::u8, {gguf_make_int(VT::u8, 1)}),
                                                        gguf_make_array(VT::array, {})}));
    Status st;
    if (!(st = w.add_tensor("t1", GgmlType::f32, {4}, blob.data()))) return fail(st);
    if (!(st = w.add_tensor("t2", GgmlType::q8_0, {32, 2}, blob.data()))) return fail(st);
    if (!(st = w.add_tensor("t3", GgmlType::mxfp4, {32, 2, 2}, blob.data()))) return fail(st);
    if (!(st = w.add_tensor("t4", GgmlType::q4_k, {256, 1, 1, 2}, blob.data()))) return fail(st);
    if (!(st = w.add_tensor("t5", GgmlType::f16, {0, 3}, nullptr))) return fail(st);
    if (!(st = w.write(out + "/synthetic_all_types.gguf"))) return fail(st);
  }
  {  // nothing at all
    GgufWriter w;
    if (Status st = w.write(out + "/synthetic_empty.gguf"); !st) return fail(st);
  }
  for (int i = 2; i < argc; ++i) {
    auto f = GgufFile::open(argv[i]);
    if (!f.ok()) return fail(f.status());
    GgufWriter w;
    for (const GgufKv& kv : (*f)->metadata()) {
      // Keep seeds small: long arrays (vocab tokens, merges) shrink to their first 16 items.
      if (const GgufArray* a = kv.value.as_array(); a && a->items.size() > 16) {
        std::vector<GgufValue> items(a->items.begin(), a->items.begin() + 16);
        w.set_value(kv.key, gguf_make_array(a->elem_type, std::move(items)));
      } else {
        w.set_value(kv.key, kv.value);
      }
    }
    for (const TensorView& t : (*f)->tensors()) {
      std::vector<int64_t> ne(static_cast<size_t>(t.n_dims > 0 ? t.n_dims : 1), 1);
      ne[0] = type_info(t.type).block_size;
      if (Status st = w.add_tensor(t.name, t.type, ne, blob.data()); !st) return fail(st);
    }
    const std::string stem = std::filesystem::path(argv[i]).stem().string();
    if (Status st = w.write(out + "/" + stem + ".min.gguf"); !st) return fail(st);
  }
  return 0;
}
