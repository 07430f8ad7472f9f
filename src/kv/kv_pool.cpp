#include "kv/kv_pool.h"

#include <algorithm>
#include <string>

#include "base/clock.h"
#include "base/units.h"

namespace strata {

Result<KvPool::Layout> KvPool::layout(const KvSpec& spec, const KvPoolOptions& o) {
  if (o.block_size < 1 || o.block_size > 4096)
    return err("--block-size %d must be in [1, 4096] positions", o.block_size);
  Layout l;
  l.salt = 0x6b76;
  bool all_paged = true, windows_only = true;
  l.region_of.resize(spec.layers.size());
  for (size_t il = 0; il < spec.layers.size(); ++il)
    for (size_t p = 0; p < spec.layers[il].parts.size(); ++p) {
      const KvPartSpec& ps = spec.layers[il].parts[p];
      const bool paged = pages_part(ps);
      l.region_of[il].push_back(paged ? static_cast<int>(l.regions.size()) : -1);
      all_paged = all_paged && paged;
      if (!paged) {
        windows_only = windows_only && ps.kind == KvPartKind::window && ps.window > 0;
        if (ps.kind == KvPartKind::window && ps.window > 0) {
          const KvWindowPart w{static_cast<int>(il), static_cast<int>(p), ps.window - 1,
                               ps.row_bytes(ps.type)};
          l.windows.push_back(w);
          l.checkpoint_bytes += static_cast<uint64_t>(w.keep) * w.row_bytes;
        }
        continue;
      }
      const KvType t = ps.stored_as(ps.type);
      if (!kv_type_supported(t))
        return err("KV pool: layer %zu part %s is %s, a type strata cannot store", il, ps.name.c_str(),
                   kv_type_name(t));
      const bool rotated = o.rotate && kv_type_quantized(t);
      l.regions.push_back(Region{static_cast<int>(il), static_cast<int>(p), ps.width, kv_storage_type(t),
                                 rotated, ps.row_bytes(ps.type), 0, ps.name + " " + kv_type_name(t)});
      // what names a block's rows besides its tokens: each paged part's type, rotation and width
      l.salt = l.salt * 1000003u + static_cast<uint64_t>(t) * 65537u + (rotated ? 7919u : 0u) +
               static_cast<uint64_t>(ps.width);
    }
  const uint64_t row_bytes = bytes_per_position(spec);  // one position of every paged part
  if (l.regions.empty()) return err("KV pool: the model has no KV part that grows per position to page");
  l.block_bytes = row_bytes * static_cast<uint64_t>(o.block_size);
  const uint64_t n = o.budget_bytes / l.block_bytes;
  if (n < 1)
    return err("--kv-budget %s holds no KV block (a block of %d positions is %s)",
               format_bytes(o.budget_bytes).c_str(), o.block_size, format_bytes(l.block_bytes).c_str());
  if (n > (uint64_t{1} << 30))
    return err("--kv-budget %s: too many KV blocks", format_bytes(o.budget_bytes).c_str());
  l.n_blocks = static_cast<int32_t>(n);
  l.prefix_cache = o.prefix_cache && (all_paged || (windows_only && o.checkpoints > 0));
  l.spill = l.prefix_cache && all_paged && (o.ram_bytes > 0 || !o.disk_dir.empty());
  if (all_paged || !l.prefix_cache) {
    l.windows.clear();
    l.checkpoint_bytes = 0;
  }
  l.format = KvBlockFormat{o.model_fingerprint, l.salt, o.block_size, l.block_bytes, ""};
  for (const Region& r : l.regions)  // the first layer's parts name the types ("k f16 v f16")
    if (r.il == l.regions.front().il) l.format.types += (l.format.types.empty() ? "" : " ") + r.name;
  if (l.regions.front().hadamard) l.format.types += " rotated";
  return l;
}

Result<KvPoolBill> KvPool::bill(const KvSpec& spec, const KvPoolOptions& o) {
  STRATA_ASSIGN(const Layout l, layout(spec, o));
  KvPoolBill b;
  b.n_blocks = l.n_blocks;
  b.block_bytes = l.block_bytes;
  b.pool_bytes = static_cast<uint64_t>(l.n_blocks) * l.block_bytes;
  b.prefix_cache = l.prefix_cache;
  b.checkpoints = l.windows.empty() ? 0 : static_cast<uint64_t>(o.checkpoints) * l.checkpoint_bytes;
  b.spill = l.spill;
  if (l.spill) {
    b.ram_tier = o.ram_bytes;
    b.ssd = !o.disk_dir.empty();
    b.spill_queue = b.ssd ? KvSpill::queue_bytes(l.format) : 0;
    b.ssd_file = KvDiskTier::file_bytes(l.format);
    b.ssd_budget = b.ssd ? o.disk_bytes : 0;
  }
  return b;
}

uint64_t KvPool::default_budget(const KvSpec& spec, int64_t n_ctx, int n_seq, int block_size) {
  const int64_t bs = std::max(block_size, 1);
  const int64_t blocks = (std::max<int64_t>(n_ctx, 1) + bs - 1) / bs;
  return bytes_per_position(spec) * static_cast<uint64_t>(blocks * bs) *
         static_cast<uint64_t>(std::max(n_seq, 1));
}

Result<std::unique_ptr<KvPool>> KvPool::create(const KvSpec& spec, Device& dev, const KvPoolOptions& o) {
  STRATA_ASSIGN(Layout l, layout(spec, o));
  std::unique_ptr<KvPool> kp(new KvPool(dev, o.block_size, l.n_blocks));
  size_t off = 0;
  for (Region& r : l.regions) {
    r.offset = off;
    off += r.row_bytes * static_cast<size_t>(l.n_blocks) * static_cast<size_t>(o.block_size);
  }
  kp->block_bytes_ = l.block_bytes;
  kp->bytes_per_token_ = static_cast<double>(bytes_per_position(spec));
  kp->salt_ = l.salt;
  kp->prefix_cache_ = l.prefix_cache;
  if (!l.windows.empty()) {
    kp->windows_ = l.windows;
    kp->checkpoints_ = std::make_unique<KvCheckpoints>(o.checkpoints);
  }
  if (l.spill) {
    const KvSpillOptions so{
        .ram_bytes = o.ram_bytes, .dir = o.disk_dir, .disk_budget = o.disk_bytes, .verbose = o.verbose};
    STRATA_ASSIGN(kp->spill_, KvSpill::create(so, l.format));
  }
  kp->regions_ = std::move(l.regions);
  kp->region_of_ = std::move(l.region_of);
  STRATA_ASSIGN(kp->buf_, dev.alloc(off, "KV pool"));
  return kp;
}

uint64_t KvPool::bytes_per_position(const KvSpec& spec) {
  uint64_t b = 0;
  for (const KvLayerSpec& l : spec.layers)
    for (const KvPartSpec& p : l.parts)
      if (pages_part(p)) b += p.row_bytes(p.type);
  return b;
}

KvPool::~KvPool() {
  dev_.free(buf_);
}

bool KvPool::holds(int il, int part, GgmlType type, bool hadamard) const {
  const int r = region(il, part);
  return r >= 0 && regions_[static_cast<size_t>(r)].type == type &&
         regions_[static_cast<size_t>(r)].hadamard == hadamard;
}

int KvPool::region(int il, int part) const {
  if (il < 0 || static_cast<size_t>(il) >= region_of_.size()) return -1;
  const std::vector<int>& l = region_of_[static_cast<size_t>(il)];
  return part < 0 || static_cast<size_t>(part) >= l.size() ? -1 : l[static_cast<size_t>(part)];
}

BlockTable KvPool::new_table(int64_t n_ctx) const {
  return BlockTable(blocks_for(std::max<int64_t>(n_ctx, 1)), block_size_);
}

RowCache KvPool::rows(int il, int part, const BlockTable& t) const {
  const int r = region(il, part);
  STRATA_ASSERT(r >= 0 && t.block_size() == block_size_);
  const Region& g = regions_[static_cast<size_t>(r)];
  RowCache c = RowCache::paged(buf_, g.offset, g.width, g.type, int64_t{n_blocks_} * block_size_, t.ids(),
                               int64_t{t.max_blocks()} * block_size_, block_size_);
  c.set_hadamard(g.hadamard);
  return c;
}

int32_t KvPool::available() const {
  std::lock_guard<std::mutex> lk(mu_);
  return pool_.available();
}

int32_t KvPool::need(const BlockTable& t, int64_t n) const {
  return std::max(0, blocks_for(n) - t.size());
}

void KvPool::tick() {
  const double now = now_seconds();
  if (t_last_ > 0) {
    const double dt = now - t_last_;
    unused_row_s_ += static_cast<double>(unused_rows_) * dt;
    row_s_ += static_cast<double>(pool_.counts().used * block_size_) * dt;
  }
  t_last_ = now;
}

void KvPool::set_held(BlockTable& t, int64_t held) {
  unused_rows_ -= t.rows() - t.held_;
  t.held_ = std::min(held, t.rows());
  unused_rows_ += t.rows() - t.held_;
}

Status KvPool::reserve(BlockTable& t, int64_t n) {
  const int32_t want = need(t, n);
  if (want == 0) {
    std::lock_guard<std::mutex> lk(mu_);
    tick();
    set_held(t, std::max(t.held_, n));
    return {};
  }
  if (blocks_for(n) > t.max_blocks())
    return err("KV pool: %lld positions exceed the sequence's %d blocks", static_cast<long long>(n),
               t.max_blocks());
  std::lock_guard<std::mutex> lk(mu_);
  tick();
  std::vector<EvictedBlock> ev;
  auto got = pool_.allocate(want, spill_ ? &ev : nullptr);
  if (!got.ok())
    return err("KV pool: %lld positions need %d more blocks of %d positions (%s), %d available of %d (%s)",
               static_cast<long long>(n), want, block_size_, format_bytes(block_bytes_ * want).c_str(),
               pool_.available(), n_blocks_, format_bytes(bytes()).c_str());
  spill_evicted(ev);                   // before the forward writes new rows into them
  unused_rows_ -= t.rows() - t.held_;  // set_held counts the table's new blocks
  for (int32_t b : got.value()) t.push(b);
  unused_rows_ += t.rows() - t.held_;
  set_held(t, std::max(t.held_, n));
  return {};
}

void KvPool::release(BlockTable& t) {
  std::lock_guard<std::mutex> lk(mu_);
  tick();
  set_held(t, 0);
  unused_rows_ -= t.rows();  // the table is empty afterwards
  // Last block first: of a freed chain, the LRU evicts the tail before the shared head.
  for (int32_t k = t.n_ - 1; k >= 0; --k) {
    pool_.release(t.ids_[k]);
    t.ids_[k] = -1;
    t.hashes_[static_cast<size_t>(k)] = 0;
  }
  t.n_ = t.n_hashed_ = 0;
}

int64_t KvPool::adopt_prefix(BlockTable& t, std::span<const int32_t> tokens) {
  STRATA_ASSERT(t.size() == 0 && t.block_size() == block_size_);
  if (!prefix_cache_ || tokens.empty()) return 0;
  std::lock_guard<std::mutex> lk(mu_);
  tick();
  const size_t bs = static_cast<size_t>(block_size_);
  uint64_t parent = 0;
  // Whole blocks, the last token left to evaluate (its logits are what the sequence wants next).
  while (static_cast<size_t>(t.n_ + 1) * bs <= tokens.size() - 1 && t.n_ < t.max_) {
    const auto blk = tokens.subspan(static_cast<size_t>(t.n_) * bs, bs);
    const uint64_t h = block_hash(parent, blk, salt_ ^ t.salt());
    const int32_t b = pool_.acquire(h, parent, blk);
    if (b < 0) break;
    t.hashes_[static_cast<size_t>(t.n_)] = h;
    t.push(b);
    t.n_hashed_ = t.n_;
    parent = h;
    ++pool_hits_;
  }
  if (checkpoints_) {  // the prefix ends where a snapshot of the window rows is kept
    int32_t keep = t.n_;
    while (keep > 0 && !checkpoints_->contains(t.hashes_[static_cast<size_t>(keep - 1)])) --keep;
    for (int32_t k = t.n_ - 1; k >= keep; --k) {
      pool_.release(t.ids_[k]);
      t.ids_[k] = -1;
      t.hashes_[static_cast<size_t>(k)] = 0;
      --pool_hits_;
    }
    t.n_ = t.n_hashed_ = keep;
  }
  if (spill_) load_prefix(t, tokens);
  unused_rows_ += t.rows();  // the blocks pushed onto the empty table (set_held takes them back)
  set_held(t, t.rows());
  return t.rows();
}

void KvPool::commit(BlockTable& t, std::span<const int32_t> tokens) {
  if (!prefix_cache_) return;
  std::lock_guard<std::mutex> lk(mu_);
  const size_t bs = static_cast<size_t>(block_size_);
  const int32_t full = static_cast<int32_t>(std::min<size_t>(tokens.size() / bs, static_cast<size_t>(t.n_)));
  for (int32_t k = t.n_hashed_; k < full; ++k) {
    const uint64_t parent = k > 0 ? t.hashes_[static_cast<size_t>(k - 1)] : 0;
    const auto blk = tokens.subspan(static_cast<size_t>(k) * bs, bs);
    const uint64_t h = block_hash(parent, blk, salt_ ^ t.salt());
    pool_.commit(t.ids_[k], h, parent, blk);  // false: another block holds it; this one stays unnamed
    t.hashes_[static_cast<size_t>(k)] = h;
  }
  t.n_hashed_ = std::max(t.n_hashed_, full);
}

std::optional<std::pair<uint64_t, int64_t>> KvPool::checkpoint_wanted(const BlockTable& t,
                                                                      int64_t n_past) const {
  if (!checkpoints_) return std::nullopt;
  std::lock_guard<std::mutex> lk(mu_);
  const int32_t k = std::min<int32_t>(t.n_hashed_, static_cast<int32_t>(n_past / block_size_));
  if (k < 1) return std::nullopt;
  const uint64_t h = t.hashes_[static_cast<size_t>(k - 1)];
  if (checkpoints_->contains(h)) return std::nullopt;
  return std::make_pair(h, int64_t{k} * block_size_);
}

void KvPool::put_checkpoint(uint64_t hash, KvCheckpoint c) {
  std::lock_guard<std::mutex> lk(mu_);
  if (checkpoints_) checkpoints_->put(hash, std::move(c));
}

std::optional<KvCheckpoint> KvPool::checkpoint_of(const BlockTable& t) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!checkpoints_ || t.n_ < 1) return std::nullopt;
  const KvCheckpoint* c = checkpoints_->find(t.hashes_[static_cast<size_t>(t.n_ - 1)]);
  if (!c) return std::nullopt;
  checkpoints_->count_restored();
  return *c;
}

