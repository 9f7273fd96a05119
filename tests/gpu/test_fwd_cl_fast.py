"""The fast channel-last forward (csrc/cuda/fwd_cl_fast.cu; on unless CAUSAL_CONV1D_FWD_CL_FAST=0).

The cases run with the path forced on in process (``kernel_path``, whatever the environment says)
and each asserts which path ran (``_last_kernel_path``). A thread of the kernel owns one
4-byte word of a token (2 channels of fp16 / bf16, 1 of fp32) and walks a chunk of tokens (8 to 128,
chosen from the grid size) with the width-1 tokens before the chunk as its halo. The cases cover:
x views with a token pitch larger than dim (a slice of a wider projection, also at a non-zero
channel offset), odd lengths, lengths shorter than a chunk or than width-1, lengths that end inside
a chunk and inside a load group, dims of 1-3 words and dims that are not a multiple of a block's
128 words (warps that straddle two chunks), widths 2-4, fp32 / fp16 / bf16 x with weights of x's
dtype, fp32 or bf16, bias or not, silu or not, initial_states (channel-last and contiguous) and
final_states (bit for bit). The ``BIG`` cases are sized so that an H200 (132 SMs) runs chunks of
16, 32, 64 and 128 tokens. ``FALLBACK`` cases are not eligible (odd dim, a 2-byte-aligned base or an
odd token pitch for 16-bit x, width 5, seq_idx): the launcher must decline them (a 4-byte access
there would fault) and the general kernel must give the right answer. ``check_path()`` asserts
through the profiler's kernel names too that the fast kernel runs exactly for the eligible cases, and
``check_disabled()`` (the path forced off) that the switch turns it off.

compute-sanitizer over the small cases:
    compute-sanitizer --tool memcheck --error-exitcode 1 python tests/gpu/gpu_ops.py test_fwd_cl_fast 1048576
"""

from __future__ import annotations

import pytest
from gpu_ops import fast_cases, kernel_path, path_ran

pytestmark = pytest.mark.gpu

PATH = "fwd_cl_fast"
FAST_KERNEL = "fwd_cl_fast_kernel"

# Layouts of x (B, D, L) with x.stride(1) == 1:
#   dense:  randn(B, L, D).transpose(1, 2)
#   pitch:  randn(B, L, D + 6)[:, :, :D]           token pitch > dim
#   offset: randn(B, L, D + 8)[:, :, 4 : 4 + D]    pitch > dim and a base 8 / 16 bytes in
#   mamba:  randn(B, L, 2 * D + 16)[:, :, D : 2 * D] (Mamba2's xBC slice of the in-projection)
# and, not eligible for 16-bit x (FALLBACK only):
#   odd_pitch: randn(B, L, D + 1)[:, :, :D]; base2: randn(B, L, D + 2)[:, :, 1 : 1 + D]
LAYOUTS = ["dense", "pitch", "offset", "mamba"]

# (B, D, L): D = 1..3 words and D % 256 != 0 (bf16) / D % 128 != 0 (fp32); L = 1, 2 (< width-1 for
# width 4), odd, < one load group (8), inside a group, several chunks ending mid-chunk.
SMALL_SHAPES = [
    (1, 2, 1),
    (2, 2, 5),
    (3, 6, 2),
    (2, 6, 37),
    (2, 70, 8),
    (1, 130, 203),
    (2, 300, 64),
    (3, 258, 1000),
    (2, 64, 129),
]

# (dtype, weight kind, width, B, D, L, layout): on a 132-SM H200 the launcher picks chunks of
# 128 (last chunk 37 tokens), 64, 32, 128 (4200 fp32 words: warps straddle chunks; last chunk 57
# tokens) and 16 tokens; the last pairs of each grid are done in halves (drain_split), so the
# 37-token chunk is a half of 37 tokens and one past the row.
BIG = [
    ("bf16", "same", 4, 2, 4096, 12709, "dense"),
    ("bf16", "fp32", 3, 1, 8192, 8000, "pitch"),
    ("fp16", "same", 2, 1, 4096, 8191, "offset"),
    ("fp32", "same", 4, 1, 4200, 12345, "pitch"),
    ("bf16", "same", 4, 4, 1536, 2100, "mamba"),
]

