"""node_trust on the sim: only the head, with its own key, reaches the workers, and it checks host keys."""

import os
import pathlib
import subprocess

import pytest
import testinfra
import yaml

INVENTORY = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
SCENARIO = pathlib.Path(__file__).resolve().parents[1]
PROJECT = SCENARIO.parents[1]
HOSTS = yaml.safe_load((SCENARIO / "inventory" / "hosts.yml").read_text())["all"]["children"]["spark"]["children"]
HEAD = next(iter(HOSTS["spark_head"]["hosts"]))
WORKERS = HOSTS["spark_workers"]["hosts"]
FABRIC = {name: v["spark_fabric_ip"] for g in HOSTS.values() for name, v in g["hosts"].items()}
MGMT = {name: v["ansible_host"] for g in HOSTS.values() for name, v in g["hosts"].items()}
KEY = "/home/spark/.ssh/dgxspark_node_trust_ed25519"
KNOWN_HOSTS = "/home/spark/.ssh/dgxspark_known_hosts"
SIM_KEY = pathlib.Path.home() / ".cache" / "dgxspark-sim" / "ssh" / "id_ed25519"


def node(name):
    return testinfra.get_host(f"ansible://{name}", ansible_inventory=INVENTORY)


def strict_ssh(key, known_hosts, address, command="hostname"):
    return (f"ssh -i {key} -o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes "
            f"-o BatchMode=yes -o IdentitiesOnly=yes -o ConnectTimeout=5 spark@{address} {command}")


def remote(host, command):
    """Run a command that may fail with ssh's own 255 (testinfra would raise): (rc, stderr)."""
    out = host.run(command + ' ; echo "exit=$?" >&2')
    lines = out.stderr.strip().splitlines()
    return int(lines[-1].split("=", 1)[1]), "\n".join(lines[:-1]), out.stdout


def host_keys(name):
    out = node(name).check_output("cat /etc/ssh/ssh_host_*_key.pub")
    return {" ".join(line.split()[:2]) for line in out.splitlines() if line.strip()}


def known_hosts_entries(text):
    entries = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            address, keytype, key = line.split()[:3]
            entries.setdefault(address, set()).add(f"{keytype} {key}")
    return entries


def controller_ssh(key, address):
    return subprocess.run(
        ["ssh", "-i", str(key), "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5",
         "-o", "LogLevel=ERROR", f"spark@{address}", "hostname"],
        capture_output=True, text=True, check=False)


