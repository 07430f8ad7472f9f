// SVG heatmap of per-(layer, expert) activation counts: layers as rows (layer 0 on top), experts
// as columns, colour = count (white = never, then yellow -> red -> dark purple for the maximum),
// with a legend and a hover tooltip per cell. Used by `--heatmap FILE.svg` on run/bench (the
// store's counts) and `strata replay --heatmap` (a trace's counts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace strata {

struct HeatmapOptions {
  std::string title = "expert activations";
  bool log_scale = false;  // colour by log(1 + count): shows the tail of skewed routing
};

// counts: [n_layers][n_experts], every row the same length. Errors on an empty or ragged grid.
Result<std::string> heatmap_svg(const std::vector<std::vector<uint64_t>>& counts,
                                const HeatmapOptions& opts = {});
// The same from a flat [n_layers * n_experts] array (the expert store's layout).
Result<std::string> heatmap_svg_flat(const std::vector<uint64_t>& counts, int n_layers, int n_experts,
                                     const HeatmapOptions& opts = {});
// heatmap_svg written to path; errors name the path.
Status heatmap_write(const std::string& path, const std::vector<std::vector<uint64_t>>& counts,
                     const HeatmapOptions& opts = {});

}  // namespace strata
