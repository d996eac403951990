#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_files
short_description: Put a role's folders and small text files on a node in one call
version_added: 0.1.0
description:
  - Makes each listed path a directory, a file with the given content, or absent, with its mode and owner,
    in one module run. A role that writes a unit, its settings and the folders they use would otherwise
    pay one module run (a round trip and a Python start on the node) per path and per loop item, on every
    converged run.
  - Files are written whole through a temporary file in the same folder and renamed into place, so a reader
    never sees half a file. Missing parent folders are created.
  - Meant for small text content rendered on the controller (units, settings, scripts). Secrets do not belong
    here, since the content is part of the module's arguments.
options:
  directories:
    description: Folders to create first, all with O(directory_mode), O(directory_owner) and O(directory_group).
    type: list
    elements: path
    default: []
  directory_mode:
    description: Octal mode of the O(directories).
    type: str
    default: "0755"
  directory_owner:
    description: Owning user of the O(directories). Left as it is when not given.
    type: str
  directory_group:
    description: Owning group of the O(directories). Left as it is when not given.
    type: str
  paths:
    description: What each path must be, in order (a folder before the files in it), after the O(directories).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path on the node.
        type: path
        required: true
      state:
        description: V(directory), V(file) (with O(paths[].content)) or V(absent) (a folder is removed with what it holds).
        type: str
        choices: [directory, file, absent]
        default: file
      content:
        description: The file's content (O(paths[].state=file)).
        type: str
        default: ""
      mode:
        description: Octal mode as a string, for example V("0644"). Left as it is when not given.
        type: str
      owner:
        description: Owning user name. Left as it is when not given.
        type: str
      group:
        description: Owning group name. Left as it is when not given.
        type: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes
attributes:
  check_mode:
    details: Compares every path with what it should be and reports what would change; writes nothing.
  diff_mode:
    support: full
    details: One diff per changed path, with the file content or the path's state before and after.
author:
  - dgxspark.vllm contributors (@dgxspark)
"""

EXAMPLES = r"""
- name: The watch's folders, its settings and its unit
  dgxspark.vllm.node_files:
    directories: [/opt/dgxspark-gpu-watch, /etc/dgxspark-vllm]
    paths:
      - {path: /etc/dgxspark-vllm/gpu-watch.json, content: "{{ settings | to_nice_json }}\n", mode: "0644"}
      - path: /etc/systemd/system/dgxspark-gpu-watch.service
        content: "{{ lookup('ansible.builtin.template', 'dgxspark-gpu-watch.service.j2') }}"
        mode: "0644"
        owner: root
        group: root
  become: true
  register: watch_files

- name: Restart only when the unit itself changed
  ansible.builtin.debug:
    msg: restart
  when: "'/etc/systemd/system/dgxspark-gpu-watch.service' in watch_files.changed_paths"
"""

RETURN = r"""
changed_paths:
  description: The paths that changed (or would, in check mode), in the order given.
  returned: always
  type: list
  elements: str
existed:
  description: For every path, whether it existed before this run.
  returned: always
  type: dict
  sample: {/etc/systemd/system/dgxspark-ray.service: true}
