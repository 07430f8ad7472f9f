#include "model/synth_codes.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <numbers>
#include <vector>

#include "base/fp16.h"
#include "quant/fp8_fp4.h"

namespace strata::synth_detail {

namespace {

constexpr int64_t kUnit = 65536;  // items per independent stream unit

struct Tables {
  std::array<float, 65536> normal;  // N(0, 1) quantiles
  std::array<uint8_t, 65536> fp8;   // E4M3 of 64 * normal
  std::array<uint8_t, 65536> fp4;   // two E2M1 codes of 2 * normal, from the draw's two bytes
  float fp4_rms = 1;
};

// Quantiles by Newton's method on Phi(x) = erfc(-x / sqrt 2) / 2 from the previous one; the upper
// half mirrors the lower so the table is exactly symmetric.
std::unique_ptr<Tables> make_tables() {
  auto t = std::make_unique<Tables>();
  double x = -4.3;
  for (int i = 0; i < 32768; ++i) {
    const double p = (i + 0.5) / 65536.0;
    for (int it = 0; it < 8; ++it) {
      const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
      const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
      const double step = (cdf - p) / pdf;
      x -= step;
      if (std::fabs(step) < 1e-12) break;
    }
    t->normal[static_cast<size_t>(i)] = static_cast<float>(x);
    t->normal[static_cast<size_t>(65535 - i)] = static_cast<float>(-x);
  }
  std::array<uint8_t, 256> nib{};
  double ss = 0;
  for (int r = 0; r < 256; ++r) {
    nib[static_cast<size_t>(r)] = f32_to_e2m1(2.0f * t->normal[static_cast<size_t>(r * 256 + 128)]);
    const double v = e2m1_to_f32(nib[static_cast<size_t>(r)]);
    ss += v * v;
  }
  t->fp4_rms = static_cast<float>(std::sqrt(ss / 256));
  for (int r = 0; r < 65536; ++r) {
    t->fp8[static_cast<size_t>(r)] = f32_to_e4m3(64.0f * t->normal[static_cast<size_t>(r)]);
    t->fp4[static_cast<size_t>(r)] =
        static_cast<uint8_t>(nib[static_cast<size_t>(r & 255)] | (nib[static_cast<size_t>(r >> 8)] << 4));
  }
  return t;
}

const Tables& tables() {
  static const std::unique_ptr<Tables> t = make_tables();
  return *t;
}

int scale_base(float std, float rms) {
  return 127 + static_cast<int>(std::lround(std::log2(std / rms)));
}

}  // namespace

size_t code_item_bytes(Code c) {
  switch (c) {
    case Code::normal_bf16:
    case Code::embed_bf16:
      return 2;
    case Code::normal_f32:
    case Code::uniform_f32:
      return 4;
    default:
      return 1;
  }
}

int fp8_scale_base(float std) {
  return scale_base(std, 64.0f);
}
int fp4_scale_base(float std) {
  return scale_base(std, tables().fp4_rms);
}
uint8_t ue8m0_code(int base, uint32_t r) {
  const int v = base + ((r & 3) == 0 ? -1 : (r & 3) == 3 ? 1 : 0);
  return static_cast<uint8_t>(std::clamp(v, 1, 254));
}

uint8_t fp4_pair_code(uint32_t r) {
  return tables().fp4[r & 0xffffu];
}

float normal_quantile(uint32_t r) {
  return tables().normal[r & 0xffff];
}

uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

uint64_t stream_key(uint64_t seed, const std::string& name) {
  return mix64(seed ^ mix64(fnv1a(name)));
}

void fill_codes(const CodeGen& g, uint64_t key, uint8_t* dst, size_t begin, size_t n, ThreadPool& pool) {
  const Tables& T = tables();
  const size_t ib = code_item_bytes(g.code);
  const int64_t i0 = static_cast<int64_t>(begin / ib), items = static_cast<int64_t>(n / ib);
  const int64_t u0 = i0 / kUnit, u1 = (i0 + items + kUnit - 1) / kUnit;
  pool.parallel_for(u1 - u0, [&](int64_t a, int64_t b) {
    std::vector<uint16_t> draws(static_cast<size_t>(kUnit));
    for (int64_t u = u0 + a; u < u0 + b; ++u) {
      // The unit's draws: four 16-bit ones per splitmix64 output at counter k.
      const uint64_t ukey = mix64(key ^ (static_cast<uint64_t>(u) * 0xD1B54A32D192ED03ull));
      for (int64_t k = 0; k < kUnit / 4; ++k) {
        const uint64_t w = mix64(ukey + static_cast<uint64_t>(k));
        for (int q = 0; q < 4; ++q)
          draws[static_cast<size_t>(4 * k + q)] = static_cast<uint16_t>(w >> (16 * q));
      }
      const int64_t lo = std::max(u * kUnit, i0), hi = std::min((u + 1) * kUnit, i0 + items);
      const uint16_t* r = draws.data() + (lo - u * kUnit);
      const size_t cnt = static_cast<size_t>(hi - lo);
      uint8_t* out = dst + static_cast<size_t>(lo - i0) * ib;
      switch (g.code) {
        case Code::normal_bf16:
        case Code::embed_bf16:
          for (size_t i = 0; i < cnt; ++i) {
            float v = g.a + g.b * T.normal[r[i]];
            if (g.code == Code::embed_bf16)
              v = T.normal[r[i]] + g.a * g.u[(static_cast<size_t>(lo) + i) % static_cast<size_t>(g.d)];
            const uint16_t h = f32_to_bf16(v);
            std::memcpy(out + 2 * i, &h, 2);
          }
          break;
        case Code::normal_f32:
          for (size_t i = 0; i < cnt; ++i) {
            const float v = g.a + g.b * T.normal[r[i]];
            std::memcpy(out + 4 * i, &v, 4);
          }
          break;
        case Code::uniform_f32:
          for (size_t i = 0; i < cnt; ++i) {
            const float v = g.a + (g.b - g.a) * ((static_cast<float>(r[i]) + 0.5f) / 65536.0f);
            std::memcpy(out + 4 * i, &v, 4);
          }
          break;
        case Code::fp8:
          for (size_t i = 0; i < cnt; ++i) out[i] = T.fp8[r[i]];
          break;
        case Code::fp4_pairs:
          for (size_t i = 0; i < cnt; ++i) out[i] = T.fp4[r[i]];
          break;
        case Code::e4m3_any:
          for (size_t i = 0; i < cnt; ++i) {
            const auto c = static_cast<uint8_t>(r[i] & 0xff);
            out[i] = (c & 0x7f) == 0x7f ? static_cast<uint8_t>(c ^ 1) : c;  // 0x7f / 0xff are NaN
          }
          break;
        case Code::ue8m0:
          for (size_t i = 0; i < cnt; ++i) out[i] = ue8m0_code(g.base, r[i]);
          break;
      }
    }
  });
}

}  // namespace strata::synth_detail
