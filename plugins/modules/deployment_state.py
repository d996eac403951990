#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: deployment_state
short_description: Record the deployment a node serves, put the last good one back, prune the ones dropped
version_added: 0.1.0
description:
  - Keeps a small state file per node with the C(current) deployment (the last one validated) and the C(previous) one.
    A deployment is what the node runs, namely the content of its serving units, the image their container runs
    (reference and ID, read from the running container), the base image it was derived from, and free-form C(info)
    (the recipe).
  - O(action=record) makes what runs now the C(current) deployment. When it differs from the recorded one (units or
    image ID), the recorded one becomes C(previous) and the former C(previous) is returned as C(dropped); with
    O(prune=true) the images only the dropped deployment used are removed (by their tags, so an image a container
    still uses, or one that has child images, stays and is named in C(prune_kept)).
  - O(action=restore) writes the C(current) deployment's units back (a unit recorded as absent is removed) and points
    the image reference its units run at the recorded image ID again. It restarts nothing.
  - O(action=read) returns the state file's deployments.
options:
  path:
    description: The state file.
    type: path
    default: /var/lib/dgxspark-vllm/deployment.json
  action:
    description: What to do.
    type: str
    choices: [read, record, restore]
    default: read
  units:
    description: The unit files that make up a deployment (O(action=record)); a missing one is recorded as absent.
    type: list
    elements: path
    default: []
  containers:
    description: The containers the deployment runs, tried in order; the first one running gives the image (O(action=record)).
    type: list
    elements: str
    default: []
  base_image:
    description: The image reference the running image was derived from (kept so that pruning can remove it too).
    type: str
    default: ""
  info:
    description: What else describes the deployment (for example the recipe); kept as given, not compared.
    type: dict
    default: {}
  prune:
    description: With O(action=record), remove the images only the dropped deployment used.
    type: bool
    default: false
  container_cli:
    description: The container CLI as a list of words, for example V([docker]).
    type: list
    elements: str
    default: [docker]
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes
attributes:
  check_mode:
    details: Reads the node and reports what would be recorded, restored or pruned; writes and removes nothing.
  diff_mode:
    support: full
    details: The diff shows the deployments (IDs and images) before and after.
author:
  - dgxspark.vllm contributors (@dgxspark)
"""

EXAMPLES = r"""
- name: Record what serves now as the last good deployment, pruning the one that falls out
  dgxspark.vllm.deployment_state:
    action: record
    units: [/etc/systemd/system/dgxspark-ray.service, /etc/systemd/system/dgxspark-vllm.service]
    containers: [dgxspark-ray, dgxspark-vllm]
    base_image: vllm-node-minimax-m3-b12x:latest
    info: {recipe: minimax-m3-vision}
    prune: true
  become: true

- name: Put the last good deployment's units and image back (restart them afterwards)
  dgxspark.vllm.deployment_state:
    action: restore
  become: true
"""

RETURN = r"""
current:
  description: The current deployment after the action (as it would be, in check mode); empty when none is recorded.
  returned: always
  type: dict
  sample: {id: 3f2a9c1b7d20, image: {ref: "localhost/vllm-mods:1a2b", id: "sha256:..."}, units: {}, info: {}}
previous:
  description: The deployment before the current one; empty when none.
  returned: always
  type: dict
dropped:
  description: The deployment that fell out of the file (O(action=record)); empty when none did.
  returned: always
  type: dict
pruned:
  description: Image IDs removed (or, in check mode, that would be).
  returned: always
  type: list
  elements: str
prune_kept:
  description: Images of the dropped deployment that stay, each with the reason.
  returned: always
  type: list
  elements: str
restored_units:
  description: Unit files written back or removed by O(action=restore).
  returned: always
  type: list
  elements: str
retagged:
  description: The image reference pointed back at the recorded image ID by O(action=restore), or empty.
  returned: always
  type: str
