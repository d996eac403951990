"""The built collection as a user installs it: `ansible-galaxy collection build` and `install` into a folder of
the user's own, then `ansible-playbook dgxspark.vllm.site` from another folder with a copy of the inventory and no
ansible.cfg of the project's: on the pair the scenario converged, it runs through, changes nothing and restarts
neither Ray nor the engine. It is the suite's one converged second run of the whole site.yml: with the Ray container
not restarted, the engine's flags are read once (preflight's check), not again by serve (the converged fast path)."""
import os
import pathlib
import shutil
import subprocess
import sys

import serving_checks as sc

HOSTS = sc.inventory()


def run(argv, cwd, env, timeout):
    res = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert res.returncode == 0, f"{' '.join(argv)}:\n{(res.stdout + res.stderr)[-4000:]}"
    return res.stdout


def main_pids():
    """The main process of Ray's and the engine's units on every node: a restart changes it."""
    return {(name, unit): sc.node(name).service(unit).systemd_properties["MainPID"]
            for name in HOSTS for unit in ("dgxspark-ray", "dgxspark-vllm")}


def tasks_that_ran(out, name):
    """The banners of tasks named `name` that ran (or, an include, were included) on some host: a user's default
    output shows the banners of skipped ones too."""
    ran, current = [], None
    for line in out.splitlines():
        if line.startswith(("TASK [", "PLAY [", "RUNNING HANDLER [")):
            current = line if line.startswith("TASK [") and name in line else None
        elif current and line.startswith(("ok:", "changed:", "included:")):
            ran.append(current)
            current = None
    return ran


def test_the_installed_collection_runs_the_site_playbook_from_a_users_folder(tmp_path):
    # The user's machine: only ansible-core, no variable of the project's harness, no ansible.cfg in reach.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MOLECULE_"))}
    env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    bindir = pathlib.Path(sys.executable).parent
    run([str(bindir / "ansible-galaxy"), "collection", "build", "--output-path", str(tmp_path / "dist"), str(sc.PROJECT)],
        cwd=tmp_path, env=env, timeout=300)
    artifact = next((tmp_path / "dist").glob("dgxspark-vllm-*.tar.gz"))
    collections = tmp_path / "collections"
    # --force: the same version in the user's own collections (the lint stage's ansible-lint run leaves one in
    # ~/.ansible/collections) makes ansible-galaxy skip the install here ("Nothing to do").
    run([str(bindir / "ansible-galaxy"), "collection", "install", "--offline", "--force", "-p", str(collections), str(artifact)],
        cwd=tmp_path, env=env, timeout=300)
    assert not (collections / "ansible_collections" / "dgxspark" / "vllm" / "ansible.cfg").exists()
    # A copy of the inventory in the user's folder (links resolved: the user has files, not the repo's links).
    user = tmp_path / "user"
    shutil.copytree(sc.INVENTORY, user / "inventory", symlinks=False)
    env["ANSIBLE_COLLECTIONS_PATH"] = str(collections)
    before = main_pids()
    out = run([str(bindir / "ansible-playbook"), "-i", "inventory", "dgxspark.vllm.site"], cwd=user, env=env, timeout=1500)
    changed = {name: sc.changed_count(out, name) for name in HOSTS}
    assert not any(changed.values()), f"the installed collection changed {changed} on the converged pair:\n{out[-4000:]}"
    assert main_pids() == before, "a converged run restarted Ray or the engine"
    reads = tasks_that_ran(out, "read the flags of the image")
    assert len(reads) == 1, reads
    assert tasks_that_ran(out, "check every vLLM flag against the image's vLLM on the head"), out[-4000:]
    assert "Finish line" in out and "Endpoint: http://" in sc.flat(out)
