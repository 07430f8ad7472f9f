// Writing a whole text file: to PATH.tmp, then renamed over PATH, so a reader never sees half a
// file and a failed write leaves no PATH behind. Errors name the file and the system's reason.
#pragma once

#include <string>

#include "base/status.h"

namespace strata {

Status write_text_file(const std::string& path, const std::string& text);

}  // namespace strata
