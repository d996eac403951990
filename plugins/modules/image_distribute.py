#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: image_distribute
short_description: Stream a container image from this node to worker nodes over SSH
version_added: 0.1.0
description:
  - Runs on the node that holds the image (the head). Reads the image ID of O(ref) here and, over SSH, on every worker.
  - Streams C(CLI save REF) through SSH into C(CLI load) on each worker whose ID differs, optionally compressed with zstd,
    workers in parallel. One C(save) feeds all the workers that receive at once, so the image is read once here.
    No archive file is written anywhere by this module.
  - With O(layers=true), the stream to a worker carries the layers (diff IDs) that worker already holds in any of its
    images as empty entries. C(docker load) and podman's docker-archive loader look a layer up before they read its
    file, so the worker loads the whole image (config, manifest, tags, ID) from what it lacks. A derived image on top of a base
    the worker has costs its top layer; an upgrade costs the layers that changed. Docker's legacy archive layout (before
    Docker 25), and a worker whose load refuses the partial archive, get the whole stream, and the result says so.
  - Before any transfer, checks the free space of each receiving worker's container storage and fails naming the node
    and both numbers when it is short.
  - After each load, reads the worker's image ID in the same SSH session and fails naming any worker whose ID still differs.
  - A transfer cut midway makes C(load) fail on a truncated stream, so the worker keeps no new tag (or its previous
    image); the next run sees the differing ID and transfers again.
author:
  - dgxspark.vllm contributors (@dgxspark)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes
  - dgxspark.vllm.ssh
attributes:
  check_mode:
    details: Reads the IDs and free space and reports which workers would receive the image.
  diff_mode:
    support: full
    details: Shows each worker's image ID before and after.
