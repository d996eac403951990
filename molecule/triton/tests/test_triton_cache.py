"""The Triton cache after the role ran, and the traps it must handle.

Runs in order: each test leaves head and worker in agreement for the next.
"""

import json
import os
import subprocess
import time

import testinfra

INVENTORY = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
PROJECT = os.environ["MOLECULE_PROJECT_DIRECTORY"]
SCENARIO = os.path.join(PROJECT, "molecule", "triton")
HEAD, WORKER = "spark-head", "spark-worker-1"
WORKER_FABRIC = "10.231.103.11"
CACHE = "/home/spark/.triton"
SEED_KERNELS = ["eagle_prepare_next", "_nvfp4_write", "update_regular_decode", "rejection_sample"]
ENV = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(PROJECT, ".collections"),
           ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
BASE_ARGS = {
    "src": CACHE, "src_name": HEAD,
    "dest": [f"spark@{WORKER_FABRIC}:~/.triton"], "dest_names": [WORKER],
    "ssh_key": "/home/spark/.ssh/dgxspark_node_trust_ed25519",
    "known_hosts": "/home/spark/.ssh/dgxspark_known_hosts",
    "become": True,
}


def node(name):
    return testinfra.get_host(f"ansible://{name}", ansible_inventory=INVENTORY)


def tree(name):
    """sha256 of every file of the node's cache, as sha256sum prints them (not the module's own
    digest cache, which records each node's inodes and so differs by design)."""
    out = node(name).check_output(f"cd {CACHE} && sudo find . -type f ! -name '.dgxspark-sync.digests*' -print0 "
                                  "| sort -z | sudo xargs -0 sha256sum")
    return out.splitlines()


