"""The engine unit's stop command (roles/serve/templates/dgxspark-vllm.service.j2, Ray backend), run for real on a
process tree shaped like vLLM's: an API server that ignores SIGTERM, its engine core and a grandchild, and an engine
core orphaned by an earlier API server. Every one must end: an engine core left behind holds the Ray placement group
and the GPUs' memory. Runs in its own PID namespace (as the command runs in the Ray container), so it sees and ends
only its own processes."""
import pathlib
import re
import shutil
import subprocess
import textwrap
import time

import jinja2
import pytest

TEMPLATE = pathlib.Path(__file__).resolve().parents[2] / "roles" / "serve" / "templates" / "dgxspark-vllm.service.j2"

# An API server that ignores SIGTERM, with its engine core (which starts a child of its own), and a core orphaned by an
# earlier API server, named as vLLM names its core.
API = """import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen([sys.executable, sys.argv[1]])
time.sleep(300)
"""
CORE = """import signal, subprocess, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen(["sleep", "300"])
time.sleep(300)
"""
ORPHAN = """import ctypes, os, time
if os.fork() == 0:
    ctypes.CDLL(None).prctl(15, b"VLLM::EngineCore", 0, 0, 0)
    time.sleep(300)
"""
# Inside the namespace: the processes, the stop, then how many of them were running before and after.
SCENE = textwrap.dedent("""\
    sh -c 'echo $$ > {pidfile}; exec python3 {api} {core}' &
    python3 {orphan}
    engine() {{  # the engine's processes still running (a zombie has ended: only its parent's wait is left)
        for s in /proc/[0-9]*/status; do
            grep -q '^State:[[:space:]]*[^Z]' "$s" 2>/dev/null \\
                && grep -qx 'Name:[[:space:]]*\\(python3\\|sleep\\|VLLM::EngineCor\\)' "$s" && echo x
        done | wc -l
    }}
    for i in $(seq 150); do [ "$(engine)" -ge 4 ] && break; sleep 0.2; done  # all started (a loaded machine is slow)
    before=$(engine)
    sh -c {stop}
    sleep 0.5
    echo "$before $(engine)"
    test -e {pidfile} && echo "pidfile left"
    exit 0
""")


def end_engine(pidfile, grace):
    source = TEMPLATE.read_text()
    expr = re.search(r"\{% set end_engine = (.*?)%\}", source, re.S).group(1)
    return jinja2.Environment().from_string("{{ " + expr + " }}").render(pidfile=pidfile, serve_stop_grace_sec=grace)


@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare for a PID namespace of its own")
def test_the_stop_ends_the_whole_engine_tree_and_an_orphaned_engine_core(tmp_path):
    pidfile = tmp_path / "engine.pid"
    stop = end_engine(str(pidfile), 2)
    files = {}
    for name, text in (("api", API), ("core", CORE), ("orphan", ORPHAN)):
        files[name] = tmp_path / f"{name}.py"
        files[name].write_text(text)
    script = SCENE.format(pidfile=pidfile, stop="'" + stop.replace("'", "'\\''") + "'", **files)
    res = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script], capture_output=True,
                         text=True, timeout=60, check=False)
    if res.returncode != 0 and "unshare" in res.stderr:
        pytest.skip("no PID namespace here: " + res.stderr.strip())
    before, after = (int(n) for n in res.stdout.split()[:2])
    # The API server, its engine core, the core's child and the orphaned core; none of them after the stop.
    assert (before, after) == (4, 0), res.stdout + res.stderr
    assert "pidfile left" not in res.stdout


def test_a_late_stop_leaves_the_pidfile_of_the_engine_started_after_it(tmp_path):
    # The stop of an engine that took long to end: meanwhile the unit started the next engine, whose pid is in the
    # pidfile now. The late stop must leave that pidfile (CI saw a running engine without one after a restart).
    pidfile = tmp_path / "engine.pid"
    # An engine that takes 3 s to end after SIGTERM.
    old = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 3"])  # pylint: disable=consider-using-with
    pidfile.write_text(f"{old.pid}\n")
    stop = end_engine(str(pidfile), 30)
    late = subprocess.Popen(["sh", "-c", stop])  # pylint: disable=consider-using-with
    time.sleep(0.5)
    pidfile.write_text("424242\n")  # the next engine's pid, written while the stop still waits
    old.wait(timeout=30)
    late.wait(timeout=60)
    assert pidfile.read_text() == "424242\n"


def test_the_stop_removes_the_pidfile_of_the_engine_it_ended(tmp_path):
    pidfile = tmp_path / "engine.pid"
    engine = subprocess.Popen(["sleep", "300"])  # pylint: disable=consider-using-with
    pidfile.write_text(f"{engine.pid}\n")
    res = subprocess.run(["sh", "-c", end_engine(str(pidfile), 5)], capture_output=True, text=True, timeout=60,
                         check=False)
    assert engine.wait(timeout=10) != 0, res.stderr
    assert not pidfile.exists()
