"""The image role on the sim pair, after converge: identical IDs, then the hard cases.

Each case sets up its own starting state on the worker, runs the scenario's
converge playbook with ansible-playbook and checks the outcome on the nodes.
"""

import json
import os
import pathlib
import subprocess

import testinfra

INVENTORY = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
SCENARIO = pathlib.Path(__file__).resolve().parents[1]
PROJECT = SCENARIO.parents[1]
REF = "localhost/dgxspark-sim-serving:latest"
CLI = "docker"  # the admin user is in the docker group, as on DGX OS
STORAGE = "/var/lib/docker"


def node(name):
    return testinfra.get_host(f"ansible://{name}", ansible_inventory=INVENTORY)


HEAD, WORKER = node("spark-head"), node("spark-worker-1")


def image_id(host, ref=REF):
    res = host.run(f"{CLI} image inspect --format '{{{{.Id}}}}' {ref}")
    return res.stdout.strip() if res.rc == 0 else None


def remove_on_worker(ref=REF):
    WORKER.run(f"{CLI} rmi -f {ref}")
    assert image_id(WORKER, ref) is None


def playbook_argv(*extra):
    return ["ansible-playbook", "-i", INVENTORY, str(SCENARIO / "converge.yml"), *extra]


def playbook_env():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(PROJECT / ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACK_RESULT_FORMAT="yaml")
    return env


def converge(*extra):
    return subprocess.run(playbook_argv(*extra), cwd=PROJECT, env=playbook_env(), capture_output=True, text=True,
                          timeout=600)


def recap_changed(output, host):
    line = next(ln for ln in output.splitlines() if ln.startswith(host + " ") and "changed=" in ln)
    return int(line.split("changed=")[1].split()[0])


def test_every_node_has_the_head_image_id():
    head = image_id(HEAD)
    assert head, "the head has no " + REF
    assert image_id(WORKER) == head


def test_second_run_transfers_nothing():
    res = converge()
    assert res.returncode == 0, res.stdout[-3000:]
    assert "spark-worker-1: already has" in res.stdout
    assert recap_changed(res.stdout, "spark-head") == 0
    assert recap_changed(res.stdout, "spark-worker-1") == 0


def test_check_mode_names_the_receiving_worker_and_changes_nothing():
    remove_on_worker()
    res = converge("--check", "--diff")
    assert res.returncode == 0, res.stdout[-3000:]
    assert "spark-worker-1: would receive " + REF in res.stdout
    assert "-spark-worker-1: absent" in res.stdout
    assert image_id(WORKER) is None


def test_too_little_disk_fails_before_the_transfer_with_the_numbers():
    remove_on_worker()
    res = converge("-e", "image_free_space_factor=100000")
    assert res.returncode != 0
    out = " ".join((res.stdout + res.stderr).split())
    assert "Nothing was transferred." in out, out[-3000:]
    assert "spark-worker-1: " in out and f"free on {STORAGE}, the image needs" in out, out[-3000:]
    assert "x its size of" in out, out[-3000:]
    assert image_id(WORKER) is None


def test_mismatched_tag_on_the_worker_is_detected_and_repaired():
    remove_on_worker()
    # A different image under the same tag: an empty filesystem imported as REF.
    WORKER.check_output(f"tar -cf - --files-from /dev/null | {CLI} import - {REF}")
    wrong = image_id(WORKER)
    assert wrong and wrong != image_id(HEAD)
    res = converge()
    assert res.returncode == 0, res.stdout[-3000:]
    assert "spark-worker-1: received " + REF in res.stdout
    assert image_id(WORKER) == image_id(HEAD)


