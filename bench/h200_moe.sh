#!/usr/bin/env bash
# Issue 16's real-GPU check: strata's Vulkan device on one NVIDIA H200 (the device machine lent to
# some sessions: 16 cores, 128 GiB RAM, no network), against llama.cpp built with nvcc for sm_90.
#
#   bench/h200_moe.sh pack [LLAMA_BENCH]   here: strata, the shared libraries it needs that an
#                                          Ubuntu image may lack, Debian's Vulkan loader and
#                                          (optional) a llama-bench into .h200/pack.tar.gz
#   bench/h200_moe.sh run OUT [STAGES]     there (repo root, .h200 carried): unpacks, writes the
#                                          model, runs STAGES (default: all); prints each run's key
#                                          numbers (tee it to OUT/log.txt), every JSON in OUT/results.tar
#
# llama-bench for `pack` (not in the repository; ~75 min on 2 cores): llama.cpp v0.5.0's source from
# `npm pack node-llama-cpp@3.22.1` (package/llama/gitRelease.bundle), then
#   cmake -S SRC -B SRC/build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON
#     -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF
#     -DGGML_OPENMP=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DGGML_CUDA_NCCL=OFF
#   ninja -C SRC/build-cuda llama-bench
# (the device's CUDA 13 runtime and cuBLAS are found there; the pack must stay under ~40 MB for the
# 64 MiB the device takes with the repository.) Device time, 2026-12-04: start ~35 s, synth ~45 s,
# check ~6 s, vram ~95 s, llama ~10 s, each --gpu-budget 24G policy ~60 s (copy > 150 s).
#
# The model: a qwen3moe synth read at >= 4 GB per token, 48 layers, d 4096, 32 heads of 128 (4 KV
# heads), 64 experts of 2048 top-8, MXFP4 experts / Q8_0 rest, vocab 32K (~44 GB), written there
# with --draws quantile (codes drawn directly: ~1 min instead of ~40 core-minutes of quantizing).
# Stages:
#   env     GPU, driver, Vulkan devices, a device-to-device copy's bandwidth (the roofline)
#   vram    strata --device Vulkan0, everything in VRAM: pp 32,128,512 and tg 32
#   tree    the same tg with linear.comp's shared-memory build (STRATA_VK_SUBGROUP=0)
#   check   strata's Vulkan logits vs its CPU logits on a small synth (a bad build falls back)
#   budget  strata with --gpu-budget 24G (the experts over it on the host), per --miss-policy when
#           the build has it
#   llama   llama-bench -ngl 99;  llama24: -ngl 99 --n-cpu-moe 23, about the same VRAM use as 24G
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: bench/h200_moe.sh pack|run ...}

