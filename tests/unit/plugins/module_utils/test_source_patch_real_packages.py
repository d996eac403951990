"""The shipped prometheus routing mod against the real releases from PyPI.

prometheus-fastapi-instrumentator 7.1.0 (buggy with FastAPI >= 0.137's `_IncludedRouter`),
8.0.2 and 8.1.0 (fixed upstream), installed with pip into cached target directories and
patched with the engine run as a script by a fresh Python, as the mods role runs it in an image.
"""
import json
import pathlib

import pytest

ENGINE = pathlib.Path(__file__).resolve().parents[4] / "plugins" / "module_utils" / "_source_patch.py"

pytestmark = pytest.mark.real_packages

MOD = "fix_prometheus_fastapi_routing"
ROUTING = "prometheus_fastapi_instrumentator/routing.py"
# FastAPI 0.137 introduced `_IncludedRouter`; 7.1.0 needs starlette < 1.0.
BUGGY = ("prometheus-fastapi-instrumentator==7.1.0", "fastapi==0.137.2", "starlette==0.52.1", "httpx==0.28.1")
FIXED = {"8.0.2": ("prometheus-fastapi-instrumentator==8.0.2",),
         "8.1.0": ("prometheus-fastapi-instrumentator==8.1.0",)}

# An instrumented app shaped like vLLM's server: routers included with prefixes (nested),
# a route on the app itself, and /metrics. Prints what each request got and the handler labels.
PROBE = r'''
import json
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient
from prometheus_fastapi_instrumentator import Instrumentator

app = FastAPI()
models = APIRouter(prefix="/models")

@models.get("/{name}")
def get_model(name: str):
    return {"id": name}

v1 = APIRouter(prefix="/v1")
v1.include_router(models)

@v1.post("/completions")
def completions():
    return {"choices": []}

app.include_router(v1)

@app.get("/health")
def health():
    return {}

Instrumentator().instrument(app).expose(app)
client = TestClient(app)
status = {}
for method, path in (("GET", "/v1/models/m3"), ("POST", "/v1/completions"), ("GET", "/v1/completions"),
                     ("GET", "/health")):
    try:
        status[method + " " + path] = client.request(method, path).status_code
    except Exception as exc:
        status[method + " " + path] = type(exc).__name__ + ": " + str(exc)
labels = sorted(line.split("handler=\"", 1)[1].split("\"", 1)[0]
                for line in client.get("/metrics").text.splitlines() if line.startswith("http_requests_total{"))
print(json.dumps({"status": status, "handlers": labels}))
'''


def probe(site):
    return json.loads(site.run("-c", PROBE).stdout)


def patch(site, tmp_path, mods, check=False):
    spec = tmp_path / "mods.json"
    spec.write_text(json.dumps({"mods": mods}))
    argv = [str(ENGINE), str(spec)] + (["--check"] if check else [])
    return json.loads(site.run(*argv).stdout)


def test_buggy_release_crashes_on_include_router(site_factory):
    out = probe(site_factory(*BUGGY))
    assert out["status"]["GET /v1/models/m3"] == "AttributeError: '_IncludedRouter' object has no attribute 'path'"
    assert out["status"]["GET /health"] == 200


def test_fix_is_applied_and_labels_the_route_template(site_factory, shipped_mods, tmp_path):
    site = site_factory(*BUGGY)
    out = patch(site, tmp_path, [shipped_mods[MOD]])
    res = out["results"][0]
    assert (res["result"], res["version"], out["failed"]) == ("applied", "7.1.0", [])
    assert res["target"] == str(site.file(ROUTING))
    assert '+            if not hasattr(route, "path"):\n' in res["diff"]
    # The engine byte-compiled the patched file (the copy had no __pycache__).
    assert list(site.file("prometheus_fastapi_instrumentator/__pycache__").glob("routing.*.pyc"))

    after = probe(site)
    assert after["status"] == {"GET /v1/models/m3": 200, "POST /v1/completions": 200,
                               "GET /v1/completions": 405, "GET /health": 200}
    assert "/v1/models/{name}" in after["handlers"]
    assert "/v1/completions" in after["handlers"]
    assert "/health" in after["handlers"]


def test_second_run_is_already_applied_and_changes_nothing(site_factory, shipped_mods, tmp_path):
    site = site_factory(*BUGGY)
    assert patch(site, tmp_path, [shipped_mods[MOD]])["results"][0]["result"] == "applied"
    routing = site.file(ROUTING)
    before = (routing.read_bytes(), routing.stat().st_mtime_ns)
    res = patch(site, tmp_path, [shipped_mods[MOD]])["results"][0]
    assert (res["result"], res["changed"], res["diff"]) == ("already_applied", False, "")
    assert (routing.read_bytes(), routing.stat().st_mtime_ns) == before


def test_check_mode_shows_the_change_and_writes_nothing(site_factory, shipped_mods, tmp_path):
    site = site_factory(*BUGGY)
    original = site.file(ROUTING).read_bytes()
    res = patch(site, tmp_path, [shipped_mods[MOD]], check=True)["results"][0]
    assert res["result"] == "applied" and res["changed"]
    assert "-            route_name = route.path\n" in res["diff"]
    assert "+def _get_included_route_name(" in res["diff"]
    assert site.file(ROUTING).read_bytes() == original
    assert "AttributeError" in probe(site)["status"]["GET /v1/models/m3"]


def test_seed_one_line_fix_only_stops_the_crash(site_factory, tmp_path):
    """The seed's getattr() fix serves the request but labels it `none`; the shipped fix does better."""
    site = site_factory(*BUGGY)
    seed_fix = {"name": "seed_getattr_fix", "module": "prometheus_fastapi_instrumentator.routing",
                "old": "            route_name = route.path\n            child_scope",
                "new": "            route_name = getattr(route, \"path\", getattr(route, \"path_format\", \"\"))\n"
                       "            child_scope"}
    assert patch(site, tmp_path, [seed_fix])["results"][0]["result"] == "applied"
    out = probe(site)
    assert out["status"]["GET /v1/models/m3"] == 200
    assert "/v1/models/{name}" not in out["handlers"]
    assert "none" in out["handlers"]


@pytest.mark.parametrize("version", sorted(FIXED))
def test_fixed_releases_are_not_needed_and_untouched(site_factory, shipped_mods, tmp_path, version):
    site = site_factory(*FIXED[version])
    routing = site.file(ROUTING)
    before = (routing.read_bytes(), routing.stat().st_mtime_ns)
    out = patch(site, tmp_path, [dict(shipped_mods[MOD], strict=True)])
    res = out["results"][0]
    assert (res["result"], res["version"], res["changed"], out["failed"]) == ("not_needed", version, False, [])
    assert (routing.read_bytes(), routing.stat().st_mtime_ns) == before
    assert not site.file("prometheus_fastapi_instrumentator/__pycache__").exists()


def test_without_a_version_condition_a_fixed_release_is_target_missing(site_factory, shipped_mods, tmp_path):
    """The version condition is what tells a fixed release from a block that moved."""
    site = site_factory(*FIXED["8.1.0"])
    mod = {k: v for k, v in shipped_mods[MOD].items() if k != "not_needed"}
    out = patch(site, tmp_path, [mod, dict(mod, name="strict_copy", strict=True)])
    assert [r["result"] for r in out["results"]] == ["target_missing", "target_missing"]
    assert out["failed"] == ["strict_copy"]
