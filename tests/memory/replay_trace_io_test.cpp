// Routing trace JSONL: writer -> reader round trip, header handling, bad input named by line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "memory/experts/routing_trace.h"

namespace strata {
namespace {

std::string tmp_path(const char* name) {
  return (std::filesystem::temp_directory_path() /
          (std::string("strata_trace_") + std::to_string(getpid()) + name))
      .string();
}

TEST(RoutingTrace, WriterReaderRoundTrip) {
  const std::string p = tmp_path("rt.jsonl");
  {
    auto w = RoutingTraceWriter::open(p, {3, 8, 2});
    ASSERT_TRUE(w.ok()) << w.message();
    const int32_t e0[] = {5, 1}, e1[] = {0, 7};
    const float w0[] = {0.75f, 0.25f}, w1[] = {0.5f, 0.5f};
    ASSERT_TRUE((*w)->write(0, 0, e0, w0).ok());
    ASSERT_TRUE((*w)->write(0, 2, e1, w1).ok());
    ASSERT_TRUE((*w)->write(1, 0, e1, {}).ok());
    EXPECT_FALSE((*w)->write(1, 1, e1, std::span<const float>(w0, 1)).ok());
    ASSERT_TRUE((*w)->close().ok());
  }
  auto t = routing_trace_read(p);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->meta.n_layers, 3);
  EXPECT_EQ(t->meta.n_experts, 8);
  EXPECT_EQ(t->meta.top_k, 2);
  ASSERT_EQ(t->records.size(), 3u);
  EXPECT_EQ(t->records[0].experts, (std::vector<int32_t>{5, 1}));
  EXPECT_EQ(t->records[0].weights, (std::vector<float>{0.75f, 0.25f}));
  EXPECT_EQ(t->records[1].layer, 2);
  EXPECT_EQ(t->records[2].token_idx, 1);
  EXPECT_TRUE(t->records[2].weights.empty());
  auto c = routing_trace_counts(*t);
  EXPECT_EQ(c[0][0], 1u);
  EXPECT_EQ(c[0][5], 1u);
  EXPECT_EQ(c[2][7], 1u);
  EXPECT_EQ(c[1][0], 0u);
  std::remove(p.c_str());
}

TEST(RoutingTrace, GridFromRecordsWithoutHeader) {
  auto t = routing_trace_parse(
      "{\"token_idx\":0,\"layer\":1,\"experts\":[3,4,9],\"weights\":[0.2,0.3,0.5]}\n\n"
      "{\"token_idx\":4,\"layer\":0,\"experts\":[2]}\r\n",
      "x");
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->meta.n_layers, 2);
  EXPECT_EQ(t->meta.n_experts, 10);
  EXPECT_EQ(t->meta.top_k, 3);
}

TEST(RoutingTrace, PrefillLinesComeBackInTokenOrder) {
  // A 2-token prefill step writes layer-major: (t0,l0) (t1,l0) (t0,l1) (t1,l1); then a decode token.
  auto t = routing_trace_parse(
      "{\"token_idx\":0,\"layer\":0,\"experts\":[1]}\n{\"token_idx\":1,\"layer\":0,\"experts\":[2]}\n"
      "{\"token_idx\":0,\"layer\":1,\"experts\":[3]}\n{\"token_idx\":1,\"layer\":1,\"experts\":[4]}\n"
      "{\"token_idx\":2,\"layer\":0,\"experts\":[5]}\n",
      "p");
  ASSERT_TRUE(t.ok()) << t.message();
  ASSERT_EQ(t->records.size(), 5u);
  const int32_t want_tok[] = {0, 0, 1, 1, 2}, want_layer[] = {0, 1, 0, 1, 0}, want_e[] = {1, 3, 2, 4, 5};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(t->records[i].token_idx, want_tok[i]);
    EXPECT_EQ(t->records[i].layer, want_layer[i]);
    EXPECT_EQ(t->records[i].experts[0], want_e[i]);
  }
}

void expect_error(const std::string& text, const std::string& needle) {
  auto t = routing_trace_parse(text, "t.jsonl");
  ASSERT_FALSE(t.ok()) << text;
  EXPECT_NE(t.message().find(needle), std::string::npos) << t.message();
}

TEST(RoutingTrace, BadInputNamesLineAndProblem) {
  expect_error("", "no routing records");
  expect_error("{\"token_idx\":0,\"layer\":0,\"experts\":[1]}\nnot json\n", "t.jsonl:2: not a JSON object");
  expect_error("{\"layer\":0,\"experts\":[1]}", "missing key \"token_idx\"");
  expect_error("{\"token_idx\":0,\"layer\":-1,\"experts\":[1]}", "layer -1");
  expect_error("{\"token_idx\":0,\"layer\":0,\"experts\":[1,1]}", "appears twice");
  expect_error("{\"token_idx\":0,\"layer\":0,\"experts\":[]}", "empty");
  expect_error("{\"token_idx\":0,\"layer\":0,\"experts\":[1],\"weights\":[1,2]}", "\"weights\" must be");
  const std::string hdr = "{\"strata_routing_trace\":1,\"n_layers\":2,\"n_experts\":4,\"top_k\":2}\n";
  expect_error(hdr + "{\"token_idx\":0,\"layer\":2,\"experts\":[1]}", "layer 2 is out of range [0, 2)");
  expect_error(hdr + "{\"token_idx\":0,\"layer\":0,\"experts\":[4]}", "expert 4 is out of range [0, 4)");
  expect_error(hdr + "{\"token_idx\":0,\"layer\":0,\"experts\":[0,1,2]}", "more than top_k 2");
  expect_error("{\"token_idx\":0,\"layer\":0,\"experts\":[1]}\n" + hdr, "header line must come first");
  expect_error("{\"strata_routing_trace\":2,\"n_layers\":2,\"n_experts\":4}", "version 2");
  auto missing = routing_trace_read("/nonexistent/trace.jsonl");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("/nonexistent/trace.jsonl"), std::string::npos);
}

}  // namespace
}  // namespace strata
