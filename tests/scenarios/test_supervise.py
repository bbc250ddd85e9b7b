"""scripts/supervise.sh: make run's worker and beat come back after a crash."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.paths import ROOT

SUPERVISE = ROOT / "scripts" / "supervise.sh"


def _supervise(command: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # noqa: S603 - the project's own script
        [str(SUPERVISE), "sh", "-c", command],
        env={**os.environ, "RESTART_DELAY": "0.1"},
        stderr=subprocess.PIPE,
    )


def test_a_command_that_exits_is_started_again(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    supervisor = _supervise(f"echo run >> {runs}; exit 3")
    time.sleep(1)
    supervisor.send_signal(signal.SIGTERM)
    _, stderr = supervisor.communicate(timeout=5)

    assert supervisor.returncode == 0
    assert len(runs.read_text().splitlines()) >= 3
    assert b"exited (status 3); restarting in 0.1 s" in stderr


def test_stopping_it_stops_the_running_command(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    supervisor = _supervise(f"echo $$ > {pid_file}; exec sleep 30")
    deadline = time.monotonic() + 5
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    child = int(pid_file.read_text())

    supervisor.send_signal(signal.SIGTERM)
    supervisor.wait(timeout=5)

    assert supervisor.returncode == 0
    time.sleep(0.2)
    assert not _running(child)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():
        return False
    state = stat.read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"


def test_a_command_that_will_not_stop_is_killed_after_the_grace(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    supervisor = subprocess.Popen(  # noqa: S603 - the project's own script
        [str(SUPERVISE), "sh", "-c", f"trap '' TERM; echo $$ > {pid_file}; sleep 30 & wait"],
        env={**os.environ, "RESTART_DELAY": "0.1", "STOP_GRACE": "1"},
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 5
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    started = time.monotonic()

    supervisor.send_signal(signal.SIGTERM)
    supervisor.wait(timeout=10)

    assert 0.9 < time.monotonic() - started < 5  # the grace, then the kill
    assert not _running(int(pid_file.read_text()))


def test_with_a_log_the_commands_output_goes_there_and_restarts_to_the_console(
    tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    supervisor = subprocess.Popen(  # noqa: S603 - the project's own script
        [str(SUPERVISE), "sh", "-c", "echo celery banner; echo noise >&2; exit 3"],
        env={**os.environ, "RESTART_DELAY": "0.1", "SUPERVISE_LOG": str(log)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    time.sleep(0.5)
    supervisor.send_signal(signal.SIGTERM)
    stdout, stderr = supervisor.communicate(timeout=5)

    assert b"celery banner\n" not in stdout + stderr
    assert log.read_text().startswith("celery banner\nnoise\n")
    assert f"exited (status 3), see {log}; restarting in 0.1 s".encode() in stderr


def test_make_run_names_another_port_when_its_own_is_taken(tmp_path: Path) -> None:
    # The Flywheel already running there keeps its metrics: they are not emptied.
    counted = tmp_path / "metrics" / "counter_1234.db"
    counted.parent.mkdir()
    counted.write_bytes(b"counts")
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = subprocess.run(  # noqa: S603 - the project's own script
            [str(SUPERVISE.parent / "run.sh")],
            env={**env, "PORT": str(port), "HOST": "127.0.0.1", "FLYWHEEL_VAR_DIR": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert counted.read_bytes() == b"counts"
    assert run.returncode == 1
    assert run.stderr.strip() == (
        f"Port {port} on 127.0.0.1 is not free (Address already in use): stop what uses it, "
        f"or pick another port, e.g. PORT={port + 1} make run"
    )


def test_a_stop_right_after_a_start_stops_the_command_too(tmp_path: Path) -> None:
    """A TERM between the command's start and the script noting its pid: the command
    stops with the script (it once went on running, a few times in a hundred)."""
    started = tmp_path / "pids"
    rng = random.Random(7)  # noqa: S311 - timings, not secrets
    for _ in range(80):
        started.write_text("")
        supervisor = _supervise(f"echo $$ >> {started}; exec sleep 30")
        time.sleep(rng.uniform(0, 0.004))
        supervisor.send_signal(signal.SIGTERM)
        supervisor.communicate(timeout=5)
        time.sleep(0.05)
        left = [int(pid) for pid in started.read_text().split() if _running(int(pid))]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert not left, "the command went on running after its supervisor stopped"
