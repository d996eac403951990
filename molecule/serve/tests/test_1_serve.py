"""The pair after site.yml: units, Ray membership, the command line the recipe asks for, the API."""

import pytest

import serving_checks as sc

HOSTS = sc.inventory()
HEAD = next(n for n, hv in HOSTS.items() if hv["group"] == "spark_head")
HV = HOSTS[HEAD]
KEY = HV["serve_api_key"]
URL = f"http://{HV['common_api_host']}:8000"


@pytest.mark.parametrize("name", sorted(HOSTS))
def test_ray_unit_runs_on_every_node(name):
    svc = sc.node(name).service("dgxspark-ray")
    assert svc.is_running and svc.is_enabled


def test_engine_unit_runs_on_the_head_only():
    assert sc.node(HEAD).service("dgxspark-vllm").is_running
    for name in HOSTS:
        if name != HEAD:
            assert not sc.node(name).file("/etc/systemd/system/dgxspark-vllm.service").exists


def test_ray_reports_every_node_alive_with_its_gpu():
    fabric = [hv["spark_fabric_ip"] for hv in HOSTS.values()]
    members = sc.ray_members(sc.node(HEAD), fabric)
    alive = sorted(n["ip"] for n in members["nodes"] if n["alive"] and n["gpus"] >= 1)
    assert alive == sorted(fabric)
    assert members["missing"] == []


def test_engine_command_line_follows_the_recipe():
    argv = sc.engine_argv(sc.node(HEAD))
    sc.assert_argv_follows_recipe(argv, sc.recipe("minimax-m3-vision"))
    assert sc.flag_value(argv, "distributed-executor-backend") == "ray"
    assert sc.flag_value(argv, "host") == HV["common_api_host"]
    assert "--api-key" not in argv and KEY not in " ".join(argv)


def test_engine_environment_follows_the_recipe():
    env = sc.engine_environ(sc.node(HEAD))
    for name, value in sc.recipe("minimax-m3-vision")["env"].items():
        assert env.get(name) == value, name
    assert env["VLLM_HOST_IP"] == HV["spark_fabric_ip"]
    assert env["NCCL_SOCKET_IFNAME"] == "enp1s0f1np1" and env["NCCL_IB_HCA"] == "rocep1s0f1"


def test_api_key_is_kept_out_of_units_and_logs():
    head = sc.node(HEAD)
    unit = head.file("/etc/systemd/system/dgxspark-vllm.service").content_string
    assert KEY not in unit
    key_file = head.file("/etc/dgxspark/dgxspark-vllm.env")
    assert key_file.mode == 0o600 and key_file.user == "root"
    assert KEY not in head.check_output("sudo journalctl -u dgxspark-vllm --no-pager -o cat")


def test_api_key_is_enforced():
    head = sc.node(HEAD)
    assert sc.api(head, URL + "/v1/models")[0] == 401
    assert sc.api(head, URL + "/v1/models", "wrong-key")[0] == 401
    status, text = sc.api(head, URL + "/v1/models", KEY)
    assert status == 200 and '"minimax-m3"' in text


def test_chat_with_an_image_arrives_whole():
    sc.chat_with_image(sc.node(HEAD), URL, KEY, "minimax-m3")


def _successes(text):
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total"))


def test_metrics_are_exported_and_count_the_requests_served():
    # The counter moves with a request sent through the served port: /metrics is the live engine's.
    head = sc.node(HEAD)
    status, before = sc.api(head, URL + "/metrics")
    assert status == 200 and "vllm:request_success_total" in before
    body = {"model": "minimax-m3", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    assert sc.api(head, URL + "/v1/chat/completions", KEY, body)[0] == 200
    after = sc.api(head, URL + "/metrics")[1]
    # At least one: the serving watchdog's canary may land in between.
    assert _successes(after) >= _successes(before) + 1, (before, after)


def test_listeners_stay_on_the_configured_addresses():
    """The API only on common_api_host; nothing else on the management address; Ray's own
    gRPC ports are the wildcard listeners Ray offers no bind option for (see the role README)."""
    for name, hv in HOSTS.items():
        host = sc.node(name)
        lines = host.check_output("sudo ss -ltnpH").splitlines()
        for line in lines:
            fields = line.split()
            local, proc = fields[3], " ".join(fields[5:])
            addr, _, port = local.rpartition(":")
            if "sshd" in proc:
                continue
            if port == "8000":
                assert name == HEAD and addr == hv["common_api_host"], line
            elif addr == hv["ansible_host"]:
                pytest.fail(f"{name}: listens on the management address: {line}")
            else:
                assert addr in (hv["spark_fabric_ip"], "127.0.0.1", "*", "0.0.0.0", "[::]"), line
                if addr in ("*", "0.0.0.0", "[::]"):
                    assert any(p in proc for p in ("gcs_server", "raylet", "ray::", "python3")), line
