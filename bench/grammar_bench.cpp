// Grammar-constrained sampling at a 32k vocabulary: what the constraint adds to a token.
//   BM_GrammarMask/<state>: one whole-vocabulary mask (GrammarConstraint::allowed_tokens) in a
//     state of a JSON-schema grammar, on a fresh constraint (cold: nothing cached) or a warm one.
//   BM_SampleConstrained / BM_SampleUnconstrained: the sampler's draw per token over random logits
//     (/0 greedy, /1 temperature 0.8), the grammar restarted every 64 tokens (a request's length),
//     so cold costs are in the average.
// The vocabulary: the tokenizer of the GGUF in STRATA_BENCH_VOCAB, e.g.
// $STRATA_FIXTURES/vocab/ggml-vocab-llama-spm.gguf (32,000 tokens). CPU times are the numbers to
// read on a shared machine.
//   strata_bench_grammar --benchmark_filter=Mask
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "runtime/grammar.h"
#include "runtime/grammar_constraint.h"
#include "runtime/sampler.h"
#include "text/tokenizer.h"

namespace strata {
namespace {

const char* const kSchemaGrammar =
    R"(root ::= ws "{" ws "\"name\"" ws ":" ws string ws "," ws "\"age\"" ws ":" ws integer ws "," ws "\"tags\"" ws ":" ws "[" ws (string ws ("," ws string ws)*)? "]" ws "}"
ws ::= " "?
char ::= [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
string ::= "\"" char* "\""
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
)";

const Tokenizer& load_tokenizer() {
  static std::unique_ptr<Tokenizer> tok = [] {
    const char* path = std::getenv("STRATA_BENCH_VOCAB");
    if (path == nullptr) {
      std::fprintf(stderr, "set STRATA_BENCH_VOCAB to a vocab GGUF\n");
      std::exit(1);
    }
    auto file = GgufFile::open(path);
    if (!file.ok()) {
      std::fprintf(stderr, "%s\n", file.message().c_str());
      std::exit(1);
    }
    auto tok = Tokenizer::from_gguf(**file);
    if (!tok.ok()) {
      std::fprintf(stderr, "%s\n", tok.message().c_str());
      std::exit(1);
    }
    return std::move(*tok);
  }();
  return *tok;
}

std::shared_ptr<const GrammarVocab> load_vocab() {
  static auto vocab = std::make_shared<const GrammarVocab>(load_tokenizer());
  return vocab;
}

std::shared_ptr<const Grammar> schema_grammar() {
  static auto g = std::make_shared<const Grammar>(Grammar::parse(kSchemaGrammar).value());
  return g;
}

// The prefixes the mask is taken after: in a string, in a number, between keys.
const char* const kStates[] = {"{\"name\": \"Al", "{\"name\": \"Al\", \"age\": 4", "{\"name\": \"Al\","};

void BM_GrammarMask(benchmark::State& state) {
  auto vocab = load_vocab();
  const bool warm = state.range(1) != 0;
  const std::string prefix = kStates[state.range(0)];
  std::vector<uint8_t> mask;
  // Advance by single-byte tokens found in the vocabulary.
  std::vector<int32_t> byte_token(256, -1);
  for (int32_t id = 0; id < vocab->n_vocab(); ++id)
    if (vocab->has_text(id) && vocab->piece(id).size() == 1 &&
        byte_token[static_cast<uint8_t>(vocab->piece(id)[0])] < 0)
      byte_token[static_cast<uint8_t>(vocab->piece(id)[0])] = id;
  auto fresh = [&] {
    auto c = std::make_unique<GrammarConstraint>(schema_grammar(), vocab);
    for (char ch : prefix) c->accept(byte_token[static_cast<uint8_t>(ch)]);
    return c;
  };
  auto c = fresh();
  c->allowed_tokens(&mask);
  size_t allowed = 0;
  for (uint8_t m : mask) allowed += m;
  for (auto _ : state) {
    if (!warm) {
      state.PauseTiming();
      c = fresh();
      state.ResumeTiming();
    }
    c->allowed_tokens(&mask);
    benchmark::DoNotOptimize(mask.data());
  }
  state.counters["allowed"] = static_cast<double>(allowed);
  state.SetLabel(prefix);
}
BENCHMARK(BM_GrammarMask)->ArgsProduct({{0, 1, 2}, {0, 1}})->Unit(benchmark::kMicrosecond);

// The worst case for a constraint: every token's draw rejected, so each step needs the state's
// whole mask (filter over the full list), along JSON documents the grammar accepts, tokenized as
// the tokenizer would; a fresh constraint per document (a request), so first-time costs count.
void BM_MaskEveryToken(benchmark::State& state) {
  auto vocab = load_vocab();
  const Tokenizer& tok = load_tokenizer();
  const std::vector<std::string> docs = {
      R"({"name": "Ada Lovelace, née Byron", "age": 36, "tags": ["mathematician", "writer", "analyst"]})",
      R"({"name":"Zhang Wei 张伟","age":-7,"tags":[]})",
      R"({ "name": "O'Brien the elder", "age": 1024, "tags": ["a", "bb", "ccc", "dddd"] })",
  };
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& d : docs) ids.push_back(tok.encode(d, false, false));
  std::vector<float> zeros(static_cast<size_t>(vocab->n_vocab()), 0.0f);
  Candidates all;
  size_t tokens = 0;
  for (auto _ : state) {
    for (const std::vector<int32_t>& doc : ids) {
      GrammarConstraint c(schema_grammar(), vocab);
      for (int32_t id : doc) {
        candidates_from_logits(zeros.data(), vocab->n_vocab(), &all);
        c.filter(&all);
        if (!c.allows(id)) {
          std::fprintf(stderr, "not allowed: [%s]\n", vocab->piece(id).c_str());
          state.SkipWithError("a document token is not allowed");
        }
        c.accept(id);
      }
      tokens += doc.size();
    }
  }
  state.counters["per_token"] = benchmark::Counter(static_cast<double>(tokens),
                                                   benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_MaskEveryToken)->Unit(benchmark::kMillisecond);

void sample_loop(benchmark::State& state, bool constrained) {
  auto vocab = load_vocab();
  const int32_t n = vocab->n_vocab();
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<std::vector<float>> logits(16, std::vector<float>(static_cast<size_t>(n)));
  for (auto& l : logits)
    for (float& x : l) x = normal(rng);
  SamplerParams p;
  p.temp = state.range(0) != 0 ? 0.8f : 0.0f;
  p.seed = 7;
  std::unique_ptr<Sampler> s;
  size_t step = 0, ended = 0;
  for (auto _ : state) {
    if (step % 64 == 0 || s == nullptr) {
      s = std::make_unique<Sampler>(p, n);
      if (constrained) s->set_constraint(std::make_unique<GrammarConstraint>(schema_grammar(), vocab));
    }
    const int32_t tok = s->sample(logits[step % logits.size()].data());
    ++step;
    if (tok < 0 || vocab->is_eog(tok)) {
      ++ended;
      s.reset();
      continue;
    }
    s->accept(tok);
  }
  state.counters["restarts"] = static_cast<double>(ended);
}

void BM_SampleConstrained(benchmark::State& state) {
  sample_loop(state, true);
}
void BM_SampleUnconstrained(benchmark::State& state) {
  sample_loop(state, false);
}
BENCHMARK(BM_SampleConstrained)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SampleUnconstrained)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace strata

BENCHMARK_MAIN();