KvPoolStats KvPool::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  KvPoolStats s;
  s.blocks = pool_.counts();
  s.block_size = block_size_;
  s.bytes = bytes();
  s.block_bytes = block_bytes_;
  s.bytes_per_token = bytes_per_token_;
  s.prefix_cache = prefix_cache_;
  s.pool_hits = pool_hits_;
  s.unused_rows = unused_rows_;
  const int64_t rows = s.blocks.used * block_size_;
  s.fragmentation = rows > 0 ? static_cast<double>(unused_rows_) / static_cast<double>(rows) : 0.0;
  const double dt = t_last_ > 0 ? now_seconds() - t_last_ : 0.0;  // up to now, as tick() would
  const double row_s = row_s_ + static_cast<double>(rows) * dt;
  s.fragmentation_avg = row_s > 0 ? (unused_row_s_ + static_cast<double>(unused_rows_) * dt) / row_s : 0.0;
  for (const Region& r : regions_) {
    const std::string name = r.name.substr(0, r.name.find(' '));
    auto it =
        std::find_if(s.parts.begin(), s.parts.end(), [&](const KvPartBytes& p) { return p.name == name; });
    if (it == s.parts.end()) {
      s.parts.push_back(KvPartBytes{name, r.name.substr(r.name.find(' ') + 1), 0, 0, 0});
      it = std::prev(s.parts.end());
    }
    it->bytes += r.row_bytes * static_cast<uint64_t>(n_blocks_) * static_cast<uint64_t>(block_size_);
    it->used_bytes += r.row_bytes * static_cast<uint64_t>(rows);
    it->bytes_per_token += r.row_bytes;
  }
  if (spill_) s.spill = spill_->stats();
  if (checkpoints_) s.checkpoints = checkpoints_->stats();
  return s;
}

}  // namespace strata
