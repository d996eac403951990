"""One SSH contract: head-to-worker SSH is built in module_utils/_ssh.py only (modules call it, roles
reach it through the dgxspark.vllm.node_ssh filter), and the key and known_hosts paths live there too."""
import pathlib
import re
import shlex

import pytest

from ansible_collections.dgxspark.vllm.plugins.filter.node_ssh import node_ssh
from ansible_collections.dgxspark.vllm.plugins.module_utils import _ssh

ROOT = pathlib.Path(__file__).resolve().parents[2]
OWNER = ROOT / "plugins" / "module_utils" / "_ssh.py"
# What only the owner may write: SSH options, and the paths of node_trust's key and known_hosts.
HAND_BUILT = re.compile(r"StrictHostKeyChecking|UserKnownHostsFile|IdentitiesOnly|BatchMode=|Ciphers=|ConnectTimeout="
                        r"|ServerAlive|dgxspark_node_trust_ed25519|dgxspark_known_hosts")
# Code and data the collection runs (documentation may name the paths: READMEs, the doc fragment, argument specs).
CODE = [p for top in ("roles", "playbooks", "plugins") for p in sorted((ROOT / top).rglob("*"))
        if p.suffix in (".yml", ".yaml", ".py", ".j2", ".sh") and p != OWNER
        and "doc_fragments" not in p.parts and p.name != "argument_specs.yml"]


def _code_lines(path):
    """The lines of a file, without module DOCUMENTATION/EXAMPLES/RETURN text and comments."""
    text = path.read_text(encoding="utf-8")
    text = re.sub(r'(?s)(DOCUMENTATION|EXAMPLES|RETURN) = r?"""(.*?)"""', "", text)
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if not line.lstrip().startswith("#")]


def test_the_code_scan_sees_the_roles_and_modules():
    names = {p.relative_to(ROOT).as_posix() for p in CODE}
    assert {"roles/preflight/tasks/fabric.yml", "roles/models/tasks/workers.yml",
            "plugins/modules/triton_cache_sync.py", "plugins/modules/image_distribute.py"} <= names


@pytest.mark.parametrize("path", CODE, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_role_or_module_builds_ssh_by_hand(path):
    found = [f"{n}: {line.strip()}" for n, line in _code_lines(path) if HAND_BUILT.search(line)]
    assert not found, (f"{path.relative_to(ROOT)} writes SSH options or node_trust's paths itself; use "
                       "module_utils/_ssh.py (modules) or the dgxspark.vllm.node_ssh filter (roles):\n" + "\n".join(found))


def test_the_scan_catches_a_hand_built_command(tmp_path):
    bad = tmp_path / "task.yml"
    bad.write_text("- ansible.builtin.command:\n    argv: [ssh, -o, StrictHostKeyChecking=yes, -i, ~/.ssh/dgxspark_node_trust_ed25519]\n")
    assert len([1 for _, line in _code_lines(bad) if HAND_BUILT.search(line)]) == 1


def test_the_filter_gives_the_modules_own_command_line():
    out = node_ssh("", known_hosts="", home="/home/spark", connect_timeout=7)
    assert out["argv"] == _ssh.ssh_base(connect_timeout=7, home="/home/spark")
    assert out["key"] == "/home/spark/.ssh/dgxspark_node_trust_ed25519"
    assert out["known_hosts"] == "/home/spark/.ssh/dgxspark_known_hosts"
    assert shlex.split(out["rsh"]) == out["argv"]
    assert node_ssh("~/k")["key"] == "~/k"  # ssh expands the tilde itself


def test_every_role_defaults_its_key_to_the_shared_pair():
    """node_trust makes the key and known_hosts at the shared paths; every other role reads them there."""
    import yaml  # pylint: disable=import-outside-toplevel
    roles = {}
    for defaults in sorted((ROOT / "roles").glob("*/defaults/main.yml")):
        data = yaml.safe_load(defaults.read_text()) or {}
        roles.update({k: v for k, v in data.items() if re.search(r"ssh_key|key_path|known_hosts", k)})
    assert roles.pop("common_ssh_key") == "" and roles.pop("common_known_hosts") == ""
    assert roles, "no role takes a key"
    for name, value in roles.items():
        want = "common_known_hosts" if "known_hosts" in name else "common_ssh_key"
        assert value == "{{ %s }}" % want, name
