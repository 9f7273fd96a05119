"""GitHub Actions matrix shards and per-job environments."""

from __future__ import annotations

import json
import math
import subprocess

import pytest

from build_matrix import emit
from build_matrix.plan import make_plan


@pytest.fixture(scope="module")
def plan(data):
    return make_plan(data)


@pytest.mark.parametrize("size", [256, 50, 7, 1])
def test_shards_hold_every_job_once_in_order(plan, size: int) -> None:
    shards = emit.shards(plan, size=size)
    assert len(shards) == math.ceil(len(plan.jobs) / size)
    assert all(1 <= s["count"] == len(s["include"]) <= size for s in shards)
    ids = [entry["id"] for s in shards for entry in s["include"]]
    assert ids == [j.id for j in plan.jobs]
    assert [s["name"] for s in shards] == [f"shard-{i}" for i in range(len(shards))]


def test_ids_are_stable_when_the_plan_grows(data) -> None:
    older = make_plan(data, torch="2.4-2.8")
    newer = make_plan(data)
    old_entries = {e["id"]: e for s in emit.shards(older) for e in s["include"]}
    new_entries = {e["id"]: e for s in emit.shards(newer) for e in s["include"]}
    assert old_entries.keys() < new_entries.keys()
    assert all(new_entries[k] == v for k, v in old_entries.items())


#: The fields of a matrix entry that tell jobs of one platform apart (the rows below).
ENTRY_FIELDS = ("id", "variant", "torch", "accel", "cuda", "oldest_torch", "oldest_accel", "stable_abi", "family")
LINUX_AARCH64 = {"platform": "linux-aarch64", "os": "linux", "arch": "aarch64", "runs_on": "ubuntu-24.04-arm"}


@pytest.mark.parametrize(
    "row",
    [
        "torch2.9-cu130-linux-aarch64 torch2.9-cu130 2.9 cu130 13.0 2.9 cu130 false cu13",
        # a stable job: torch/accel/cuda of the torch it compiles against (accel: the index to test with)
        "stable2.10-cu13-linux-aarch64 stable2.10-cu13 2.14 cu132 13.2 2.10 cu130 true cu13",
    ],
)
def test_matrix_entry(plan, row: str) -> None:
    expected = {**dict(zip(ENTRY_FIELDS, row.split())), **LINUX_AARCH64, "python": "3.10"}
    assert emit.matrix_entry(plan.job(expected["id"])) == expected


def test_stable_entry_oldest_torch(plan) -> None:
    cu12 = emit.matrix_entry(plan.job("stable2.10-cu12-windows-amd64"))
    assert (cu12["oldest_torch"], cu12["oldest_accel"]) == ("2.10", "cu128")  # torch 2.10 ships cu126 and cu128


@pytest.mark.parametrize("size", [0, 257])
def test_bad_shard_size(plan, cli, size: int) -> None:
    with pytest.raises(ValueError, match="shard size"):
        emit.shards(plan, size=size)
    res = cli("emit", "matrix", "--shard-size", str(size))
    assert res.code == 2 and "shard size" in res.err


def test_github_output(plan, cli) -> None:
    res = cli("emit", "matrix", "--format", "github-output", "--shard-size", "50")
    assert res.code == 0
    lines = dict(line.split("=", 1) for line in res.out.splitlines())
    assert int(lines["shards"]) == math.ceil(len(plan.jobs) / 50)
    assert json.loads(lines["names"]) == [f"shard-{i}" for i in range(int(lines["shards"]))]
    first = json.loads(lines["shard-0"])
    assert len(first["include"]) == 50 and first["include"][0]["id"] == plan.jobs[0].id
    last = json.loads(lines[f"shard-{int(lines['shards']) - 1}"])
    assert last["include"][-1]["id"] == "stable2.10-cu13-windows-amd64" and last["include"][-1]["stable_abi"] == "true"


def test_env_shell_format_round_trips_through_bash(plan, tmp_path) -> None:
    job = plan.job("stable2.10-cu12-windows-amd64")  # quotes, ';', '&&', '{dest_dir}\\name' inside
    script = tmp_path / "env.sh"
    script.write_text(emit.format_env(job.environment, "shell"))
    for key, value in job.environment.items():
        got = subprocess.run(
            ["bash", "-c", f'source "{script}"; printf %s "${key}"'], capture_output=True, text=True, check=True
        )
        assert got.stdout == value, key


def _parse_github_env(text: str) -> dict[str, str]:
    out, lines, i = {}, text.split("\n"), 0
    while i < len(lines) and lines[i]:
        name, delim = lines[i].split("<<", 1)
        end = lines.index(delim, i + 1)
        out[name] = "\n".join(lines[i + 1 : end])
        i = end + 1
    return out


def test_env_github_and_dotenv_formats(plan, cli) -> None:
    job = plan.job("torch2.6-cu118-linux-x86_64")
    res = cli("emit", "env", "--job", job.id, "--format", "github")
    assert res.code == 0 and _parse_github_env(res.out) == job.environment
    res = cli("emit", "env", "--job", job.id, "--format", "dotenv")
    assert {k: json.loads(v) for k, v in (ln.split("=", 1) for ln in res.out.splitlines())} == job.environment
    res = cli("emit", "env", "--job", job.id)
    assert json.loads(res.out) == job.environment
    with pytest.raises(ValueError, match="environment format"):
        emit.format_env(job.environment, "yaml")


def test_env_unknown_job(cli) -> None:
    res = cli("emit", "env", "--job", "torch2.7-cu128-linux-x86")
    assert res.code == 3
    assert "Perhaps you meant 'torch2.7-cu128-linux-x86_64'" in res.err
