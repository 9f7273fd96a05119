"""The CUDA kernel paths of the serving ops (docs/serving.md; csrc/cuda/varlen_*.cu, spec_update_*.cu).

Every case runs on CUDA with its fast path on (asserting, through ``_last_kernel_path``, which path
ran: the fast one where eligible, the general one otherwise), again with the fast paths forced off
(the general kernels), and through the CPU kernels on copies of the same inputs. The two CUDA runs
must agree bit for bit (the fast kernels accumulate in the general kernels' order), the caches of
all three bit for bit (states are copies of inputs), and the outputs of CUDA and CPU within rounding.
The CPU kernels are checked against a float64 reference in tests/causal_conv1d; here they are the
reference the CUDA kernels must reproduce, prefix caching, ragged and tree-draft decode included.
The last tests capture both ops in a CUDA graph and replay it on new inputs.
"""

from __future__ import annotations

import itertools
import random

import pytest
import torch
from gpu_ops import kernel_path, path_ran

pytestmark = pytest.mark.gpu

DT = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TOL = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
FAST_PATHS = ("varlen_cl_fast", "varlen_cf_fast", "spec_update_fast")
PAD = -1


def close(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> bool:
    a, b = a.double().cpu(), b.double().cpu()
    return bool(((a - b).abs() <= TOL[dtype] * (1 + b.abs())).all())


def varlen_args(ops_args: dict) -> tuple:
    a = ops_args
    return (
        a["x"],
        a["w"],
        a["b"],
        a["cs"],
        a["q"],
        a["ci"],
        a["hi"],
        a["silu"],
        PAD,
        a.get("first"),
        a.get("last"),
        a.get("init"),
        a.get("comp"),
        a.get("block", 0),
    )


def to(a: dict, device: str) -> dict:
    out = {}
    for k, v in a.items():
        if isinstance(v, torch.Tensor):
            out[k] = torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=device).copy_(v)
        else:
            out[k] = v
    return out


def run_three(ops, fn, args: dict, state_key: str, expect: str, op: str):
    """(cuda fast-on result, its state), with the general-path run and the CPU run checked against it."""
    a_fast, a_gen, a_cpu = to(args, "cuda"), to(args, "cuda"), to(args, "cpu")
    out_fast = fn(a_fast)
    msg = path_ran(ops, op, expect)
    assert not msg, msg
    with (
        kernel_path(ops, "varlen_cl_fast", 0),
        kernel_path(ops, "varlen_cf_fast", 0),
        kernel_path(ops, "spec_update_fast", 0),
        kernel_path(ops, "spec_update_decode", 0),
    ):
        out_gen = fn(a_gen)
        general = "varlen_general" if op == "varlen_fwd" else "spec_update_general"
        msg = path_ran(ops, op, general)
        assert not msg, msg
    out_cpu = fn(a_cpu)
    torch.cuda.synchronize()
    if expect == "spec_update_decode":  # the update op's kernels: another summation order
        assert close(out_fast, out_gen, args["x"].dtype), f"{expect} and the general path differ"
    else:
        assert torch.equal(out_fast, out_gen), f"{expect} and the general path differ"
    assert torch.equal(a_fast[state_key], a_gen[state_key]), f"{expect} and the general path wrote different caches"
    assert torch.equal(a_fast[state_key].cpu(), a_cpu[state_key]), "the CUDA and CPU caches differ"
    # outputs are rounded to the cache's dtype first: the coarser of the two sets the tolerance
    coarse = max(args["x"].dtype, args[state_key].dtype, key=lambda d: TOL[d])
    assert close(out_fast, out_cpu, coarse), "CUDA and CPU outputs differ"
    assert out_fast.stride() == out_cpu.stride()
    return out_fast, a_fast[state_key]


