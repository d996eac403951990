"""playbooks/restart.yml brings the stack back in order; playbooks/stop.yml stops it cleanly.
Runs last (it leaves the cluster stopped)."""

import serving_checks as sc

HOSTS = sc.inventory()
HEAD = next(n for n, hv in HOSTS.items() if hv["group"] == "spark_head")
HV = HOSTS[HEAD]
URL = f"http://{HV['common_api_host']}:8000"


def test_restart_playbook_restarts_in_order():
    res = sc.playbook("playbooks/restart.yml")
    assert res.returncode == 0, res.stdout[-6000:]
    out = res.stdout
    # Engine stopped before Ray; Ray head started before the workers; the engine last.
    # (ordered_restart starts the Ray unit, the head's side first, then the other nodes.)
    order = [out.index(t) for t in ("Serve | stop the engine on the head", "Ray | stop the worker nodes",
                                    "Ray | stop the head node",
                                    "Restart | keep the unit running, the first side first: dgxspark-ray",
                                    "Restart | keep the unit running on the other nodes: dgxspark-ray",
                                    "Serve | wait for /health")]
    assert order == sorted(order), order
    assert sc.api(sc.node(HEAD), URL + "/v1/models", HV["serve_api_key"])[0] == 200


def test_stop_playbook_leaves_nothing_running():
    res = sc.playbook("playbooks/stop.yml")
    assert res.returncode == 0, res.stdout[-6000:]
    for name in HOSTS:
        host = sc.node(name)
        for unit in ("dgxspark-ray", "dgxspark-vllm"):
            assert not host.service(unit).is_running, (name, unit)
            props = host.service(unit).systemd_properties
            # Stopped on purpose reads inactive, not failed (Ray and the engine exit 1 on SIGTERM).
            assert props["ActiveState"] == "inactive", (name, unit, props.get("Result"), props.get("ExecMainStatus"))
        names = [c["Names"] for c in sc.json.loads(host.check_output("sudo docker ps -a --format json") or "[]")]
        assert not [n for n in names if "dgxspark-" in str(n)], (name, names)
        assert host.run("ls /dev/shm/psm_* 2>/dev/null").stdout == ""
