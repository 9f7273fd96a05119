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


class Runner(Protocol):
    def run(
        self,
        argv: Sequence[str],
        *,
        log: Path,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[Path] = None,
        capture: bool = False,
        check: bool = True,
    ) -> CommandResult: ...

    def start(
        self,
        argv: Sequence[str],
        *,
        log: Path,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[Path] = None,
    ) -> Process: ...


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


class SubprocessRunner:
    """Runs commands for real, writing their output to a log file and (unless quiet) the console.

    Console lines are indented under the step header so the progress stays readable.
    """

    def __init__(self, *, echo: bool = True, stream: IO[str] = sys.stdout, prefix: str = "    | ") -> None:
        self.echo = echo
        self.stream = stream
        self.prefix = prefix

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
        argv = [str(a) for a in argv]
        log.parent.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        full_env = None if env is None else {**os.environ, **env}
        with open(log, "a", encoding="utf-8") as log_file:
            log_file.write(f"$ {' '.join(argv)}\n")
            log_file.flush()
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=full_env,
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
            returncode = proc.wait()
            log_file.write(f"[exit status {returncode}]\n")
        result = CommandResult(tuple(argv), returncode, "".join(out_parts), time.monotonic() - start)
        if check and returncode != 0:
            raise CommandFailed(argv, returncode, log)
        return result

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

    def start(
        self,
        argv: Sequence[str],
        *,
        log: Path,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[Path] = None,
    ) -> Process:
        argv = [str(a) for a in argv]
        log.parent.mkdir(parents=True, exist_ok=True)
        log_file = open(log, "a", encoding="utf-8")  # noqa: SIM115 - closed by _Popen.stop
        log_file.write(f"$ {' '.join(argv)}\n")
        log_file.flush()
        full_env = None if env is None else {**os.environ, **env}
        proc = subprocess.Popen(
            argv, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT
        )
        return _Popen(proc, log_file)
