#!/usr/bin/env bash
# Install the parts of a CUDA toolkit needed to compile causal-conv1d inside a manylinux image
# (cibuildwheel's before-all step), from NVIDIA's RHEL package repositories.
#
#   bash scripts/install-cuda-manylinux.sh 12.8          # or 11.8, 12.4, 12.6, 12.9, 13.0 ...
#
# Images: manylinux2014 (CentOS 7, yum, NVIDIA's rhel7 repo) for pre-cxx11 torch builds and
# manylinux_2_28 (AlmaLinux 8, dnf, NVIDIA's rhel8 repo) for cxx11 builds; x86_64 and aarch64
# (NVIDIA calls Arm servers "sbsa"). The OS release and arch are read from the image.
#
# Packages (nothing else: no driver, no samples, no profilers):
#   cuda-nvcc-X-Y             nvcc, ptxas, cicc, fatbinary, the crt headers
#   cuda-cudart-devel-X-Y     cuda_runtime.h, libcudart.so (+ the cudart package)
#   cuda-cccl-X-Y             CUB / Thrust / libcu++ (CUDA >= 11.x split them out of nvcc)
#   cuda-nvrtc-devel-X-Y      nvrtc.h: ATen/cuda headers include it (ATen/cuda/detail/LazyNVRTC)
#   cuda-profiler-api-X-Y     cuda_profiler_api.h (torch/csrc/cuda headers)
#   cuda-nvtx-X-Y             nvToolsExt / nvtx3 headers (c10/cuda and torch headers)
#   cuda-cuobjdump-X-Y        lets the wheel check verify the embedded CUDA archs (small)
#   libcublas-devel-X-Y, libcusparse-devel-X-Y, libcusolver-devel-X-Y
#                             cublas_v2.h, cusparse.h, cusolverDn.h: ATen/cuda/CUDAContext.h
#                             includes them (CUDAContextLight.h); set CUDA_MATH_HEADERS=0 to skip
#                             them when no source includes CUDAContext.h (saves ~1.5 GB).
# Versions are pinned by the package names' X-Y suffix: one CUDA minor release line, whose
# updates are ABI- and behaviour-compatible; dnf takes that line's latest update. For a
# byte-for-byte rebuild set CUDA_PKG_VERSION to the component version to install (e.g.
# CUDA_PKG_VERSION=12.8.93 -> cuda-nvcc-12-8-12.8.93 ...); NVIDIA versions each component
# separately, so that pin applies to the packages whose version you name.
#
# Afterwards: CUDA_HOME=/usr/local/cuda-X.Y, nvcc on PATH via /usr/local/cuda-X.Y/bin (the
# per-job CIBW_ENVIRONMENT sets both). Exit non-zero with a message on anything unsupported.
set -euo pipefail

usage() { echo "usage: $0 MAJOR.MINOR   (e.g. 12.8)" >&2; exit 2; }
[ $# -eq 1 ] || usage
CUDA="$1"
[[ "$CUDA" =~ ^([0-9]+)\.([0-9]+)$ ]] || { echo "error: invalid CUDA version '$CUDA' (expected MAJOR.MINOR, e.g. 12.8)" >&2; exit 2; }
MAJOR="${BASH_REMATCH[1]}"
MINOR="${BASH_REMATCH[2]}"
SUFFIX="${MAJOR}-${MINOR}"

# The CUDA minor lines torch has shipped builds for (and their final update releases, for the log).
declare -A FINAL_UPDATE=(
  [11.8]=11.8.0 [12.1]=12.1.1 [12.4]=12.4.1 [12.6]=12.6.3 [12.8]=12.8.1 [12.9]=12.9.1 [13.0]=13.0.2 [13.2]=13.2.1
)
if [ -z "${FINAL_UPDATE[$CUDA]:-}" ]; then
  echo "error: CUDA $CUDA is not in this script's table (known: ${!FINAL_UPDATE[*]}); add its final update release" >&2
  exit 2
fi

[ -r /etc/os-release ] || { echo "error: /etc/os-release missing: not a manylinux (RHEL-family) image" >&2; exit 2; }
# shellcheck disable=SC1091
. /etc/os-release
RHEL="${VERSION_ID%%.*}"
case "$RHEL" in
  7|8|9) ;;
  *) echo "error: unsupported OS '$ID $VERSION_ID' (expected manylinux2014 = EL7 or manylinux_2_28 = EL8)" >&2; exit 2 ;;
esac
case "$(uname -m)" in
  x86_64) REPO_ARCH=x86_64 ;;
  aarch64) REPO_ARCH=sbsa ;;
  *) echo "error: unsupported architecture $(uname -m) (x86_64 or aarch64)" >&2; exit 2 ;;
esac
if [ "$RHEL" = 7 ] && [ "$REPO_ARCH" = sbsa ]; then
  echo "error: NVIDIA publishes no EL7 repository for aarch64 (sbsa); aarch64 CUDA torch builds are cxx11 -> manylinux_2_28" >&2
  exit 2
fi
if [ "$RHEL" = 7 ] && { [ "$MAJOR" -gt 12 ] || { [ "$MAJOR" = 12 ] && [ "$MINOR" -gt 4 ]; }; }; then
  echo "error: CUDA $CUDA has no EL7 packages (NVIDIA dropped RHEL 7 after 12.4); pre-cxx11 torch builds use CUDA <= 12.4" >&2
  exit 2
fi

if command -v dnf >/dev/null; then PM=dnf; else PM=yum; fi
REPO_URL="https://developer.download.nvidia.com/compute/cuda/repos/rhel${RHEL}/${REPO_ARCH}/cuda-rhel${RHEL}.repo"
echo "== CUDA $CUDA (line ending at ${FINAL_UPDATE[$CUDA]}) from $REPO_URL with $PM"
curl -fsSL --retry 5 --retry-delay 5 -o "/etc/yum.repos.d/cuda-rhel${RHEL}.repo" "$REPO_URL"

PKGS=(
  "cuda-nvcc-${SUFFIX}"
  "cuda-cudart-devel-${SUFFIX}"
  "cuda-nvrtc-devel-${SUFFIX}"
  "cuda-profiler-api-${SUFFIX}"
  "cuda-nvtx-${SUFFIX}"
  "cuda-cuobjdump-${SUFFIX}"
)
PKGS+=("cuda-cccl-${SUFFIX}")  # CUB / Thrust / libcu++, its own package since CUDA 11.x
if [ "${CUDA_MATH_HEADERS:-1}" = 1 ]; then
  PKGS+=("libcublas-devel-${SUFFIX}" "libcusparse-devel-${SUFFIX}" "libcusolver-devel-${SUFFIX}")
fi
if [ -n "${CUDA_PKG_VERSION:-}" ]; then
  for i in "${!PKGS[@]}"; do PKGS[i]="${PKGS[i]}-${CUDA_PKG_VERSION}"; done
fi

$PM install -y --setopt=install_weak_deps=False "${PKGS[@]}"
$PM clean all >/dev/null 2>&1 || true
rm -rf /var/cache/dnf /var/cache/yum

HOME_DIR="/usr/local/cuda-${CUDA}"
[ -x "$HOME_DIR/bin/nvcc" ] || { echo "error: $HOME_DIR/bin/nvcc missing after the install" >&2; exit 1; }
ln -sfn "$HOME_DIR" /usr/local/cuda
"$HOME_DIR/bin/nvcc" --version | tail -2
got="$("$HOME_DIR/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')"
[ "$got" = "$CUDA" ] || { echo "error: nvcc reports CUDA $got, expected $CUDA" >&2; exit 1; }
echo "CUDA_HOME=$HOME_DIR"
