"""The sim engine plugin (sim/engine/plugin): its mods stand-in runs without importing vLLM."""
import pathlib
import subprocess
import sys

PLUGIN = pathlib.Path(__file__).resolve().parents[2] / "sim" / "engine" / "plugin"


def test_the_mods_stand_in_does_not_import_vllm(tmp_path):
    # Each of the nine mod runs of a converge imported vLLM (and torch) for two constants: seconds of a
    # shared core each. A vLLM that fails when imported proves it is not.
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("raise SystemExit('vllm was imported')\n")
    code = ("import sys; import dgxspark_sim_vllm.mods, dgxspark_sim_vllm.faults as f; "
            "assert 'torch' not in sys.modules; print(f.MARK)")
    res = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": f"{PLUGIN}:{tmp_path}"},
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "dgxspark-sim mod applied" in res.stdout