if [ "$mode" = pack ]; then
  llama=${2:-}
  dir=.h200/stage
  rm -rf .h200 && mkdir -p "$dir/lib" "$dir/bin" "$dir/deb"
  cp build/release/tools/strata "$dir/bin/"
  # Every shared library but the C runtime's own (the image's glibc / libstdc++ are newer).
  for bin in "$dir"/bin/strata ${llama:+"$llama"}; do
    ldd "$bin" | awk '/=> \// {print $3}' |
      grep -Ev '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so|/cuda|/lib(ssl|crypto|z|brotli[a-z]*|pcre2-8)\.so' |
      xargs -r -I{} cp -L {} "$dir/lib/"
  done
  [ -n "$llama" ] && cp "$llama" "$dir/bin/llama-bench"
  # Debian's Vulkan loader and GL vendor-neutral dispatch (NVIDIA's Vulkan driver is loaded through them).
  (cd "$dir/deb" && apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 >/dev/null 2>&1 ||
    echo "apt-get download failed: no Vulkan loader in the pack")
  strip "$dir"/bin/* 2>/dev/null; tar -C "$dir" -cf - . | xz -T2 -9 > .h200/pack.tar.xz && rm -rf "$dir"
  ls -la .h200/pack.tar.xz
  exit 0
fi

out=${2:?usage: bench/h200_moe.sh run OUT [STAGES]}
stages=${3:-env,check,vram,llama,budget,llama24,tree}
mkdir -p "$out"
res=/tmp/h200res
mkdir -p "$res"
pack=/tmp/h200pack
work=${H200_WORK:-/tmp/h200}
mkdir -p "$pack" "$work"
xz -dc .h200/pack.tar.xz | tar -C "$pack" -xf -
export LD_LIBRARY_PATH=$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
strata=$pack/bin/strata
llama=$pack/bin/llama-bench
# llama-bench's CUDA runtime and cuBLAS: the image's toolkit (or the wheels PyTorch carries).
if [ -x "$llama" ] && ldd "$llama" | grep -q 'not found'; then
  for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
    d=$(find /usr/local/cuda* /usr/lib /opt -name "$lib" 2>/dev/null | head -1)
    [ -n "$d" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(dirname "$d")
  done
  ldd "$llama" | grep 'not found'
fi
has() { [[ ",$stages," == *",$1,"* ]]; }
log() { echo "== $(date +%T) $*"; }
# After a run: its exit code, the numbers that matter from its JSON (strata's or llama-bench's) and
# the end of its stderr; every file of $res into one tar in $out.
report() {  # NAME RC
  echo "rc=$2"
  python3 - "$res/$1.json" <<'PY' 2>&1
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"(no JSON: {e})"); sys.exit()
if isinstance(j, list):  # llama-bench
    for r in j:
        print(f"llama.cpp pp{r['n_prompt']} tg{r['n_gen']}: {r['avg_ts']:.1f} t/s {r['samples_ts']}")
    sys.exit()
keys = ("tg_tok_s", "tg_gbps", "tg_weight_bytes_per_token", "device_copy_gbps", "tg_fraction_of_device_copy",
        "tg_device_submissions_per_token", "tg_device_busy_ms_per_token", "tg_device_busy_fraction",
        "expert_gpu_resident", "tg_experts_gpu_per_token", "tg_experts_host_per_token")
print({k: round(j[k], 4) if isinstance(j[k], float) else j[k] for k in keys if k in j})
for r in j.get("pp_runs", []):
    print(f"pp{r['n_prompt']}: {r['median']:.2f} t/s {r['samples_ts']}")
for k in ("pp_miss", "tg_miss", "miss_rates"):
    if k in j:
        print(k, json.dumps(j[k])[:600])
PY
  tail -3 "$res/$1.err"
  tar -C "$res" -cf "$out/results.tar" .
}

# The Vulkan loader and glvnd (the image has NVIDIA's driver and ICD manifest but not these), and
# the driver's own manifests.
for f in "$pack"/deb/*.deb; do dpkg -x "$f" /; done
ldconfig
nv=/usr/local/nvidia/share
[ -f $nv/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=$nv/vulkan/icd.d/nvidia_icd.json
[ -f $nv/glvnd/egl_vendor.d/10_nvidia.json ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$nv/glvnd/egl_vendor.d/10_nvidia.json
if ! "$strata" bench --list-devices 2>&1 | grep -q '^  Vulkan0'; then
  echo "no Vulkan device:"
  VK_LOADER_DEBUG=error,driver "$strata" bench --list-devices 2>&1 | tail -8
  ls -la $nv/vulkan/icd.d $nv/glvnd/egl_vendor.d /usr/share/vulkan/icd.d 2>&1
  exit 3
fi

if has env; then
  log env
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv
  nproc; free -g | head -2; df -h "$work" | tail -1
  "$strata" bench --list-devices
  # The roofline: a device-to-device copy (bytes read + written per second), through PyTorch.
  [ -n "${H200_COPY:-}" ] && timeout 60 python3 - <<'EOF' 2>&1 | tail -2
import torch, time
a = torch.empty(4 << 30, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(10): b.copy_(a)
torch.cuda.synchronize(); dt = (time.perf_counter() - t) / 10
print(f"d2d copy: {2 * a.numel() / dt / 1e12:.2f} TB/s (read + write)")
EOF
fi

model=$work/qwen3moe-48x64x2048-mxfp4.gguf
if [ ! -f "$model" ]; then
  log synth
  TIMEFORMAT="synth: %R s"
  time (timeout 240 "$strata" synth --arch qwen3moe --layers 48 --embd 4096 --heads 32 --kv-heads 4 \
    --experts 64 --top-k 8 --expert-ffn 2048 --vocab 32K --type mxfp4 --draws quantile -o "$model" 2>&1 | tail -2)
fi

if has check; then
  # The kernels against the CPU on a small synth before the long runs: the logits of 24 tokens,
  # max |Vulkan - CPU| over the logits' spread; a build that is off falls back to the tree.
  log check
  small=$work/small.gguf
  "$strata" synth --arch qwen3moe --layers 2 --embd 1024 --heads 8 --kv-heads 2 --experts 16 --top-k 4 \
    --expert-ffn 512 --vocab 1K --type mxfp4 --draws quantile -o "$small" > /dev/null 2>&1
  toks=$(seq -s, 1 24)
  "$strata" logits -m "$small" --tokens "$toks" -o "$work/l_cpu.bin" 2> /dev/null
  "$strata" logits -m "$small" --tokens "$toks" -o "$work/l_vk.bin" --device Vulkan0 2> /dev/null
  STRATA_VK_SUBGROUP=0 "$strata" logits -m "$small" --tokens "$toks" -o "$work/l_tree.bin" --device Vulkan0 2> /dev/null
  verdict=$(python3 - "$work" <<'PY'
import sys, numpy as np
w = sys.argv[1]; a = np.fromfile(w + "/l_cpu.bin", dtype=np.float32)
for n in ("vk", "tree"):
    b = np.fromfile(w + f"/l_{n}.bin", dtype=np.float32)
    r = float(np.abs(a - b).max() / np.ptp(a)) if b.size == a.size else 1.0
    print(f"{n}: max |vulkan - cpu| / spread {r:.2e}", file=sys.stderr)
    if n == "vk": print("ok" if r < 1e-2 else "off")
PY
)
  echo "subgroup build: $verdict"
  [ "$verdict" = ok ] || export STRATA_VK_SUBGROUP=0
fi

if has vram; then
  log "strata vram"
  timeout 200 "$strata" bench -m "$model" --device Vulkan0 -p 32,128,512 -n 32 -r 3 --json \
    > "$res/strata_vram.json" 2> "$res/strata_vram.err"
  report strata_vram $?
fi

if has llama && [ -x "$llama" ]; then
  log "llama.cpp -ngl 99"
  timeout 150 "$llama" -m "$model" -ngl 99 -p 32,128,512 -n 32 -r 3 -o json > "$res/llama_vram.json" 2> "$res/llama_vram.err"
  report llama_vram $?
fi

if has budget; then
  policies=none
  "$strata" bench --help 2>&1 | grep -q -- '--miss-policy' && policies="auto cpu copy"
  for p in $policies; do
    log "strata --gpu-budget 24G ($p)"
    extra=()
    [ "$p" != none ] && extra=(--miss-policy "$p")
    timeout 150 "$strata" bench -m "$model" --device Vulkan0 --gpu-budget 24G "${extra[@]}" -p 32,512 -n 16 -r 1 \
      --json > "$res/strata_24g_$p.json" 2> "$res/strata_24g_$p.err"
    report "strata_24g_$p" $?
  done
fi

if has llama24 && [ -x "$llama" ]; then
  # 24 GB of VRAM: the dense weights (~2.2 GB) and 25 of 48 layers' experts (0.86 GB each).
  log "llama.cpp -ngl 99 --n-cpu-moe 23"
  timeout 150 "$llama" -m "$model" -ngl 99 -ncmoe 23 -p 32,512 -n 16 -r 2 -o json > "$res/llama_24g.json" \
    2> "$res/llama_24g.err"
  report llama_24g $?
fi

if has tree; then
  log "strata vram, STRATA_VK_SUBGROUP=0"
  STRATA_VK_SUBGROUP=0 timeout 120 "$strata" bench -m "$model" --device Vulkan0 -p 0 -n 32 -r 2 --json \
    > "$res/strata_tree.json" 2> "$res/strata_tree.err"
  report strata_tree $?
fi

log done
