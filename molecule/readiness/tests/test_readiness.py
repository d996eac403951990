"""Readiness on the simulated pair: headless converged, and every preflight failure stops the run
with its own message before anything on a node changes."""

import json
import os
import pathlib
import re
import subprocess
import time

import pytest
import testinfra

from serving_checks import flat, record, sim_node  # noqa: E402  pylint: disable=wrong-import-position

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCENARIO = pathlib.Path(__file__).resolve().parents[1]
# Molecule's inventory directory holds the scenario's hosts and the sim group_vars.
INVENTORY = pathlib.Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
CLUSTER = os.environ.get("DGXSPARK_SIM_CLUSTER", "readiness")
HEAD, WORKER = "spark-head", "spark-worker-1"
NODES = [HEAD, WORKER]
IFACE = "enp1s0f1np1"
WORKER_FABRIC_IP = "10.231.108.11"
PODMAN = ["podman", "--runtime", "runc"]

# What must not move when preflight fails: boot target, desktop, /etc, the admin's home, the fabric.
SNAPSHOT = (
    "systemctl get-default; systemctl is-active graphical.target display-manager.service || true; "
    "find /etc /home/spark -xdev -path /home/spark/.ansible -prune -o -type f -printf '%p %s %T@\\n' "
    "| sort | sha256sum; ip -o link show " + IFACE + " | grep -o 'mtu [0-9]*'"
)

# A test-only stand-in put ahead of nvidia-smi on the worker: same GPU, another driver release.
OTHER_DRIVER_STANDIN = """#!/bin/sh
# test stand-in: nvidia-smi of a node on another driver release
case "$*" in *--query-gpu=*) echo "0, NVIDIA GB10, 570.00.00"; exit 0;; esac
echo "| NVIDIA-SMI 570.00.00    Driver Version: 570.00.00    CUDA Version: 13.0     |"
"""


def node(name):
    return testinfra.get_host(f"ansible://{name}", ansible_inventory=str(INVENTORY))


def sudo(name, cmd):
    """Run a command as root on a sim node from the harness side (setup, teardown, snapshots)."""
    out = subprocess.run(PODMAN + ["exec", f"{CLUSTER}-{name}", "sh", "-c", cmd], capture_output=True, text=True)
    assert out.returncode == 0, f"{name}: {cmd}: {out.stderr}"
    return out.stdout


def playbook(*args, inventory=INVENTORY, check=False, fresh_connections=False):
    """Run the scenario's converge (preflight, then headless) as a user would; return rc and output."""
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"))
    if fresh_connections:
        # New SSH control sockets: a master to a stopped node would hang.
        env["ANSIBLE_SSH_CONTROL_PATH_DIR"] = str(pathlib.Path(os.environ.get("TMPDIR", "/tmp"))
                                                  / f"readiness-cp-{time.monotonic_ns()}")
    cmd = ["ansible-playbook", "-i", str(inventory), str(SCENARIO / "converge.yml"), *args]
    if check:
        cmd += ["--check", "--diff"]
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    return res.returncode, res.stdout + res.stderr


