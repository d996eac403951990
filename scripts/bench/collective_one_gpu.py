#!/usr/bin/env python3
"""The fabric role's collective script (plugins/modules/fabric_collective.py, SCRIPT) on one real GPU, world size 1:
that it runs on a CUDA build of torch with NCCL and with gloo, and what it reads of the NCCL the process loaded
(its version and the libnccl file mapped), then what the collection's known-bad table (roles/preflight/files/known_bad.yml)
finds in that readout. One rank moves nothing across a link, so its times are no fabric figure; the bus bandwidth
the role judges needs two nodes.

    python3 scripts/bench/collective_one_gpu.py        # on a machine with one NVIDIA GPU and torch
"""
import ast
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULE = ROOT / "plugins" / "modules" / "fabric_collective.py"
sys.path.insert(0, str(ROOT / "plugins" / "module_utils"))
import _known_bad  # noqa: E402  pylint: disable=wrong-import-position


def script():
    """SCRIPT and MARK as the module ships them, read without importing the module (it needs Ansible)."""
    tree = ast.parse(MODULE.read_text())
    found = {t.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name) and t.id in ("SCRIPT", "MARK")}
    return found["SCRIPT"], found["MARK"]


def main():
    code, mark = script()
    env = dict(os.environ, DGXSPARK_RANK="0", DGXSPARK_WORLD="1", DGXSPARK_MASTER_ADDR="127.0.0.1")
    for port, backend in ((29611, "nccl"), (29612, "gloo")):
        env["DGXSPARK_MASTER_PORT"] = str(port)
        res = subprocess.run([sys.executable, "-c", code, backend, "4194304,16777216", "5", "120"], env=env,
                             capture_output=True, text=True, timeout=600, check=False)
        line = next((l for l in res.stdout.splitlines() if l.startswith(mark)), None)
        report = json.loads(line[len(mark):]) if line else None
        known_bad = None
        if report:
            import yaml  # pylint: disable=import-outside-toplevel
            table = yaml.safe_load((ROOT / "roles" / "preflight" / "files" / "known_bad.yml").read_text())
            facts = {"nccl_version": report["nccl"]["version"], "nccl_file": report["nccl"]["file"]}
            known_bad = [hit["id"] for hit in _known_bad.evaluate(table, facts)["hits"]]
        print(json.dumps({"backend": backend, "exit": res.returncode, "report": report, "known_bad": known_bad,
                          "stderr_tail": None if report else res.stderr[-2000:]}, indent=1))


if __name__ == "__main__":
    main()
