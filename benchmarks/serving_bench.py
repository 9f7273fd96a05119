"""Serving benchmark: varlen prefill over a state cache and speculative decode, on a GPU.

    python benchmarks/serving_bench.py [--peer-vllm PATH/TO/vllm/model_executor/layers/mamba/ops/causal_conv1d.py]
                                       [--json OUT.json] [--dtype bf16] [--width 4]

Cases (dim 5376, width 4, bf16 by default):
  * prefill: 64 sequences of mixed lengths (seeded, 32768 tokens in all), initial states read from a
    state cache for about half of them, final states written back;
      - ours:   causal_conv1d_varlen_fn on the packed batch, x channel-last ((tokens, dim).T, what an
                engine holds) and channel-first ((dim, tokens) contiguous);
      - padded: our causal_conv1d_fn on the same sequences padded to the longest (64, dim, max_len),
                channel-last, with initial_states and return_final_states (the conv alone: the
                pad/gather/scatter an engine would add around it is not timed, so this is a lower
                bound for the padded path);
      - peer:   vLLM's Triton causal_conv1d_fn (only with --peer-vllm).
  * spec decode: batch 64, 4 draft tokens (seqlen 5), state cache of 256 lines, state_len width - 1 + 4,
    random conv_state_indices and num_accepted_tokens in [1, 5];
      - ours:   causal_conv1d_update_spec;
      - padded: the same semantics without the feature: gather each row's history window with torch
                indexing, causal_conv1d_fn with initial_states, scatter the new state back (all on
                the device, capturable);
      - plain:  our causal_conv1d_update (no roll-back: a lower bound, not the same semantics);
      - peer:   vLLM's Triton causal_conv1d_update (only with --peer-vllm).
Each variant is checked against our result before timing (peer and padded must agree with ours),
then timed eagerly (median over repeats of a back-to-back loop, µs per call) and as a CUDA-graph
replay of one call (median of replays, µs); a variant that cannot be captured says why.

The peer file is loaded from the path given (never copied here): its `vllm.*` imports are served by
small stand-ins (PAD_SLOT_ID = -1, triton / triton.language) when vLLM itself is not installed.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.util
import json
import logging
import random
import statistics
import sys
import types
from pathlib import Path
from typing import Any, Callable, Optional

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


# ---------------------------------------------------------------------------------------------
# timing


def time_eager(fn: Callable[[], Any], calls: int = 50, repeats: int = 7) -> float:
    """µs per call of a back-to-back loop, median over repeats."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    res = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        res.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(res)


def time_graph(fn: Callable[[], Any], replays: int = 50) -> float:
    """µs per replay of a CUDA graph holding one call, median of replays."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(5):
        g.replay()
    torch.cuda.synchronize()
    res = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        res.append(a.elapsed_time(b) * 1e3)
    return statistics.median(res)


CHECK_ONLY = False  # --check-only: run the correctness checks, time nothing (also on the CPU)


def measure(name: str, fn: Callable[[], Any]) -> dict:
    row: dict[str, Any] = {"variant": name}
    if CHECK_ONLY:
        fn()
        return {**row, "eager_us": None, "graph_us": None}
    try:
        row["eager_us"] = time_eager(fn)
    except Exception as exc:  # noqa: BLE001 - report and go on
        row["eager_us"] = None
        row["eager_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    try:
        row["graph_us"] = time_graph(fn)
    except Exception as exc:  # noqa: BLE001
        row["graph_us"] = None
        row["graph_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        torch.cuda.synchronize()
    return row


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a64, b64 = a.double(), b.double()
    den = b64.norm().item()
    return (a64 - b64).norm().item() / (den if den > 0 else 1.0)


# ---------------------------------------------------------------------------------------------
# peer


class _VllmStubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves any ``vllm.*`` module as a stand-in (when vLLM is not installed): PAD_SLOT_ID = -1,
    triton / tl, init_logger; an unknown attribute raises AttributeError naming it."""

    def __init__(self, triton: Any, tl: Any) -> None:
        self.attrs = {"PAD_SLOT_ID": -1, "triton": triton, "tl": tl, "init_logger": logging.getLogger}

    def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201
        if name == "vllm" or name.startswith("vllm."):
            return importlib.util.spec_from_loader(name, self, is_package=True)
        return None

    def create_module(self, spec):  # noqa: ANN001, ANN201
        mod = types.ModuleType(spec.name)
        mod.__path__ = []
        mod.__dict__.update(self.attrs)

        def missing(attr: str) -> Any:
            raise AttributeError(f"the vLLM stand-in has no {spec.name}.{attr} (install vLLM to run this peer file)")

        mod.__getattr__ = missing
        return mod

    def exec_module(self, module) -> None:  # noqa: ANN001
        pass


