"""Checks shared by the serving scenarios (serve, quad): units, Ray membership, the rendered
command line against the recipe, the API. Imported by each scenario's tests."""
import base64
import hashlib
import json
import os
import pathlib
import re
import resource
import shlex
import subprocess
import sys
import time

import testinfra
import yaml

PROJECT = pathlib.Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", pathlib.Path(__file__).resolve().parents[2]))
INVENTORY = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
RECIPES = PROJECT / "roles" / "recipe" / "files" / "recipes"
RAY_NODES = (PROJECT / "roles" / "ray_cluster" / "files" / "ray_nodes.py").read_text()
PIDFILE = "/tmp/dgxspark-vllm.pid"


def record(case, phase, seconds, changed, message):
    """One row of the bad-input table (docs/reliability.md, scripts/reliability_table.py): where a bad
    input was stopped, after how many seconds, with how many changes on the nodes, and the message."""
    results = PROJECT / ".cache" / "reliability"
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{case}.json").write_text(json.dumps({"case": case, "phase": phase, "seconds": round(seconds, 1),
                                                      "changed": changed, "message": message[:600]}))


def noticed_after_exit(output):
    """Seconds between the engine's exit and the health wait failing, from engine_health's message."""
    m = re.search(r"\(noticed (\d+) s after the exit\)", output)
    return int(m.group(1)) if m else None


def inventory():
    """hosts.yml of the scenario: {name: hostvars} plus the spark group's vars."""
    data = yaml.safe_load((pathlib.Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"]) / "inventory" / "hosts.yml").read_text())
    spark = data["all"]["children"]["spark"]
    hosts = {}
    for group in ("spark_head", "spark_workers"):
        for name, hv in spark["children"][group]["hosts"].items():
            hosts[name] = dict(spark.get("vars", {}), **hv, group=group)
    return hosts


def head_and_worker(hosts):
    """The head's name and the first worker's, from inventory()."""
    return (next(n for n, hv in hosts.items() if hv["group"] == "spark_head"),
            next(n for n, hv in hosts.items() if hv["group"] == "spark_workers"))


def node(name):
    """A node over plain SSH with the inventory's address, user, key and SSH arguments: a command is one SSH
    round trip, where an `ansible` run per command (force_ansible) cost seconds of a core each."""
    return testinfra.get_host(f"ansible://{name}", ansible_inventory=INVENTORY)


def recipe(name="minimax-m3-vision"):
    return yaml.safe_load((RECIPES / f"{name}.yml").read_text())


def ray_members(head, fabric_ips):
    out = head.run("printf %s " + shlex.quote(RAY_NODES) + " | sudo docker exec -i dgxspark-ray python3 - 1 "
                   + " ".join(fabric_ips))
    assert out.rc == 0, out.stderr
    return json.loads(out.stdout)


def engine_pid(head, container="dgxspark-ray"):
    """The running engine's pid in the Ray head container; without one, the units' state and journals say why."""
    res = head.run(f"sudo docker exec {container} cat {PIDFILE}")
    if res.rc != 0:
        why = head.run("systemctl status --no-pager -n 0 dgxspark-vllm dgxspark-ray; sudo journalctl --no-pager "
                       "-o short-monotonic -n 150 -u dgxspark-vllm -u dgxspark-ray").stdout
        raise AssertionError(f"no engine pidfile in {container} ({res.stderr.strip()}):\n{why}")
    return res.stdout.strip()


def engine_argv(head, container="dgxspark-ray"):
    pid = engine_pid(head, container)
    raw = head.check_output(f"sudo docker exec {container} cat /proc/{pid}/cmdline | base64 -w0")
    return [w.decode() for w in base64.b64decode(raw).split(b"\0") if w]


def engine_environ(head, container="dgxspark-ray"):
    pid = engine_pid(head, container)
    raw = head.check_output(f"sudo docker exec {container} cat /proc/{pid}/environ | base64 -w0")
    return dict(w.decode().split("=", 1) for w in base64.b64decode(raw).split(b"\0") if b"=" in w)


def flag_value(argv, flag):
    assert f"--{flag}" in argv, f"--{flag} missing from {argv}"
    return argv[argv.index(f"--{flag}") + 1]


def assert_argv_follows_recipe(argv, data):
    """Every recipe flag is in the running command line with the recipe's value (JSON compared as data)."""
    assert argv[argv.index("serve") + 1] == data["model"]
    for flag, value in data["args"].items():
        if value is True:
            assert f"--{flag}" in argv, flag
        elif value in (False, None):
            assert f"--{flag}" not in argv, flag
        elif isinstance(value, (dict, list)):
            assert json.loads(flag_value(argv, flag)) == value, flag
        else:
            assert flag_value(argv, flag) == str(value), flag
    if "served_model_name" in data:
        # The short name first (replies carry it), then the model id that the launcher's clients send.
        at = argv.index("--served-model-name")
        assert argv[at + 1:at + 3] == [data["served_model_name"], data["model"]], argv[at:at + 4]


def api(head, url, key=None, body=None, timeout=60):
    """HTTP status and body of a request made on the head (curl, loopback or the API address)."""
    cmd = f"curl -s -m {timeout} -o /tmp/api-body -w '%{{http_code}}' "
    if key:
        cmd += f"-H 'Authorization: Bearer {key}' "
    if body is not None:
        cmd += "-H 'Content-Type: application/json' --data-binary @- "
    feed = "printf %s " + shlex.quote(json.dumps(body)) + " | " if body is not None else ""
    out = head.run(feed + cmd + shlex.quote(url) + "; echo; cat /tmp/api-body")
    status, _, text = out.stdout.partition("\n")
    return int(status or 0), text


def chat_with_image(head, base_url, key, model):
    image = hashlib.sha256(b"dgxspark").digest() * 64  # 2 KiB of bytes standing for an image
    body = {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is in this image?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(image).decode()}}]}]}
    status, text = api(head, base_url + "/v1/chat/completions", key, body)
    assert status == 200, text
    content = json.loads(text)["choices"][0]["message"]["content"]
    assert content.startswith("[vllm stand-in] "), content
    reply = json.loads(content.partition("] ")[2])
    assert reply["texts"] == ["What is in this image?"]
    assert reply["images"] == [{"mime": "image/png", "bytes": len(image), "sha256": hashlib.sha256(image).hexdigest()}]