"""

import grp
import os
import pwd
import shutil
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule


def _kind(st):
    if st is None:
        return "absent"
    return "directory" if stat.S_ISDIR(st.st_mode) else "file"


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError:
        return None  # binary: always rewritten, not shown


def _ids(module, spec):
    """uid and gid wanted (-1: leave as it is); an unknown user or group ends the run, named."""
    uid = gid = -1
    try:
        if spec.get("owner"):
            uid = pwd.getpwnam(spec["owner"]).pw_uid
    except KeyError:
        module.fail_json(msg=f"{spec['path']}: no user {spec['owner']!r} on this node; set owner to an account the node has")
    try:
        if spec.get("group"):
            gid = grp.getgrnam(spec["group"]).gr_gid
    except KeyError:
        module.fail_json(msg=f"{spec['path']}: no group {spec['group']!r} on this node; set group to one the node has")
    return uid, gid


def _mode(module, spec):
    if spec.get("mode") is None:
        return None
    try:
        return int(str(spec["mode"]), 8)
    except ValueError:
        module.fail_json(msg=f"{spec['path']}: mode {spec['mode']!r} is not octal; give it as a string such as \"0644\"")
    return None


def _write(path, content, mode, uid, gid):
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".dgxspark-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(content)
        if mode is not None:
            os.chmod(tmp, mode)
        elif os.path.exists(path):
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        else:
            os.chmod(tmp, 0o644)
        os.chown(tmp, uid, gid)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def ensure(module, spec, check):
    """(changed, existed, diff) for one path; changes it unless check."""
    path, want = spec["path"], spec["state"]
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    have = _kind(st)
    mode, (uid, gid) = _mode(module, spec), _ids(module, spec)
    diff = {"before_header": path, "after_header": path, "before": "", "after": ""}
    if want == "absent":
        if have == "absent":
            return False, False, None
        diff.update(before=f"{have}\n", after="absent\n")
        if not check:
            shutil.rmtree(path) if have == "directory" else os.unlink(path)
        return True, True, diff

    attrs_off = st is not None and ((mode is not None and stat.S_IMODE(st.st_mode) != mode)
                                    or (uid != -1 and st.st_uid != uid) or (gid != -1 and st.st_gid != gid))
    if want == "directory":
        if have == "directory" and not attrs_off:
            return False, True, None
        if have == "file":
            module.fail_json(msg=f"{path} is a file where a folder must be; move it away and run again")
        diff.update(before=f"{have}{_attrs(st)}\n", after=f"directory{_attrs_wanted(mode, spec)}\n")
        if not check:
            os.makedirs(path, exist_ok=True)
            os.chmod(path, mode if mode is not None else stat.S_IMODE(os.stat(path).st_mode))
            os.chown(path, uid, gid)
        return True, have != "absent", diff

    if have == "directory":
        module.fail_json(msg=f"{path} is a folder where a file must be; move it away and run again")
    before = _read(path) if have == "file" else ""
    content = spec["content"]
    if have == "file" and before == content and not attrs_off:
        return False, True, None
    if before == content:  # only mode or owner differ
        diff.update(before=f"mode/owner{_attrs(st)}\n", after=f"mode/owner{_attrs_wanted(mode, spec)}\n")
    else:
        diff.update(before=before if before is not None else "(binary)\n", after=content)
    if not check:
        _write(path, content, mode, uid, gid)
    return True, have == "file", diff


def _attrs(st):
    if st is None:
        return ""
    return f" mode {stat.S_IMODE(st.st_mode):04o} uid {st.st_uid} gid {st.st_gid}"


def _attrs_wanted(mode, spec):
    parts = [f"mode {mode:04o}" if mode is not None else "", f"owner {spec['owner']}" if spec.get("owner") else "",
             f"group {spec['group']}" if spec.get("group") else ""]
    return "".join(" " + p for p in parts if p)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            directories=dict(type="list", elements="path", default=[]),
            directory_mode=dict(type="str", default="0755"),
            directory_owner=dict(type="str"),
            directory_group=dict(type="str"),
            paths=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True),
                state=dict(type="str", default="file", choices=["directory", "file", "absent"]),
                content=dict(type="str", default=""),
                mode=dict(type="str"),
                owner=dict(type="str"),
                group=dict(type="str"),
            )),
        ),
        supports_check_mode=True,
    )
    p = module.params
    folders = [dict(path=d, state="directory", content="", mode=p["directory_mode"], owner=p["directory_owner"],
                    group=p["directory_group"]) for d in p["directories"]]
    specs = folders + p["paths"]
    for spec in specs:
        if not os.path.isabs(spec["path"]):
            module.fail_json(msg=f"{spec['path']!r} is not an absolute path; give every path from /")
    # Every path is judged before any is changed, so bad input (a bad mode, an unknown owner, a file where a
    # folder must be) ends the run with nothing written.
    judged = [ensure(module, spec, check=True) for spec in specs]
    changed_paths, existed, diffs = [], {}, []
    for spec, (changed, was, diff) in zip(specs, judged):
        existed[spec["path"]] = was
        if changed:
            if not module.check_mode:
                ensure(module, spec, check=False)
            changed_paths.append(spec["path"])
            diffs.append(diff)
    result = dict(changed=bool(changed_paths), changed_paths=changed_paths, existed=existed)
    if module._diff and diffs:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
