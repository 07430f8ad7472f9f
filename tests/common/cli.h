// Running the built `strata` CLI from tests: exit code, stdout and stderr of one invocation.
#pragma once

#include <filesystem>
#include <string>

namespace strata::testing {

struct Proc {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::filesystem::path& p);

// Runs `strata ARGS` through the shell (ARGS must be shell-safe); stdout/stderr go through files
// in scratch_dir.
Proc run_strata(const std::string& args, const std::filesystem::path& scratch_dir);

// A failed command: non-zero exit, exactly one line on stderr containing `needle`, and (when
// quiet_stdout) nothing on stdout.
void expect_one_line_error(const Proc& p, const std::string& needle, bool quiet_stdout = false);

}  // namespace strata::testing