def playbook(inventory, *args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(PROJECT / ".collections"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", PY_COLORS="0")
    return subprocess.run(["ansible-playbook", "-i", str(inventory), str(SCENARIO / "converge.yml"), *args],
                          capture_output=True, text=True, check=False, env=env, cwd=PROJECT)


@pytest.fixture(name="head_private_key")
def fixture_head_private_key(tmp_path):
    """The head's private key, copied to the controller as an attacker who stole it would."""
    path = tmp_path / "stolen_key"
    path.write_text(node(HEAD).file(KEY).content_string)
    path.chmod(0o600)
    return path


def test_head_key_is_private_to_the_admin_user():
    key = node(HEAD).file(KEY)
    assert key.user == "spark" and key.mode == 0o600
    assert node(HEAD).file(KEY + ".pub").content_string.split()[2] == "dgxspark-node-trust"


def test_known_hosts_holds_exactly_the_workers_real_host_keys():
    entries = known_hosts_entries(node(HEAD).file(KNOWN_HOSTS).content_string)
    assert entries == {FABRIC[w]: host_keys(w) for w in WORKERS}


@pytest.mark.parametrize("worker", sorted(WORKERS))
def test_worker_authorizes_the_head_key_from_the_head_fabric_address_only(worker):
    lines = node(worker).file("/home/spark/.ssh/authorized_keys").content_string.splitlines()
    trust = [line for line in lines if line.endswith(" dgxspark-node-trust")]
    head_pub = node(HEAD).file(KEY + ".pub").content_string.split()[1]
    assert len(trust) == 1 and trust[0].startswith(f'from="{FABRIC[HEAD]}",') and head_pub in trust[0]
    # The sim's own controller key stays authorized next to it.
    assert SIM_KEY.with_suffix(".pub").read_text().split()[1] in "\n".join(lines)


@pytest.mark.parametrize("worker", sorted(WORKERS))
def test_head_reaches_worker_over_the_fabric_with_strict_host_key_checking(worker):
    rc, err, out = remote(node(HEAD), strict_ssh(KEY, KNOWN_HOSTS, FABRIC[worker]))
    assert rc == 0, err
    assert out.strip() == worker


@pytest.mark.parametrize("network", ["management", "fabric"])
def test_same_key_from_the_controller_is_refused(head_private_key, network):
    worker = sorted(WORKERS)[0]
    address = (MGMT if network == "management" else FABRIC)[worker]
    # The sim's own key reaches the same address: what fails below is the key, not the network.
    assert controller_ssh(SIM_KEY, address).returncode == 0
    out = controller_ssh(head_private_key, address)
    assert out.returncode != 0 and "Permission denied" in out.stderr, out.stderr


def test_same_key_from_another_worker_is_refused():
    first, second = sorted(WORKERS)[:2]
    host = node(first)
    host.check_output("umask 077; printf '%%s\\n' %s > /tmp/stolen_key", node(HEAD).file(KEY).content_string.strip())
    try:
        rc, err, _ = remote(host, strict_ssh("/tmp/stolen_key", "/dev/null", FABRIC[second]).replace(
            "StrictHostKeyChecking=yes", "StrictHostKeyChecking=no"))
        assert rc != 0 and "Permission denied" in err, err
    finally:
        host.run("rm -f /tmp/stolen_key")


def test_a_host_key_mismatch_is_refused():
    first, second = sorted(WORKERS)[:2]
    head = node(HEAD)
    # Pretend the first worker's address answers with the second worker's keys.
    forged = "\n".join(f"{FABRIC[first]} {k}" for k in host_keys(second))
    head.check_output("printf '%%s\\n' %s > /tmp/forged_known_hosts", forged)
    try:
        rc, err, _ = remote(head, strict_ssh(KEY, "/tmp/forged_known_hosts", FABRIC[first]))
        assert rc != 0 and "REMOTE HOST IDENTIFICATION HAS CHANGED" in err, err
    finally:
        head.run("rm -f /tmp/forged_known_hosts")


def test_an_unknown_host_is_refused():
    rc, err, _ = remote(node(HEAD), strict_ssh(KEY, KNOWN_HOSTS, FABRIC[HEAD]))
    assert rc != 0 and "Host key verification failed" in err, err


def test_check_mode_after_converge_changes_nothing():
    out = playbook(INVENTORY, "--check", "--diff")
    assert out.returncode == 0, out.stdout + out.stderr
    recap = [line for line in out.stdout.splitlines() if " : ok=" in line]
    assert len(recap) == len(FABRIC) and all("changed=0" in line for line in recap), out.stdout


def test_removing_a_worker_from_the_inventory_removes_its_known_hosts_entries(tmp_path):
    removed = sorted(WORKERS)[-1]
    reduced = yaml.safe_load((SCENARIO / "inventory" / "hosts.yml").read_text())
    del reduced["all"]["children"]["spark"]["children"]["spark_workers"]["hosts"][removed]
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(reduced))
    (tmp_path / "group_vars").symlink_to(PROJECT / "inventories" / "sim" / "group_vars")
    # A known_hosts file of its own, so the scenario's state stays as converge left it.
    path = "~/.ssh/removal_test_known_hosts"
    try:
        assert playbook(INVENTORY, "-e", f"node_trust_known_hosts_path={path}").returncode == 0
        before = known_hosts_entries(node(HEAD).check_output(f"cat {path}"))
        out = playbook(tmp_path, "-e", f"node_trust_known_hosts_path={path}", "--diff")
        assert out.returncode == 0, out.stdout + out.stderr
        after = known_hosts_entries(node(HEAD).check_output(f"cat {path}"))
    finally:
        node(HEAD).run(f"rm -f {path}")
    assert FABRIC[removed] in before
    assert set(after) == {FABRIC[w] for w in WORKERS if w != removed}