def test_cut_transfer_leaves_no_broken_image_and_the_rerun_converges():
    remove_on_worker()
    run = subprocess.Popen(playbook_argv(), cwd=PROJECT, env=playbook_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        # On the head: once the SSH client of the transfer has sent 100 MB, kill it (the link drops).
        # The bracket keeps this shell's own command line from matching.
        cut = HEAD.run(
            "for i in $(seq 1800); do "
            "pid=$(pgrep -u spark -f '^ssh .*[d]gxspark_node_trust_ed25519.* load -q' | head -n 1); "
            "if [ -n \"$pid\" ] && [ \"$(awk '/^rchar/ {print $2}' /proc/$pid/io 2>/dev/null || echo 0)\" -gt 100000000 ]; "
            "then kill \"$pid\" && echo \"cut $pid\" && exit 0; fi; sleep 0.1; done; exit 1")
        out, _ = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
    assert cut.rc == 0, "the transfer never started: " + cut.stdout + cut.stderr
    assert run.returncode != 0, out[-3000:]
    assert "spark-worker-1: FAILED" in " ".join(out.split()), out[-3000:]
    # No half image under the tag on the worker.
    assert image_id(WORKER) is None
    res = converge()
    assert res.returncode == 0, res.stdout[-3000:]
    assert image_id(WORKER) == image_id(HEAD)


def test_build_source_builds_on_the_head_in_the_background_and_distributes():
    ref = "localhost/dgxspark-image-test:built"
    context = "/tmp/dgxspark-image-test"
    log = "/tmp/dgxspark-image-test.log"
    HEAD.run(f"{CLI} rmi -f {ref}; rm -rf {context} {log}")
    WORKER.run(f"{CLI} rmi -f {ref}")
    HEAD.check_output(f"mkdir -p {context}")
    # A build that outlasts a few progress intervals (image_build_poll=2), as a real one outlasts 30 s.
    containerfile = (SCENARIO / "files" / "Containerfile").read_text() + "RUN sleep 8\n"
    HEAD.check_output(f"cat > {context}/Containerfile <<'EOF'\n{containerfile}EOF")
    HEAD.check_output(f"echo built-by-the-image-role > {context}/marker.txt")
    res = converge("-e", f"image_source=build image_ref={ref} image_build_context={context} image_build_command= "
                   f"image_build_dockerfile=Containerfile image_build_log={log} image_build_poll=2")
    assert res.returncode == 0, res.stdout[-3000:]
    assert HEAD.file(log).exists
    # While it ran, a line every 2 s: the log's bytes, the rate, its last line and how to follow it.
    lines = [ln for ln in res.stdout.splitlines() if f"[spark-head] build of {ref} (log bytes):" in ln]
    assert len(lines) >= 2, res.stdout[-3000:]
    assert "so far" in lines[-1] and "/s" in lines[-1] and f"follow: ssh 10.231.4.10 tail -f {log}" in lines[-1], lines
    built = image_id(HEAD, ref)
    assert built and image_id(WORKER, ref) == built
    assert WORKER.run(f"{CLI} run --rm {ref} cat /marker.txt").stdout.strip() == "built-by-the-image-role"
    # Nothing to do the second time: the head has the tag, the worker the same ID.
    again = converge("-e", f"image_source=build image_ref={ref} image_build_context={context} image_build_command= "
                     f"image_build_dockerfile=Containerfile image_build_log={log}")
    assert again.returncode == 0 and recap_changed(again.stdout, "spark-head") == 0, again.stdout[-3000:]


def test_a_derived_image_sends_only_its_top_layer_to_a_worker_that_has_the_base():
    derived = "localhost/dgxspark-sim-serving:derived"
    HEAD.check_output(f"{CLI} rm -f derive >/dev/null 2>&1; {CLI} run --name derive {REF} sh -c 'echo mod > /opt/mod' "
                      f"&& {CLI} commit derive {derived} >/dev/null && {CLI} rm derive")
    assert image_id(WORKER) == image_id(HEAD), "the worker has the base"
    args = {"ref": derived, "container_cli": CLI.split(), "storage_path": STORAGE,
            "workers": [{"name": "spark-worker-1", "host": "10.231.104.11", "user": "spark"}]}
    res = subprocess.run(["ansible", "spark-head", "-i", INVENTORY, "-o", "-m", "dgxspark.vllm.image_distribute",
                          "-a", json.dumps(args)], cwd=PROJECT, env=playbook_env(), capture_output=True,
                         text=True, timeout=600)
    out = json.loads(res.stdout.split("=>", 1)[1])
    assert not out.get("failed"), out.get("msg")
    w = out["workers"][0]
    assert w["stream"] == "layers" and w["layers_sent"] == 1 and w["layers_reused"] >= 1, w
    # Read from Docker's store, the top layer only (save would have read the whole image).
    assert out["read_from"].startswith("store: Docker Engine's overlay2 store"), out["read_from"]
    assert w["bytes"] < 0.01 * out["size"], w  # a few kilobytes of a ~583 MB image
    assert image_id(WORKER, derived) == image_id(HEAD, derived)
