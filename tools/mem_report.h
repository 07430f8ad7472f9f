// The memory report `run` and `bench` print at exit: measured bytes under the planner's keys
// (dense_weights, expert_weights_resident, kv_cache, scratch, io_buffers, total), next to what
// `strata plan` bills for the same model and options.
//
// Measured: dense_weights = pages of the non-expert tensors resident in RAM (mincore on the
// mapping; with an expert budget the store has copied them into anonymous RAM at open, so all of
// them are resident, none in the page cache); expert_weights_resident = the fast tier's touched
// pages (all-resident: the expert tensors' resident pages); kv_cache / scratch = what the session
// allocated (0 where the architecture does not report it; scratch plus the caller's logits row, as
// planned); io_buffers = the I/O engine's own allocations; total = peak RSS (VmHWM). The plan is
// made with the run's context, batch, threads, expert budget and I/O backend (io_uring: its rings
// for --io-depth reads; threads: --io-threads).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/model.h"

namespace strata::cli {

struct MemReport {
  static constexpr int kKeys = 6;
  static const char* const kNames[kKeys];  // dense_weights, ..., total
  uint64_t planned[kKeys] = {};
  uint64_t measured[kKeys] = {};
  std::string plan_error;  // non-empty when the plan could not be made
};

// pool_kv: the bytes of the paged KV pool the session's full-attention K / V live in (run), added
// to the session's own KV bytes.
MemReport mem_report(const Model& m, const Session& s, int n_batch, uint64_t pool_kv = 0);
// "strata: memory ..." lines for stderr.
std::string mem_report_text(const MemReport& r);
// {"planned":{key:bytes},"measured":{key:bytes}}
nlohmann::json mem_report_json(const MemReport& r);

}  // namespace strata::cli
