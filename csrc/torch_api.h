// The op layer's view of torch: one small set of names, mapped at compile time onto either the
// LibTorch stable ABI (torch >= 2.10: torch/csrc/stable, torch/headeronly and the C shims; the
// library loads on every later torch) or ATen (the legacy per-torch-minor builds, torch 2.4-2.9, and
// any torch with CAUSAL_CONV1D_STABLE_ABI=FALSE). build_support/extension.py defines
// CAUSAL_CONV1D_STABLE_ABI=1 (and TORCH_TARGET_VERSION) for a stable build.
//
// The op layer (ops.cpp, checks.h, cpu/*.cpp, cuda/ops_cuda.cpp) uses only these
// names, so there is one copy of it: Tensor, ScalarType, Half/BFloat16, the checks (CC1D_CHECK*),
// tensor creation and the few tensor ops it needs, parallel_for, the library macros (CC1D_LIBRARY,
// CC1D_LIBRARY_IMPL, CC1D_KERNEL) and the message formatting helpers. CUDA-only names (stream,
// device guard) are in cuda/torch_api_cuda.h.
//
// Errors: the legacy build raises TypeError / ValueError / RuntimeError through TORCH_CHECK_TYPE /
// TORCH_CHECK_VALUE / TORCH_CHECK. The stable ABI carries only the message of a std::runtime_error
// (STD_TORCH_CHECK) to Python, as a RuntimeError; the message then starts with a tag,
// "[TypeError] " / "[ValueError] " / "[RuntimeError] ", after STD_TORCH_CHECK's location prefix,
// and the Python API (causal_conv1d/_errors.py) re-raises it as that type with the message that
// follows the tag -- the same text as the legacy build's.
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#if CAUSAL_CONV1D_STABLE_ABI

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/Half.h>

#define CC1D_CHECK(cond, ...) STD_TORCH_CHECK(cond, "[RuntimeError] ", __VA_ARGS__)
#define CC1D_CHECK_TYPE(cond, ...) STD_TORCH_CHECK(cond, "[TypeError] ", __VA_ARGS__)
#define CC1D_CHECK_VALUE(cond, ...) STD_TORCH_CHECK(cond, "[ValueError] ", __VA_ARGS__)

#define CC1D_LIBRARY(ns, m) STABLE_TORCH_LIBRARY(ns, m)
#define CC1D_LIBRARY_IMPL(ns, k, m) STABLE_TORCH_LIBRARY_IMPL(ns, k, m)
#define CC1D_KERNEL(fn) TORCH_BOX(fn)

#else  // legacy: ATen

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#define CC1D_CHECK(cond, ...) TORCH_CHECK(cond, __VA_ARGS__)
#define CC1D_CHECK_TYPE(cond, ...) TORCH_CHECK_TYPE(cond, __VA_ARGS__)
#define CC1D_CHECK_VALUE(cond, ...) TORCH_CHECK_VALUE(cond, __VA_ARGS__)

#define CC1D_LIBRARY(ns, m) TORCH_LIBRARY(ns, m)
#define CC1D_LIBRARY_IMPL(ns, k, m) TORCH_LIBRARY_IMPL(ns, k, m)
#define CC1D_KERNEL(fn) (fn)

#endif  // CAUSAL_CONV1D_STABLE_ABI

