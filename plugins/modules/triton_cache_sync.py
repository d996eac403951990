#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: triton_cache_sync
short_description: Bring a directory (a Triton cache) on other nodes into exact, verified agreement with this one
version_added: 0.1.0
description:
  - Runs on the source node and makes the tree I(src) on every destination agree with it, over SSH with rsync, then proves it.
  - Builds a manifest (path, size, mtime, SHA-256) of I(src) here and of each destination on the destination itself
    (this module ships its hashing code to the node with C(python3 -c); no file is pulled back to be hashed).
    Every file is hashed once per side, in parallel over files, streaming.
  - Sends only what differs (rsync C(--files-from) and C(--ignore-times), so a file with the same size and mtime but other bytes,
    which C(rsync -a) skips, is found and replaced), then hashes the sent files on the destination and compares.
  - rsync writes into a scratch dir C(.dgxspark-sync.tmp) under the destination and renames into place, so an interrupted transfer
    never leaves a truncated file under its final name; the next run removes the scratch dir and converges.
  - Destinations are independent; one that is down or refuses SSH fails alone, with a message; the others still sync.
  - With I(mode=union) the files a destination has and the source lacks are first fetched here (and verified),
    then the union goes to every destination.
  - I(required_kernels) is optional, so it can copy and verify any tree (the third example); the collection's roles use it for
    the Triton cache only. The manifest code lives in C(plugins/module_utils/_manifest.py), shared with M(dgxspark.vllm.model_cache).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes
  - dgxspark.vllm.ssh
author:
  - dgxspark.vllm contributors (@dgxspark)
attributes:
  check_mode:
    details: Computes both manifests and reports what would be sent, deleted or fetched; changes nothing on any node.
  diff_mode:
    support: full
    details: Lists, per destination, the files that would change (path, size, first digest characters) before and after.
  idempotent:
    description: A second run with nothing changed on any node reports C(changed=false) and sends nothing.
