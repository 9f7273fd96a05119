// Launch parameters of the packed-sequence backward (packed_bwd.cu; filled by packed_ops.cpp;
// semantics: docs/package.md, "Packed sequences"). The packed forward runs on the varlen_fwd
// kernels (varlen.cuh). Plain structs, no torch. Strides in elements.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernel_paths.h"

namespace causal_conv1d_cuda {

struct PackedBwdParams {
  int dim = 0, width = 0, nseq = 0;
  int64_t total = 0;  // tokens in x
  int x_dtype = 0, w_dtype = 0, b_dtype = 0;
  bool silu = false;
  bool channel_last = false;  // x, dout, dx: the channel axis has stride 1
  bool vec_ok = false;        // channel-first: 16-byte accesses are legal at every 16-token chunk of x, dout, dx
  const int32_t* cu = nullptr;  // cu_seqlens (nseq + 1,), contiguous
  // x, dout, dx: (dim, total) views of the (1, dim, total) tensors
  const void* x = nullptr;
  int64_t x_cs = 0, x_ts = 0;
  const void* dout = nullptr;
  int64_t do_cs = 0, do_ts = 0;
  void* dx = nullptr;
  int64_t dx_cs = 0, dx_ts = 0;
  const void* weight = nullptr;  // (dim, width)
  int64_t w_cs = 0, w_ws = 0;
  const void* bias = nullptr;  // (dim,) or null
  int64_t b_s = 0;
  // (nseq, dim, width - 1) in x's dtype, or null
  const void* init = nullptr;
  int64_t i_ns = 0, i_cs = 0, i_ls = 0;
  const void* dfinal = nullptr;
  int64_t df_ns = 0, df_cs = 0, df_ls = 0;
  void* dinit = nullptr;
  int64_t di_ns = 0, di_cs = 0, di_ls = 0;
  void* dweight = nullptr;  // (dim, width) contiguous, weight's dtype
  void* dbias = nullptr;    // (dim,), bias's dtype, or null
  // Set by the host: the device (for the fast path's grid and its dependent-launch reduce) and the
  // weight-gradient workspace of the chosen path (nparts x (padded width + 1) x dim floats; none for
  // the general path, which sums inside its blocks).
  int num_sms = 132;
  bool pdl = false;
  float* partial = nullptr;
  int64_t nparts = 0;
};

// The op's kernel path (dispatch.cu), its workspace rows, and the launch of that path on `stream`
// (launches checked).
causal_conv1d::KernelPath select_packed_bwd(const PackedBwdParams& p);
int64_t packed_bwd_num_parts(causal_conv1d::KernelPath path, const PackedBwdParams& p);
void run_packed_bwd(causal_conv1d::KernelPath path, const PackedBwdParams& p, cudaStream_t stream);

}  // namespace causal_conv1d_cuda
