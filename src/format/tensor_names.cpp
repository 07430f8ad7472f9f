// GGUF tensor names (tensor_names.h).
#include "format/tensor_names.h"

namespace strata {

namespace {
constexpr std::string_view kBlk = "blk.";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
}  // namespace

std::string blk_name(int il, std::string_view suffix) {
  std::string s(kBlk);
  s += std::to_string(il);
  s += '.';
  s += suffix;
  return s;
}

int blk_index(std::string_view name) {
  if (name.substr(0, kBlk.size()) != kBlk) return -1;
  size_t i = kBlk.size();
  int v = 0;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) {
    if (v > 100000000) return -1;  // no model has that many blocks; keeps v from overflowing
    v = v * 10 + (name[i] - '0');
  }
  if (i == kBlk.size() || i == name.size() || name[i] != '.') return -1;
  return v;
}

bool is_routed_expert(std::string_view name) {
  return name.find("_exps.") != std::string_view::npos || ends_with(name, "_exps");
}

int routed_expert_part(std::string_view name) {
  for (int p = 0; p < kRoutedExpertParts; ++p) {
    const std::string_view part = kRoutedExpertPartNames[p];
    if (name.size() > part.size() && ends_with(name, part) && name[name.size() - part.size() - 1] == '.')
      return p;
  }
  return -1;
}

}  // namespace strata
