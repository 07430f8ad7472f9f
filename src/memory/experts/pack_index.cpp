// Expert bundle index reader (pack.h): validates everything the expert store will trust.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "memory/experts/pack.h"

namespace strata {

namespace {

uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint32_t get_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

using json = nlohmann::json;

Result<uint64_t> u64_of(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned())
    return err("%s: \"%s\" must be a non-negative integer", where.c_str(), key);
  return it->get<uint64_t>();
}

Status parse_index(const json& j, const std::string& p, PackIndex* ix) {
  if (!j.is_object() || j.value("format", "") != "strata-pack")
    return err("%s: index is not a strata-pack index", p.c_str());
  STRATA_ASSIGN(uint64_t nl, u64_of(j, "n_layers", p + ": index"));
  STRATA_ASSIGN(uint64_t ne, u64_of(j, "n_experts", p + ": index"));
  if (nl == 0 || ne == 0 || nl > (1u << 20) || ne > (1u << 20))
    return err("%s: index: n_layers %llu / n_experts %llu out of range", p.c_str(), (unsigned long long)nl,
               (unsigned long long)ne);
  ix->n_layers = static_cast<int>(nl);
  ix->n_experts = static_cast<int>(ne);
  if (j.contains("source") && j["source"].is_object()) {
    const json& s = j["source"];
    ix->source_path = s.value("path", "");
    ix->source_size = s.value("size", uint64_t{0});
    ix->source_tensors = s.value("tensors", int64_t{0});
  }
  if (!j.contains("experts") || !j["experts"].is_array())
    return err("%s: index: missing \"experts\" array", p.c_str());
  const uint64_t data_bytes = ix->file_size - ix->data_offset;
  for (size_t i = 0; i < j["experts"].size(); ++i) {
    const json& je = j["experts"][i];
    const std::string w = p + ": index expert #" + std::to_string(i);
    PackExpert pe;
    STRATA_ASSIGN(uint64_t l, u64_of(je, "layer", w));
    STRATA_ASSIGN(uint64_t e, u64_of(je, "expert", w));
    STRATA_ASSIGN(pe.offset, u64_of(je, "offset", w));
    STRATA_ASSIGN(pe.size, u64_of(je, "size", w));
    if (l >= nl || e >= ne)
      return err("%s: (layer %llu, expert %llu) is outside the grid", w.c_str(), (unsigned long long)l,
                 (unsigned long long)e);
    pe.layer = static_cast<int>(l);
    pe.expert = static_cast<int>(e);
    if (pe.offset % kPackAlignment != 0)
      return err("%s: offset %llu is not 4 KiB aligned", w.c_str(), (unsigned long long)pe.offset);
    if (pe.size == 0 || pe.offset > data_bytes || pe.padded_size() > data_bytes - pe.offset)
      return err("%s: blob [%llu, +%llu) is outside the data section (%llu bytes)", w.c_str(),
                 (unsigned long long)pe.offset, (unsigned long long)pe.size, (unsigned long long)data_bytes);
    if (!je.contains("parts") || !je["parts"].is_array() || je["parts"].empty())
      return err("%s: missing \"parts\"", w.c_str());
    uint64_t end = 0;
    for (const json& jp : je["parts"]) {
      PackPart pp;
      if (!jp.is_object() || !jp.contains("name") || !jp["name"].is_string())
        return err("%s: a part has no name", w.c_str());
      pp.name = jp["name"].get<std::string>();
      const std::string tn = jp.value("type", "");
      if (!type_from_name(tn, &pp.type))
        return err("%s: part '%s' has unknown type '%s'", w.c_str(), pp.name.c_str(), tn.c_str());
      if (jp.contains("ne") && jp["ne"].is_array())
        for (const json& x : jp["ne"]) {
          if (!x.is_number_integer() || x.get<int64_t>() < 0)
            return err("%s: part '%s': bad shape", w.c_str(), pp.name.c_str());
          pp.ne.push_back(x.get<int64_t>());
        }
      STRATA_ASSIGN(pp.offset, u64_of(jp, "offset", w));
      STRATA_ASSIGN(pp.size, u64_of(jp, "size", w));
      if (pp.offset != end || pp.size > pe.size - std::min(pe.size, pp.offset))
        return err("%s: part '%s' [%llu, +%llu) is not contiguous inside its %llu-byte blob", w.c_str(),
                   pp.name.c_str(), (unsigned long long)pp.offset, (unsigned long long)pp.size,
                   (unsigned long long)pe.size);
      end = pp.offset + pp.size;
      pe.parts.push_back(std::move(pp));
    }
    if (end != pe.size)
      return err("%s: parts cover %llu of %llu bytes", w.c_str(), (unsigned long long)end,
                 (unsigned long long)pe.size);
    ix->experts.push_back(std::move(pe));
  }
  std::sort(ix->experts.begin(), ix->experts.end(), [](const PackExpert& a, const PackExpert& b) {
    return std::tie(a.layer, a.expert) < std::tie(b.layer, b.expert);
  });
  for (size_t i = 1; i < ix->experts.size(); ++i)
    if (ix->experts[i].layer == ix->experts[i - 1].layer &&
        ix->experts[i].expert == ix->experts[i - 1].expert)
      return err("%s: index lists (layer %d, expert %d) twice", p.c_str(), ix->experts[i].layer,
                 ix->experts[i].expert);
  // No two blobs overlap.
  std::vector<const PackExpert*> by_off;
  for (const PackExpert& e : ix->experts) by_off.push_back(&e);
  std::sort(by_off.begin(), by_off.end(),
            [](const PackExpert* a, const PackExpert* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_off.size(); ++i)
    if (by_off[i - 1]->offset + by_off[i - 1]->padded_size() > by_off[i]->offset)
      return err("%s: blobs of (layer %d, expert %d) and (layer %d, expert %d) overlap", p.c_str(),
                 by_off[i - 1]->layer, by_off[i - 1]->expert, by_off[i]->layer, by_off[i]->expert);
  ix->order.assign(static_cast<size_t>(ix->n_layers), {});
  if (j.contains("order") && j["order"].is_array())
    for (size_t l = 0; l < j["order"].size() && l < ix->order.size(); ++l)
      for (const json& x : j["order"][l])
        if (x.is_number_integer()) ix->order[l].push_back(x.get<int>());
  return {};
}

}  // namespace

Result<PackIndex> pack_read_index(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return err("cannot open expert bundle %s: %s", path.c_str(), std::strerror(errno));
  struct Closer {
    FILE* f;
    ~Closer() { std::fclose(f); }
  } closer{f};
  uint8_t h[64];
  if (std::fread(h, 1, sizeof h, f) != sizeof h)
    return err("%s: too short for an expert bundle header", path.c_str());
  if (std::memcmp(h, "STRATAPK", 8) != 0) return err("%s: not an expert bundle (bad magic)", path.c_str());
  const uint32_t version = get_u32(h + 8), align = get_u32(h + 12);
  if (version != kPackVersion)
    return err("%s: bundle version %u is not supported (expected %u)", path.c_str(), version, kPackVersion);
  if (align != kPackAlignment)
    return err("%s: bundle alignment %u, expected %u", path.c_str(), align, kPackAlignment);
  PackIndex ix;
  ix.path = path;
  const uint64_t index_offset = get_u64(h + 16), index_size = get_u64(h + 24);
  ix.data_offset = get_u64(h + 32);
  ix.file_size = get_u64(h + 40);
  if (std::fseek(f, 0, SEEK_END) != 0) return err("%s: cannot seek", path.c_str());
  const long actual = std::ftell(f);
  if (actual < 0 || static_cast<uint64_t>(actual) != ix.file_size)
    return err("%s: file is %ld bytes, the header says %llu (truncated or changed?)", path.c_str(), actual,
               (unsigned long long)ix.file_size);
  if (index_offset < 64 || index_size == 0 || index_size > (uint64_t{1} << 32) ||
      index_offset + index_size > ix.data_offset || ix.data_offset % kPackAlignment != 0 ||
      ix.data_offset > ix.file_size)
    return err("%s: header offsets are inconsistent (index %llu+%llu, data %llu, size %llu)", path.c_str(),
               (unsigned long long)index_offset, (unsigned long long)index_size,
               (unsigned long long)ix.data_offset, (unsigned long long)ix.file_size);
  std::string text(static_cast<size_t>(index_size), '\0');
  if (std::fseek(f, static_cast<long>(index_offset), SEEK_SET) != 0 ||
      std::fread(text.data(), 1, text.size(), f) != text.size())
    return err("%s: cannot read the index at offset %llu", path.c_str(), (unsigned long long)index_offset);
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return err("%s: the index is not valid JSON", path.c_str());
  STRATA_TRY(parse_index(j, path, &ix));
  return ix;
}

}  // namespace strata
