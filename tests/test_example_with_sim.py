"""``config/tables/example.toml`` against ``shoewarden sim``, exactly as its comment and
docs/devices.md say (issue 8, section 3).

Two processes, as two terminals: ``shoewarden sim --profile gr-blackjack --link-dir
/tmp/shoewarden-sim --dealer person`` and ``shoewarden run --table
config/tables/example.toml``. The test is the person: it types each command the simulator
shows at run's console, waits until run has taken it, and presses Enter at the simulator.
The day must be clean: every device admitted (no DEVICE_IDENTITY), no deviation, exit 0.
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from controller.audit import table_files, verify_file

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "config" / "tables" / "example.toml"
LOG_ROOT = Path("/tmp/shoewarden-example")  # where example.toml keeps its logs


def lines_of(stream) -> queue.Queue[str | None]:  # type: ignore[no-untyped-def]
    q: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            q.put(line)
        q.put(None)
    threading.Thread(target=pump, daemon=True).start()
    return q


def next_line(q: queue.Queue[str | None], what: str, timeout: float = 30.0) -> str:
    line = q.get(timeout=timeout)
    assert line is not None, f"the process ended while waiting for {what}"
    return line


@pytest.mark.slow  # (end to end: processes and servers started and killed)
def test_example_table_config_runs_against_the_simulator() -> None:
    shutil.rmtree(LOG_ROOT, ignore_errors=True)
    sim = subprocess.Popen(
        [sys.executable, "-m", "controller", "sim", "--profile", "gr-blackjack", "--seed", "7",
         "--shoes", "1", "--link-dir", "/tmp/shoewarden-sim", "--dealer", "person"],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, bufsize=1)
    run = None
    try:
        assert sim.stdout is not None and sim.stdin is not None
        sim_out = lines_of(sim.stdout)
        ports = json.loads(next_line(sim_out, "the ports"))
        assert ports["shoe"] == "/tmp/shoewarden-sim/shoe"
        run = subprocess.Popen([sys.executable, "-m", "controller", "run", "--table",
                                str(EXAMPLE)], cwd=ROOT, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               bufsize=1)
        assert run.stdout is not None and run.stdin is not None
        run_out = lines_of(run.stdout)
        transcript: list[str] = []
        seen: Counter[str] = Counter()  # run's inputs so far, by type
        typed = 0
        while True:
            line = next_line(sim_out, "the next step")
            if line.startswith("the simulated day has been played"):
                break
            if "type at the dealer console:" not in line:
                continue
            kind = line.split("(", 1)[1].split(")", 1)[0]
            command = line.split("console:", 1)[1].strip()
            prompt = next_line(sim_out, "the Enter prompt")
            after = prompt.split("so far (", 1)[1].split(")", 1)[0]
            want = Counter() if after == "nothing" else Counter(
                {k: int(n) for k, n in (part.rsplit(" ", 1) for part in after.split(", "))})
            while want - seen:  # as the person would: wait until run shows the devices' inputs
                echoed = next_line(run_out, f"run to show {want - seen}")
                transcript.append(echoed)
                if echoed.startswith("> "):
                    seen[echoed[2:].split()[0]] += 1
            run.stdin.write(command + "\n")
            run.stdin.flush()
            typed += 1
            while True:  # run has taken it when it echoes the input
                echoed = next_line(run_out, f"run to take {command!r}")
                transcript.append(echoed)
                if echoed.startswith("> "):
                    seen[echoed[2:].split()[0]] += 1
                if echoed.startswith(f"> {kind}") or "  ? " in echoed:
                    break
            assert "  ? " not in echoed, (command, echoed)
            sim.stdin.write("\n")
            sim.stdin.flush()
        run.stdin.write("quit\n")
        run.stdin.flush()
        code = run.wait(60)
        while (rest := run_out.get(timeout=10)) is not None:
            transcript.append(rest)
        text = "".join(transcript)
        assert typed > 100
        assert "DEVICE_IDENTITY" not in text and "DEVIATION" not in text, text[-3000:]
        assert code == 0, (code, run.stderr.read() if run.stderr else "", text[-2000:])
        assert "state closed" in text or "state: closed" in text or "closed" in text
        (log,) = table_files(LOG_ROOT / "audit", "BJ-03")
        assert verify_file(log).ok
        records = [json.loads(r) for r in log.read_text().splitlines()]
        connected = {r["event"]["device"] for r in records if r["kind"] == "input"
                     and r["event"]["type"] == "device_connected"}
        assert connected == {"shoe", "scanner", "shuffler"}
        cards = sum(1 for r in records if r["kind"] == "input" and r["event"]["type"] == "card")
        assert cards > 200
    finally:
        for proc in (run, sim):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
        shutil.rmtree(LOG_ROOT, ignore_errors=True)


def test_sim_refuses_a_bad_link_dir_in_one_line(capsys) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from controller.cli import main
    for where, why in (("/proc/x", "kernel file system"), ("/etc/passwd", "not a directory")):
        with pytest.raises(SystemExit) as exit_:
            main(["sim", "--profile", "gr-blackjack", "--link-dir", where])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert f"shoewarden sim: error: --link-dir {where}: " in err and why in err
        assert "Traceback" not in err


def test_only_kernel_file_systems_are_refused_by_name() -> None:
    """By path component, not by prefix: /procurement or /system-sim are ordinary places,
    and /dev/shm is a tmpfs (symlinks and FIFOs work there)."""
    from simulators.pty_host.linkdirs import bad_link_dir
    for where in ("/proc", "/proc/x", "/sys/x", "/dev/x"):
        assert "kernel file system" in (bad_link_dir(where) or ""), where
    for where in ("/procurement/x", "/system-sim", "/devices/sim", "/dev/shm/sim", "/tmp/x"):
        assert "kernel" not in (bad_link_dir(where) or ""), where  # (may be unwritable)


def test_sim_without_a_profile_prints_its_own_usage(capsys) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from controller.cli import main
    with pytest.raises(SystemExit):
        main(["sim"])
    err = capsys.readouterr().err
    assert err.startswith("usage: shoewarden sim") and "simulators.pty_host" not in err
    assert "--exit-with-parent" not in err  # internal to bench


def test_sim_prints_the_allowlist_the_example_holds(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import tomllib

    from controller.cli import main
    assert main(["sim", "--profile", "gr-blackjack", "--print-allowlist"]) == 0
    printed = tomllib.loads(capsys.readouterr().out)["allowlist"]
    assert printed == tomllib.loads(EXAMPLE.read_text())["allowlist"]
    assert main(["sim", "--profile", "gr-blackjack", "--print-allowlist",
                 str(tmp_path / "allow.toml")]) == 0
    assert tomllib.loads((tmp_path / "allow.toml").read_text())["allowlist"] == printed