def recap_changed(output):
    return {h: int(c) for h, c in re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", output, re.M)}


# --- the converged state ---------------------------------------------------------------

@pytest.mark.parametrize("name", NODES)
def test_boots_headless(name):
    assert node(name).check_output("systemctl get-default") == "multi-user.target"


@pytest.mark.parametrize("name", NODES)
def test_display_manager_stopped_sshd_running(name):
    host = node(name)
    assert host.run("systemctl is-active display-manager-standin.service").stdout.strip() == "inactive"
    assert host.run("systemctl is-active graphical.target").stdout.strip() == "inactive"
    assert host.service("ssh").is_running
    # The stand-in held 256 MB; its process is gone.
    assert host.run("pgrep -f 'bytearray\\(256'").rc == 1


def test_free_memory_short_fails_with_the_numbers():
    # Already headless, so nothing to switch: the check alone decides.
    rc, out = playbook("-e", "headless_gpu_memory_utilization=0.99")
    assert rc != 0
    # The figure is MemFree after the page cache was dropped: what a GB10's CUDA reports to the engine.
    assert re.search(r"spark-head: [0-9.]+ GiB free \(MemFree, page cache dropped\), but vLLM at gpu_memory_utilization "
                     r"0\.99 needs 0\.99 x [0-9.]+ GiB "
                     r"\+ 0\.5 GiB margin = [0-9.]+ GiB\.", out), out[-3000:]
    assert set(recap_changed(out).values()) == {0}


def test_drop_caches_tasks_run_alone(tmp_path):
    play = tmp_path / "drop.yml"
    play.write_text("""- name: Drop caches as the serving role does
  hosts: spark
  gather_facts: false
  tasks:
    - name: Drop the page cache
      ansible.builtin.include_role:
        name: dgxspark.vllm.headless
        tasks_from: drop_caches.yml
        apply:
          tags: [drop_caches]
      tags: [drop_caches]
""")
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"))
    res = subprocess.run(["ansible-playbook", "-i", str(INVENTORY), str(play), "--tags", "drop_caches"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert out.count("after dropping the page cache") == 2, out[-3000:]
    assert set(recap_changed(out).values()) == {0}


# --- from a desktop again: check mode tells the truth, then the failures --------------

@pytest.fixture(scope="module")
def desktop():
    """Both nodes back on the desktop, as a fresh DGX OS node is; headless again at the end."""
    for name in NODES:
        sudo(name, "systemctl set-default graphical.target && systemctl isolate graphical.target")
        assert node(name).run("systemctl is-active display-manager-standin.service").stdout.strip() == "active"
    yield
    rc, out = playbook()
    assert rc == 0, out[-3000:]
    for name in NODES:
        assert node(name).check_output("systemctl get-default") == "multi-user.target"


def test_check_mode_reports_the_switch_and_changes_nothing(desktop):
    before = {n: sudo(n, SNAPSHOT) for n in NODES}
    rc, out = playbook(check=True)
    assert rc == 0, out[-3000:]
    assert recap_changed(out) == {HEAD: 1, WORKER: 1}
    assert "-default: graphical.target" in out and "+default: multi-user.target" in out
    assert "-graphical.target: active" in out and "+graphical.target: inactive" in out
    assert {n: sudo(n, SNAPSHOT) for n in NODES} == before


# The sim's overlay over the shipped group_vars, as in every sim inventory (inventories/sim/hosts.yml).
SIM_GROUP = """    sim:
      vars: {ansible_group_priority: 10}
      children: {spark_head: {}, spark_workers: {}}
"""


def inventory_file(tmp_path, body):
    (tmp_path / "hosts.yml").write_text(body + SIM_GROUP)
    (tmp_path / "group_vars").symlink_to(INVENTORY / "group_vars")
    return tmp_path


HEAD_LINE = "spark-head: {ansible_host: 10.231.8.10, spark_fabric_ip: 10.231.108.10}"
WORKER_LINE = "spark-worker-1: {ansible_host: 10.231.8.11, spark_fabric_ip: 10.231.108.11}"
BAD_INVENTORIES = {
    "two_heads": f"""all:
  children:
    spark:
      children:
        spark_head:
          hosts:
            {HEAD_LINE}
            {WORKER_LINE}
        spark_workers: {{}}
""",
    "no_worker": f"""all:
  children:
    spark:
      children:
        spark_head:
          hosts:
            {HEAD_LINE}
""",
    "no_fabric_ip": f"""all:
  children:
    spark:
      children:
        spark_head:
          hosts:
            {HEAD_LINE}
        spark_workers:
          hosts:
            spark-worker-1: {{ansible_host: 10.231.8.11}}
""",
    "admin_user": f"""all:
  children:
    spark:
      children:
        spark_head:
          hosts:
            {HEAD_LINE}
        spark_workers:
          hosts:
            spark-worker-1: {{ansible_host: 10.231.8.11, spark_fabric_ip: 10.231.108.11, ansible_user: sparkadmin}}
""",
}

# A second admin on the worker, reachable with the sim key, for the admin_user case.
ADD_ADMIN = ("useradd --create-home --shell /bin/bash sparkadmin && install -d -m 0700 -o sparkadmin /home/sparkadmin/.ssh && "
             "install -m 0600 -o sparkadmin /home/spark/.ssh/authorized_keys /home/sparkadmin/.ssh/authorized_keys")


def scenario_set(key, value):
    """A command that sets one key of a sim node's scenario file (what its stand-ins report)."""
    return ("python3 -c \"import json, sys; p = '/etc/dgxspark-sim/scenario.json'; d = json.load(open(p)); "
            f"d['{key}'] = json.loads(sys.argv[1]); json.dump(d, open(p, 'w'))\" '{json.dumps(value)}'")


RAIL_WIDTH = "/etc/dgxspark-sim/sys/class/infiniband/rocep1s0f1/device/current_link_width"
KNOWN_BAD_KERNEL = "7.0.0-1019-nvidia"
SIM_KERNEL = "6.17.0-1032-nvidia"


def overrides(**args):
    return ["-e", json.dumps({"recipe_overrides": {"args": args}})]


# name: (extra args, setup on nodes, teardown on nodes, expected message)
CASES = {
    "two_heads": ([], {}, {}, r"exactly one host in group 'spark_head', it has 2 \(spark-head, spark-worker-1\)"),
    "no_worker": ([], {}, {}, r"one or more hosts in group 'spark_workers', apart from the head; it has 0"),
    "no_fabric_ip": ([], {}, {}, r"No valid fabric address \(spark_fabric_ip\) for: spark-worker-1\."),
    "admin_user": ([], {WORKER: ADD_ADMIN}, {WORKER: "userdel --force --remove sparkadmin"},
                   r"The nodes disagree on the admin user: spark-head=spark, spark-worker-1=sparkadmin\."),
    "layout": (overrides(**{"tensor-parallel-size": 4}), {}, {},
               r"tensor-parallel-size 4 x pipeline-parallel-size 1 must equal the GPUs across the nodes: 2 node"),
    "util": (overrides(**{"gpu-memory-utilization": 1.5}), {}, {},
             r"gpu-memory-utilization is 1\.5; it must be a number in \(0, 1\]"),
    "vision_no_images": (overrides(**{"limit-mm-per-prompt": {"image": 0, "video": 0}}), {}, {},
                         r"Vision is on \(recipe minimax-m3-vision\) but limit-mm-per-prompt sets image to 0"),
    "vision_video": (overrides(**{"limit-mm-per-prompt": {"image": 4, "video": 1}}), {}, {},
                     r"Vision is on with a video budget \(limit-mm-per-prompt video is 1\)"),
    "memory_plan": (overrides(**{"max-model-len": 196608}), {}, {},
                    r"tokens, below max-model-len 196608 even at the top of its error"),
    "mtu": ([], {WORKER: f"ip link set {IFACE} mtu 1500"}, {WORKER: f"ip link set {IFACE} mtu 9000"},
            r"The nodes disagree on the MTU of the fabric interface: spark-head=9000, spark-worker-1=1500\."),
    "port_down": ([], {WORKER: f"ip link set {IFACE} down"}, {WORKER: f"ip link set {IFACE} up"},
                  r"spark-worker-1: ibdev2netdev shows no Up port \(rocep1s0f1 port 1 ==> enp1s0f1np1 \(Down\)\)"),
    "no_ipv4": ([], {WORKER: f"ip addr flush dev {IFACE}"}, {WORKER: f"ip addr add {WORKER_FABRIC_IP}/24 dev {IFACE}"},
                r"spark-worker-1: enp1s0f1np1 has no IPv4 address\."),
    "fabric_silent": (["-e", "preflight_connect_timeout=3"],
                      {HEAD: f"ip route add blackhole {WORKER_FABRIC_IP}/32"},
                      {HEAD: f"ip route del blackhole {WORKER_FABRIC_IP}/32"},
                      rf"From spark-head, no answer on TCP 22 at the fabric address of spark-worker-1 \({WORKER_FABRIC_IP}\)"),
    "ssh_refused": ([], {HEAD: "su spark -c \"ssh-keygen -q -t ed25519 -N '' -f ~/.ssh/dgxspark_node_trust_ed25519\""},
                    {HEAD: "rm -f /home/spark/.ssh/dgxspark_node_trust_ed25519 /home/spark/.ssh/dgxspark_node_trust_ed25519.pub"},
                    r"spark-head cannot log in non-interactively \(ssh in batch mode, .*\) to: spark-worker-1"),
    "driver": ([], {WORKER: "mv /usr/local/bin/nvidia-smi /usr/local/bin/nvidia-smi.sim && "
                    "cat > /usr/local/bin/nvidia-smi <<'EOF'\n" + OTHER_DRIVER_STANDIN + "EOF\n"
                    "chmod 0755 /usr/local/bin/nvidia-smi"},
               {WORKER: "mv -f /usr/local/bin/nvidia-smi.sim /usr/local/bin/nvidia-smi"},
               r"The nodes disagree on the GPU driver version: spark-head=[0-9.]+, spark-worker-1=570\.00\.00\."),
    # What the later phases rely on, on the node as the admin user.
    "sudo_password": ([], {WORKER: "echo 'spark ALL=(ALL) ALL' > /etc/sudoers.d/spark"},
                      {WORKER: "echo 'spark ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/spark"},
                      r"spark-worker-1: `sudo -n true` as spark failed \(sudo: a password is required\)"),
    "docker_denied": ([], {WORKER: "chmod 0600 /var/run/docker.sock"}, {WORKER: "chmod 0660 /var/run/docker.sock"},
                      r"spark-worker-1: `docker info` as spark failed \(.*permission denied.*\)\. Fix: add the admin user"),
    "no_nvidia_runtime": ([], {WORKER: "mv /etc/docker/daemon.json /etc/docker/daemon.json.sim && systemctl restart docker"},
                          {WORKER: "mv /etc/docker/daemon.json.sim /etc/docker/daemon.json && systemctl restart docker"},
                          r"spark-worker-1: Docker has no NVIDIA runtime \(runtimes: [^)]*\) .* nvidia-ctk runtime configure"),
    "no_rsync": ([], {WORKER: "mv /usr/bin/rsync /usr/bin/rsync.off"}, {WORKER: "mv /usr/bin/rsync.off /usr/bin/rsync"},
                 r"spark-worker-1: rsync not found on the PATH of spark"),
    "disk_short": (["-e", "preflight_disk_margin_gib=100000"], {}, {},
                   r"spark-(head|worker-1): not enough disk: .* GiB with the margin under .* GiB are free"),
    # Known-bad host releases (roles/preflight/files/known_bad.yml), before any image or model moves.
    "known_bad_kernel": ([], {HEAD: scenario_set("kernel", KNOWN_BAD_KERNEL)}, {HEAD: scenario_set("kernel", SIM_KERNEL)},
                         r"spark-head runs a known-bad release\. kernel 7\.0\.0-1019-nvidia, kho on: .* Fix: .*kho=off.*"
                         r"preflight_known_bad_accept: \[kernel-7\.0\.0-1019-kho\]"),
    "rail_pcie_x2": ([], {WORKER: f"echo 2 > {RAIL_WIDTH}"}, {WORKER: f"echo 4 > {RAIL_WIDTH}"},
                     r"spark-worker-1 runs a known-bad release\. rail_pcie_width 2: .* Fix: "),
    # NCCL_IB_HCA against the Up RoCE devices: one twin of a QSFP port left out, a device that is not Up.
    "hca_twin_missing": (["-e", "ray_cluster_ib_hca=rocep1s0f1"],
                         {WORKER: scenario_set("rdma_twin", ["roceP2p1s0f1", "enP2p1s0f1np1"])},
                         {WORKER: scenario_set("rdma_twin", None)},
                         r"spark-worker-1: NCCL_IB_HCA=rocep1s0f1 leaves out roceP2p1s0f1, Up on this node.* "
                         r"It comes from ray_cluster_ib_hca\. Fix: list every device"),
    "hca_not_up": (["-e", "ray_cluster_ib_hca=rocep1s0f1,rocep1s0f0"], {}, {},
                   r"spark-(head|worker-1): NCCL_IB_HCA=rocep1s0f1,rocep1s0f0 names rocep1s0f0, not Up on this node "
                   r"\(its RoCE devices: rocep1s0f1 \(Up\)\)"),
    # Variables of the roles after preflight, checked against their argument specs before any change.
    # The shared values are checked by Ansible itself as the first play starts (every role depends on common).
    "backend_choice": (["-e", "common_executor_backend=rya"], {}, {},
                       r"Validation of arguments failed: value of common_executor_backend must be one of: ray, mp, got: rya"),
    "image_source_choice": (["-e", "image_source=fetch"], {}, {},
                            r"role image: value of image_source must be one of: pull, build, load, got: fetch"),
    "triton_mode_choice": (["-e", "triton_cache_mode=sync"], {}, {},
                           r"role triton_cache: value of triton_cache_mode must be one of: push, union, got: sync"),
    "validate_mode_choice": (["-e", "validate_mode=full"], {}, {},
                             r"role validate: value of validate_mode must be one of: content, transport, got: full"),
    "models_source_choice": (["-e", "models_source=ftp"], {}, {},
                             r"role models: value of models_source must be one of: hub, local, got: ftp"),
    "port_type": (["-e", "common_api_port=http"], {}, {},
                  r"Validation of arguments failed: argument 'common_api_port' is of type str and we were unable to "
                  r"convert to int"),
    "watch_window": (["-e", "gpu_watch_wedge_seconds=5"], {}, {},
                     r"gpu_watch needs an interval of at least 1 s and windows of at least two samples: interval=10, wedge=5 s"),
    "ray_cpus_type": (["-e", "ray_cluster_num_cpus=two"], {}, {},
                      r"role ray_cluster: argument 'ray_cluster_num_cpus' is of type str and we were unable to convert to int"),
    "socket_interface": (["-e", json.dumps({"ray_cluster_env": {"GLOO_SOCKET_IFNAME": "enp9s0"}})], {}, {},
                         r"GLOO_SOCKET_IFNAME=enp9s0 names no interface of this node .* It comes from ray_cluster_env"),
    # Preflight alone (as before a maintenance window) checks every role's variables, bench's and diagnose's too.
    "preflight_alone_checks_every_role": (["--tags", "preflight", "-e", "bench_runs=oops"], {}, {},
                                          r"role bench: argument 'bench_runs' is of type str and we were unable to convert to int"),
    # Rules across variables, and values in their registries' syntax.
    "port_clash": (["-e", "common_api_port=29501"], {}, {},
                   r"each used once, but they are \{\"common_api_port\": \"?29501\"?, \"ray_cluster_port\": 29501\}"),
    "api_host_syntax": (["-e", "common_api_host=10.231.8.10:8000"], {}, {},
                        r"common_api_host = '10\.231\.8\.10:8000' is not an address the API can bind to"),
    # A role's own copy of a shared value, set apart from it: the engine would bind one port and be probed on another.
    "own_copy_of_a_shared_value": (["-e", "serve_api_port=9000"], {}, {},
                                   r"spark-(head|worker-1): serve_api_port = \"?9000\"? differs from common_api_port = 8000, "
                                   r"which the other roles read; .* Set common_api_port instead"),
    "recipe_params_own_format": (["-e", json.dumps({"recipe_params": {"util": 0.9}})], {}, {},
                                 r"recipe_params \(util\) fill in the parameters of a launcher recipe file, but "
                                 r"minimax-m3-vision is in the collection's own format"),
    "image_ref_syntax": (["-e", "image_ref='vllm node:latest'"], {}, {},
                         r"image_ref = 'vllm node:latest' is not an image reference"),
    "model_id_syntax": (["-e", json.dumps({"recipe_overrides": {"model": "MiniMax M3"}})], {}, {},
                        r"models: ids must look like ORG/NAME .*'MiniMax M3'"),
    # vLLM flags, checked against the flag list of the vLLM the collection ships (no image on the head yet).
    "flag_typo": (overrides(**{"max-model-lenght": 8192}), {}, {},
                  r"--max-model-lenght \(from recipe_overrides \(args\), set in the inventory or with -e\) "
                  r"is not in the flag set of vLLM 0\.32\.0 shipped with the collection .*Did you mean --max-model-len\?"),
    "flag_json_syntax": (overrides(**{"compilation-config": '{"mode": 0, cudagraph_mode: "FULL_DECODE_ONLY"}'}), {}, {},
                         r"--compilation-config \(from recipe_overrides \(args\), set in the inventory or with -e\) "
                         r"takes JSON, and .* does not parse: Expecting property name"),
    "flag_json_key_typo": (overrides(**{"compilation-config": {"mode": 0, "cudagraph_mod": "FULL_DECODE_ONLY"}}), {}, {},
                           r"--compilation-config key 'cudagraph_mod' .*Did you mean 'cudagraph_mode'\?"),
    # Values: what the parser converts to, and the bounds vLLM's config classes declare (read with the list).
    "flag_values": (overrides(**{"max-num-seqs": "two", "max-num-batched-tokens": 0}), {}, {},
                    r"(?=.*--max-num-seqs \(from recipe_overrides \(args\), set in the inventory or with -e\) is 'two', "
                    r"and vLLM 0\.32\.0 \(the list shipped with the collection\) takes a whole number there)"
                    r"(?=.*--max-num-batched-tokens \(from recipe_overrides .*is 0, and vLLM 0\.32\.0 "
                    r"\(the list shipped with the collection\) declares >= 1 for it \(SchedulerConfig\))"),
}

@pytest.mark.parametrize("case", list(CASES))
def test_preflight_failure_stops_the_run_and_changes_nothing(desktop, tmp_path, case):
    args, setup, teardown, message = CASES[case]
    inventory = inventory_file(tmp_path, BAD_INVENTORIES[case]) if case in BAD_INVENTORIES else INVENTORY
    for name, cmd in setup.items():
        sudo(name, cmd)
    try:
        before = {n: sudo(n, SNAPSHOT) for n in NODES}
        started = time.monotonic()
        rc, out = playbook(*args, inventory=inventory)
        seconds = time.monotonic() - started
        after = {n: sudo(n, SNAPSHOT) for n in NODES}
    finally:
        for name, cmd in teardown.items():
            sudo(name, cmd)
    assert rc != 0, out[-3000:]
    # Each node's error, whole: Ansible's own argument check puts its findings on the lines after the first.
    errors = [" ".join(e.split()) for e in re.findall(r"^\[ERROR\]: Task failed: Action failed: (.*?)(?=^Origin:|^fatal:|\Z)",
                                                      out, re.M | re.S)]
    assert errors and all(re.search(message, e) for e in errors), out[-3000:]
    record(case, "preflight", seconds, sum(recap_changed(out).values()) + sum(after[n] != before[n] for n in NODES),
           errors[0])
    assert "PLAY [Headless nodes]" not in out
    assert set(recap_changed(out).values()) == {0}, out[-2000:]
    # Still on the desktop: headless, which would have switched them, never ran.
    assert after == before
    assert all(s.startswith("graphical.target") for s in after.values())


def test_down_node_stops_the_run_naming_it(desktop):
    before = sudo(HEAD, SNAPSHOT)
    sim_node("stop-node", CLUSTER, WORKER)
    try:
        rc, out = playbook("-e", "preflight_connect_timeout=3", fresh_connections=True)
    finally:
        sim_node("start-node", CLUSTER, WORKER)
    assert rc != 0, out[-3000:]
    assert re.search(r"Not reachable over SSH from this machine: spark-worker-1 \(", out), out[-3000:]
    assert "PLAY [Headless nodes]" not in out
    assert sudo(HEAD, SNAPSHOT) == before


def test_after_node_trust_preflight_checks_the_login_strictly(desktop):
    """Once node_trust has set up the head's key, preflight logs in with it (BatchMode, strict host keys)."""
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"))
    res = subprocess.run(["ansible-playbook", "-i", str(INVENTORY), str(ROOT / "playbooks" / "site.yml"),
                          "--tags", "node_trust"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    rc, out = playbook()
    assert rc == 0, out[-3000:]
    login = out.split("the head logs in to each worker non-interactively (BatchMode)", 1)[1].split("TASK [", 1)[0]
    assert "ok: [spark-head] => (item=spark-worker-1)" in login, login
    assert "is not on spark-head yet" not in out


def test_known_bad_release_accepted_runs_with_a_warning_naming_it():
    """preflight_known_bad_accept takes the risk of one row: the run goes on and says which."""
    sudo(HEAD, scenario_set("kernel", KNOWN_BAD_KERNEL))
    try:
        rc, out = playbook("--tags", "preflight", "-e", json.dumps({"preflight_known_bad_accept": ["kernel-7.0.0-1019-kho"]}))
    finally:
        sudo(HEAD, scenario_set("kernel", SIM_KERNEL))
    assert rc == 0, out[-3000:]
    assert re.search(r"WARNING: spark-head runs a known-bad release, its risk accepted by preflight_known_bad_accept\.\s+"
                     r"kernel-7\.0\.0-1019-kho: ", out), out[-3000:]
    assert "WARNING: spark-worker-1 runs a known-bad release" not in out


def site(*args):
    """Run the shipped site.yml against the scenario's inventory; return rc and output."""
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"))
    res = subprocess.run(["ansible-playbook", "-i", str(INVENTORY), str(ROOT / "playbooks" / "site.yml"), *args],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    return res.returncode, res.stdout + res.stderr


def test_fabric_phase_records_its_figures_and_a_rerun_reads_them():
    """The fabric phase measures each rail and TCP (the sim's figures are modelled), records them on the head, and
    a converged re-run reads the record instead of measuring, changing nothing."""
    rc, out = site("--tags", "fabric", "-e", "fabric_remeasure=true")
    assert rc == 0, out[-3000:]
    assert "spark-head -> spark-worker-1, rocep1s0f1: 95.0 Gb/s of RDMA writes (at least 80)." in flat(out), out[-3000:]
    record = json.loads(sudo(HEAD, "cat /var/lib/dgxspark-vllm/fabric.json"))
    assert record["figures"] == "modelled"
    assert [(r["kind"], r["device"], r["ok"]) for r in record["results"]] == [("rdma", "rocep1s0f1", True), ("tcp", "tcp", True)]
    rc, out = site("--tags", "fabric")
    assert rc == 0, out[-3000:]
    assert "Measured before, for the same workers, devices and thresholds" in flat(out), out[-3000:]
    assert set(recap_changed(out).values()) == {0}, out[-3000:]


def test_degraded_link_stops_site_before_the_image_moves():
    """A rail at a tenth of its rate (the degraded ConnectX-7 initialization) stops site.yml at the fabric phase,
    naming the pair, the device, the figure, the threshold and the cause, before the image phase starts."""
    sudo(HEAD, scenario_set("rdma_gbps", 13))
    try:
        started = time.monotonic()
        rc, out = site("-e", "fabric_remeasure=true")
        seconds = time.monotonic() - started
    finally:
        sudo(HEAD, scenario_set("rdma_gbps", 95))
    assert rc != 0, out[-3000:]
    errors = re.findall(r"^\[ERROR\]: Task failed: Action failed: (.*)$", out, re.M)
    assert errors and re.search(r"spark-head -> spark-worker-1, rocep1s0f1: 13\.0 Gb/s of RDMA writes, below 80\. "
                                r"Likely the degraded initialization .* Fix: power-cycle both nodes", errors[0]), out[-3000:]
    record("degraded_link", "fabric", seconds, sum(recap_changed(out).values()), errors[0])
    assert "PLAY [Serving image" not in out, out[-3000:]
    # A failed record is not proof: the next run measures again (and passes, the rail back at 95).
    rc, out = site("--tags", "fabric")
    assert rc == 0 and "95.0 Gb/s of RDMA writes" in flat(out), out[-3000:]


def test_diagnose_lists_a_known_bad_release_without_failing(tmp_path):
    """diagnose.yml matches every node's releases against the table and reports a hit as a finding (never fatal)."""
    sudo(HEAD, scenario_set("kernel", KNOWN_BAD_KERNEL))
    try:
        env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"))
        res = subprocess.run(["ansible-playbook", "-i", str(INVENTORY), str(ROOT / "playbooks" / "diagnose.yml"),
                              "-e", f"diagnose_report_dir={tmp_path}"], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=300)
    finally:
        sudo(HEAD, scenario_set("kernel", SIM_KERNEL))
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    report = json.loads(next(tmp_path.glob("diagnose-*.json")).read_text())
    assert any(f.startswith("spark-head: known-bad release kernel-7.0.0-1019-kho: Turn Kexec HandOver off")
               for f in report["findings"]), report["findings"]
    sections = {n: {s["name"]: s for s in d["sections"]} for n, d in report["nodes"].items()}
    assert sections[HEAD]["Known-bad releases (the known-bad table)"]["rc"] == 1
    assert sections[WORKER]["Known-bad releases (the known-bad table)"]["output"] == "none of the table's releases on this node"

