// SVG heatmap writer (heatmap.h). Plain SVG 1.1 text, no scripts, so it renders anywhere.
#include "memory/experts/heatmap.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdarg>
#include <cstddef>
#include <cstring>

namespace strata {

namespace {

// Colour stops of the ramp, t in [0, 1]: light yellow -> orange -> red -> dark purple.
void ramp(double t, int rgb[3]) {
  static const int stops[5][3] = {{255, 247, 188}, {254, 196, 79}, {236, 112, 20}, {189, 0, 38}, {63, 0, 75}};
  t = std::clamp(t, 0.0, 1.0) * 4.0;
  const int i = std::min(3, static_cast<int>(t));
  const double f = t - i;
  for (int c = 0; c < 3; ++c)
    rgb[c] = static_cast<int>(std::lround(stops[i][c] + f * (stops[i + 1][c] - stops[i][c])));
}

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

void appendf(std::string* out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string* out, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0) out->append(buf, static_cast<size_t>(std::min<int>(n, sizeof buf - 1)));
}

}  // namespace

Result<std::string> heatmap_svg(const std::vector<std::vector<uint64_t>>& counts,
                                const HeatmapOptions& opts) {
  const int n_layers = static_cast<int>(counts.size());
  if (n_layers == 0 || counts[0].empty()) return err("heatmap: no counts (0 layers or 0 experts)");
  const int n_experts = static_cast<int>(counts[0].size());
  for (int l = 0; l < n_layers; ++l)
    if (static_cast<int>(counts[l].size()) != n_experts)
      return err("heatmap: layer %d has %zu experts, layer 0 has %d", l, counts[l].size(), n_experts);
  uint64_t max_c = 0, total = 0;
  for (const auto& row : counts)
    for (uint64_t c : row) max_c = std::max(max_c, c), total += c;

  // Layout: cells sized to keep the picture around 1200 x 700 px.
  const int cw = std::clamp(1200 / n_experts, 2, 18), ch = std::clamp(700 / n_layers, 3, 18);
  const int left = 60, top = 50, legend_h = 70;
  const int gw = cw * n_experts, gh = ch * n_layers;
  const int width = std::max(left + gw + 20, 420), height = top + gh + legend_h;
  auto scale = [&](uint64_t c) {
    if (max_c == 0) return 0.0;
    return opts.log_scale ? std::log1p(static_cast<double>(c)) / std::log1p(static_cast<double>(max_c))
                          : static_cast<double>(c) / static_cast<double>(max_c);
  };

  std::string s;
  s.reserve(static_cast<size_t>(n_layers) * n_experts * 90 + 4096);
  appendf(&s,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
          "font-family=\"sans-serif\" font-size=\"11\">\n",
          width, height, width, height);
  appendf(&s, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", width, height);
  appendf(&s, "<text x=\"%d\" y=\"20\" font-size=\"14\" font-weight=\"bold\">%s</text>\n", left,
          escape(opts.title).c_str());
  appendf(&s, "<text x=\"%d\" y=\"36\">%d layers x %d experts, %llu activations%s</text>\n", left, n_layers,
          n_experts, static_cast<unsigned long long>(total), opts.log_scale ? ", log colour scale" : "");
  // Cells. Never-activated cells stay white (drawn only as the grid background).
  appendf(&s, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"white\" stroke=\"#999\"/>\n", left,
          top, gw, gh);
  for (int l = 0; l < n_layers; ++l) {
    for (int e = 0; e < n_experts; ++e) {
      const uint64_t c = counts[l][e];
      if (c == 0) continue;
      int rgb[3];
      ramp(scale(c), rgb);
      appendf(
          &s,
          "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#%02x%02x%02x\"><title>layer %d, expert "
          "%d: %llu</title></rect>\n",
          left + e * cw, top + l * ch, cw, ch, rgb[0], rgb[1], rgb[2], l, e,
          static_cast<unsigned long long>(c));
    }
  }
  // Axis labels: every layer when rows are tall enough, else every k-th.
  const int lstep = std::max(1, 12 / ch);
  for (int l = 0; l < n_layers; l += lstep)
    appendf(&s, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" dominant-baseline=\"middle\">L%d</text>\n",
            left - 4, top + l * ch + ch / 2, l);
  const int estep = std::max(1, 32 / cw);
  for (int e = 0; e < n_experts; e += estep)
    appendf(&s, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"9\">%d</text>\n",
            left + e * cw + cw / 2, top - 3, e);
  appendf(&s, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 %d %d)\">layer</text>\n",
          14, top + gh / 2, 14, top + gh / 2);
  // Legend: a gradient bar from 0 to the maximum count.
  const int ly = top + gh + 25, lw = 240;
  s += "<defs><linearGradient id=\"ramp\" x1=\"0\" x2=\"1\" y1=\"0\" y2=\"0\">\n";
  for (int i = 0; i <= 8; ++i) {
    int rgb[3];
    ramp(i / 8.0, rgb);
    appendf(&s, "<stop offset=\"%.3f\" stop-color=\"#%02x%02x%02x\"/>\n", i / 8.0, rgb[0], rgb[1], rgb[2]);
  }
  s += "</linearGradient></defs>\n";
  appendf(&s, "<text x=\"%d\" y=\"%d\">expert (column)</text>\n", left, ly - 8);
  appendf(&s, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"white\" stroke=\"#999\"/>\n", left,
          ly);
  appendf(&s, "<text x=\"%d\" y=\"%d\">0</text>\n", left + 16, ly + 10);
  appendf(&s, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"12\" fill=\"url(#ramp)\" stroke=\"#999\"/>\n",
          left + 40, ly, lw);
  appendf(&s, "<text x=\"%d\" y=\"%d\">1</text>\n", left + 40, ly + 26);
  appendf(&s, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%llu activations%s</text>\n", left + 40 + lw,
          ly + 26, static_cast<unsigned long long>(max_c), opts.log_scale ? " (log)" : "");
  s += "</svg>\n";
  return s;
}

Result<std::string> heatmap_svg_flat(const std::vector<uint64_t>& counts, int n_layers, int n_experts,
                                     const HeatmapOptions& opts) {
  if (n_layers <= 0 || n_experts <= 0 ||
      counts.size() != static_cast<size_t>(n_layers) * static_cast<size_t>(n_experts))
    return err("heatmap: %zu counts for %d layers x %d experts", counts.size(), n_layers, n_experts);
  std::vector<std::vector<uint64_t>> grid(static_cast<size_t>(n_layers));
  for (int l = 0; l < n_layers; ++l)
    grid[l].assign(counts.begin() + static_cast<std::ptrdiff_t>(l) * n_experts,
                   counts.begin() + static_cast<std::ptrdiff_t>(l + 1) * n_experts);
  return heatmap_svg(grid, opts);
}

Status heatmap_write(const std::string& path, const std::vector<std::vector<uint64_t>>& counts,
                     const HeatmapOptions& opts) {
  STRATA_ASSIGN(std::string svg, heatmap_svg(counts, opts));
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return err("cannot create heatmap %s: %s", path.c_str(), std::strerror(errno));
  const bool ok = std::fwrite(svg.data(), 1, svg.size(), f) == svg.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) return err("writing heatmap %s failed", path.c_str());
  return {};
}

}  // namespace strata
