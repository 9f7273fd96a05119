"""Running commands: the one place the release pipeline touches subprocesses.

The pipeline only talks to a :class:`Runner`; tests swap in a fake one that records the commands
and answers with canned results, so the orchestration is tested without building anything.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Optional, Protocol

from release.errors import CommandFailed

__all__ = ["CommandResult", "Process", "Runner", "SubprocessRunner"]


@dataclasses.dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str = ""  # only when captured
    seconds: float = 0.0


class Process(Protocol):
    """A background process (the local index server)."""

    def poll(self) -> Optional[int]: ...

    def stop(self, timeout: float = 10.0) -> Optional[int]: ...


def _open_log(log: Path, argv: Sequence[str]) -> IO[str]:
    """``log`` opened for appending (its folder created), headed by the command line."""
    log.parent.mkdir(parents=True, exist_ok=True)
    log_file = open(log, "a", encoding="utf-8")  # noqa: SIM115 - the caller closes it
    log_file.write(f"$ {' '.join(argv)}\n")
    log_file.flush()
    return log_file


class Runner:
    """Runs a command with its output appended to a log file: what the pipeline calls. A subclass
    says how a command is spawned (:class:`SubprocessRunner`: for real); tests pass a fake with the
    same ``run`` and ``start``."""

    def run(
        self,
        argv: Sequence[str],
        *,
        log: Path,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[Path] = None,
        capture: bool = False,
        check: bool = True,
    ) -> CommandResult:
        """Run ``argv`` to its end (``env``: on top of this process's); ``capture``: its stdout is the
        result's, not the log's. A non-zero exit raises :class:`CommandFailed` unless ``check`` is off."""
        args = [str(a) for a in argv]
        start = time.monotonic()
        with _open_log(log, args) as log_file:
            returncode, stdout = self._wait(args, log_file, _full_env(env), cwd, capture)
            log_file.write(f"[exit status {returncode}]\n")
        result = CommandResult(tuple(args), returncode, stdout, time.monotonic() - start)
        if check and returncode != 0:
            raise CommandFailed(args, returncode, log)
        return result

    def start(
        self, argv: Sequence[str], *, log: Path, env: Optional[Mapping[str, str]] = None, cwd: Optional[Path] = None
    ) -> Process:
        """Start ``argv`` in the background, its output going to ``log``."""
        args = [str(a) for a in argv]
        return self._spawn(args, _open_log(log, args), _full_env(env), cwd)

    def _wait(
        self, argv: list[str], log_file: IO[str], env: Optional[dict[str, str]], cwd: Optional[Path], capture: bool
    ) -> tuple[int, str]:
        """Run ``argv`` to its end: its exit status and (``capture``) its stdout."""
        raise NotImplementedError

    def _spawn(self, argv: list[str], log_file: IO[str], env: Optional[dict[str, str]], cwd: Optional[Path]) -> Process:
        """Start ``argv``; the process owns ``log_file`` and closes it when stopped."""
        raise NotImplementedError


def _full_env(env: Optional[Mapping[str, str]]) -> Optional[dict[str, str]]:
    return None if env is None else {**os.environ, **env}


class _Popen:
    def __init__(self, proc: subprocess.Popen, log_file: IO[str]) -> None:
        self._proc = proc
        self._log_file = log_file

    @property
    def pid(self) -> int:
        return self._proc.pid

    def poll(self) -> Optional[int]:
        return self._proc.poll()

    def stop(self, timeout: float = 10.0) -> Optional[int]:
        """Terminate (then kill) this one process; returns its exit status."""
        try:
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait(timeout=timeout)
            return self._proc.returncode
        finally:
            self._log_file.close()


class SubprocessRunner(Runner):
    """Runs commands for real, writing their output to a log file and (unless quiet) the console.

    Console lines are indented under the step header so the progress stays readable.
    """

    def __init__(self, *, echo: bool = True, stream: IO[str] = sys.stdout, prefix: str = "    | ") -> None:
        self.echo = echo
        self.stream = stream
        self.prefix = prefix

    def _wait(
        self, argv: list[str], log_file: IO[str], env: Optional[dict[str, str]], cwd: Optional[Path], capture: bool
    ) -> tuple[int, str]:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if capture else subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        out_parts: list[str] = []
        err_thread: Optional[threading.Thread] = None
        if capture:
            # stdout is the data (e.g. plan JSON); stderr is progress: log and echo it.
            assert proc.stderr is not None
            err_thread = threading.Thread(target=self._pump, args=(proc.stderr, log_file, None), daemon=True)
            err_thread.start()
        assert proc.stdout is not None
        self._pump(proc.stdout, log_file, out_parts if capture else None)
        if err_thread is not None:
            err_thread.join()
        return proc.wait(), "".join(out_parts)

    def _pump(self, pipe: IO[str], log_file: IO[str], keep: Optional[list[str]]) -> None:
        for line in pipe:
            if keep is not None:
                keep.append(line)
                continue  # captured data goes to the caller, not the console
            log_file.write(line)
            log_file.flush()
            if self.echo:
                self.stream.write(self.prefix + line.rstrip("\n") + "\n")
                self.stream.flush()

    def _spawn(self, argv: list[str], log_file: IO[str], env: Optional[dict[str, str]], cwd: Optional[Path]) -> Process:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT
        )
        return _Popen(proc, log_file)
