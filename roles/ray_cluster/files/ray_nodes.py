"""Which of the expected node IPs are alive in Ray with at least N GPUs (run in the head container)."""
import json
import sys

import ray

expected, min_gpus = sys.argv[2:], float(sys.argv[1])
ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
nodes = [{"ip": n["NodeManagerAddress"], "alive": n["Alive"], "gpus": n["Resources"].get("GPU", 0)}
         for n in ray.nodes()]
ready = {n["ip"] for n in nodes if n["alive"] and n["gpus"] >= min_gpus}
print(json.dumps({"nodes": nodes, "missing": [ip for ip in expected if ip not in ready]}))