options:
  ref:
    description: The image reference (tag) to distribute, as the container CLI names it.
    type: str
    required: true
  workers:
    description: The nodes to receive the image.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The name used in messages and results (the inventory name).
        type: str
        required: true
      host:
        description: The address this node reaches the worker at (its fabric address).
        type: str
        required: true
      user:
        description: The SSH user on the worker; the current user when not set.
        type: str
  container_cli:
    description:
      - The container CLI as a list of words, used here and on the workers, for example V([docker]) or V([sudo, docker]).
      - It needs C(image inspect), C(save) to stdout and C(load) from stdin, as docker and podman have.
    type: list
    elements: str
    default: [docker]
  compress:
    description: Compress the stream with zstd (needs C(zstd) on this node and the workers); pays off on slow links only.
    type: bool
    default: false
  layers:
    description: Send each worker only the layers it lacks (see the description); V(false) always sends the whole image.
    type: bool
    default: true
  read_from:
    description:
      - Where this node reads the image for a worker that lacks only some of its layers.
      - V(save) is the CLI's C(save), which reads every layer of the image whatever the workers hold.
      - V(store) reads Docker Engine's overlay2 store directly (as root, through C(sudo -n) unless this module runs
        as root), only the layers the workers lack, each rebuilt byte for byte from the layer's tar-split and files, so
        a derived image costs the time of its top layer, not of the whole image. C(docker load) checks the diff ID of
        every layer it reads.
      - V(auto) takes V(store) where it can (Docker Engine with the overlay2 driver, root reachable, the image's config
        in the store) and V(save) otherwise; a worker whose load refuses the store's archive gets the whole C(save)
        stream. The result says which was used, and why.
    type: str
    choices: [auto, save, store]
    default: auto
  parallel:
    description: How many workers receive at the same time, from one C(save).
    type: int
    default: 4
  storage_path:
    description: A path on the container storage filesystem of the workers, for the free space check.
    type: path
    default: /var/lib/docker
  free_space_factor:
    description:
      - Free space a receiving worker needs on O(storage_path), as a multiple of the image size.
      - C(load) stages the stream before it unpacks the layers, so it needs about twice the image size while it runs.
    type: float
    default: 2.0
  progress_file:
    description:
      - A file on this node where the stream keeps its own count while it runs (bytes read from the image
        so far, and the image's size when the stream is the whole uncompressed image), every 5 s.
      - Run the module with C(async) and read the file with M(dgxspark.vllm.job_progress)
        (O(dgxspark.vllm.job_progress#module:counter)) to show a long stream's progress.
    type: path
    version_added: 0.2.0
notes:
  - The workers are reached with strict host key checking by default; the node_trust role sets up the key and known hosts file.
"""

EXAMPLES = r"""
- name: Stream the serving image from the head to the workers
  dgxspark.vllm.image_distribute:
    ref: vllm-node-minimax-m3-b12x:latest
    workers:
      - name: spark-2
        host: 192.168.100.11
        user: spark
  register: image_distribution

- name: The same with podman's docker CLI run as root, compressed for a slow link
  dgxspark.vllm.image_distribute:
    ref: localhost/dgxspark-sim-serving:latest
    container_cli: [sudo, docker]
    storage_path: /var/lib/containers
    compress: true
    workers:
      - name: spark-worker-1
        host: 10.231.104.11
"""

RETURN = r"""
id:
  description: The image ID of O(ref) on this node, as the container CLI prints it.
  returned: when the image is on this node
  type: str
  sample: sha256:f4a27e5c680e3b9c1ecd4ad0f24a281cab298d936dd40b18fb3e1437fcccfb8a
size:
  description: The image size in bytes on this node.
  returned: when the image is on this node
  type: int
  sample: 582789251
read_from:
  description: Where the image was read for the workers that lack only some layers (C(store) or C(save)), and why.
  returned: always
  type: str
  sample: "store: Docker Engine's overlay2 store at /var/lib/docker"
workers:
  description: One entry per worker.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The worker's name.
      type: str
    host:
      description: The address it was reached at.
      type: str
    status:
      description: V(present) (already identical), V(transferred), V(would_receive) (check mode) or V(failed).
      type: str
    previous_id:
      description: The worker's image ID for O(ref) before the run; empty when it had none.
      type: str
    id:
      description: The worker's image ID for O(ref) at the end.
      type: str
    free_bytes:
      description: Free bytes on O(storage_path) before the transfer.
      type: int
    bytes:
      description: Bytes sent over SSH (compressed when O(compress)).
      type: int
    layers_sent:
      description: Layers whose files were sent.
      type: int
    layers_reused:
      description: Layers the worker already held, left out of the stream.
      type: int
    stream:
      description:
        - V(layers) (only what the worker lacked) or V(whole).
        - V(whole) with the reason after a colon when layers were asked for but could not be left out.
      type: str
    seconds:
      description: Wall time of the transfer and load.
      type: float
    message:
      description: What went wrong, for a failed worker.
      type: str
  sample:
    - name: spark-worker-1
      host: 10.231.104.11
      status: transferred
      previous_id: ""
      id: f4a27e5c680e3b9c1ecd4ad0f24a281cab298d936dd40b18fb3e1437fcccfb8a
      free_bytes: 81024204800
      bytes: 48640
      layers_sent: 1
      layers_reused: 9
      stream: layers
      seconds: 1.2
      message: ""
msg:
  description: One line per worker saying what happened.
  returned: always
  type: str
"""

import concurrent.futures
import os
import re
import shlex
import shutil
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.vllm.plugins.module_utils import _ssh
from ansible_collections.dgxspark.vllm.plugins.module_utils._stream import relay
from ansible_collections.dgxspark.vllm.plugins.module_utils._tarfilter import LayerFilter
from ansible_collections.dgxspark.vllm.plugins.module_utils import _layerstore
from ansible_collections.dgxspark.vllm.plugins.module_utils._progress import write_counter

# How docker and podman say that a reference is not there.
MISSING_IMAGE = re.compile(r"no such (image|object)|image not known", re.IGNORECASE)
CHUNK = 1 << 20


def normalize_id(image_id):
    """Docker prints `sha256:<hex>`, podman the bare hex: compare the hex."""
    image_id = (image_id or "").strip()
    return image_id.split(":", 1)[1] if image_id.startswith("sha256:") else image_id


def human(n):
    return "%.2f GB" % (n / 1e9)


def probe_command(cli, ref, storage_path, compress, layers=False):
    """One remote shell line: the image ID (or the CLI's error), free KiB of the storage path, whether
    zstd is there, and the diff IDs of every layer the worker's images hold."""
    inspect = shlex.join(list(cli) + ["image", "inspect", "--format", "{{.Id}}", ref])
    df = shlex.join(["df", "-Pk", storage_path])
    line = "%s 2>&1; echo __rc=$?; %s 2>&1; echo __df=$?" % (inspect, df)
    if compress:
        line += "; command -v zstd >/dev/null; echo __zstd=$?"
    if layers:
        line += ('; ids=$(%s 2>/dev/null | sort -u); [ -z "$ids" ] || %s $ids 2>/dev/null; echo __layers=$?'
                 % (shlex.join(list(cli) + ["image", "ls", "-q", "--no-trunc"]),
                    shlex.join(list(cli) + ["image", "inspect", "--format", "{{range .RootFS.Layers}}{{println .}}{{end}}"])))
    return line


def parse_probe(output):
    """Parse probe_command's output into a dict: id, missing, error, free_bytes, df_error, zstd."""
    res = {"id": "", "missing": False, "error": "", "free_bytes": None, "df_error": "", "zstd": None, "layers": set()}
    section, inspect_lines, df_lines, other = "inspect", [], [], []
    for line in output.splitlines():
        m = re.match(r"^__(rc|df|zstd|layers)=(\d+)$", line.strip())
        if not m:
            {"inspect": inspect_lines, "df": df_lines}.get(section, other).append(line)
            continue
        key, code = m.group(1), int(m.group(2))
        if key == "rc":
            text = "\n".join(inspect_lines).strip()
            if code == 0:
                res["id"] = text.splitlines()[-1].strip() if text else ""
            elif MISSING_IMAGE.search(text):
                res["missing"] = True
            else:
                res["error"] = text or "exit status %d" % code
            section = "df"
        elif key == "df":
            rows = [r for r in df_lines if r.strip()]
            fields = rows[-1].split() if rows else []
            if code == 0 and len(fields) >= 4 and fields[3].isdigit():
                res["free_bytes"] = int(fields[3]) * 1024
            else:
                res["df_error"] = "\n".join(df_lines).strip() or "exit status %d" % code
            section = "done"
        elif key == "zstd":
            res["zstd"] = code == 0
        else:
            res["layers"] = set(x.strip() for x in other if x.strip().startswith("sha256:"))
        other = []
    return res


class Distributor:
    def __init__(self, module):
        self.module = module
        p = module.params
        self.ref, self.cli = p["ref"], p["container_cli"]
        self.ssh = dict(key=p["ssh_key"], known_hosts=p["known_hosts"], port=p["ssh_port"],
                        host_key_checking=p["host_key_checking"], connect_timeout=p["connect_timeout"])
        # The stream's count so far for progress_file, over every group and attempt; its expected size.
        self.streamed, self.expected = 0, 0

    def count(self, read):
        if self.module.params["progress_file"]:
            write_counter(self.module.params["progress_file"], self.streamed + read, self.expected)

    def ssh_cmd(self, worker, command):
        return _ssh.ssh_argv(worker["host"], command, user=worker.get("user"), **self.ssh)

    def local_image(self):
        """(ID, size in bytes, diff IDs of its layers) of the image here; Nones when it is not here."""
        rc, out, err = self.module.run_command(list(self.cli) + ["image", "inspect", "--format",
                                                                 "{{.Id}} {{.Size}} {{range .RootFS.Layers}}{{.}},{{end}}", self.ref])
        if rc == 0:
            fields = out.strip().split()
            return fields[0], int(fields[1]), [x for x in (fields[2] if len(fields) > 2 else "").split(",") if x]
        if MISSING_IMAGE.search(err + out):
            return None, None, []
        self.module.fail_json(msg="%s image inspect failed on this node: %s. Make the container CLI usable by this user "
                              "(docker group) or set container_cli (e.g. [sudo, docker])." % (shlex.join(self.cli), (err or out).strip()))

    def probe(self, worker):
        command = probe_command(self.cli, self.ref, self.module.params["storage_path"], self.module.params["compress"],
                                self.module.params["layers"])
        argv = self.ssh_cmd(worker, command)
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False, timeout=self.ssh["connect_timeout"] + 60)
        except subprocess.TimeoutExpired:
            return {"ssh_error": "no answer within %ds" % (self.ssh["connect_timeout"] + 60)}
        out = proc.stdout.decode("utf-8", "replace")
        if proc.returncode == 255 or "__rc=" not in out:
            return {"ssh_error": proc.stderr.decode("utf-8", "replace").strip() or "ssh exit status %d" % proc.returncode}
        return parse_probe(out)

    def store_source(self, head_id):
        """Docker Engine's overlay2 store, if this node's CLI is Docker Engine with that driver, root is
        reachable and the image's config is there: (argv prefix, root folder, why) or (None, None, why)."""
        rc, out, err = self.module.run_command(list(self.cli) + ["info", "--format", "{{.Driver}}|{{.DockerRootDir}}"])
        fields = out.strip().split("|", 1)
        if rc != 0 or len(fields) != 2 or not fields[1]:
            return None, None, "the CLI is not Docker Engine's (%s)" % ((err or out).strip()[:200] or "no driver")
        driver, root = fields
        if driver != "overlay2":
            return None, None, "Docker's storage driver is %s, not overlay2" % driver
        prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
        config = os.path.join(root, "image", "overlay2", "imagedb", "content", "sha256", normalize_id(head_id))
        rc, out, err = self.module.run_command(prefix + ["test", "-r", config])
        if rc != 0:
            return None, None, "the store at %s is not readable here%s" % (
                root, " (sudo -n: %s)" % (err.strip()[:200] or "refused") if prefix else "")
        return prefix, root, "Docker Engine's overlay2 store at %s" % root

    def transfer(self, group, skip=None, layers=(), store=None):
        """save | [zstd] once, into 'ssh worker [zstd -d |] CLI load && CLI image inspect' for every worker
        of the group at once, each stream without the layers skip[name] lists:
        {name: (bytes, seconds, error, the ID the worker has now, the filter or None)}."""
        # The ID is read in the same SSH session as the load: the proof costs no second connection.
        remote = "%s && %s" % (shlex.join(list(self.cli) + ["load", "-q"]),
                               shlex.join(list(self.cli) + ["image", "inspect", "--format", "__id={{.Id}}", self.ref]))
        if self.module.params["compress"]:
            remote = "zstd -dcq | " + remote
        skip = skip or {}
        filters = dict((w["name"], LayerFilter(skip[w["name"]], layers)) for w in group if skip.get(w["name"]))
        compress = self.module.params["compress"]
        # One save for the whole group: the image is read once on this node, however many workers. Relayed
        # through this process to count the bytes (and leave out layers); nothing is written to disk.
        # With compression and layers to leave out, each worker's stream is compressed after its filter.
        per_sink_zstd = compress and bool(filters)
        producers = [("save", list(self.cli) + ["save", self.ref])]
        if store is not None:
            # Only the layers some worker of the group lacks, straight from the store.
            wanted = sorted(set(x for w in group for x in layers if x not in (skip.get(w["name"]) or [])))
            code = _layerstore.script()
            producers = [("read the store", store["prefix"] + ["python3", "-c", code, store["root"], store["id"], self.ref] + wanted)]
        if compress and not per_sink_zstd:
            producers.append(("zstd", ["zstd", "-q", "-c", "-T0", "-3"]))
        sinks = []
        for w in group:
            argv = self.ssh_cmd(w, remote)
            if per_sink_zstd:  # each filtered stream is compressed after its filter
                argv = ["sh", "-c", 'zstd -q -c -T0 -3 | "$@"', "zstd"] + argv
            sinks.append(("load on %s" % w["name"], argv, filters.get(w["name"])))
        read = [0]

        def seen(n):
            read[0] = n
            self.count(n)
        outcomes = relay(producers, sinks, CHUNK, progress=seen)
        self.streamed += read[0]
        result = {}
        for w in group:
            sent, seconds, error, output = outcomes["load on %s" % w["name"]]
            new_id = ([line.strip()[5:] for line in output.splitlines() if line.strip().startswith("__id=")] or [""])[-1]
            result[w["name"]] = (sent, seconds, error.replace("the connection closed", "the connection to %s closed" % w["name"]),
                                 new_id, filters.get(w["name"]))
        return result


def run(module):
    p = module.params
    d = Distributor(module)
    if p["compress"] and not shutil.which("zstd"):
        module.fail_json(msg="compress is on but zstd is not installed on this node: install zstd or turn compress off.")
    names = [w["name"] for w in p["workers"]]
    if len(set(names)) != len(names):
        module.fail_json(msg="workers: each name must appear once, got %s" % ", ".join(names))

    results = [{"name": w["name"], "host": w["host"], "status": "", "previous_id": "", "id": "", "free_bytes": None,
                "bytes": 0, "seconds": 0.0, "message": "", "layers_sent": 0, "layers_reused": 0, "stream": ""}
               for w in p["workers"]]
    workers = dict((w["name"], w) for w in p["workers"])
    with concurrent.futures.ThreadPoolExecutor(max(1, min(len(results) or 1, 16))) as pool:
        # The workers are probed while this node inspects its own image.
        futures = [pool.submit(d.probe, w) for w in p["workers"]]
        head_id, size, layers = d.local_image()
        probes = [f.result() for f in futures]
    if head_id is None and not module.check_mode:
        module.fail_json(msg="%s is not on this node: get it here first (pull, build or load), then distribute." % p["ref"], workers=[])

    problems = []
    for r, pr in zip(results, probes):
        w = workers[r["name"]]
        if "ssh_error" in pr:
            problems.append("%s (%s): cannot run commands over SSH as %s with key %s and known hosts %s: %s. Set up node trust "
                            "(role dgxspark.vllm.node_trust) or fix the address." %
                            (r["name"], r["host"], w.get("user") or "the current user", p["ssh_key"] or _ssh.DEFAULT_KEY,
                             p["known_hosts"] or _ssh.DEFAULT_KNOWN_HOSTS, pr["ssh_error"]))
            continue
        if pr["error"]:
            problems.append("%s: %s image inspect failed: %s. Make the container CLI usable by the SSH user there (docker group) or "
                            "set container_cli." % (r["name"], shlex.join(p["container_cli"]), pr["error"]))
            continue
        r["previous_id"] = r["id"] = pr["id"]
        r["free_bytes"] = pr["free_bytes"]
        if head_id is not None and pr["id"] and normalize_id(pr["id"]) == normalize_id(head_id):
            r["status"] = "present"
            continue
        r["status"] = "would_receive" if module.check_mode else "pending"
        if pr["free_bytes"] is None:
            problems.append("%s: cannot read the free space of %s: %s. Set storage_path to the container storage directory there."
                            % (r["name"], p["storage_path"], pr["df_error"]))
        elif size is not None and pr["free_bytes"] < size * p["free_space_factor"]:
            problems.append("%s: %s free on %s, the image needs %s (%.1f x its size of %s). Free space there first." %
                            (r["name"], human(pr["free_bytes"]), p["storage_path"], human(size * p["free_space_factor"]),
                             p["free_space_factor"], human(size)))
        if p["compress"] and pr["zstd"] is False:
            problems.append("%s: compress is on but zstd is not installed there: install zstd or turn compress off." % r["name"])
    if problems:
        module.fail_json(msg="Nothing was transferred. " + " | ".join(problems), id=head_id, size=size, workers=results)

    # The layers each receiving worker holds already (in any image) stay out of its stream.
    skip = dict((r["name"], [x for x in layers if x in pr["layers"]]) for r, pr in zip(results, probes)
                if p["layers"] and r["status"] in ("pending", "would_receive"))
    for r in results:
        if r["status"] in ("pending", "would_receive"):
            r["layers_reused"] = len(skip.get(r["name"], []))
            r["layers_sent"] = len(layers) - r["layers_reused"]
    pending = [r for r in results if r["status"] == "pending"]
    store, read_from = None, "save"
    if p["layers"] and p["read_from"] != "save" and any(skip.get(r["name"]) for r in pending):
        prefix, root, why = d.store_source(head_id)
        if root is not None:
            store, read_from = {"prefix": prefix, "root": root, "id": head_id}, "store: " + why
        elif p["read_from"] == "store":
            module.fail_json(msg="read_from is store, but %s. Use read_from auto or save." % why, workers=results)
        else:
            read_from = "save: " + why
    fallback = []
    # A share done only where the stream is the image as saved: whole, uncompressed, read once for every
    # pending worker in one group.
    if not p["compress"] and store is None and not any(skip.get(r["name"]) for r in pending) and len(pending) <= max(1, p["parallel"]):
        d.expected = size or 0
    for attempt in ("layers", "whole"):
        if not pending:
            break
        size_of_group = max(1, p["parallel"])
        outcomes = {}
        for i in range(0, len(pending), size_of_group):
            outcomes.update(d.transfer([workers[r["name"]] for r in pending[i:i + size_of_group]],
                                       skip if attempt == "layers" else None, layers,
                                       store if attempt == "layers" else None))
        for r in pending:
            sent, seconds, error, new_id, filt = outcomes[r["name"]]
            if not new_id and not error:  # loaded, but the ID did not come back: ask again
                pr = d.probe(workers[r["name"]])
                new_id, error = pr.get("id", ""), pr.get("ssh_error") or pr.get("error") or ""
            r.update(bytes=r["bytes"] + sent, seconds=round(r["seconds"] + seconds, 1), id=new_id)
            if filt is not None:
                legacy = ("whole: the archive is in Docker's legacy layout (before Docker 25), whose layer files "
                          "cannot be told apart while they stream")
                r.update(layers_sent=len(filt.sent_layers), layers_reused=len(filt.skipped),
                         stream="layers" if filt.skipped else legacy if filt.legacy else "whole")
            else:
                r.update(layers_sent=len(layers), layers_reused=0, stream=r["stream"] or "whole")
            if normalize_id(r["id"]) == normalize_id(head_id):
                r["status"] = "transferred"
                continue
            # A store archive that failed is the store's failure, whatever the worker held: say so.
            if attempt == "layers" and store is not None:
                r["stream"] = "whole: the archive read from the store failed (%s)" % (
                    error or "the ID there is %s" % (r["id"] or "absent"))
                fallback.append(r)
                continue
            if attempt == "layers" and filt is not None and filt.skipped:
                # The worker refused an archive without the layers it holds: send it all, and say so.
                r["stream"] = "whole: the load refused the archive without the %d layers the worker holds (%s)" % (
                    len(filt.skipped), error or "the ID there is %s" % (r["id"] or "absent"))
                fallback.append(r)
                continue
            r["status"] = "failed"
            r["message"] = error or "load finished but the ID there is %s, not the head's %s" % (
                r["id"] or "absent", head_id)
        pending, fallback = fallback, []

    def line(r):
        if r["status"] == "present":
            return "%s: already has %s" % (r["name"], r["id"])
        if r["status"] == "would_receive":
            return "%s: would receive %s%s, %d layer(s), %d it holds reused" % (
                r["name"], p["ref"], " (%s)" % human(size) if size else "", r["layers_sent"], r["layers_reused"])
        if r["status"] == "transferred":
            return "%s: received %s (%s sent in %.1f s; %d layer(s) sent, %d it held reused; stream %s)" % (
                r["name"], p["ref"], human(r["bytes"]), r["seconds"], r["layers_sent"], r["layers_reused"], r["stream"])
        return "%s: FAILED: %s" % (r["name"], r["message"])

    msg = "\n".join(line(r) for r in results) or "no workers"
    changed = any(r["status"] in ("transferred", "would_receive", "failed") for r in results)
    diff = {"before": "".join("%s: %s\n" % (r["name"], r["previous_id"] or "absent") for r in results),
            "after": "".join("%s: %s\n" % (r["name"], head_id or p["ref"]) for r in results)}
    failed = [r["name"] for r in results if r["status"] == "failed"]
    if failed:
        module.fail_json(msg="Image %s differs from the head's on %s after the transfer. %s" % (p["ref"], ", ".join(failed), msg),
                         id=head_id, size=size, workers=results, changed=changed)
    module.exit_json(changed=changed, id=head_id, size=size, workers=results, msg=msg, diff=diff, read_from=read_from)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ref=dict(type="str", required=True),
            workers=dict(type="list", elements="dict", required=True, options=dict(
                name=dict(type="str", required=True),
                host=dict(type="str", required=True),
                user=dict(type="str"),
            )),
            container_cli=dict(type="list", elements="str", default=["docker"]),
            **_ssh.ARGUMENT_SPEC,
            compress=dict(type="bool", default=False),
            layers=dict(type="bool", default=True),
            parallel=dict(type="int", default=4),
            storage_path=dict(type="path", default="/var/lib/docker"),
            free_space_factor=dict(type="float", default=2.0),
            read_from=dict(type="str", default="auto", choices=["auto", "save", "store"]),
            progress_file=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    if not module.params["container_cli"]:
        module.fail_json(msg="container_cli is empty: give the CLI as a list, e.g. [docker] or [sudo, docker].")
    run(module)


if __name__ == "__main__":
    main()