def wait_health(head, url, timeout, want=200):
    """Seconds until /health answers `want` (or None at the timeout)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if api(head, url + "/health", timeout=10)[0] == want:
            return time.monotonic() - t0
        time.sleep(1)
    return None


def playbook(*args, timeout=900):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(PROJECT / ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_CALLBACK_RESULT_FORMAT="yaml")
    started, cpu = time.monotonic(), _children_cpu()
    res = subprocess.run(["ansible-playbook", "-i", INVENTORY, *args], cwd=PROJECT, env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, check=False)
    keep_run(args, res, time.monotonic() - started, _children_cpu() - cpu)
    return res


def _children_cpu():
    """CPU seconds (user + system) of the ended child processes: an ansible-playbook run and every worker it forked."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def keep_run(args, res, seconds, cpu=None):
    """Every run a test makes is kept whole (.cache/playbook-runs/SCENARIO/NN-TEST.log, its task timer's slowest
    tasks at the end): what a passing test spent its minutes on, and a failing one's full output. The header
    also says what the run cost this machine's controller (scripts/playbook_runs.py sums them)."""
    folder = PROJECT / ".cache" / "playbook-runs" / os.environ.get("MOLECULE_SCENARIO_NAME", "none")
    folder.mkdir(parents=True, exist_ok=True)
    test = os.environ.get("PYTEST_CURRENT_TEST", "none").split("::")[-1].split(" ")[0]
    number = len(list(folder.glob("*.log"))) + 1
    spent = "" if cpu is None else f", {cpu:.1f} s of controller CPU"
    (folder / f"{number:02d}-{test[:90]}.log").write_text(
        f"# ansible-playbook {shlex.join(args)}\n# exit {res.returncode} after {seconds:.0f} s{spent}\n{res.stdout}")


