"""A fresh clone runs the site playbook with ansible-core alone: the collection is found from the working
tree through a tracked link and ansible.cfg, with no bootstrap, root or sim tool."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
LINK = ".collections/ansible_collections/dgxspark/vllm"


def test_the_collection_link_is_tracked():
    out = subprocess.run(["git", "ls-files", "-s", LINK], cwd=ROOT, capture_output=True, text=True, check=True,
                         timeout=30).stdout.split()
    assert out and out[0] == "120000", f"{LINK} must be a tracked symlink (git add it), got {out}"
    assert os.readlink(ROOT / LINK) == "../../.."


def test_site_syntax_checks_with_only_ansible_cfg_to_find_the_collection():
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    playbook = pathlib.Path(sys.executable).with_name("ansible-playbook")
    res = subprocess.run([str(playbook), "--syntax-check", "-i", "inventories/spark-pair", "site.yml"], cwd=ROOT,
                         env=env, capture_output=True, text=True, check=False, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
