// The Vulkan pipeline cache kept on disk between runs (issue 16): the driver's compiled form of the
// shaders, so a second start skips compiling them. One file per device and driver build, named by
// the driver's pipelineCacheUUID: STRATA_VK_PIPELINE_CACHE=FILE, or off; by default
// $XDG_CACHE_HOME/strata (else ~/.cache/strata) /vulkan-<uuid>.bin. A file whose header is not this
// device's (vendor, device, UUID) is ignored, never handed to the driver; reading or writing it never
// fails the device (written to a temporary file and renamed, so concurrent processes do not mix).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/vulkan/vk_instance.h"

namespace strata::vk {

// The file for pd ("" when the cache is off or no folder is known).
std::string pipeline_cache_path(const PhysicalDevice& pd);
// Its bytes when they are a pipeline cache of pd's (Vulkan's header checked), else empty.
std::vector<uint8_t> read_pipeline_cache(const std::string& path, const PhysicalDevice& pd);
// Writes bytes to path (its folder created); false when it could not.
bool write_pipeline_cache(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace strata::vk