def prefill_case(
    dtype, W, layout, st_layout, S, seed, apc=False, block=8, st_dtype=None, lens=None, dim=None, bad_line=False
):
    g = random.Random(seed)
    torch.manual_seed(seed)
    kC = 16 // torch.empty((), dtype=dtype).element_size()
    D = dim or kC * g.choice([4, 33, 130])
    if lens is None:
        lens = [g.choice([0, 1, 2, 3, 4, 5, 9, 17, 64, 65, 200, 333]) for _ in range(g.randint(3, 9))]
    B = len(lens)
    q0 = g.choice([0, 0, 3])  # tokens before the first request
    q = torch.tensor([q0] + [q0 + sum(lens[: i + 1]) for i in range(B)], dtype=torch.int32)
    T = int(q[-1]) + g.choice([0, 5])  # a padded tail
    if layout == "cf":  # rows of 16-byte multiples (x's and the contiguous out's): the fast path's condition
        T = (T + kC - 1) // kC * kC
    x = (
        torch.randn(D, T, dtype=dtype)
        if layout == "cf"
        else torch.randn(T, D + 2 * kC, dtype=dtype)[:, kC : kC + D].t()
    )
    w = torch.randn(D, W, dtype=dtype) / W**0.5
    b = torch.randn(D, dtype=dtype)
    cols = 2 + max(3 * block + 2 + n for n in lens) // block + 2  # prefix caching: blocks per request
    lines = B * cols + 2 if apc else 3 * B + 2
    st_dt = st_dtype or dtype
    cs = (
        torch.randn(lines, D, S, dtype=st_dt)
        if st_layout == "bds"
        else torch.randn(lines, S, D, dtype=st_dt).transpose(1, 2)
    )
    perm = torch.randperm(lines).to(torch.int32)
    hi = torch.tensor([g.random() < 0.6 for _ in range(B)])
    args = {"x": x, "w": w, "b": b, "cs": cs, "q": q, "hi": hi, "silu": bool(seed % 2)}
    if not apc:
        ci = perm[:B].clone()
        ci[g.randrange(B)] = PAD
        if bad_line and B > 3:
            ci[g.randrange(B)] = lines + 7  # out of range: skipped on CUDA like a pad slot (CPU: refused)
        args["ci"] = torch.cat([ci, torch.full((3,), 5, dtype=torch.int32)])  # longer than the batch
        return args
    # prefix caching: request i continues from p0 tokens; its blocks of `block` tokens in row i
    comp = torch.tensor([g.choice([0, 1, block - 1, block, 3 * block + 2]) for _ in range(B)], dtype=torch.int32)
    table = perm[: B * cols].view(B, cols).clone()
    init = torch.zeros(B, dtype=torch.int32)
    first = torch.ones(B, dtype=torch.int32)
    last = torch.ones(B, dtype=torch.int32)
    for i in range(B):
        p0, n = int(comp[i]), lens[i]
        k = ((p0 + n - 1) // block - p0 // block) if n > 0 else 0
        last[i] = 1 + k
    args.update(ci=table, init=init, first=first, last=last, comp=comp, block=block)
    return args


def varlen_call(ops):
    return lambda a: ops.varlen_fwd(*varlen_args(a))


PREFILL = [
    # (dtype, W, x layout, state layout, S, expected path)
    *[(dt, W, "cl", "bsd", S, "varlen_cl_fast") for dt, W, S in itertools.product(DT, (2, 3, 4), (3, 6))],
    *[(dt, W, "cf", "bsd", 3, "varlen_cf_fast") for dt, W in itertools.product(DT, (2, 4))],
    ("bf16", 4, "cl", "bds", 5, "varlen_cl_fast"),  # a (lines, dim, S) cache: per-element cache accesses
    ("fp16", 4, "cf", "bds", 4, "varlen_cf_fast"),
    ("bf16", 5, "cl", "bsd", 6, "varlen_general"),  # widths 5-8: the general kernel
    ("fp32", 8, "cf", "bds", 9, "varlen_general"),
]


@pytest.mark.parametrize("case", PREFILL, ids=lambda c: "-".join(map(str, c)))
def test_prefill_paths(ops, case) -> None:
    dts, W, layout, st_layout, S, expect = case
    for seed in range(3):
        args = prefill_case(DT[dts], W, layout, st_layout, S, seed * 7 + W, bad_line=True)
        ci = args["ci"]
        bad = ci[: len(args["q"]) - 1] >= args["cs"].shape[0]
        cpu_args = dict(args)
        if bool(bad.any()):  # the CPU kernels refuse it; CUDA skips it like a pad slot
            cpu_args["ci"] = torch.where(bad, torch.tensor(PAD, dtype=torch.int32), ci[: len(bad)])
            cpu_args["ci"] = torch.cat([cpu_args["ci"], ci[len(bad) :]])
            a_bad, a_pad = to(args, "cuda"), to(cpu_args, "cuda")
            out_cuda = ops.varlen_fwd(*varlen_args(a_bad))
            out_ref = ops.varlen_fwd(*varlen_args(a_pad))
            assert torch.equal(out_cuda, out_ref), "an out-of-range line is not skipped like pad_slot_id"
            assert torch.equal(a_bad["cs"], a_pad["cs"]), "an out-of-range line changed the cache"
        run_three(ops, varlen_call(ops), cpu_args, "cs", expect, "varlen_fwd")


@pytest.mark.parametrize(
    "dts,layout,expect",
    [
        ("bf16", "cl", "varlen_cl_fast"),
        ("fp32", "cl", "varlen_cl_fast"),
        ("bf16", "cf", "varlen_general"),
        ("fp16", "cl", "varlen_cl_fast"),
    ],
)
@pytest.mark.parametrize("block", [8, 16])
def test_prefill_prefix_caching(ops, dts, layout, expect, block) -> None:
    for seed in range(3):
        args = prefill_case(DT[dts], 4, layout, "bsd", 3, 100 + seed, apc=True, block=block)
        run_three(ops, varlen_call(ops), args, "cs", expect, "varlen_fwd")


@pytest.mark.parametrize("x_dt,st_dt", [("bf16", "fp32"), ("fp32", "bf16"), ("fp16", "bf16")])
def test_prefill_state_dtype(ops, x_dt, st_dt) -> None:
    args = prefill_case(DT[x_dt], 4, "cl", "bsd", 3, 5, st_dtype=DT[st_dt])
    run_three(ops, varlen_call(ops), args, "cs", "varlen_general", "varlen_fwd")


def test_prefill_long_requests(ops) -> None:
    """Requests of thousands of tokens over many chunks (and a grid of more than one chunk size)."""
    for layout, expect in (("cl", "varlen_cl_fast"), ("cf", "varlen_cf_fast")):
        args = prefill_case(torch.bfloat16, 4, layout, "bsd", 3, 11, lens=[3000, 1, 4097, 2, 0, 2500], dim=1024)
        run_three(ops, varlen_call(ops), args, "cs", expect, "varlen_fwd")


def spec_case(dtype, W, mode, seed, L=4, ragged=False, apc=False, tree=False, st_dtype=None, layout="cl", extra_s=3):
    g = random.Random(seed)
    torch.manual_seed(seed)
    kC = 16 // torch.empty((), dtype=dtype).element_size()
    D = kC * g.choice([4, 33])
    B = g.choice([1, 5, 9])
    H = W - 1
    spec = mode == "spec"
    S = H - 1 + L + (g.choice([0, 2]) if spec else extra_s)
    lines = 4 * B + 3
    st_dt = st_dtype or dtype
    cs = torch.randn(lines, S, D, dtype=st_dt).transpose(1, 2)
    perm = torch.randperm(lines).to(torch.int32)
    args = {
        "w": torch.randn(D, W, dtype=dtype) / W**0.5,
        "b": torch.randn(D, dtype=dtype),
        "cs": cs,
        "silu": bool(seed % 2),
        "L": L,
    }
    if ragged:
        n = [g.randint(0, L) for _ in range(B)]
        q = torch.tensor([0] + [sum(n[: i + 1]) for i in range(B)], dtype=torch.int32)
        args["x"] = torch.randn(int(q[-1]) + 2, D, dtype=dtype)
        args["q"] = q
    elif L == 1 and not spec:
        args["x"] = torch.randn(B, D, dtype=dtype)
    elif layout == "cl":
        args["x"] = torch.randn(B, L, D, dtype=dtype).transpose(1, 2)
    else:
        args["x"] = torch.randn(B, D, L, dtype=dtype)
    if apc:
        cols = 4
        args["ci"] = perm[: B * cols].view(B, cols).clone()
        args["init"] = torch.tensor([g.randrange(cols) for _ in range(B)], dtype=torch.int32)
        args["last"] = torch.tensor([g.randrange(cols) for _ in range(B)], dtype=torch.int32)
    else:
        ci = perm[:B].clone()
        if B > 1:
            ci[g.randrange(B)] = PAD
        args["ci"] = torch.cat([ci, torch.full((2,), 3, dtype=torch.int32)])  # longer than the batch
    if spec:
        args["na"] = torch.tensor([g.randint(1, L) for _ in range(B)] + [1, 1], dtype=torch.int32)
    if tree:
        par = torch.zeros(B, L, dtype=torch.int32)
        for b in range(B):
            for j in range(1, L):
                par[b, j] = g.randrange(j)
        args["par"] = par
    return args


def spec_call(ops):
    def call(a):
        ragged = "q" in a
        return ops.spec_update(
            a["x"],
            a["cs"],
            a["w"],
            a["b"],
            a["silu"],
            a["ci"],
            a.get("na"),
            PAD,
            a.get("q"),
            a["L"] if ragged else -1,
            a.get("last"),
            a.get("init"),
            a.get("par"),
        )

    return call


SPEC = [
    # (dtype, W, mode, L, options, expected path)
    *[(dt, W, "spec", 4, {}, "spec_update_fast") for dt, W in itertools.product(DT, (2, 3, 4))],
    *[(dt, 4, "plain", L, {}, "spec_update_fast") for dt, L in itertools.product(DT, (1, 2))],
    # state_len == width - 1: the plain step runs on the update op's kernels
    *[(dt, W, "plain", 1, {"extra_s": 0}, "spec_update_decode") for dt, W in itertools.product(DT, (2, 4))],
    ("bf16", 4, "plain", 3, {"extra_s": -2}, "spec_update_decode"),
    ("bf16", 4, "spec", 5, {"ragged": True}, "spec_update_fast"),
    ("fp32", 3, "plain", 3, {"ragged": True}, "spec_update_fast"),
    ("bf16", 4, "spec", 4, {"apc": True}, "spec_update_fast"),
    ("fp16", 4, "plain", 1, {"apc": True}, "spec_update_fast"),
    ("bf16", 4, "spec", 4, {"tree": True}, "spec_update_general"),
    ("fp32", 3, "spec", 6, {"tree": True, "ragged": True}, "spec_update_general"),
    ("bf16", 4, "spec", 4, {"st_dtype": torch.float32}, "spec_update_general"),
    ("bf16", 4, "spec", 4, {"layout": "cf"}, "spec_update_general"),
    ("fp32", 6, "spec", 3, {}, "spec_update_general"),
    ("bf16", 8, "plain", 2, {}, "spec_update_general"),
]


@pytest.mark.parametrize(
    "case", SPEC, ids=lambda c: "-".join(str(v) for v in c[:4]) + "-" + "-".join(f"{k}{v}" for k, v in c[4].items())
)
def test_spec_paths(ops, case) -> None:
    dts, W, mode, L, opts, expect = case
    for seed in range(3):
        args = spec_case(DT[dts], W, mode, 31 * seed + W + L, L=L, **opts)
        run_three(ops, spec_call(ops), args, "cs", expect, "spec_update")


def test_chain_prefill_spec_decode(ops) -> None:
    """prefill -> speculative step (a = 1 fresh from the prefill) -> plain decode -> prefill again, on one
    cache with state_len > width - 1, the same on CUDA and CPU."""
    torch.manual_seed(3)
    D, W, K, dtype = 256, 4, 3, torch.bfloat16
    S = W - 1 + K
    lines, B = 12, 4
    res = {}
    for dev in ("cuda", "cpu"):
        g = torch.Generator().manual_seed(5)
        w = (torch.randn(D, W, generator=g) / 2).to(dtype).to(dev)
        b = torch.randn(D, generator=g).to(dtype).to(dev)
        cs = torch.randn(lines, S, D, generator=g).to(dtype).to(dev).transpose(1, 2)
        ci = torch.tensor([7, 2, 9, 4], dtype=torch.int32, device=dev)
        lens = [5, 1, 40, 2]
        q = torch.tensor([0, 5, 6, 46, 48], dtype=torch.int32, device=dev)
        x = torch.randn(48, D, generator=g).to(dtype).to(dev).t()
        outs = [ops.varlen_fwd(x, w, b, cs, q, ci, None, True, PAD, None, None, None, None, 0)]
        xs = torch.randn(B, 1 + K, D, generator=g).to(dtype).to(dev).transpose(1, 2)
        na = torch.ones(B, dtype=torch.int32, device=dev)
        outs.append(ops.spec_update(xs, cs, w, b, True, ci, na, PAD, None, -1, None, None, None))
        na = torch.tensor([2, 4, 1, 3], dtype=torch.int32, device=dev)
        xs2 = torch.randn(B, 1 + K, D, generator=g).to(dtype).to(dev).transpose(1, 2)
        outs.append(ops.spec_update(xs2, cs, w, b, True, ci, na, PAD, None, -1, None, None, None))
        x2 = torch.randn(sum(lens), D, generator=g).to(dtype).to(dev).t()
        hi = torch.ones(B, dtype=torch.bool, device=dev)
        outs.append(ops.varlen_fwd(x2, w, b, cs, q, ci, hi, True, PAD, None, None, None, None, 0))
        res[dev] = (outs, cs)
    for got, want in zip(res["cuda"][0], res["cpu"][0]):
        assert close(got, want, dtype)
    assert torch.equal(res["cuda"][1].cpu(), res["cpu"][1])


def test_graph_capture(ops) -> None:
    """Both ops captured in one CUDA graph; replays on new inputs give the eager results."""
    args_p = to(prefill_case(torch.bfloat16, 4, "cl", "bsd", 3, 2), "cuda")
    args_s = to(spec_case(torch.bfloat16, 4, "spec", 9, L=4), "cuda")
    call_p, call_s = varlen_call(ops), spec_call(ops)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        call_p(to(args_p, "cuda"))
        call_s(to(args_s, "cuda"))
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out_p = call_p(args_p)
        out_s = call_s(args_s)
    for _ in range(2):
        for a in (args_p, args_s):
            a["x"].copy_(torch.randn_like(a["x"]))
            a["cs"].copy_(torch.randn_like(a["cs"]))
        ref_p, ref_s = to(args_p, "cuda"), to(args_s, "cuda")
        want_p, want_s = call_p(ref_p), call_s(ref_s)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out_p, want_p) and torch.equal(out_s, want_s)
        assert torch.equal(args_p["cs"], ref_p["cs"]) and torch.equal(args_s["cs"], ref_s["cs"])
