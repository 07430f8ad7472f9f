#include "base/text_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace strata {

Status write_text_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return err("cannot write '%s': %s", path.c_str(), std::strerror(errno));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return err("cannot write '%s': %s", path.c_str(), std::strerror(errno));
  }
  return {};
}

}  // namespace strata
