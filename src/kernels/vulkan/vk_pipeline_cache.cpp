#include "kernels/vulkan/vk_pipeline_cache.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace strata::vk {

std::string pipeline_cache_path(const PhysicalDevice& pd) {
  if (const char* e = std::getenv("STRATA_VK_PIPELINE_CACHE"); e != nullptr && *e != '\0')
    return std::strcmp(e, "off") == 0 ? std::string() : std::string(e);
  std::string dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0')
    dir = std::string(x) + "/strata";
  else if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0')
    dir = std::string(h) + "/.cache/strata";
  else
    return {};
  char uuid[2 * VK_UUID_SIZE + 1];
  for (uint32_t i = 0; i < VK_UUID_SIZE; ++i) std::snprintf(uuid + 2 * i, 3, "%02x", pd.cache_uuid[i]);
  return dir + "/vulkan-" + uuid + ".bin";
}

std::vector<uint8_t> read_pipeline_cache(const std::string& path, const PhysicalDevice& pd) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // VkPipelineCacheHeaderVersionOne: header size, version, vendor, device, UUID.
  constexpr size_t kHeader = 16 + VK_UUID_SIZE;
  if (bytes.size() < kHeader) return {};
  uint32_t w[4];
  std::memcpy(w, bytes.data(), sizeof w);
  if (w[0] < kHeader || w[0] > bytes.size() || w[1] != VK_PIPELINE_CACHE_HEADER_VERSION_ONE ||
      w[2] != pd.vendor_id || w[3] != pd.device_id ||
      std::memcmp(bytes.data() + 16, pd.cache_uuid, VK_UUID_SIZE) != 0)
    return {};
  return bytes;
}

bool write_pipeline_cache(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::error_code ec;
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return false;
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!f) {
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
  return !ec;
}

}  // namespace strata::vk
