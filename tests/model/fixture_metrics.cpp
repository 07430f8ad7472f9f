#include "model/fixture_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

namespace strata::testing {

bool load_fixture(const std::string& dir, const std::string& name, FixtureMeta* out, std::string* msg) {
  const std::string base = dir + "/logits/" + name;
  std::ifstream js(base + ".json");
  if (!js) {
    *msg = "cannot open " + base + ".json";
    return false;
  }
  nlohmann::json j = nlohmann::json::parse(js);
  out->name = name;
  out->model_path = dir + "/" + j.at("model_file").get<std::string>();
  out->pass_class = j.at("pass_class").get<std::string>();
  out->n_tokens = j.at("n_tokens").get<int>();
  out->n_vocab = j.at("n_vocab").get<int>();
  out->tokens = j.at("tokens").get<std::vector<int32_t>>();
  out->recommended = j.at("recommended_pass");
  out->ref.resize(static_cast<size_t>(out->n_tokens) * out->n_vocab);
  FILE* f = std::fopen((base + ".f32").c_str(), "rb");
  if (!f) {
    *msg = "cannot open " + base + ".f32";
    return false;
  }
  const size_t got = std::fread(out->ref.data(), sizeof(float), out->ref.size(), f);
  std::fclose(f);
  if (got != out->ref.size()) {
    *msg = base + ".f32: short read";
    return false;
  }
  return true;
}

static void log_softmax(const float* x, int n, std::vector<double>& out) {
  double mx = x[0];
  for (int i = 1; i < n; ++i) mx = std::max(mx, static_cast<double>(x[i]));
  double s = 0;
  for (int i = 0; i < n; ++i) s += std::exp(x[i] - mx);
  const double ls = std::log(s);
  out.resize(n);
  for (int i = 0; i < n; ++i) out[i] = x[i] - mx - ls;
}

FixtureMetrics fixture_metrics(const FixtureMeta& m, const std::vector<float>& eng, double tie_below) {
  FixtureMetrics r;
  const int T = m.n_tokens, V = m.n_vocab;
  std::vector<double> lr, le;
  int agree = 0, counted = 0;
  double kl_sum = 0, worst = -1;
  for (int t = 0; t < T; ++t) {
    const float* a = m.ref.data() + static_cast<size_t>(t) * V;
    const float* b = eng.data() + static_cast<size_t>(t) * V;
    double row_max = 0;
    for (int v = 0; v < V; ++v) row_max = std::max(row_max, std::fabs(static_cast<double>(a[v]) - b[v]));
    r.max_abs = std::max(r.max_abs, row_max);
    if (row_max > worst) {
      worst = row_max;
      r.worst_pos = t;
    }
    log_softmax(a, V, lr);
    log_softmax(b, V, le);
    double kl = 0;
    for (int v = 0; v < V; ++v) kl += std::exp(lr[v]) * (lr[v] - le[v]);
    kl_sum += kl;
    r.kl_max = std::max(r.kl_max, kl);
    const int ia = static_cast<int>(std::max_element(a, a + V) - a);
    const int ib = static_cast<int>(std::max_element(b, b + V) - b);
    double top1 = -1e300, top2 = -1e300;
    for (int v = 0; v < V; ++v) {
      if (a[v] > top1) {
        top2 = top1;
        top1 = a[v];
      } else if (a[v] > top2) {
        top2 = a[v];
      }
    }
    if (top1 - top2 >= tie_below) {
      ++counted;
      agree += ia == ib;
    }
  }
  r.kl_mean = kl_sum / T;
  r.argmax_agree = counted ? static_cast<double>(agree) / counted : 1.0;
  return r;
}

Criteria fixture_criteria(const FixtureMeta& m, const std::string& criteria) {
  nlohmann::json rec = m.recommended;
  Criteria c;
  c.name = "f32";
  if (m.pass_class != "f32") {
    rec = rec.at(criteria);
    c.name = criteria;
  }
  if (rec.contains("max_abs")) c.max_abs = rec["max_abs"].get<double>();
  if (rec.contains("kl_max")) c.kl_max = rec["kl_max"].get<double>();
  if (rec.contains("kl_mean")) c.kl_mean = rec["kl_mean"].get<double>();
  if (rec.contains("argmax_agree_min")) c.argmax_min = rec["argmax_agree_min"].get<double>();
  if (rec.contains("argmax_excludes_near_ties_below"))
    c.tie_below = rec["argmax_excludes_near_ties_below"].get<double>();
  return c;
}

std::string fixture_check(const FixtureMetrics& r, const Criteria& c) {
  std::string f;
  char buf[160];
  if (c.max_abs >= 0 && !(r.max_abs <= c.max_abs)) {
    std::snprintf(buf, sizeof buf, "max_abs %.3e > %g; ", r.max_abs, c.max_abs);
    f += buf;
  }
  if (c.kl_max >= 0 && !(r.kl_max <= c.kl_max)) {
    std::snprintf(buf, sizeof buf, "kl_max %.3e > %g; ", r.kl_max, c.kl_max);
    f += buf;
  }
  if (c.kl_mean >= 0 && !(r.kl_mean <= c.kl_mean)) {
    std::snprintf(buf, sizeof buf, "kl_mean %.3e > %g; ", r.kl_mean, c.kl_mean);
    f += buf;
  }
  if (!(r.argmax_agree >= c.argmax_min)) {
    std::snprintf(buf, sizeof buf, "argmax %.4f < %g; ", r.argmax_agree, c.argmax_min);
    f += buf;
  }
  return f;
}

std::string metrics_string(const FixtureMetrics& r) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "max|d| %.3e  KL max %.3e  KL mean %.3e  argmax %.4f  worst pos %d",
                r.max_abs, r.kl_max, r.kl_mean, r.argmax_agree, r.worst_pos);
  return buf;
}

}  // namespace strata::testing
