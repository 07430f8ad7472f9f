// SVG heatmap: one cell per activated (layer, expert), tooltips with counts, legend max, errors.
#include <gtest/gtest.h>

#include "memory/experts/heatmap.h"

namespace strata {
namespace {

size_t count_of(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

TEST(Heatmap, CellsTooltipsLegend) {
  const std::vector<std::vector<uint64_t>> c = {{0, 5, 1}, {9, 0, 0}};
  HeatmapOptions o;
  o.title = "a <b> & c";
  auto svg = heatmap_svg(c, o);
  ASSERT_TRUE(svg.ok()) << svg.message();
  const std::string& s = *svg;
  EXPECT_EQ(s.rfind("<svg", 0), 0u);
  EXPECT_NE(s.find("</svg>"), std::string::npos);
  EXPECT_EQ(count_of(s, "<title>"), 3u);  // zero cells stay background
  EXPECT_NE(s.find("<title>layer 1, expert 0: 9</title>"), std::string::npos);
  EXPECT_NE(s.find("<title>layer 0, expert 1: 5</title>"), std::string::npos);
  EXPECT_NE(s.find("9 activations"), std::string::npos);  // legend maximum
  EXPECT_NE(s.find("2 layers x 3 experts, 15 activations"), std::string::npos);
  EXPECT_NE(s.find("a &lt;b&gt; &amp; c"), std::string::npos);
  EXPECT_NE(s.find("#3f004b"), std::string::npos);  // the maximum gets the darkest colour
  EXPECT_NE(s.find(">L1<"), std::string::npos);

  auto flat = heatmap_svg_flat({0, 5, 1, 9, 0, 0}, 2, 3, o);
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(*flat, s);
}

TEST(Heatmap, BadGrids) {
  EXPECT_FALSE(heatmap_svg({}).ok());
  auto r = heatmap_svg({{1, 2}, {3}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("layer 1 has 1 experts"), std::string::npos);
  EXPECT_FALSE(heatmap_svg_flat({1, 2, 3}, 2, 2).ok());
  auto w = heatmap_write("/nonexistent/dir/x.svg", {{1}});
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.message().find("/nonexistent/dir/x.svg"), std::string::npos);
}

}  // namespace
}  // namespace strata