def module(args=None, check=False, popen=False):
    """Run the module on the head as Ansible does; return its result."""
    argv = ["ansible", HEAD, "-i", INVENTORY, "-b", "-m", "dgxspark.vllm.triton_cache_sync",
            "-a", json.dumps(dict(BASE_ARGS, **(args or {})))] + (["--check"] if check else [])
    env = dict(ENV, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal")
    if popen:
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    return parse(out.stdout)


def parse(stdout):
    """The module's result from the minimal callback: `spark-head | CHANGED => {...}`."""
    start = stdout.index(HEAD + " | ")
    result = json.JSONDecoder().raw_decode(stdout[stdout.index("{", start):])[0]
    # The callback drops `failed` from the body; the header says it.
    result["failed"] = stdout[start:].startswith(HEAD + " | FAILED")
    return result


def converge(extra_vars):
    """The role through the scenario's converge playbook; return (rc, output)."""
    out = subprocess.run(["ansible-playbook", "-i", INVENTORY, os.path.join(SCENARIO, "converge.yml"),
                          "-e", json.dumps(extra_vars)], env=ENV, capture_output=True, text=True, check=False)
    return out.returncode, out.stdout + out.stderr


def flip_byte_keep_size_and_mtime(name, path):
    node(name).check_output(
        "sudo python3 -c 'import os,sys; p=sys.argv[1]; st=os.stat(p); b=bytearray(open(p,\"rb\").read()); "
        "b[len(b)//2]^=1; open(p,\"wb\").write(b); os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))' " + path)


def test_worker_cache_equals_head_with_the_seed_kernels():
    head = tree(HEAD)
    assert len(head) == 75 + 4 * 8
    assert tree(WORKER) == head
    worker = node(WORKER)
    for kernel in SEED_KERNELS:
        assert worker.run(f"ls {CACHE}/cache/*/{kernel}.json {CACHE}/cache/*/{kernel}.cubin").rc == 0, kernel


def test_root_owned_files_from_the_container_arrive_with_their_owner():
    out = node(WORKER).check_output(f"stat -c %U {CACHE}/cache/JTO5663WO6S5BQNBTUGUJOZAIYTMZ76TGSYHIK3VSBGZPEKLXXJA/softmax_kernel.cubin")
    assert out == "root"


def test_second_run_changes_nothing_and_verifies_everything():
    res = module()
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False
    dest = res["dest"][WORKER]
    assert dest["sent"] == [] and dest["verified_files"] == res["files"] == 107
    assert dest["verified_bytes"] == res["bytes"]


def test_flipped_byte_with_same_size_and_mtime_is_found_and_repaired():
    rel = "cache/JTO5663WO6S5BQNBTUGUJOZAIYTMZ76TGSYHIK3VSBGZPEKLXXJA/softmax_kernel.cubin"
    before = tree(WORKER)
    flip_byte_keep_size_and_mtime(WORKER, f"{CACHE}/{rel}")
    assert tree(WORKER) != before
    # rsync -a's quick check (size + mtime) passes it by.
    quick = node(HEAD).run(
        f"rsync -a -n -i -e 'ssh -i ~/.ssh/dgxspark_node_trust_ed25519 -o UserKnownHostsFile=~/.ssh/dgxspark_known_hosts' "
        f"--rsync-path='sudo rsync' {CACHE}/ spark@{WORKER_FABRIC}:{CACHE}/")
    assert quick.rc == 0 and "softmax_kernel.cubin" not in quick.stdout
    checked = module(check=True)
    assert checked["changed"] and checked["dest"][WORKER]["content_mismatch"] == [rel]
    assert tree(WORKER) != before
    # The role's default: digest caches on both nodes (written by the converge). The flip
    # changed the file's ctime, so the worker reads that one file again, and only it.
    res = module({"digest_cache": True})
    assert res["dest"][WORKER]["hashed"] == 2, res["dest"][WORKER]  # before (flipped) and after (repaired)
    assert res["changed"] and res["dest"][WORKER]["content_mismatch"] == [rel]
    assert res["dest"][WORKER]["sent"] == [rel]
    assert tree(WORKER) == tree(HEAD) == before


def test_killed_transfer_leaves_no_partial_file_and_the_rerun_converges():
    head, worker = node(HEAD), node(WORKER)
    rel = f"cache/KILLTEST{int(time.time())}/big_kernel.cubin"
    assert worker.run(f"test -e {CACHE}/{rel}").rc != 0
    head.check_output(f"mkdir -p {CACHE}/{os.path.dirname(rel)} && head -c 192M /dev/urandom > {CACHE}/{rel}")
    proc = module({"rsync_opts": ["--bwlimit=6M"]}, popen=True)
    try:
        partial = ""
        for _ in range(60):  # bounded: up to 30 s for the transfer to get going
            partial = worker.run(f"sudo find {CACHE}/.dgxspark-sync.tmp -type f -size +1M").stdout.strip()
            if partial:
                break
            time.sleep(0.5)
        assert partial, "the transfer never started"
        # Midway: the bytes sit in the scratch dir, nothing under the final name.
        assert worker.run(f"test -e {CACHE}/{rel}").rc != 0
        pid = worker.check_output("pgrep -o -f '^rsync --server'")
        worker.check_output(f"sudo kill -9 {pid}")
        stdout, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    res = parse(stdout)
    assert res["failed"] and "rsync failed" in res["msg"], res.get("msg")
    assert worker.run(f"test -e {CACHE}/{rel}").rc != 0, "a partial file sits under its final name"
    rerun = module()
    assert not rerun.get("failed"), rerun.get("msg")
    assert rel in rerun["dest"][WORKER]["sent"]
    assert worker.run(f"test -e {CACHE}/.dgxspark-sync.tmp").rc != 0
    assert tree(WORKER) == tree(HEAD)
    head.check_output(f"rm -rf {CACHE}/{os.path.dirname(rel)}")
    assert module({"delete": True})["dest"][WORKER]["deleted"] == [rel]


def test_without_become_root_owned_dirs_fail_with_a_clear_message():
    node(HEAD).check_output(f"sudo cp -a {CACHE}/cache/JTO5663WO6S5BQNBTUGUJOZAIYTMZ76TGSYHIK3VSBGZPEKLXXJA/softmax_kernel.json "
                            f"{CACHE}/cache/JTO5663WO6S5BQNBTUGUJOZAIYTMZ76TGSYHIK3VSBGZPEKLXXJA/new_kernel.json")
    before = tree(WORKER)
    res = module({"become": False})
    assert res["failed"] and res["failed_dests"] == [WORKER]
    assert "not writable by the login user" in res["msg"] and "become" in res["msg"]
    assert tree(WORKER) == before
    assert not module().get("failed")
    assert tree(WORKER) == tree(HEAD)


def test_down_worker_fails_alone_with_a_clear_message():
    res = module({"dest": BASE_ARGS["dest"] + ["spark@10.231.103.99:~/.triton"],
                  "dest_names": [WORKER, "spark-worker-9"], "connect_timeout": 3})
    assert res["failed"] and res["failed_dests"] == ["spark-worker-9"]
    assert "spark-worker-9: cannot reach spark@10.231.103.99 over SSH" in res["msg"]
    assert not res["dest"][WORKER]["failed"] and res["dest"][WORKER]["verified_files"] == res["files"]


def test_missing_required_kernel_fails_naming_node_and_kernel():
    rc, out = converge({"triton_cache_required_kernels": ["add_kernel", "never_compiled_kernel"],
                        "triton_cache_strict": True})
    assert rc != 0
    assert "never_compiled_kernel is on no node (spark-head, spark-worker-1)" in " ".join(out.split())


def test_cold_cache_explains_how_to_warm_it_without_failing():
    rc, out = converge({"triton_cache_required_kernels": ["never_compiled_kernel"]})
    text = " ".join(out.split())
    assert rc == 0, text[-2000:]
    assert "The Triton cache is cold" in text and "first serving run" in text


def test_kernel_only_on_a_worker_fails_push_and_union_gives_it_to_all():
    worker = node(WORKER)
    worker.check_output(f"sudo mkdir -p {CACHE}/cache/WORKERONLY && "
                        f"sudo cp {CACHE}/cache/STANDIN1*/eagle_prepare_next.json {CACHE}/cache/WORKERONLY/worker_kernel.json && "
                        f"sudo cp {CACHE}/cache/STANDIN1*/eagle_prepare_next.cubin {CACHE}/cache/WORKERONLY/worker_kernel.cubin")
    required = SEED_KERNELS + ["worker_kernel"]
    rc, out = converge({"triton_cache_required_kernels": required})
    text = " ".join(out.split())
    assert rc != 0 and "spark-head still lack worker_kernel" in text and "triton_cache_mode=union" in text
    rc, out = converge({"triton_cache_required_kernels": required, "triton_cache_mode": "union"})
    assert rc == 0, out[-2000:]
    assert tree(HEAD) == tree(WORKER)
    assert node(HEAD).run(f"test -f {CACHE}/cache/WORKERONLY/worker_kernel.cubin").rc == 0