def container_cmd(host, container):
    """The command a container was started with (docker inspect, parsed here: no templates in commands)."""
    return json.loads(host.check_output(f"sudo docker inspect {container}"))[0]["Config"]["Cmd"]


def sim_node(action, cluster, name, *extra):
    """Stop or start one sim node (a node that is down, and back) through the sim's controller:
    `sim/simctl.py stop-node|start-node`; a start returns once the node's sshd answers."""
    res = subprocess.run([sys.executable, str(PROJECT / "sim" / "simctl.py"), action, "--cluster", cluster, name,
                          *extra], capture_output=True, text=True, check=False, timeout=600)
    if res.returncode != 0:
        raise AssertionError(f"simctl {action} {name} failed ({res.returncode}): {res.stderr[-3000:]}")


SIM_GROUP_VARS = PROJECT / "inventories" / "sim" / "group_vars"


def sim_var(name, group="sim"):
    """A variable the sim overlay sets for a group (inventories/sim/group_vars/GROUP.yml: sim or sim_real_engine)."""
    return yaml.safe_load((SIM_GROUP_VARS / f"{group}.yml").read_text())[name]


def real_engine_vars():
    """The settings of the sim's real-engine group (inventories/sim/group_vars/sim_real_engine.yml)."""
    return yaml.safe_load((SIM_GROUP_VARS / "sim_real_engine.yml").read_text())


def merged(base, change):
    """base with change merged in recursively (what combine(recursive=true) gives)."""
    out = dict(base)
    for key, value in change.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def overrides_with(change):
    """-e arguments that set recipe_overrides to the sim's own with change merged in."""
    return ["-e", json.dumps({"recipe_overrides": merged(real_engine_vars()["recipe_overrides"], change)})]


def recipe_as_served(name="minimax-m3-text", backend="ray"):
    """The recipe the sim's real engine serves: the shipped one as served on the backend (its backends.<backend>
    merged over it), with the sim's listed swaps."""
    shipped = recipe(name)
    return merged(merged(shipped, shipped.get("backends", {}).get(backend, {})), real_engine_vars()["recipe_overrides"])


def flat(text):
    """Output with every run of whitespace made one space: messages wrap in the YAML callback."""
    return " ".join(text.split())


def changed_count(out, host):
    """changed= of host in the PLAY RECAP of a playbook's (unflattened) output."""
    m = re.search(rf"^{host}\s*:.*\bchanged=(\d+)", out, re.M)
    assert m, out[-3000:]
    return int(m.group(1))


def journal(host, unit, lines=400):
    return host.run(f"sudo journalctl -u {unit} --no-pager -o cat -n {lines}").stdout


WATCHDOG_STATE = "/var/lib/dgxspark-vllm/watchdog/state.json"


def watchdog_state(head, pred, timeout):
    """The watchdog's state.json once pred(state) holds; fails with the last state and the watchdog's journal."""
    t0, last = time.monotonic(), None
    while time.monotonic() - t0 < timeout:
        out = head.run(f"sudo cat {WATCHDOG_STATE}")
        if out.rc == 0:
            try:
                last = json.loads(out.stdout)
            except ValueError:
                last = None
            if last is not None and pred(last):
                return last
        time.sleep(1)
    raise AssertionError(f"the watchdog's state did not get there within {timeout} s; last: {last}\n"
                         + journal(head, "dgxspark-watchdog", 40))


def figure(name, values):
    """A measured figure of a scenario (docs/reliability.md takes them from .cache/figures)."""
    out = PROJECT / ".cache" / "figures"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(values, indent=1, sort_keys=True))
