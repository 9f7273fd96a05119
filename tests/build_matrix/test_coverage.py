"""The coverage table (JSON for the landing page, Markdown for the README)."""

from __future__ import annotations

import json

from build_matrix import coverage
from build_matrix.plan import make_plan


def _covered(job, pythons: list[str], torch_version: str, *, stable_abi: bool) -> dict:
    """The cell of a combination that ``job``'s wheel serves."""
    return {
        "status": "covered",
        "job": job.id,
        "wheel": job.wheel_filename,
        "pythons": pythons,
        "torch_version": torch_version,
        "stable_abi": stable_abi,
    }


def test_table_rows_and_cells(data) -> None:
    plan = make_plan(data)
    t = coverage.table(plan)
    assert t["platforms"] == ["linux-x86_64", "linux-aarch64", "windows-amd64"]
    rows = {(r["torch"], r["accel"]): r for r in t["rows"]}
    assert set(rows) == {(m, a) for m, rel in data.torch.items() for a in rel.builds}
    cell = rows[("2.7", "cu128")]["cells"]["linux-aarch64"]
    job = plan.job("torch2.7-cu128-linux-aarch64")
    assert cell == _covered(job, list(job.covers_pythons), "2.7.1", stable_abi=False)
    missing = rows[("2.7", "cu118")]["cells"]["linux-aarch64"]
    assert missing["status"] == "unavailable" and "no cu118 build for linux-aarch64" in missing["reason"]
    covered = [c for r in t["rows"] for c in r["cells"].values() if c["status"] == "covered"]
    legacy = [j for j in plan.jobs if not j.stable_abi]
    assert len([c for c in covered if not c["stable_abi"]]) == len(legacy)
    assert {c["job"] for c in covered} == {j.id for j in plan.jobs}
    stable = rows[("2.12", "cu126")]["cells"]["linux-x86_64"]
    job = plan.job("stable2.10-cu12-linux-x86_64")
    assert stable == _covered(job, ["3.10", "3.11", "3.12", "3.13", "3.14"], "2.11.0", stable_abi=True)
    assert rows[("2.15", "cpu")]["cells"]["windows-amd64"]["pythons"] == ["3.11", "3.12", "3.13", "3.14", "3.15"]
    assert t["jobs"] == {"per_minor": 133, "stable_abi": 70, "stable_jobs": 9, "saved": 63}


def test_markdown(data) -> None:
    md = coverage.markdown(make_plan(data, torch="2.6"))
    lines = md.splitlines()
    assert lines[0] == "| torch | accel | linux-x86_64 | linux-aarch64 | windows-amd64 |"
    assert len([ln for ln in lines if ln.startswith("| 2.6 |")]) == 4
    assert (
        "| 2.6 | cu118 | ✅ cp39-abi3 (Python 3.9–3.13) | — no torch build | ✅ cp39-abi3 (Python 3.9–3.13) |" in lines
    )
    assert "build jobs before the stable ABI (one per torch minor): 10" in lines


def test_markdown_counts_jobs_before_and_after(data) -> None:
    lines = coverage.markdown(make_plan(data)).splitlines()
    assert (
        "| 2.13 | cu130 | ✅ stable ABI (Python 3.10–3.14) | ✅ stable ABI (Python 3.10–3.14) | ✅ stable ABI (Python 3.10–3.14) |"
        in lines
    )
    assert "build jobs before the stable ABI (one per torch minor): 133" in lines
    assert "build jobs with stable-ABI wheels for torch >= 2.10: 70 (9 stable, 61 per-minor for older torch)" in lines


def test_cli_coverage(cli, tmp_path) -> None:
    out = tmp_path / "coverage.json"
    res = cli("coverage", "--format", "json", "--torch", "2.14", "-o", str(out))
    assert res.code == 0 and res.out == ""
    assert [r["variant"] for r in json.loads(out.read_text())["rows"]] == [
        "torch2.14-cpu",
        "torch2.14-cu126",
        "torch2.14-cu130",
        "torch2.14-cu132",
    ]
