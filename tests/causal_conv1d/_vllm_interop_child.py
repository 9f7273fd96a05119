"""The child process of test_serving_vllm_interop.py: runs vLLM's own causal conv1d kernels in Triton's
interpreter beside ours on one cache, and prints one JSON object, {case id: "ok" or the failure}.

Triton's interpreter must be chosen before triton is first imported (its own library functions,
tl.zeros and the like, are decorated at import), so this runs in a fresh process started with
TRITON_INTERPRET=1:  python _vllm_interop_child.py PEER_DIR
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Callable

BLOCK_M = 8  # vLLM's prefill splits each request into chunks of BLOCK_M tokens


def case_ids() -> list[str]:
    """The cases, named as the parent's test ids: chain-<lead>-<ours api>, tree-<width>-<ours api>."""
    apis = ["native", "vllm"]
    return [f"chain-{lead}-{api}" for lead in ("vllm", "ours") for api in apis] + [
        f"tree-{w}-{api}" for w in (2, 3, 4) for api in apis
    ]


def _load_peer(peer: Path) -> ModuleType:
    """vLLM's module; the stand-in `vllm` package beside it provides PAD_SLOT_ID and triton."""
    sys.path.insert(0, str(peer))
    try:
        spec = importlib.util.spec_from_file_location("vllm_causal_conv1d", peer / "vllm_causal_conv1d.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(peer))
    return mod


def _own_grid_dict() -> None:
    """The interpreter calls a callable grid with the kernel's argument dict after turning tensors
    into its own handles; vLLM's grid function stores a tensor (batch_ptr) into that dict, which the
    interpreter would then pass on raw. Give the grid function its own copy of the dict."""
    from triton.runtime import interpreter  # noqa: PLC0415

    original_init = interpreter.GridExecutor.__init__

    def init(self, fn, arg_names, grid, *args, **kwargs):  # noqa: ANN001
        own = (lambda meta: grid(dict(meta))) if callable(grid) else grid
        original_init(self, fn, arg_names, own, *args, **kwargs)

    interpreter.GridExecutor.__init__ = init


def main(peer: Path) -> dict[str, str]:
    import torch  # noqa: PLC0415

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _serving_ref import API, decode_ref, prefill_ref  # noqa: PLC0415

    from causal_conv1d.varlen import PAD_SLOT_ID  # noqa: PLC0415

    _own_grid_dict()
    V = _load_peer(peer)

    def i32(v) -> torch.Tensor:
        return torch.tensor(v, dtype=torch.int32)

    def metadata(qsl: torch.Tensor) -> SimpleNamespace:
        """vLLM's host-built launch plan for causal_conv1d_fn (compute_causal_conv1d_metadata): for
        each BLOCK_M-token chunk its request (batch_ptr) and its index in it (token_chunk_offset_ptr).
        Without it vLLM's grid function reads tensors the interpreter has turned into handles."""
        chunks = [-(-n // BLOCK_M) for n in qsl.diff().tolist()]
        req = torch.tensor([i for i, c in enumerate(chunks) for _ in range(c)], dtype=torch.int32)
        off = torch.tensor([j for c in chunks for j in range(c)], dtype=torch.int32)
        plan = {"tot": sum(chunks), "mlist": req, "mlist_len": len(req), "offsetlist": off}
        plan.update(batch_ptr=req, token_chunk_offset_ptr=off)
        return SimpleNamespace(nums_dict={BLOCK_M: plan}, batch_ptr=req, token_chunk_offset_ptr=off)

    def starts(lens: list[int]) -> torch.Tensor:
        q = [0]
        for n in lens:
            q.append(q[-1] + n)
        return i32(q)

    class Chain:
        """One cache driven by vLLM's calls and ours in turn, checked against the reference after each."""

        def __init__(self, ours: API, dim: int, width: int, state_len: int, lines: int) -> None:
            self.ours, self.dim = ours, dim
            self.weight = torch.randn(dim, width) / width**0.5
            self.bias = torch.randn(dim)
            self.cache = torch.randn(lines, state_len, dim).transpose(1, 2)  # vLLM's layout (dim unit-stride)
            self.ref = self.cache.clone()

        def _check(self, out, want, want_cache, who: str) -> None:
            torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5, msg=lambda m: f"{who}: {m}")
            assert torch.equal(self.cache, want_cache), f"{who}: the cache differs from the reference"
            self.ref = want_cache

        def prefill(self, who: str, lens, table, hinit, apc=None, block: int = BLOCK_M) -> None:
            q = starts(lens)
            x = torch.randn(int(q[-1]), self.dim).T  # channel-last, as vLLM holds it
            ci, hi = i32(table), torch.tensor(hinit)
            first, last, init, done = (None,) * 4 if apc is None else tuple(i32(v) for v in apc)
            block = block if apc is not None else 0
            args = (x, self.weight, self.bias, self.cache, q, ci, hi)
            want, want_cache = prefill_ref(
                *args[:3], self.ref, q, ci, hi, True, PAD_SLOT_ID, first, last, init, done, block
            )
            if who == "vllm":
                out = V.causal_conv1d_fn(
                    *args, "silu", PAD_SLOT_ID, first, last, init, done, block, metadata=metadata(q)
                )
                for i in range(len(lens)):  # vLLM leaves a skipped request's output unwritten; ours is 0
                    line = table[i][apc[2][i]] if apc is not None else table[i]
                    if line == PAD_SLOT_ID:
                        out[:, int(q[i]) : int(q[i + 1])] = 0
            else:
                out = self.ours.prefill(*args, True, PAD_SLOT_ID, first, last, init, done, block)
            self._check(out, want, want_cache, f"{who} prefill")

        def decode(self, who: str, lens, indices, accepted=None, ragged=False, apc=None, parent=None) -> None:
            if ragged:
                qsl, mql = starts(lens), max(lens)
                x = torch.randn(sum(lens), self.dim)
            else:
                qsl, mql = None, -1
                x = torch.randn(len(lens), self.dim, lens[0]) if lens[0] > 1 else torch.randn(len(lens), self.dim)
            idx = i32(indices)
            nacc = None if accepted is None else i32(accepted)
            last, init = (None, None) if apc is None else (i32(apc[0]), i32(apc[1]))
            par = None if parent is None else i32(parent)
            tail = (PAD_SLOT_ID, qsl, mql, last, init, par)
            want, want_cache = decode_ref(x, self.ref, self.weight, self.bias, True, idx, nacc, *tail)
            if who == "vllm":
                out = V.causal_conv1d_update(
                    x, self.cache, self.weight, self.bias, "silu", idx, nacc, qsl, mql, PAD_SLOT_ID, last, init, par
                )
                for b in range(len(lens)):  # vLLM leaves a skipped request's output unwritten; ours is 0
                    line = indices[b][apc[1][b]] if apc is not None else indices[b]
                    if line == PAD_SLOT_ID:
                        if ragged:
                            out[int(qsl[b]) : int(qsl[b + 1])] = 0
                        else:
                            out[b] = 0
            else:
                out = self.ours.decode(x, self.cache, self.weight, self.bias, True, idx, nacc, *tail)
            self._check(out, want, want_cache, f"{who} decode")

    def chain_case(lead: str, ours: API) -> None:
        """prefill with prefix caching -> speculative step (num_accepted_tokens = 1 right after it) ->
        speculative step -> ragged speculative steps -> plain decode -> prefix-cached prefills
        continuing both requests -> prefix-cached speculative steps, on one cache with state_len >
        width - 1, alternating vLLM's kernels and ours (``lead`` makes the first call)."""
        torch.manual_seed(1)
        width, h = 4, 3
        chain = Chain(ours, 8, width, state_len=h - 1 + 4, lines=16)
        other = "ours" if lead == "vllm" else "vllm"
        table = [[0, 1, 2, 3, 8, 9, 10, 14], [4, 5, 6, 7, 11, 12, 13, 15]]
        # 1. request 0: 19 tokens (boundaries 8, 16 -> lines 0, 1; final -> line 2); request 1: 5 (-> line 4)
        chain.prefill(lead, [19, 5], table, [False, False], apc=([0, 0], [2, 0], [0, 0], [0, 0]))
        # 2. speculative step of 4 tokens right after the prefill: num_accepted_tokens = 1
        chain.decode(other, [4, 4], [2, 4], accepted=[1, 1])
        # 3. speculative step: 3 and 2 of the previous 4 accepted
        chain.decode(lead, [4, 4], [2, 4], accepted=[3, 2])
        # 4. ragged speculative steps (2 and 3 tokens, then 3 and 1)
        chain.decode(other, [2, 3], [2, 4], accepted=[4, 1], ragged=True)
        chain.decode(lead, [3, 1], [2, 4], accepted=[2, 3], ragged=True)
        # 5. plain one-token decode steps
        chain.decode(other, [1, 1], [2, 4])
        chain.decode(lead, [1, 1], [2, 4])
        # 6. prefix-cached prefills, chunks starting at block boundaries (as vLLM's scheduler aligns
        #    them): request 0 at position 24 from its block 2 (line 2), 16 tokens (boundary 32 ->
        #    block 3, line 3; final -> block 4, line 8); request 1 at 8 from block 0 (line 4), 10
        #    tokens (boundary 16 -> line 5; final -> line 6)
        chain.prefill(other, [16, 10], table, [True, True], apc=([3, 1], [4, 2], [2, 0], [24, 8]))
        # 7. request 0 at 40 from block 4 (line 8), 17 tokens (boundaries 48, 56 -> lines 9, 10; final
        #    -> block 7, line 14); request 1 skipped (pad_slot_id in its input column)
        skip = [row[:] for row in table]
        skip[1][2] = PAD_SLOT_ID
        chain.prefill(lead, [17, 4], skip, [True, True], apc=([5, 2], [7, 2], [4, 2], [40, 18]))
        # 8. speculative steps that read one block's line and write another's (prefix-cached decode)
        rows = [[14, 9, 10, 1], [4, 5, 6, 7]]
        chain.decode(other, [3, 3], rows, accepted=[1, 1], apc=([2, 3], [0, 1]))
        chain.decode(lead, [3, 3], rows, accepted=[2, 3], apc=([1, 3], [2, 3]))

    def tree_case(width: int, ours: API) -> None:
        """Tree drafts (retrieve_parent_token; vLLM's kernel takes widths 2..4), 3-D and ragged,
        speculative, a padded request, alternating vLLM's kernels and ours."""
        torch.manual_seed(2)
        h = width - 1
        chain = Chain(ours, 6, width, state_len=h + 5, lines=5)
        parents = [[-1, 0, 0, 1, 1], [-1, 0, 1, 2, 0], [-1, 0, 0, 0, 3]]
        chain.decode("vllm", [5, 5, 5], [3, PAD_SLOT_ID, 0], accepted=[1, 1, 1], parent=parents)
        chain.decode("ours", [5, 5, 5], [3, PAD_SLOT_ID, 0], accepted=[2, 1, 4], parent=parents)
        chain.decode("vllm", [4, 5, 2], [3, 1, 0], accepted=[3, 1, 1], ragged=True, parent=parents)
        chain.decode("ours", [5, 1, 3], [3, 1, 0], accepted=[2, 4, 1], ragged=True, parent=parents)

    cases: dict[str, Callable[[], None]] = {}
    for cid in case_ids():
        kind, arg, api = cid.split("-")
        if kind == "chain":
            cases[cid] = lambda arg=arg, api=api: chain_case(arg, API(api))
        else:
            cases[cid] = lambda arg=arg, api=api: tree_case(int(arg), API(api))
    results = {}
    for cid, run in cases.items():
        try:
            run()
            results[cid] = "ok"
        except Exception:  # noqa: BLE001  (reported to the parent, which fails that case)
            results[cid] = traceback.format_exc()
    return results


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