"""

import hashlib
import json
import os
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule


def fingerprint(units, image_id):
    """What makes two deployments the same: the units' content and the image ID they run."""
    blob = json.dumps({"units": units, "image": image_id}, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def rotate(state, new):
    """The state after recording `new`, and the deployment that falls out (or {})."""
    current = state.get("current") or {}
    if current.get("id") == new["id"]:
        return state, {}
    return {"current": new, "previous": current}, state.get("previous") or {}


def prunable(dropped, state):
    """Image IDs only the dropped deployment uses: its running image first (a base has it as a child), then its base."""
    keep = set()
    for dep in (state.get("current") or {}, state.get("previous") or {}):
        keep.update(i for i in (dep.get("image", {}).get("id"), dep.get("base_image", {}).get("id")) if i)
    ids = [dropped.get("image", {}).get("id"), dropped.get("base_image", {}).get("id")]
    out = []
    for i in ids:
        if i and i not in keep and i not in out:
            out.append(i)
    return out


def summary(dep):
    if not dep:
        return "(none)\n"
    img = dep.get("image", {})
    return f"{dep.get('id')}: {img.get('ref')} {img.get('id', '')[:19]} recorded {dep.get('recorded_at', '')}\n"


class Node:
    def __init__(self, module):
        self.module = module
        self.cli = module.params["container_cli"]

    def run(self, *args):
        rc, out, err = self.module.run_command(self.cli + list(args))
        return rc, out.strip(), err.strip()

    def running_image(self, containers):
        for name in containers:
            rc, out = self.run("inspect", "--format", "{{.State.Running}} {{.Config.Image}} {{.Image}}", name)[:2]
            if rc == 0 and out.startswith("true "):
                ref, image_id = out.split(" ", 2)[1:]
                return name, ref, image_id
        return None, "", ""

    def image_id(self, ref):
        rc, out = self.run("image", "inspect", "--format", "{{.Id}}", ref)[:2]
        return out if rc == 0 else ""

    def parents(self):
        """IDs of the images other images on the node were built on (docker build and commit record a Parent)."""
        rc, out = self.run("image", "ls", "--all", "--quiet", "--no-trunc")[:2]
        ids = sorted(set(out.split())) if rc == 0 else []
        if not ids:
            return set()
        rc, out = self.run("image", "inspect", "--format", "{{.Parent}}", *ids)[:2]
        return set(out.split()) if rc == 0 else set()

    def tags(self, image_id):
        rc, out = self.run("image", "inspect", "--format", "{{json .RepoTags}}", image_id)[:2]
        return (json.loads(out) or []) if rc == 0 and out else None


def read_state(path):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ValueError(f"the deployment state file {path} cannot be read ({exc}); move it away to start a new one")
    return data if isinstance(data, dict) else {}


def write_state(path, state):
    os.makedirs(os.path.dirname(path) or ".", mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".deployment-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=2, sort_keys=True)
        f.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def read_unit(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return None


def record(module, node, state, result):
    p = module.params
    if not p["units"] or not p["containers"]:
        module.fail_json(msg="action=record needs units and containers")
    units = {u: read_unit(u) for u in p["units"]}
    name, ref, image_id = node.running_image(p["containers"])
    if not name and module.check_mode:
        # A check run of a whole deployment: nothing serves yet, the real run records what it starts.
        result.update(changed=True, msg="nothing serves yet: the deployment this run starts would be recorded")
        return state
    if not name:
        module.fail_json(msg=f"none of the containers {', '.join(p['containers'])} runs on this node: there is no "
                             "deployment to record. Bring the engine up first (site.yml).")
    base = {"ref": p["base_image"], "id": node.image_id(p["base_image"])} if p["base_image"] else {}
    new = {"id": fingerprint(units, image_id), "units": units, "container": name,
           "image": {"ref": ref, "id": image_id}, "base_image": base, "info": p["info"],
           "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    after, dropped = rotate(state, new)
    result.update(current=after.get("current") or {}, previous=after.get("previous") or {}, dropped=dropped)
    if after is state:
        return state
    result["changed"] = True
    if p["prune"] and dropped:
        prune(module, node, dropped, after, result)
    return after


def prune(module, node, dropped, after, result):
    ids = prunable(dropped, after)
    # A base that other images were built on stays: untagging it would only break the next build FROM it.
    parents = node.parents() if ids else set()
    for image_id in ids:
        tags = node.tags(image_id)
        if tags is None:
            continue  # already gone
        if image_id in parents:
            result["prune_kept"].append(f"{image_id}: other images on this node were built on it")
            continue
        if module.check_mode:
            result["pruned"].append(image_id)
            continue
        # Untagging each name removes the image with the last one, unless a container or a child image holds it.
        results = [node.run("image", "rm", t) for t in tags or [image_id]]
        errors = [res[2] for res in results if res[0] != 0]
        if node.image_id(image_id):
            result["prune_kept"].append(f"{image_id}: {errors[-1] if errors else 'still held'}")
        else:
            result["pruned"].append(image_id)


def restore(module, node, state, result):
    current = state.get("current")
    if not current:
        module.fail_json(msg=f"no deployment is recorded in {module.params['path']}: there is nothing to roll back "
                             "to on this node (site.yml records one once the endpoint validates).")
    image = current.get("image", {})
    if image.get("id") and not node.image_id(image["id"]):
        module.fail_json(msg=f"the image of the last good deployment ({image.get('ref')}, {image['id']}) is no longer "
                             "on this node: it cannot be restarted. Load that image again, or run site.yml.")
    for path, content in sorted(current.get("units", {}).items()):
        if read_unit(path) == content:
            continue
        result["restored_units"].append(path)
        if module.check_mode:
            continue
        if content is None:
            os.remove(path)
        else:
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".restore-")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(content)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
    if image.get("ref") and image.get("id") and node.image_id(image["ref"]) != image["id"]:
        result["retagged"] = image["ref"]
        if not module.check_mode:
            rc, err = node.run("tag", image["id"], image["ref"])[::2]
            if rc != 0:
                module.fail_json(msg=f"cannot point {image['ref']} back at {image['id']}: {err}")
    result["changed"] = bool(result["restored_units"] or result["retagged"])
    result.update(current=current, previous=state.get("previous") or {})


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/var/lib/dgxspark-vllm/deployment.json"),
            action=dict(type="str", default="read", choices=["read", "record", "restore"]),
            units=dict(type="list", elements="path", default=[]),
            containers=dict(type="list", elements="str", default=[]),
            base_image=dict(type="str", default=""),
            info=dict(type="dict", default={}),
            prune=dict(type="bool", default=False),
            container_cli=dict(type="list", elements="str", default=["docker"]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        state = read_state(p["path"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    node = Node(module)
    result = dict(changed=False, current=state.get("current") or {}, previous=state.get("previous") or {},
                  dropped={}, pruned=[], prune_kept=[], restored_units=[], retagged="")
    if p["action"] == "record":
        after = record(module, node, state, result)
        if after is not state and not module.check_mode:
            write_state(p["path"], after)
        if module._diff:
            result["diff"] = dict(
                before="current: " + summary(state.get("current")) + "previous: " + summary(state.get("previous")),
                after="current: " + summary(after.get("current")) + "previous: " + summary(after.get("previous")),
                before_header=p["path"], after_header=p["path"])
    elif p["action"] == "restore":
        restore(module, node, state, result)
        if module._diff:
            result["diff"] = dict(before="".join(f"{u}: as deployed now\n" for u in result["restored_units"]),
                                  after="".join(f"{u}: as in {result['current'].get('id')}\n"
                                                for u in result["restored_units"])
                                  + (f"{result['retagged']} -> {result['current']['image']['id']}\n"
                                     if result["retagged"] else ""))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
