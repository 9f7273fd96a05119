"""diff between two plans."""

from __future__ import annotations

import json
from pathlib import Path

from build_matrix import compat


def _without_2_15(tmp_path: Path) -> Path:
    text = compat.DEFAULT_DATA_PATH.read_text()
    old = tmp_path / "old.toml"
    old.write_text(text[: text.index('[torch."2.15"]')])
    return old


def test_new_release_shows_up(cli, tmp_path: Path) -> None:
    old = _without_2_15(tmp_path)
    res = cli("diff", str(old), "current", "--format", "json")
    assert res.code == 0
    d = json.loads(res.out)
    # torch 2.15 adds no job: the stable-ABI jobs serve it; they change only in what they serve
    assert d["jobs"]["added"] == [] and d["jobs"]["removed"] == []
    assert d["jobs"]["changed"] and all(j.startswith("stable2.10-") for j in d["jobs"]["changed"])
    assert all(set(fields) <= {"serves", "covers_pythons"} for fields in d["jobs"]["changed"].values()), d["jobs"][
        "changed"
    ]
    # 2.15's combinations are new rows; the other minors gain unavailable CPython 3.15 rows.
    added_covered = [c for c in d["combinations"]["added"] if c["status"] == "covered"]
    assert added_covered and {c["torch"] for c in added_covered} == {"2.15"}
    assert {c["python"] for c in d["combinations"]["added"] if c["torch"] != "2.15"} == {"3.15", "3.15t"}
    assert d["combinations"]["newly_covered"] == [] and d["combinations"]["no_longer_covered"] == []
    assert not d["identical"]
    text = cli("diff", str(old), "current")
    assert "~ stable2.10-cu13-linux-x86_64" in text.out
    assert cli("diff", str(old), "current", "--exit-code").code == 7


def test_changed_job_lists_fields(cli, tmp_path: Path) -> None:
    plan_old = tmp_path / "old.json"
    assert cli("plan", "--format", "json", "--torch", "2.14", "-o", str(plan_old)).code == 0
    newer = tmp_path / "new.toml"
    newer.write_text(compat.DEFAULT_DATA_PATH.read_text().replace('latest = "2.14.1"', 'latest = "2.14.2"'))
    res = cli("diff", str(plan_old), str(newer))
    assert "~ stable2.10-cu13-linux-x86_64" in res.out  # built against torch 2.14
    assert "torch_version: '2.14.1' -> '2.14.2'" in res.out
    assert "CIBW_BEFORE_BUILD" in res.out


def test_identical(cli) -> None:
    res = cli("diff", "current", "current", "--exit-code")
    assert res.code == 0 and res.out == "plans are identical\n"


def test_bad_plan_files(cli, tmp_path: Path) -> None:
    missing = cli("diff", str(tmp_path / "nope.json"), "current")
    assert missing.code == 6 and "not found" in missing.err
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    res = cli("diff", str(broken), "current")
    assert res.code == 6 and "not JSON" in res.err
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"jobs": [], "combinations": [{"torch": "2.7"}]}))
    res = cli("diff", str(other), "current")
    assert res.code == 6 and "combinations[0]" in res.err
