#include "common/cli.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/fixtures.h"

namespace strata::testing {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Proc run_strata(const std::string& args, const std::filesystem::path& scratch_dir) {
  const std::filesystem::path o = scratch_dir / "stdout.txt", e = scratch_dir / "stderr.txt";
  const std::string cmd = strata_binary() + " " + args + " >" + o.string() + " 2>" + e.string();
  const int st = std::system(cmd.c_str());
  Proc p;
  p.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  p.out = slurp(o);
  p.err = slurp(e);
  return p;
}

void expect_one_line_error(const Proc& p, const std::string& needle, bool quiet_stdout) {
  EXPECT_NE(p.code, 0);
  EXPECT_EQ(std::count(p.err.begin(), p.err.end(), '\n'), 1) << "stderr: " << p.err;
  EXPECT_NE(p.err.find(needle), std::string::npos) << "stderr: " << p.err;
  if (quiet_stdout) {
    EXPECT_TRUE(p.out.empty()) << "stdout: " << p.out;
  }
}

}  // namespace strata::testing
