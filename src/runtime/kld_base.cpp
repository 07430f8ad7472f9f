#include "runtime/kld_base.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <memory>

namespace strata {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace

Result<KldBase> read_kld_base(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) return err("%s: cannot open (%s)", path.c_str(), std::strerror(errno));
  char magic[8];
  uint32_t n_ctx = 0;
  int32_t n_vocab = 0, n_chunk = 0;
  if (std::fread(magic, 1, 8, f.get()) != 8 || std::memcmp(magic, "_logits_", 8) != 0)
    return err("%s: not a llama-perplexity --kl-divergence-base file (no \"_logits_\" header)", path.c_str());
  if (std::fread(&n_ctx, 4, 1, f.get()) != 1 || std::fread(&n_vocab, 4, 1, f.get()) != 1 ||
      std::fread(&n_chunk, 4, 1, f.get()) != 1)
    return err("%s: truncated header", path.c_str());
  if (n_ctx < 4 || n_ctx > (1u << 20) || n_vocab < 2 || n_vocab > (1 << 24) || n_chunk < 1 ||
      n_chunk > (1 << 20))
    return err("%s: implausible header (n_ctx %u, n_vocab %d, n_chunk %d)", path.c_str(), n_ctx, n_vocab,
               n_chunk);
  KldBase b;
  b.n_ctx = static_cast<int>(n_ctx);
  b.n_vocab = n_vocab;
  b.n_chunk = n_chunk;
  b.tokens.resize(static_cast<size_t>(n_ctx) * static_cast<size_t>(n_chunk));
  if (std::fread(b.tokens.data(), 4, b.tokens.size(), f.get()) != b.tokens.size())
    return err("%s: truncated: fewer than the %zu tokens the header announces", path.c_str(),
               b.tokens.size());
  const size_t n_rows = static_cast<size_t>(n_chunk) * static_cast<size_t>(b.rows_per_chunk());
  b.rows.resize(n_rows * b.row_stride());
  if (const size_t got = std::fread(b.rows.data(), 2, b.rows.size(), f.get()); got != b.rows.size())
    return err("%s: truncated: %zu of %zu log-probability rows", path.c_str(), got / b.row_stride(), n_rows);
  return b;
}

Status write_kld_base(const std::string& path, int n_ctx, int n_vocab, const std::vector<int32_t>& tokens,
                      const std::vector<float>& logits) {
  KldBase b;
  b.n_ctx = n_ctx;
  b.n_vocab = n_vocab;
  b.n_chunk = static_cast<int>(tokens.size() / static_cast<size_t>(n_ctx));
  const auto n_rows = static_cast<size_t>(b.n_chunk) * static_cast<size_t>(b.rows_per_chunk());
  if (b.n_chunk < 1 || tokens.size() % static_cast<size_t>(n_ctx) || logits.size() != n_rows * n_vocab)
    return err("write_kld_base: %zu tokens / %zu logits do not make whole chunks of %d", tokens.size(),
               logits.size(), n_ctx);
  File f(std::fopen(path.c_str(), "wb"));
  if (!f) return err("%s: cannot create (%s)", path.c_str(), std::strerror(errno));
  const auto u_ctx = static_cast<uint32_t>(n_ctx);
  bool ok = std::fwrite("_logits_", 1, 8, f.get()) == 8 && std::fwrite(&u_ctx, 4, 1, f.get()) == 1 &&
            std::fwrite(&n_vocab, 4, 1, f.get()) == 1 && std::fwrite(&b.n_chunk, 4, 1, f.get()) == 1 &&
            std::fwrite(tokens.data(), 4, tokens.size(), f.get()) == tokens.size();
  std::vector<uint16_t> row(b.row_stride(), 0);
  for (size_t r = 0; r < n_rows && ok; ++r) {
    const float* x = logits.data() + r * static_cast<size_t>(n_vocab);
    const float mx = *std::max_element(x, x + n_vocab);
    const float mn = std::max(*std::min_element(x, x + n_vocab), mx - 16);
    double sum = 0;
    for (int v = 0; v < n_vocab; ++v) sum += std::exp(double(x[v]) - mx);
    const float scale = (mx - mn) / 65535.0f, min_lp = mn - mx - static_cast<float>(std::log(sum));
    std::memcpy(row.data(), &scale, 4);
    std::memcpy(row.data() + 2, &min_lp, 4);
    for (int v = 0; v < n_vocab; ++v)
      row[4 + static_cast<size_t>(v)] =
          scale > 0 && x[v] > mn ? static_cast<uint16_t>(std::lround((x[v] - mn) / scale)) : uint16_t{0};
    ok = std::fwrite(row.data(), 2, row.size(), f.get()) == row.size();
  }
  if (!ok || std::fflush(f.get()) != 0) return err("%s: write failed", path.c_str());
  return {};
}

}  // namespace strata
