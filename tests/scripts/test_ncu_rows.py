"""benchmarks/ncu_rows.py without a GPU: its reading of ncu's `--csv --page details` output (kernels in
launch order, split into rows at the marker kernel, metric units) and its table."""

from __future__ import annotations

import csv
import importlib.util
import io
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load():
    spec = importlib.util.spec_from_file_location("ncu_rows", ROOT / "benchmarks" / "ncu_rows.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ncu_rows = load()

FWD = (
    "void causal_conv1d_cuda::(anonymous namespace)::fwd_cf_fast_kernel<__nv_bfloat16, 4, 8>"
    "(causal_conv1d_cuda::ConvParams, causal_conv1d_cuda::(anonymous namespace)::Grid)"
)
BWD = "void causal_conv1d_cuda::(anonymous namespace)::bwd_cf_fast_kernel_spans<__nv_bfloat16, 4>(a, b, c)"
# ncu spells an anonymous namespace "<unnamed>"; c++filt "(anonymous namespace)"
RED = "causal_conv1d_cuda::<unnamed>::bwd_cf_fast_reduce_kernel(const float *, long, int)"
SPIN = "spin_kernel(long)"


def details_csv(launches: list[tuple[str, list[tuple[str, str, str, str]]]]) -> str:
    """ncu's details page as CSV: one line per (kernel launch, metric), IDs in launch order, with the
    ==PROF== lines ncu writes to the same log."""
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(["ID", "Process ID", "Kernel Name", "Section Name", "Metric Name", "Metric Unit", "Metric Value"])
    for i, (name, metrics) in enumerate(launches):
        for section, metric, unit, value in metrics or [
            ("GPU Speed Of Light Throughput", "Duration", "nsecond", "1,000")
        ]:
            w.writerow([str(i), "42", name, section, metric, unit, value])
    return "==PROF== Connected to process 42\n" + buf.getvalue() + "==PROF== Disconnected from process 42\n"


def sol(dur_unit: str, dur: str, dram: str) -> list[tuple[str, str, str, str]]:
    return [
        ("GPU Speed Of Light Throughput", "Duration", dur_unit, dur),
        ("GPU Speed Of Light Throughput", "DRAM Throughput", "%", dram),
        ("Occupancy", "Achieved Occupancy", "%", "46.40"),
        ("Launch Statistics", "Registers Per Thread", "register/thread", "64"),
        # a metric of the same name in another section must not be taken for the SOL one
        ("Memory Workload Analysis", "Memory Throughput", "Tbyte/s", "3.90"),
    ]


def test_rows_split_at_the_marker_and_units_converted():
    text = details_csv(
        [
            (FWD, sol("usecond", "68.19", "92.10")),
            (SPIN, []),
            (BWD, sol("msecond", "0.1071", "80.5")),
            (RED, sol("ns", "2,350", "3.2")),
            (SPIN, []),
        ]
    )
    kernels = ncu_rows.parse(text)
    assert [k["id"] for k in kernels] == [0, 1, 2, 3, 4]
    rows = ncu_rows.group(kernels, ["fwd row", "bwd row"])
    assert [n for n, _ in rows] == ["fwd row", "bwd row"]
    fwd = [ncu_rows.kernel_row(k) for k in rows[0][1]]
    bwd = [ncu_rows.kernel_row(k) for k in rows[1][1]]
    assert [k["kernel"] for k in fwd] == ["fwd_cf_fast_kernel<__nv_bfloat16, 4, 8>"]
    assert [k["kernel"] for k in bwd] == ["bwd_cf_fast_kernel_spans<__nv_bfloat16, 4>", "bwd_cf_fast_reduce_kernel"]
    assert fwd[0]["µs"] == pytest.approx(68.19)
    assert bwd[0]["µs"] == pytest.approx(107.1)
    assert bwd[1]["µs"] == pytest.approx(2.35)
    assert fwd[0]["DRAM %"] == pytest.approx(92.1)
    assert fwd[0]["occ %"] == pytest.approx(46.4)
    assert fwd[0]["regs"] == 64
    assert fwd[0]["issue %"] is None  # not in this report: shown as a dash, not as a number
    table = ncu_rows.table(
        [{"build": "ours", "rows": [{"name": n, "kernels": [ncu_rows.kernel_row(k) for k in ks]} for n, ks in rows]}]
    )
    lines = table.splitlines()
    assert len(lines) == 2 + 3
    assert "| fwd row | ours | `fwd_cf_fast_kernel<__nv_bfloat16, 4, 8>` | 68.2 | 92.1 |" in table
    assert "| — |" in lines[2]


def test_a_row_whose_op_launched_nothing_keeps_its_place():
    kernels = ncu_rows.parse(details_csv([(SPIN, []), (FWD, sol("usecond", "1", "1")), (SPIN, [])]))
    rows = ncu_rows.group(kernels, ["empty", "fwd"])
    assert rows[0] == ("empty", [])
    assert [k["name"] for k in rows[1][1]] == [FWD]


def test_fewer_marker_groups_than_rows_is_an_error():
    kernels = ncu_rows.parse(details_csv([(FWD, []), (SPIN, [])]))
    with pytest.raises(SystemExit, match="1 rows. kernels .+0 after the last marker. for 2 rows"):
        ncu_rows.group(kernels, ["a", "b"])


def test_upstream_kernel_names_shorten():
    name = (
        "void causal_conv1d_fwd_kernel<Causal_conv1d_fwd_kernel_traits<128, 4, true, c10::BFloat16, "
        "c10::BFloat16>>(ConvParamsBase)"
    )
    assert ncu_rows.short_name(name).startswith("causal_conv1d_fwd_kernel<Causal_conv1d_fwd_kernel_traits<128")
    assert "c10::" not in ncu_rows.short_name(name)


def test_kernels_after_the_last_marker_are_an_error():
    kernels = ncu_rows.parse(details_csv([(FWD, []), (SPIN, []), (BWD, [])]))
    with pytest.raises(SystemExit, match=r"\+1 after the last marker"):
        ncu_rows.group(kernels, ["a"])