options:
  src:
    description:
      - The tree on this node. A leading C(~) is the home of the user the module runs as.
      - A missing I(src) is an empty tree (nothing to send).
    type: path
    default: ~/.triton
  src_name:
    description: Name of this node in results and messages (defaults to its hostname).
    type: str
  dest:
    description:
      - Destinations, each C(host), C(user@host) or either with C(:path); a plain local path (starting with C(/), C(~) or C(.)) too.
      - Without C(:path) the destination path is I(src) as written (C(~) is the destination login user's home).
    type: list
    elements: str
    required: true
  dest_names:
    description: Names for the destinations in results and messages, in the order of I(dest) (default the I(dest) strings).
    type: list
    elements: str
    default: []
  mode:
    description:
      - C(push) makes every destination agree with I(src).
      - C(union) first fetches here the files that a destination has and I(src) lacks (the first destination that has one wins;
        a file on both sides stays as I(src) has it), then pushes. Cannot be combined with I(delete).
    type: str
    choices: [push, union]
    default: push
  verify:
    description:
      - C(content) compares a SHA-256 of every file on both sides and verifies what was sent.
      - C(none) compares size and mtime only, like C(rsync -a), and verifies nothing.
    type: str
    choices: [content, none]
    default: content
  digest_cache:
    description:
      - With I(verify=content), keep on each node a cache of digests (C(.dgxspark-sync.digests) in the tree) and hash again only the files
        whose inode, size, mtime or ctime changed since. Writing a file changes its ctime even when its mtime is put back, so a byte
        changed in place is still found; what it does not see is corruption below the filesystem (bit rot), which the default,
        reading every file on every run, does.
    type: bool
    default: false
  required_kernels:
    description:
      - Triton kernel names that must be present afterwards on this node and every destination that synced.
      - A kernel is present when a dir at any depth holds C(<name>.json) and its binary C(<name>.cubin) (or C(.hsaco), C(.spv)).
    type: list
    elements: str
    default: []
  on_missing_kernels:
    description: C(fail) fails the task naming each node and missing kernel; C(warn) reports them in RV(missing_kernels) and a warning.
    type: str
    choices: [fail, warn]
    default: fail
  delete:
    description: Remove from the destinations the files and links that I(src) lacks (and dirs left empty by that).
    type: bool
    default: false
  exclude:
    description: Glob patterns (matched against the name and the relative path) left out of manifests and transfers.
    type: list
    elements: str
    default: []
  owner:
    description: Owner of every entry of the destination tree afterwards (needs I(become) unless it is the login user).
    type: str
  group:
    description: Group of every entry of the destination tree afterwards.
    type: str
  become:
    description:
      - Run the destination side (hashing, rsync receiver, chown) with C(sudo -n), for trees holding files written by root from a container.
      - For an unreadable I(src), run the task itself with C(become); pass I(ssh_key) and I(known_hosts) as absolute paths then.
    type: bool
    default: false
  rsync_opts:
    description: Extra rsync arguments (e.g. C(--bwlimit=100M)).
    type: list
    elements: str
    default: []
  parallel:
    description: Hashing threads per node (0 picks twice the CPU count, at most 32).
    type: int
    default: 0
requirements:
  - rsync and ssh on this node; rsync and python3 (3.8 or later) on each destination
notes:
  - Hash choice, SHA-256 from Python's hashlib, because it runs on the CPU's SHA instructions on both x86 and the GB10's Arm cores,
    measured faster there than BLAKE2, and is a cryptographic hash. Throughput on caches of small files is bound by opening files,
    which is why hashing runs in parallel over files.
seealso:
  - name: dgxspark.vllm.triton_cache role
    description: Pushes the head's Triton cache to every worker (or merges all of them) with this module.
    link: https://example.invalid/dgxspark/vllm/roles/triton_cache
"""

EXAMPLES = r"""
- name: Push the head's Triton cache to the workers and prove it
  dgxspark.vllm.triton_cache_sync:
    src: ~/.triton
    dest:
      - spark@192.168.100.11
    become: true
    required_kernels: [eagle_prepare_next, _nvfp4_write, update_regular_decode, rejection_sample]

- name: Give every node the kernels any node has compiled
  dgxspark.vllm.triton_cache_sync:
    dest: [spark@192.168.100.11, spark@192.168.100.12]
    mode: union

- name: Copy and verify a model folder on the workers (no kernels involved)
  dgxspark.vllm.triton_cache_sync:
    src: /home/spark/.cache/huggingface/hub/models--org--name
    dest: [spark@192.168.100.11]
    delete: true
"""

RETURN = r"""
src:
  description: Absolute path of the source tree.
  returned: always
  type: str
digest:
  description: SHA-256 over the source manifest (sorted path, size, content digest); equal trees have equal digests.
  returned: always
  type: str
files:
  description: Files in the source tree.
  returned: always
  type: int
bytes:
  description: Bytes in the source tree.
  returned: always
  type: int
hashed:
  description: Files read and hashed on the source in this run (all of them unless I(digest_cache) knew them).
  returned: always
  type: int
hash:
  description: Name of the content hash.
  returned: always
  type: str
  sample: sha256
dest:
  description: Per destination name, what was done.
  returned: always
  type: dict
  contains:
    path:
      description: Absolute path of the tree on the destination.
      type: str
    sent:
      description: Files and links sent (in check mode, that would be sent).
      type: list
      elements: str
    content_mismatch:
      description: Files whose size and mtime matched but whose bytes differed (replaced).
      type: list
      elements: str
    deleted:
      description: Files and links removed (I(delete)).
      type: list
      elements: str
    fetched:
      description: Files fetched from this destination into the source (I(mode=union)).
      type: list
      elements: str
    verified_files:
      description: Files whose content digest is proven equal to the source's after the run (0 with I(verify=none)).
      type: int
    verified_bytes:
      description: Their bytes.
      type: int
    hashed:
      description: Files read and hashed on this destination in this run (before and after the transfer).
      type: int
    missing_kernels:
      description: Required kernels missing on this destination afterwards.
      type: list
      elements: str
    failed:
      description: Whether this destination failed.
      type: bool
    msg:
      description: Why it failed.
      type: str
missing_kernels:
  description: Node name to the required kernels missing there (nodes missing none are left out).
  returned: always
  type: dict
  sample: {"spark-worker-1": ["rejection_sample"]}
failed_dests:
  description: Names of the destinations that failed.
  returned: always
  type: list
  elements: str
"""

import concurrent.futures
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.vllm.plugins.module_utils import _manifest as mf
from ansible_collections.dgxspark.vllm.plugins.module_utils import _ssh
from ansible_collections.dgxspark.vllm.plugins.module_utils._ssh import converse


class DestError(Exception):
    """A destination failed; the message says why and what to do."""


class Node(object):
    """A destination: a local path, or a path on a host reached with ssh."""

    def __init__(self, spec, name, default_path, params, control_dir):
        self.spec, self.name, self.params = spec, name, params
        if spec.startswith(("/", "~", ".")):
            self.host, self.user, self.path = None, None, spec
        else:
            m = re.match(r"^(?:([^@:/\s]+)@)?([^@:/\s]+)(?::(.*))?$", spec)
            if not m:
                raise ValueError("dest %r: expected host, user@host, either with :path, or a local path" % spec)
            self.user, self.host, path = m.groups()
            self.path = path or default_path
        self.control = os.path.join(control_dir, "cm-%d" % abs(hash(spec))) if control_dir else None
        self.root = None

    @property
    def local(self):
        return self.host is None

    @property
    def target(self):
        return "%s@%s" % (self.user, self.host) if self.user else self.host

    def ssh_argv(self):
        # One connection per destination for all its steps.
        return _ssh.from_params(self.params, control_path=self.control)

    def sudo(self):
        return "sudo -n " if self.params["become"] else ""

    def request(self, req, src_digest=None):
        """Run one _manifest request on the node, return its JSON answer.

        ``src_digest`` (a Future of the source's tree digest) makes it an exchange: the node starts
        on its manifest while this node hashes its own, then gets the digest, and answers an equal
        tree with ``same`` instead of every file (see _manifest.answer_to).
        """
        req = dict(req, path=self.root or self.path, workers=self.params["parallel"],
                   excludes=self.params["exclude"], exchange=src_digest is not None)
        if self.local:
            out = mf.run_action(req)
        else:
            remote = "%spython3 -c %s \"$HOME\"" % (self.sudo(), shlex.quote(mf.BOOTSTRAP))
            later = (lambda: json.dumps({"digest": src_digest.result()}) + "\n") if src_digest is not None else None
            res = converse(self.ssh_argv() + [self.target, remote], json.dumps(dict(req, code=mf.source_text())) + "\n", later)
            if res.returncode == 255:
                raise DestError(ssh_failure(self, res.stderr))
            if res.returncode != 0 or not res.stdout.strip():
                err = res.stderr.strip()
                if "password is required" in err or "a terminal is required" in err:
                    raise DestError("%s: sudo on %s asks for a password; become needs passwordless sudo there "
                                    "(or set become: false if the tree is writable by %s)" % (self.name, self.host, self.user or "the login user"))
                raise DestError("%s: the manifest script failed on %s (rc %d): %s" % (self.name, self.host, res.returncode, err[-500:]))
            out = json.loads(res.stdout)
        if "error" in out:
            raise DestError("%s: %s" % (self.name, out["error"]))
        self.root = out["root"]
        return out

    def rsync_dest(self):
        return self.root + "/" if self.local else "%s:%s/" % (self.target, self.root)

    def close(self):
        if self.control and os.path.exists(self.control):
            subprocess.run(self.ssh_argv() + ["-O", "exit", self.target], capture_output=True, check=False)


def ssh_failure(node, stderr):
    last = (stderr.strip().splitlines() or ["no answer"])[-1]
    hint = "check that the node is up and reachable"
    if "Host key verification failed" in stderr or "No ED25519 host key is known" in stderr or "host key" in stderr.lower():
        hint = "its host key is not in the known-hosts file: run the node_trust role (or ssh-keyscan it into %s)" % (
            node.params["known_hosts"] or _ssh.DEFAULT_KNOWN_HOSTS)
    elif "Permission denied" in stderr:
        hint = "the key is not authorized there: run the node_trust role, or check ssh_key and the user"
    elif "Connection refused" in stderr:
        hint = "nothing listens for SSH there: is sshd running, is the port right?"
    return "%s: cannot reach %s over SSH (%s); %s" % (node.name, node.target, last, hint)


def rsync_cmd(params, node, push, tmp):
    argv = ["rsync", "-a", "--whole-file", "--files-from=-", "--from0", "--temp-dir=%s" % tmp]
    if push:
        # Listed files are sent even when size and mtime match: they differ in content.
        argv.append("--ignore-times")
    if not node.local:
        argv += ["-e", shlex.join(node.ssh_argv())]
        sudo = node.sudo()
        if push:
            argv.append("--rsync-path=%smkdir -p %s && %srsync" % (sudo, shlex.quote(tmp), sudo))
        elif sudo:
            argv.append("--rsync-path=sudo -n rsync")
    return argv + list(params["rsync_opts"])


def run_rsync(node, argv, files):
    res = subprocess.run(argv, input="\0".join(files), capture_output=True, text=True, check=False)
    ssh_said = [x for x in res.stderr.splitlines() if x.startswith("ssh:") or "Host key verification" in x or "(publickey" in x]
    if res.returncode == 255 and ssh_said:
        raise DestError(ssh_failure(node, "\n".join(ssh_said)))
    if res.returncode != 0:
        err = res.stderr.strip()
        hint = ""
        if "Permission denied" in err:
            hint = (" Some files or dirs there are not writable by the login user (written by root from the serving container?):"
                    " set become: true (passwordless sudo there), or chown the tree to that user.")
        if not hint and res.returncode in (12, 20, 255):
            hint = " The transfer was interrupted; nothing partial is under a final name there. Run again to finish it."
        raise DestError("%s: rsync failed (rc %d): %s.%s" % (node.name, res.returncode, err[-600:], hint))


def parents(rels):
    out = set()
    for rel in rels:
        while True:
            rel = os.path.dirname(rel)
            out.add(rel)
            if not rel:
                break
    return out


def entry_line(man, rel):
    if rel in man["files"]:
        size, _m, dig = man["files"][rel]
        return "%s  %d bytes  %s" % (rel, size, (dig or "")[:16])
    if rel in man["links"]:
        return "%s -> %s" % (rel, man["links"][rel])
    return None


def sync_dest(module, node, src, dman):
    """Make one destination agree with ``src`` (its manifest ``dman`` already built). Returns its result."""
    p = module.params
    content = p["verify"] == "content"
    cmp_ = mf.compare(src, dman, content)
    send = cmp_["send"]
    delete = cmp_["extra"] if p["delete"] else []
    res = {"path": node.root, "sent": send, "content_mismatch": cmp_["content_mismatch"], "deleted": delete,
           "fetched": node.fetched, "failed": False, "msg": "", "chowned": len(dman.get("owner_mismatch", [])),
           "swept": dman.get("swept", False), "hashed": dman.get("hashed", 0)}
    res["changed"] = bool(send or delete or res["chowned"] or res["swept"])
    res["diff"] = {
        "before_header": "%s:%s" % (node.name, node.root), "after_header": "%s:%s" % (node.name, node.root),
        "before": "".join(line + "\n" for line in filter(None, (entry_line(dman, r) for r in send + delete))),
        "after": "".join(line + "\n" for line in filter(None, (entry_line(src, r) for r in send))),
    }
    if not p["become"]:
        blocked = sorted(set(dman["unwritable"]) & parents(send + delete))
        if blocked:
            raise DestError("%s: %d dirs under %s are not writable by the login user (e.g. %s), written by root from the "
                            "serving container?: set become: true (passwordless sudo there) or chown -R the tree to that user"
                            % (node.name, len(blocked), node.root, blocked[0] or "."))
    final = {r: v for r, v in dman["files"].items() if r not in delete}
    if module.check_mode:
        final.update({r: src["files"][r] for r in send if r in src["files"]})
    else:
        if send:
            tmp = os.path.join(node.root, mf.TMP_DIR)
            if node.local:
                os.makedirs(tmp, exist_ok=True)
            run_rsync(node, rsync_cmd(p, node, True, tmp) + [src["root"] + "/", node.rsync_dest()], send)
        if send or delete or res["chowned"]:
            fin = node.request({"action": "finish", "verify": [r for r in send if r in src["files"]] if content else [],
                                "delete": delete, "src_dirs": src["dirs"], "owner": p["owner"], "group": p["group"],
                                "cache": content and p["digest_cache"]})
            res["hashed"] += len(fin["verified"])
            bad = []
            for rel in (r for r in send if r in src["files"]):
                got = fin["verified"].get(rel) if content else None
                if content and got != src["files"][rel][2]:
                    bad.append(rel)
                final[rel] = [src["files"][rel][0], src["files"][rel][1], got]
            if bad:
                raise DestError("%s: %d files still differ from the source after the transfer (e.g. %s): the source changed "
                                "during the sync, or the disk there is failing; run again" % (node.name, len(bad), bad[0]))
    if content:
        same = [r for r, v in src["files"].items() if r in final and final[r][2] == v[2]]
        res["verified_files"] = len(same)
        res["verified_bytes"] = sum(src["files"][r][0] for r in same)
    else:
        res["verified_files"] = res["verified_bytes"] = 0
    res["final_paths"] = list(final)
    return res


def fetch_missing(module, src, nodes, mans):
    """mode=union: fetch here what destinations have and the source lacks; verify; add to ``src``."""
    p = module.params
    taken = set(src["files"]) | set(src["links"])
    for node in nodes:
        man = mans.get(node.name)
        if man is None:
            continue
        want = sorted(r for r in list(man["files"]) + list(man["links"]) if r not in taken)
        node.fetched = want
        if not want:
            continue
        taken.update(want)
        if module.check_mode:
            for rel in want:
                if rel in man["files"]:
                    src["files"][rel] = man["files"][rel]
                else:
                    src["links"][rel] = man["links"][rel]
            continue
        tmp = os.path.join(src["root"], mf.TMP_DIR)
        os.makedirs(tmp, exist_ok=True)
        try:
            run_rsync(node, rsync_cmd(p, node, False, tmp) + [node.rsync_dest(), src["root"] + "/"], want)
        finally:
            mf.sweep_tmp(src["root"])
        files = [r for r in want if r in man["files"]]
        digests = mf.hash_files(src["root"], files, p["parallel"]) if p["verify"] == "content" else {}
        for rel in files:
            st = os.stat(os.path.join(src["root"], rel))
            if p["verify"] == "content" and digests[rel] != man["files"][rel][2]:
                raise DestError("%s: fetched %s does not match its digest there; run again" % (node.name, rel))
            src["files"][rel] = [st.st_size, st.st_mtime_ns, digests.get(rel)]
        for rel in want:
            if rel in man["links"]:
                src["links"][rel] = man["links"][rel]
        src["dirs"] = sorted(set(src["dirs"]) | (parents(want) - {""}))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            src=dict(type="path", default="~/.triton"),
            src_name=dict(type="str"),
            dest=dict(type="list", elements="str", required=True),
            dest_names=dict(type="list", elements="str", default=[]),
            mode=dict(type="str", choices=["push", "union"], default="push"),
            verify=dict(type="str", choices=["content", "none"], default="content"),
            digest_cache=dict(type="bool", default=False),
            required_kernels=dict(type="list", elements="str", default=[]),
            on_missing_kernels=dict(type="str", choices=["fail", "warn"], default="fail"),
            delete=dict(type="bool", default=False),
            exclude=dict(type="list", elements="str", default=[]),
            owner=dict(type="str"),
            group=dict(type="str"),
            become=dict(type="bool", default=False),
            **_ssh.ARGUMENT_SPEC,
            rsync_opts=dict(type="list", elements="str", default=[]),
            parallel=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["mode"] == "union" and p["delete"]:
        module.fail_json(msg="mode=union adds what any node has; it cannot be combined with delete=true")
    if p["dest_names"] and len(p["dest_names"]) != len(p["dest"]):
        module.fail_json(msg="dest_names has %d names for %d dest entries: give one name per dest, in order"
                         % (len(p["dest_names"]), len(p["dest"])))
    if p["verify"] == "none" and p["mode"] == "union":
        module.fail_json(msg="mode=union needs verify=content to tell which files a node lacks")
    for tool in ("rsync", "ssh"):
        if not shutil.which(tool):
            module.fail_json(msg="%s is not installed on this node (the source): install it (apt-get install %s)"
                             % (tool, "openssh-client" if tool == "ssh" else tool))
    names = p["dest_names"] or p["dest"]
    if len(set(names)) != len(names):
        module.fail_json(msg="dest entries must be distinct: %s" % ", ".join(names))
    src_name = p["src_name"] or socket.gethostname()
    src_root = mf.expand_root(p["src"])
    control_dir = tempfile.mkdtemp(prefix="dgxspark-sync-")
    try:
        nodes = []
        for spec, name in zip(p["dest"], names):
            try:
                nodes.append(Node(spec, name, p["src"], p, control_dir))
            except ValueError as exc:
                module.fail_json(msg=str(exc))
        for node in nodes:
            node.fetched = []
        results = run(module, src_root, src_name, nodes)
    finally:
        for node in locals().get("nodes", []):
            node.close()
        shutil.rmtree(control_dir, ignore_errors=True)
    module.exit_json(**results)


def run(module, src_root, src_name, nodes):
    p = module.params
    content = p["verify"] == "content"
    cache = content and p["digest_cache"]
    req = {"action": "manifest", "hash": content, "sweep": not module.check_mode, "check": module.check_mode,
           "cache": cache, "owner": p["owner"], "group": p["group"]}
    failures, mans = {}, {}
    # Destination manifests are built on the destinations while this node hashes its own tree;
    # then each destination gets this tree's digest and answers an equal tree in a few bytes.
    src_digest = concurrent.futures.Future() if content else None
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(nodes))) as pool:
        futures = {pool.submit(node.request, req, src_digest): node for node in nodes}
        src = None
        try:
            src = mf.build(src_root, p["exclude"], content, p["parallel"], cache=cache, write_cache=not module.check_mode)
        finally:
            if src_digest is not None:
                src_digest.set_result(mf.digest(src) if src is not None and not src["unreadable"] else None)
        for fut, node in futures.items():
            try:
                mans[node.name] = fut.result()
            except DestError as exc:
                failures[node.name] = str(exc)
    for man in mans.values():
        if man.pop("same", False):  # the destination's tree equals this one
            man.update(files={r: list(v) for r, v in src["files"].items()}, links=dict(src["links"]),
                       dirs=list(src["dirs"]), unwritable=[])
    if src["unreadable"]:
        module.fail_json(msg="%d entries under %s cannot be read by %s (e.g. %s), written by root from the serving container?: "
                         "run the task with become: true (and ssh_key/known_hosts as absolute paths), or make them readable "
                         "(sudo chmod -R a+rX %s). Nothing was changed." % (
                             len(src["unreadable"]), src_root, _whoami(), src["unreadable"][0], src_root))
    if p["mode"] == "union":
        try:
            fetch_missing(module, src, [n for n in nodes if n.name in mans], mans)
        except DestError as exc:
            module.fail_json(msg=str(exc))
    results = {}

    def one(node):
        try:
            return sync_dest(module, node, src, mans[node.name])
        except DestError as exc:
            return {"failed": True, "msg": str(exc)}

    ok = [n for n in nodes if n.name in mans]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(ok))) as pool:
        for node, res in zip(ok, pool.map(one, ok)):
            results[node.name] = res
    for name, msg in failures.items():
        results[name] = {"failed": True, "msg": msg}
    empty = {"path": None, "sent": [], "content_mismatch": [], "deleted": [], "fetched": [],
             "verified_files": 0, "verified_bytes": 0, "hashed": 0, "missing_kernels": []}
    for node in nodes:
        merged = dict(empty, fetched=node.fetched)
        merged.update(results[node.name])
        results[node.name] = merged

    missing = {}
    if p["required_kernels"]:
        lacking = mf.missing_kernels(src["files"], p["required_kernels"])
        if lacking:
            missing[src_name] = lacking
        for node in nodes:
            res = results[node.name]
            if not res["failed"]:
                res["missing_kernels"] = mf.missing_kernels(res["final_paths"], p["required_kernels"])
                if res["missing_kernels"]:
                    missing[node.name] = res["missing_kernels"]
    changed = any(r.get("changed") for r in results.values()) or any(n.fetched for n in nodes)
    diff = [r.pop("diff") for r in results.values() if r.get("diff") and (r["diff"]["before"] or r["diff"]["after"])]
    for r in results.values():
        r.pop("final_paths", None)
        r.pop("diff", None)
        r.pop("changed", None)
    nfiles, nbytes = mf.totals(src)
    out = dict(changed=changed, src=src_root, digest=mf.digest(src), files=nfiles, bytes=nbytes, hash=mf.HASH_NAME,
               hashed=src.get("hashed", 0),
               dest=results, missing_kernels=missing, failed_dests=sorted(failures) + sorted(
                   n for n, r in results.items() if r["failed"] and n not in failures))
    if module._diff and diff:
        out["diff"] = diff
    problems = ["%s: %s" % (n, results[n]["msg"].split(": ", 1)[-1]) for n in out["failed_dests"]]
    if missing:
        text = "; ".join("%s lacks %s" % (n, ", ".join(k)) for n, k in missing.items())
        if p["on_missing_kernels"] == "fail":
            problems.append("required Triton kernels missing: %s (warm the cache: a first serving run on the head "
                            "compiles them; then sync again)" % text)
        else:
            module.warn("required Triton kernels missing: %s" % text)
    if problems:
        module.fail_json(msg="; ".join(problems), **out)
    return out


def _whoami():
    try:
        import pwd
        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return "uid %d" % os.geteuid()


if __name__ == "__main__":
    main()
