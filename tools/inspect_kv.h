// `strata inspect --kv`: the KV-cache view of a model (owned by the DeepSeek engineer).
#pragma once

int inspect_kv_main(int argc, char** argv);