def load_vllm_peer(path: str) -> types.ModuleType:
    """vLLM's causal_conv1d.py as a module; stand-ins for its vllm.* imports when vLLM is absent."""
    import triton  # noqa: PLC0415  (the peer is Triton code)
    import triton.language as tl  # noqa: PLC0415

    try:
        import vllm  # noqa: F401, PLC0415
    except Exception:  # noqa: BLE001 - no vLLM: serve what the file imports
        sys.meta_path.insert(0, _VllmStubFinder(triton, tl))
    spec = importlib.util.spec_from_file_location("vllm_causal_conv1d_peer", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"--peer-vllm: cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------------------------
# cases


def mixed_lengths(n: int, total: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    raw = [rng.lognormvariate(0.0, 1.0) for _ in range(n)]
    lens = [max(1, int(r / sum(raw) * total)) for r in raw]
    lens[lens.index(max(lens))] += total - sum(lens)
    return lens


def prefill_case(args, ours, peer) -> list[dict]:
    from causal_conv1d import causal_conv1d_fn  # noqa: PLC0415

    dev, dt, D, W = args.device, DTYPES[args.dtype], args.dim, args.width
    lens = mixed_lengths(args.prefill_seqs, args.prefill_tokens, seed=15)
    B, T, maxlen = len(lens), sum(lens), max(lens)
    q = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device=dev)
    g = torch.Generator(device="cpu").manual_seed(0)
    x_cl = torch.randn(T, D, generator=g).to(dev, dt).t()  # (D, T), channel-last
    x_cf = x_cl.contiguous()
    w = (torch.randn(D, W, generator=g) / W**0.5).to(dev, dt)
    b = torch.randn(D, generator=g).to(dev, dt)
    lines = 2 * B
    cache0 = torch.randn(lines, W - 1, D, generator=g).to(dev, dt).transpose(1, 2)  # (lines, D, W-1), vLLM's layout
    ci = torch.randperm(lines, generator=g)[:B].to(torch.int32).to(dev)
    hi = (torch.rand(B, generator=g) < 0.5).to(dev)
    print(f"\n== prefill: {B} sequences, {T} tokens (max {maxlen}), dim {D}, width {W}, {args.dtype}")

    cache_a = cache0.clone()
    want = ours(x_cl, w, b, cache_a, q, ci, hi, activation="silu")
    # padded: (B, D, maxlen) channel-last, initial states gathered, final states returned
    x_pad = torch.zeros(B, maxlen, D, device=dev, dtype=dt)
    for i, n in enumerate(lens):
        x_pad[i, :n] = x_cl[:, int(q[i]) : int(q[i]) + n].t()
    x_pad = x_pad.transpose(1, 2)
    init = torch.where(hi[:, None, None], cache0[ci.long()], torch.zeros((), device=dev, dtype=dt))
    init = init.transpose(1, 2).contiguous().transpose(1, 2)  # channel-last states
    pad_out = causal_conv1d_fn(x_pad, w, b, initial_states=init, activation="silu")
    err_pad = max(rel_err(pad_out[i, :, :n], want[:, int(q[i]) : int(q[i]) + n]) for i, n in enumerate(lens))
    print(f"check: padded vs ours rel err {err_pad:.2e}")
    rows = []
    for name, x in (("ours varlen (x channel-last)", x_cl), ("ours varlen (x channel-first)", x_cf)):
        c = cache0.clone()
        got = ours(x, w, b, c, q, ci, hi, activation="silu")
        if rel_err(got, want) >= 1e-2:
            raise SystemExit(f"{name}: result differs from the channel-last run")
        rows.append(measure(name, lambda x=x, c=c: ours(x, w, b, c, q, ci, hi, activation="silu")))
    rows.append(
        measure(
            f"padded causal_conv1d_fn ({B}x{maxlen}, conv only)",
            lambda: causal_conv1d_fn(x_pad, w, b, initial_states=init, return_final_states=True, activation="silu"),
        )
    )
    if peer is not None:
        for lname, x in (("channel-last", x_cl), ("channel-first", x_cf)):
            name = f"vLLM Triton causal_conv1d_fn (x {lname})"
            try:
                c = cache0.clone()
                xp = x.clone()
                got = peer.causal_conv1d_fn(
                    xp,
                    w,
                    b,
                    conv_states=c,
                    query_start_loc=q,
                    cache_indices=ci,
                    has_initial_state=hi,
                    activation="silu",
                    pad_slot_id=-1,
                )
                err = rel_err(got, want)
                print(f"check: {name} vs ours rel err {err:.2e}")
                row = measure(
                    name,
                    lambda xp=xp, c=c: peer.causal_conv1d_fn(
                        xp,
                        w,
                        b,
                        conv_states=c,
                        query_start_loc=q,
                        cache_indices=ci,
                        has_initial_state=hi,
                        activation="silu",
                        pad_slot_id=-1,
                    ),
                )
                row["rel_err_vs_ours"] = err
            except Exception as exc:  # noqa: BLE001 - the peer's API differs across versions
                row = {"variant": name, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
            rows.append(row)
    return rows


def decode_case(args, ours, peer) -> list[dict]:
    from causal_conv1d import causal_conv1d_fn, causal_conv1d_update  # noqa: PLC0415

    dev, dt, D, W = args.device, DTYPES[args.dtype], args.dim, args.width
    B, drafts, lines = args.decode_batch, args.drafts, 4 * args.decode_batch
    L, S = 1 + drafts, W - 1 + drafts
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(B, D, L, generator=g).to(dev, dt)
    w = (torch.randn(D, W, generator=g) / W**0.5).to(dev, dt)
    b = torch.randn(D, generator=g).to(dev, dt)
    state0 = torch.randn(lines, S, D, generator=g).to(dev, dt).transpose(1, 2)  # (lines, D, S), vLLM's layout
    idx = torch.randperm(lines, generator=g)[:B].to(torch.int32).to(dev)
    nacc = torch.randint(1, L + 1, (B,), generator=g).to(torch.int32).to(dev)
    print(
        f"\n== speculative decode: batch {B}, {drafts} draft tokens (seqlen {L}), state_len {S}, dim {D}, width {W}, {args.dtype}"
    )
    s_ours = state0.clone()
    want = ours(x, s_ours, w, b, "silu", idx, nacc)
    il = idx.long()
    # the padded path: window gather, causal_conv1d_fn, new-state scatter (torch indexing on the device)
    ar_w = torch.arange(W - 1, device=dev)
    ar_s = torch.arange(S, device=dev)

    def padded(state: torch.Tensor) -> torch.Tensor:
        rows = state[il]  # (B, D, S)
        e = S - L + nacc.long()  # (B,)
        win = rows.gather(2, (e[:, None] - (W - 1) + ar_w)[:, None, :].expand(B, D, W - 1))
        out = causal_conv1d_fn(x, w, b, initial_states=win.contiguous(), activation="silu")
        cat = torch.cat([rows, x], dim=2)  # entry j of the new state: cat[j + a] for j < S - L, else x
        src = torch.where(ar_s[None, :] < S - L, ar_s[None, :] + nacc.long()[:, None], ar_s[None, :] + L)
        state[il] = cat.gather(2, src[:, None, :].expand(B, D, S))
        return out

    s_pad = state0.clone()
    got = padded(s_pad)
    print(f"check: padded vs ours rel err {rel_err(got, want):.2e}, states equal {torch.equal(s_pad, s_ours)}")
    rows = []
    s1 = state0.clone()
    rows.append(measure("ours causal_conv1d_update_spec", lambda: ours(x, s1, w, b, "silu", idx, nacc)))
    s2 = state0.clone()
    rows.append(measure("padded: gather + causal_conv1d_fn + scatter", lambda: padded(s2)))
    s3 = state0.clone()
    rows.append(
        measure(
            "plain causal_conv1d_update (no roll-back)", lambda: causal_conv1d_update(x, s3, w, b, "silu", None, idx)
        )
    )
    if peer is not None:
        name = "vLLM Triton causal_conv1d_update"
        try:
            s4 = state0.clone()
            got = peer.causal_conv1d_update(
                x.clone(), s4, w, b, activation="silu", conv_state_indices=idx, num_accepted_tokens=nacc, pad_slot_id=-1
            )
            err = rel_err(got, want)
            print(f"check: {name} vs ours rel err {err:.2e}, states equal {torch.equal(s4, s_ours)}")
            xp = x.clone()
            row = measure(
                name,
                lambda: peer.causal_conv1d_update(
                    xp, s4, w, b, activation="silu", conv_state_indices=idx, num_accepted_tokens=nacc, pad_slot_id=-1
                ),
            )
            row["rel_err_vs_ours"] = err
        except Exception as exc:  # noqa: BLE001
            row = {"variant": name, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
        rows.append(row)
    return rows


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    print(f"| {'variant':58s} | eager µs | graph µs |")
    print(f"|{'-' * 60}|---------:|---------:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['variant']:58s} | n/a: {r['error']}")
            continue
        e = f"{r['eager_us']:8.1f}" if r.get("eager_us") is not None else "     n/a"
        gph = f"{r['graph_us']:8.1f}" if r.get("graph_us") is not None else "     n/a"
        print(f"| {r['variant']:58s} | {e} | {gph} |")
        for k in ("eager_error", "graph_error"):
            if k in r:
                print(f"|   {k}: {r[k]}")


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peer-vllm", help="path to vLLM's vllm/model_executor/layers/mamba/ops/causal_conv1d.py")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    ap.add_argument("--width", type=int, default=4)
    ap.add_argument("--dim", type=int, default=5376)
    ap.add_argument("--prefill-seqs", type=int, default=64)
    ap.add_argument("--prefill-tokens", type=int, default=32768)
    ap.add_argument("--decode-batch", type=int, default=64)
    ap.add_argument("--drafts", type=int, default=4)
    ap.add_argument("--check-only", action="store_true", help="correctness checks only, no timing")
    ap.add_argument("--device", default="cuda", help="cuda (default); cpu only with --check-only")
    args = ap.parse_args(argv)
    global CHECK_ONLY  # noqa: PLW0603
    CHECK_ONLY = args.check_only
    if args.device != "cuda" and not args.check_only:
        print("timing needs --device cuda (the CPU can only run --check-only)", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("serving_bench needs a CUDA GPU", file=sys.stderr)
        return 2
    from causal_conv1d.varlen import causal_conv1d_update_spec, causal_conv1d_varlen_fn  # noqa: PLC0415

    peer = None
    if args.peer_vllm:
        try:
            peer = load_vllm_peer(args.peer_vllm)
        except Exception as exc:  # noqa: BLE001 - report, time ours anyway
            print(f"peer: could not load {args.peer_vllm}: {type(exc).__name__}: {exc}", file=sys.stderr)
    print(
        f"device {torch.cuda.get_device_name(0) if args.device == 'cuda' else args.device}, torch {torch.__version__}"
    )
    pre = prefill_case(args, causal_conv1d_varlen_fn, peer)
    dec = decode_case(args, causal_conv1d_update_spec, peer)
    print_table(f"prefill ({args.prefill_seqs} seqs, {args.prefill_tokens} tokens, dim {args.dim}, {args.dtype})", pre)
    print_table(
        f"speculative decode (batch {args.decode_batch}, {args.drafts} drafts, dim {args.dim}, {args.dtype})", dec
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"prefill": pre, "decode": dec, "args": vars(args)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
