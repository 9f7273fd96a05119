"""The coverage table (JSON for the landing page, Markdown for the README)."""

from __future__ import annotations

import json

from build_matrix import coverage
from build_matrix.plan import make_plan


def test_table_rows_and_cells(data) -> None:
    plan = make_plan(data)
    t = coverage.table(plan)
    assert t["platforms"] == ["linux-x86_64", "linux-aarch64", "windows-amd64"]
    rows = {(r["torch"], r["accel"]): r for r in t["rows"]}
    assert set(rows) == {(m, a) for m, rel in data.torch.items() for a in rel.builds}
    cell = rows[("2.7", "cu128")]["cells"]["linux-aarch64"]
    job = plan.job("torch2.7-cu128-linux-aarch64")
    assert cell == {"status": "covered", "job": job.id, "wheel": job.wheel_filename,
                    "pythons": list(job.covers_pythons), "torch_version": "2.7.1"}
    missing = rows[("2.7", "cu118")]["cells"]["linux-aarch64"]
    assert missing["status"] == "unavailable" and "no cu118 build for linux-aarch64" in missing["reason"]
    covered = sum(c["status"] == "covered" for r in t["rows"] for c in r["cells"].values())
    assert covered == len(plan.jobs)


def test_markdown(data) -> None:
    md = coverage.markdown(make_plan(data, torch="2.6"))
    lines = md.splitlines()
    assert lines[0] == "| torch | accel | linux-x86_64 | linux-aarch64 | windows-amd64 |"
    assert len([ln for ln in lines if ln.startswith("| 2.6 |")]) == 4
    assert "| 2.6 | cu118 | ✅ cp39-abi3 (Python 3.9–3.13) | — no torch build | ✅ cp39-abi3 (Python 3.9–3.13) |" in lines


def test_cli_coverage(cli, tmp_path) -> None:
    out = tmp_path / "coverage.json"
    res = cli("coverage", "--format", "json", "--torch", "2.14", "-o", str(out))
    assert res.code == 0 and res.out == ""
    assert [r["variant"] for r in json.loads(out.read_text())["rows"]] == [
        "torch2.14-cpu", "torch2.14-cu126", "torch2.14-cu130", "torch2.14-cu132"]