# Not eligible: (dtype, width, B, D, L, layout, seq_idx)
FALLBACK = [
    ("bf16", 4, 2, 37, 100, "dense", False),  # odd dim
    ("fp16", 3, 2, 64, 100, "base2", False),  # base 2-byte aligned
    ("bf16", 4, 2, 64, 99, "odd_pitch", False),  # odd token pitch
    ("bf16", 5, 2, 64, 100, "dense", False),  # width 5
    ("fp32", 4, 2, 64, 100, "dense", True),  # seq_idx
]


def drain_split(dts: str, B: int, D: int, L: int, sms: int) -> tuple[int, int]:
    """(pairs, tail pairs) of fwd_cl_fast.cu's geometry(): (batch, chunk) pairs of the grid, and how
    many of the last are done in halves (a wave of resident threads' worth, pieces of at least
    one 8-token load group)."""
    nwords = D if dts == "fp32" else D // 2
    resident = sms * 8 * 128

    def threads(c: int) -> int:
        return B * -(-L // c) * nwords

    chunk = 128
    while chunk > 8 and threads(chunk) < 3 * resident:
        chunk //= 2
    pairs = B * -(-L // chunk)
    if chunk // 2 < 8:
        return pairs, 0
    return pairs, min(pairs, -(-resident // (2 * nwords)))


def cases() -> list[tuple]:
    """(dtype, weight kind, width, B, D, L, layout, states, init layout, silu, bias).

    states: 0 none, 1 final_states only, 2 initial_states only, 3 both.
    """

    def options(i: int) -> tuple:  # layout, states, init layout, silu, bias
        return LAYOUTS[i % 4], (i // 4) % 4, "cl" if i % 3 else "cf", i % 5 != 2, i % 6 != 1

    out = fast_cases(SMALL_SHAPES, options, ["same", "fp32", "bf16"])
    for i, (dts, wk, W, B, D, L, layout) in enumerate(BIG):
        out.append((dts, wk, W, B, D, L, layout, 3 if i % 2 == 0 else 1, "cl", i != 1, i != 2))
    return out


def _dtype(dts: str):
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dts]


def make_x(B: int, D: int, L: int, dtype, layout: str, g):
    import torch

    def r(P):
        return torch.randn(B, L, P, device="cuda", dtype=dtype, generator=g)

    if layout == "dense":
        t = r(D)
    elif layout == "pitch":
        t = r(D + 6)[:, :, :D]
    elif layout == "offset":
        t = r(D + 8)[:, :, 4 : 4 + D]
    elif layout == "mamba":
        t = r(2 * D + 16)[:, :, D : 2 * D]
    elif layout == "odd_pitch":
        t = r(D + 1)[:, :, :D]
    elif layout == "base2":
        t = r(D + 2)[:, :, 1 : 1 + D]
    else:
        raise ValueError(layout)
    x = t.transpose(1, 2)
    assert x.stride(1) == 1 and x.stride(2) != 1, "the cases must be channel-last views"
    return x


def _check(out, fin, ref, ref_fin, dtype, wd, want_final: bool) -> list[str]:
    import torch

    from causal_conv1d._reference import rel_tol

    msg = []
    tol = rel_tol(dtype, wd)
    bad = ((out.double() - ref).abs() > tol * (1.0 + ref.abs())).nonzero()
    if bad.numel():
        i = tuple(bad[0].tolist())
        msg.append(f"{bad.shape[0]} bad outputs, first at (b, d, l) = {i}: got {out[i].item()}, want {ref[i].item()}")
    want_fin = ref_fin.to(dtype)
    if want_final and fin.shape != want_fin.shape:
        msg.append(f"final_states shape {tuple(fin.shape)}, want {tuple(want_fin.shape)}")
    elif want_final and not torch.equal(fin, want_fin):
        diff = (fin != want_fin).nonzero()
        i = tuple(diff[0].tolist())
        msg.append(
            f"final_states differ from the last width-1 inputs at {diff.shape[0]} elements, first at (b, d, j) = "
            f"{i}: got {fin[i].item()}, want {want_fin[i].item()}"
        )
    if not want_final and fin.numel() != 0:
        msg.append(f"final_states should be empty, got shape {tuple(fin.shape)}")
    if out.stride(1) != 1:
        msg.append(f"out is not channel-last: strides {out.stride()}")
    return msg


def run_cases(max_elems: int = 0) -> int:
    """Run every case on the GPU (only those with B * D * L <= max_elems when it is positive: the
    small ones, for compute-sanitizer); print failures; return the number failed."""
    import torch
    from gpu_ops import load_ops

    from causal_conv1d._reference import fwd_ref

    ops = load_ops()
    failed = 0
    all_cases = cases()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    split = [drain_split(c[0], c[3], c[4], c[5], sms) for c in BIG]
    if not any(0 < tail < pairs for pairs, tail in split):
        failed += 1
        print(f"FAIL none of the BIG cases has both whole chunks and halves at the end of its grid: {split}")
    for n, (dts, wk, W, B, D, L, layout, states, init_layout, silu, bias) in enumerate(all_cases):
        if max_elems > 0 and B * D * L > max_elems:
            continue
        dtype = _dtype(dts)
        wd = dtype if wk == "same" else _dtype(wk)
        g = torch.Generator(device="cuda").manual_seed(n)
        x = make_x(B, D, L, dtype, layout, g)
        w = (torch.randn(D, W, device="cuda", generator=g) / W**0.5).to(wd)
        b = torch.randn(D, device="cuda", generator=g).to(wd) if bias else None
        init = None
        if states >= 2:
            if init_layout == "cl":
                init = torch.randn(B, W - 1, D, device="cuda", dtype=dtype, generator=g).transpose(1, 2)
            else:
                init = torch.randn(B, D, W - 1, device="cuda", dtype=dtype, generator=g)
        want_final = states in (1, 3)
        out, fin = ops.fwd(x, w, b, None, init, want_final, silu)
        ran = path_ran(ops, "fwd", PATH)
        ref, ref_fin = fwd_ref(x, w, b, initial_states=init, silu=silu)
        msg = ran + _check(out, fin, ref, ref_fin, dtype, wd, want_final)
        del ref, ref_fin
        if msg:
            failed += 1
            print(
                f"FAIL {dts} w={wk} W={W} B={B} D={D} L={L} layout={layout} states={states} init={init_layout} "
                f"silu={silu} bias={bias}: " + "; ".join(msg)
            )
    for n, (dts, W, B, D, L, layout, use_seq) in enumerate(FALLBACK):
        dtype = _dtype(dts)
        g = torch.Generator(device="cuda").manual_seed(10_000 + n)
        x = make_x(B, D, L, dtype, layout, g)
        w = (torch.randn(D, W, device="cuda", generator=g) / W**0.5).to(dtype)
        b = torch.randn(D, device="cuda", generator=g).to(dtype)
        seq = None
        if use_seq:
            seq = torch.cat([torch.zeros(B, L // 3), torch.ones(B, L - L // 3)], dim=1).to("cuda", torch.int32)
        want_final = not use_seq  # return_final_states is refused with seq_idx
        out, fin = ops.fwd(x, w, b, seq, None, want_final, True)
        ran = path_ran(ops, "fwd", "fwd_general")
        ref, ref_fin = fwd_ref(x, w, b, seq_idx=seq, silu=True)
        msg = ran + _check(out, fin, ref, ref_fin, dtype, dtype, want_final)
        if msg:
            failed += 1
            print(f"FAIL fallback {dts} W={W} B={B} D={D} L={L} layout={layout} seq_idx={use_seq}: " + "; ".join(msg))
    torch.cuda.synchronize()
    total = len(all_cases) + len(FALLBACK)
    print(f"{total - failed}/{total} cases passed")
    return failed


def _kernels(fn) -> tuple[list[str], str]:
    """The CUDA kernels fn launched (the profiler's names) and the kernel path the op recorded."""
    from gpu_ops import kernels_of, load_ops

    names = kernels_of(fn)
    return names, load_ops()._last_kernel_path("fwd")


def _path_inputs():
    """(name, eligible, thunk) for the path checks."""
    import torch
    from gpu_ops import load_ops

    ops = load_ops()
    g = torch.Generator(device="cuda").manual_seed(7)
    items = []

    def add(name, eligible, dts, W, D, L, layout, seq=False, init=False):
        dtype = _dtype(dts)
        x = make_x(2, D, L, dtype, layout, g)
        w = torch.randn(D, W, device="cuda", generator=g).to(dtype)
        b = torch.randn(D, device="cuda", generator=g).to(dtype)
        s = torch.zeros(2, L, device="cuda", dtype=torch.int32) if seq else None
        st = torch.randn(2, W - 1, D, device="cuda", dtype=dtype, generator=g).transpose(1, 2) if init else None
        items.append((name, eligible, lambda: ops.fwd(x, w, b, s, st, not seq, True)))

    add("bf16 dense", True, "bf16", 4, 256, 300, "dense")
    add("bf16 mamba slice + initial_states", True, "bf16", 3, 64, 300, "mamba", init=True)
    add("fp16 D=2", True, "fp16", 2, 2, 50, "offset")
    add("fp32 odd D", True, "fp32", 4, 37, 50, "pitch")
    add("bf16 odd D", False, "bf16", 4, 37, 50, "dense")
    add("fp16 2-byte aligned base", False, "fp16", 4, 64, 50, "base2")
    add("bf16 odd pitch", False, "bf16", 4, 64, 50, "odd_pitch")
    add("bf16 width 5", False, "bf16", 5, 64, 50, "dense")
    add("fp32 seq_idx", False, "fp32", 4, 64, 50, "dense", seq=True)
    return items


def check_path() -> int:
    """The fast kernel runs for the eligible cases and only for them (recorded path and profiler).

    Returns the number of failed checks; 0 (with a note) when the profiler records no kernels
    (no CUPTI), since the check cannot be made then.
    """
    items = _path_inputs()
    runs = [(name, eligible, *_kernels(fn)) for name, eligible, fn in items]
    failed = 0
    for name, eligible, _, path in runs:
        if path != (PATH if eligible else "fwd_general"):
            failed += 1
            print(f"FAIL recorded path: {name}: {'eligible' if eligible else 'not eligible'} but ran {path}")
    if not any(k for _, _, k, _ in runs):
        print("note: the profiler recorded no CUDA kernels (no CUPTI?); profiler check skipped")
        return failed
    for name, eligible, ks, _ in runs:
        ran = any(FAST_KERNEL in k for k in ks)
        if ran != eligible:
            failed += 1
            print(f"FAIL path: {name}: {'eligible' if eligible else 'not eligible'} but fast kernel ran={ran}: {ks}")
    print(f"path check: {len(runs) - failed}/{len(runs)} passed")
    return failed


def check_disabled() -> int:
    """With the path off: the fast kernel never runs (recorded path and profiler), results still right."""
    import torch

    from causal_conv1d._reference import fwd_ref

    items = _path_inputs()
    runs = [(name, *_kernels(fn)) for name, _, fn in items]
    failed = 0
    for name, ks, path in runs:
        if any(FAST_KERNEL in k for k in ks) or path != "fwd_general":
            failed += 1
            print(f"FAIL disabled: {name} ran path {path}, kernels {ks}")
    g = torch.Generator(device="cuda").manual_seed(3)
    x = make_x(2, 64, 100, torch.bfloat16, "pitch", g)
    w = torch.randn(64, 4, device="cuda", generator=g).to(torch.bfloat16)
    from gpu_ops import load_ops

    out, fin = load_ops().fwd(x, w, None, None, None, True, True)
    ref, ref_fin = fwd_ref(x, w, None, silu=True)
    msg = _check(out, fin, ref, ref_fin, torch.bfloat16, torch.bfloat16, True)
    if msg:
        failed += 1
        print("FAIL disabled: general kernel: " + "; ".join(msg))
    print(f"disabled check: {'passed' if failed == 0 else f'{failed} failed'}")
    return failed


def test_fwd_cl_fast_path(ops):
    with kernel_path(ops, PATH, 1):
        failed = run_cases() + check_path()
    assert failed == 0, f"{failed} fast-path cases failed (printed above)"


def test_fwd_cl_fast_disabled(ops):
    with kernel_path(ops, PATH, 0):
        failed = check_disabled()
    assert failed == 0, f"{failed} checks failed with {PATH} off (printed above)"
