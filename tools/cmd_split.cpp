// strata split: write a GGUF model as shards in llama.cpp's gguf-split layout
// (PREFIX-00001-of-0000N.gguf, split.no / split.count / split.tensors.count), or join a split
// model back into one file:
//   strata split IN.gguf PREFIX [--split-max-tensors N | --split-max-size 4G]
//   strata split --merge FIRST-SHARD.gguf OUT.gguf
// strata loads a split model from its first shard directly; --merge is for tools that read one
// file (the expert store's O_DIRECT reads).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "base/units.h"
#include "command.h"
#include "format/gguf.h"

namespace {

int fail(const std::string& m, int code = 1) {
  std::fprintf(stderr, "strata split: error: %s\n", m.c_str());
  return code;
}

int merge(const strata::GgufFile& in, const std::string& out) {
  strata::GgufWriter w;
  for (const strata::GgufKv& kv : in.metadata()) {
    if (kv.key != "split.no" && kv.key != "split.count" && kv.key != "split.tensors.count")
      w.set_value(kv.key, kv.value);
  }
  for (const strata::TensorView& t : in.tensors()) {
    auto st = w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
    if (!st.ok()) return fail(st.message());
  }
  if (auto st = w.write(out); !st.ok()) return fail(st.message());
  std::printf("wrote %s: %zu tensors from %d shards\n", out.c_str(), in.tensors().size(), in.n_shards());
  return 0;
}

int cmd_split(int argc, char** argv) {
  std::string in_path, out, max_size;
  strata::GgufSplitOptions o;
  bool do_merge = false;
  CLI::App app{"Split a GGUF model into shards (llama.cpp's gguf-split layout), or merge shards",
               "strata split"};
  app.add_option("input", in_path, "GGUF model (for --merge: the first shard)")->required();
  app.add_option("output", out, "shard prefix: PREFIX-00001-of-0000N.gguf ... (for --merge: the file)")
      ->required();
  auto* mt = app.add_option("--split-max-tensors", o.max_tensors, "tensors per shard at most");
  auto* ms = app.add_option(
      "--split-max-size", max_size,
      "tensor bytes per shard at most (K/M/G = KiB/MiB/GiB; llama-gguf-split's M/G are decimal)");
  auto* mg = app.add_flag("--merge", do_merge, "join a split model into one file");
  mt->excludes(ms);
  mg->excludes(mt)->excludes(ms);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(e.what(), 2);
  }
  if (!ms->count() && !mt->count() && !do_merge)
    return fail("give --split-max-tensors N or --split-max-size SIZE", 2);
  if (mt->count() && o.max_tensors < 1) return fail("--split-max-tensors must be >= 1", 2);
  if (ms->count()) {
    auto b = strata::parse_size(max_size);
    if (!b.ok()) return fail("--split-max-size: " + b.message(), 2);
    if (*b == 0) return fail("--split-max-size must be > 0", 2);
    o.max_bytes = *b;
  }
  auto f = strata::GgufFile::open(in_path);
  if (!f.ok()) return fail(f.message());
  if (do_merge) return merge(**f, out);
  auto paths = strata::gguf_write_split(**f, out, o);
  if (!paths.ok()) return fail(paths.message());
  for (const std::string& p : *paths) std::printf("%s\n", p.c_str());
  std::printf("wrote %zu shards, %zu tensors\n", paths->size(), (*f)->tensors().size());
  return 0;
}

const strata::cli::Registrar reg{"split", "split a GGUF into gguf-split shards, or --merge them", &cmd_split};

}  // namespace