namespace causal_conv1d {

#if CAUSAL_CONV1D_STABLE_ABI
using Tensor = torch::stable::Tensor;
using ScalarType = torch::headeronly::ScalarType;
using Half = torch::headeronly::Half;
using BFloat16 = torch::headeronly::BFloat16;
inline constexpr bool kStableAbi = true;
#else
using Tensor = at::Tensor;
using ScalarType = at::ScalarType;
using Half = at::Half;
using BFloat16 = at::BFloat16;
inline constexpr bool kStableAbi = false;
#endif
using OptTensor = std::optional<Tensor>;

// ---------------------------------------------------------------------------------------------
// Message formatting (the same text in both builds: the legacy messages as c10 printed them)

inline const char* dtype_name(ScalarType t) { return toString(t); }

// "[2, 8, 16]", as c10 prints an IntArrayRef.
template <typename Sizes>
std::string fmt_sizes(const Sizes& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < std::size(s); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

// "cpu", "cuda:0", as c10 prints a Device.
inline std::string device_str(const Tensor& t) {
  const auto d = t.device();
  std::string s;
  switch (d.type()) {
    case torch::headeronly::DeviceType::CPU: s = "cpu"; break;
    case torch::headeronly::DeviceType::CUDA: s = "cuda"; break;
    case torch::headeronly::DeviceType::Meta: s = "meta"; break;
    default: s = "device_type_" + std::to_string(static_cast<int>(d.type())); break;
  }
  if (d.index() >= 0) s += ":" + std::to_string(static_cast<int>(d.index()));
  return s;
}

template <typename A, typename B>
bool same_sizes(const A& a, const B& b) {
  if (std::size(a) != std::size(b)) return false;
  for (size_t i = 0; i < std::size(a); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Tensor creation and the tensor ops the op layer uses

inline void zero_fill(Tensor& t);

// A new uninitialised tensor of the given sizes, strides and dtype on like's device. Not a view (an
// output made by transposing a fresh tensor would be one, and autograd rejects in-place ops on
// views made inside a custom function's forward).
template <size_t N>
inline Tensor alloc_strided(const int64_t (&sizes)[N], const int64_t (&strides)[N], ScalarType dtype,
                            const Tensor& like) {
#if CAUSAL_CONV1D_STABLE_ABI
  int32_t device_type = 0, device_index = 0;
  STD_TORCH_CHECK(aoti_torch_get_device_type(like.get(), &device_type) == AOTI_TORCH_SUCCESS, "device type");
  STD_TORCH_CHECK(aoti_torch_get_device_index(like.get(), &device_index) == AOTI_TORCH_SUCCESS, "device index");
  const int32_t shim_dtype = torch::stable::detail::to<int32_t>(torch::stable::detail::from(dtype));
  AtenTensorHandle ret = nullptr;
  STD_TORCH_CHECK(aoti_torch_empty_strided(static_cast<int64_t>(N), sizes, strides, shim_dtype, device_type,
                                           device_index, &ret) == AOTI_TORCH_SUCCESS,
                  "[RuntimeError] could not allocate a tensor of shape ", fmt_sizes(sizes));
  return Tensor(ret);
#else
  return at::empty_strided(sizes, strides, like.options().dtype(dtype));
#endif
}

// A new uninitialised contiguous tensor of the given sizes and dtype on like's device.
template <size_t N>
inline Tensor alloc_empty(const int64_t (&sizes)[N], ScalarType dtype, const Tensor& like) {
  int64_t strides[N];
  int64_t s = 1;
  for (size_t i = N; i-- > 0;) {
    strides[i] = s;
    s *= sizes[i] > 1 ? sizes[i] : 1;
  }
  return alloc_strided(sizes, strides, dtype, like);
}

template <size_t N>
inline Tensor alloc_zeros(const int64_t (&sizes)[N], ScalarType dtype, const Tensor& like) {
  Tensor t = alloc_empty(sizes, dtype, like);
  zero_fill(t);
  return t;
}

inline Tensor transposed(const Tensor& t, int64_t a, int64_t b) {
#if CAUSAL_CONV1D_STABLE_ABI
  return torch::stable::transpose(t, a, b);
#else
  return t.transpose(a, b);
#endif
}

inline Tensor narrowed(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
#if CAUSAL_CONV1D_STABLE_ABI
  Tensor self = t;  // stable narrow takes a non-const reference; the handle is shared
  return torch::stable::narrow(self, dim, start, length);
#else
  return t.narrow(dim, start, length);
#endif
}

inline void copy_into(Tensor& dst, const Tensor& src) {
#if CAUSAL_CONV1D_STABLE_ABI
  torch::stable::copy_(dst, src);
#else
  dst.copy_(src);
#endif
}

inline void zero_fill(Tensor& t) {  // declared above
#if CAUSAL_CONV1D_STABLE_ABI
  torch::stable::zero_(t);
#else
  t.zero_();
#endif
}

// t itself when it is contiguous already (no dispatcher call: the stable contiguous() is one).
inline Tensor as_contiguous(const Tensor& t) {
#if CAUSAL_CONV1D_STABLE_ABI
  if (t.is_contiguous()) return t;
  return torch::stable::contiguous(t);
#else
  return t.contiguous();
#endif
}

// t converted to dtype (t itself when it has that dtype already).
inline Tensor to_dtype(const Tensor& t, ScalarType dtype) {
  if (t.scalar_type() == dtype) return t;
#if CAUSAL_CONV1D_STABLE_ABI
  return torch::stable::to(t, dtype);
#else
  return t.to(dtype);
#endif
}

// The base address and size in bytes of t's storage (for memory hints on fresh outputs).
inline std::pair<void*, int64_t> storage_span(const Tensor& t) {
#if CAUSAL_CONV1D_STABLE_ABI
  void* data = nullptr;
  int64_t nbytes = 0;
  STD_TORCH_CHECK(aoti_torch_get_data_ptr(t.get(), &data) == AOTI_TORCH_SUCCESS, "data_ptr");
  STD_TORCH_CHECK(aoti_torch_get_storage_size(t.get(), &nbytes) == AOTI_TORCH_SUCCESS, "storage size");
  const int64_t offset_bytes = t.storage_offset() * static_cast<int64_t>(t.element_size());
  return {static_cast<char*>(data) - offset_bytes, nbytes};
#else
  return {const_cast<void*>(static_cast<const void*>(t.storage().data())), static_cast<int64_t>(t.storage().nbytes())};
#endif
}

// ---------------------------------------------------------------------------------------------
// Threads: torch's intra-op pool and thread count (torch.set_num_threads) in both builds.

template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
#if CAUSAL_CONV1D_STABLE_ABI
  torch::stable::parallel_for(begin, end, grain, f);
#else
  at::parallel_for(begin, end, grain, f);
#endif
}

}  // namespace causal_conv1d
