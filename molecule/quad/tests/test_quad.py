"""Four nodes after site.yml with TP 2 x PP 2: every node in Ray, the engine using all four GPUs."""

import pytest

import serving_checks as sc

HOSTS = sc.inventory()
HEAD = next(n for n, hv in HOSTS.items() if hv["group"] == "spark_head")
URL = "http://127.0.0.1:8000"


@pytest.mark.parametrize("name", sorted(HOSTS))
def test_ray_unit_runs_on_every_node(name):
    assert sc.node(name).service("dgxspark-ray").is_running


def test_ray_reports_four_nodes_with_gpus():
    fabric = [hv["spark_fabric_ip"] for hv in HOSTS.values()]
    assert len(fabric) == 4
    members = sc.ray_members(sc.node(HEAD), fabric)
    assert members["missing"] == []
    assert sum(n["gpus"] for n in members["nodes"] if n["alive"]) == 4


def test_engine_runs_tp2_pp2_from_the_inventory_overrides():
    argv = sc.engine_argv(sc.node(HEAD))
    data = sc.recipe("minimax-m3-vision")
    data["args"].update(HOSTS[HEAD]["recipe_overrides"]["args"])
    sc.assert_argv_follows_recipe(argv, data)
    assert sc.flag_value(argv, "pipeline-parallel-size") == "2"


def test_endpoint_answers_without_a_key_when_none_is_set():
    head = sc.node(HEAD)
    status, text = sc.api(head, URL + "/v1/models")
    assert status == 200 and '"minimax-m3"' in text
    sc.chat_with_image(head, URL, None, "minimax-m3")
