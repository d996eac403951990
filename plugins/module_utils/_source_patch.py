# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Patch engine for Python source files: replace one exact block, idempotently.

Standard library only, no Ansible imports: the same file is the engine of the
``dgxspark.vllm.source_patch`` module and, copied into a container image by the
``dgxspark.vllm.mods`` role, a plain script run by the image's own Python::

    python3 _source_patch.py MODS.json [--check]

MODS.json holds ``{"mods": [MOD, ...], "strict": false}``; the script prints
``{"results": [RESULT, ...], "failed": [NAME, ...]}`` as JSON and exits 0
(``failed`` lists the mods whose result fails under their strictness).

A MOD is a dict:
  name          label-safe name (letters, digits, ``_``, ``-``, ``.``)
  launcher      a mod folder of the community launcher (holding ``run.sh``):
                copied to ``/workspace/mods/<name>`` and run there as the
                launcher runs it; exit 0 = applied, anything else = failed.
                Takes no other keys but ``strict`` (default true: the launcher
                aborts the launch on a failed mod) and ``description``
  module | path the target: a Python module name, resolved without importing
                it, or a file path
  old, new      the exact block to replace and its replacement, or
  script        a shell script run instead (env MOD_TARGET = the target file);
                exit 0 = applied; a last output line naming a result reports it
  not_needed    optional ``{marker, distribution, version}``: the fix is
                upstream when the marker text is in the target, or when the old
                block is gone and the installed distribution matches ``version``
                (e.g. ``">=8.0.0"``)
  strict        optional bool; a strict mod fails on anything but applied,
                already_applied and not_needed
  replaces      optional: the name of a launcher mod this one stands in for
                (the mods role puts it in that mod's place)
"""

from __future__ import absolute_import, division, print_function

import difflib
import importlib.machinery
import importlib.util
import json
import os
import py_compile
import re
import subprocess
import sys
import tempfile

__metaclass__ = type

APPLIED = "applied"
ALREADY_APPLIED = "already_applied"
NOT_NEEDED = "not_needed"
TARGET_MISSING = "target_missing"
FAILED = "failed"
RESULTS = (APPLIED, ALREADY_APPLIED, NOT_NEEDED, TARGET_MISSING, FAILED)
OK_RESULTS = (APPLIED, ALREADY_APPLIED, NOT_NEEDED)

KEYS = frozenset(("name", "description", "module", "path", "old", "new", "script", "not_needed", "strict",
                  "replaces"))
LAUNCHER_KEYS = frozenset(("name", "description", "launcher", "strict", "via", "digest", "ref"))
# Where the launcher copies a mod inside the container before it runs run.sh.
LAUNCHER_DEST = "/workspace/mods"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SPEC_RE = re.compile(r"^\s*(==|!=|>=|<=|>|<)\s*([0-9][0-9A-Za-z.+-]*)\s*$")


def validate(mod):
    """Return a list of problems with a mod definition (empty when valid)."""
    if not isinstance(mod, dict):
        return ["a mod must be a dict, got %s" % type(mod).__name__]
    name = mod.get("name")
    problems = []
    if "launcher" in mod:
        unknown = sorted(set(mod) - LAUNCHER_KEYS)
        if unknown:
            problems.append("%s: a launcher mod takes only %s, not %s" % (name, ", ".join(sorted(LAUNCHER_KEYS)),
                                                                          ", ".join(unknown)))
        if not isinstance(name, str) or not _NAME_RE.match(name):
            problems.append("launcher mod name %r: use letters, digits, '_', '-', '.'" % (name,))
        if not isinstance(mod["launcher"], str) or not mod["launcher"]:
            problems.append("%s: 'launcher' must be the mod folder's path" % name)
        return problems
    unknown = sorted(set(mod) - KEYS)
    if unknown:
        problems.append("%s: unknown keys %s (known: %s)" % (name, ", ".join(unknown), ", ".join(sorted(KEYS))))
    if not isinstance(name, str) or not _NAME_RE.match(name):
        problems.append("name %r: use letters, digits, '_', '-', '.' (it becomes an image label)" % (name,))
    if bool(mod.get("module")) == bool(mod.get("path")):
        problems.append("%s: set exactly one of 'module' (a Python module name) or 'path' (a file)" % name)
    has_block = "old" in mod or "new" in mod
    if has_block == bool(mod.get("script")):
        problems.append("%s: set either 'old' and 'new' (a block replacement) or 'script'" % name)
    elif has_block and not (isinstance(mod.get("old"), str) and mod.get("old") and isinstance(mod.get("new"), str)):
        problems.append("%s: 'old' must be a non-empty string and 'new' a string" % name)
    elif has_block and mod["old"] == mod["new"]:
        problems.append("%s: 'old' and 'new' are the same text" % name)
    cond = mod.get("not_needed") or {}
    if not isinstance(cond, dict) or set(cond) - {"marker", "distribution", "version"}:
        problems.append("%s: 'not_needed' takes only marker, distribution, version" % name)
    elif bool(cond.get("distribution")) != bool(cond.get("version")):
        problems.append("%s: 'not_needed' needs both 'distribution' and 'version', or neither" % name)
    elif cond.get("version"):
        try:
            version_matches("0", cond["version"])
        except ValueError as exc:
            problems.append("%s: %s" % (name, exc))
    return problems


def _version_key(text):
    """Sortable key for a version: release numbers; pre/dev releases sort before their release."""
    m = re.match(r"^\s*v?(\d+(?:\.\d+)*)(.*)$", text or "")
    if not m:
        raise ValueError("not a version: %r" % (text,))
    release = [int(x) for x in m.group(1).split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    rest = m.group(2).lower()
    final = 0 if re.match(r"^[-_.]?(a|b|c|rc|alpha|beta|pre|preview|dev)", rest) else 1
    return (tuple(release), final)


def version_matches(version, spec):
    """True when version satisfies every comma-separated clause of spec, e.g. '>=8.0.0,<9'."""
    ops = {
        "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
        ">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b, "<": lambda a, b: a < b,
    }
    have = _version_key(version)
    for clause in spec.split(","):
        m = _SPEC_RE.match(clause)
        if not m:
            raise ValueError("version condition %r: use clauses like '>=8.0.0' joined by ','" % (spec,))
        if not ops[m.group(1)](have, _version_key(m.group(2))):
            return False
    return True


def find_module_file(name):
    """Source file of a module, found without importing it or its packages."""
    parts = name.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
        for i in range(1, len(parts)):
            if spec is None or not spec.submodule_search_locations:
                return None
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i + 1]), list(spec.submodule_search_locations))
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None
    return spec.origin


def distribution_version(name):
    """Installed version of a distribution, or None."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return None
    try:
        return metadata.version(name)
    except Exception:  # PackageNotFoundError, broken metadata
        return None


def _unified(before, after, path):
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                        "a" + path if path.startswith("/") else "a/" + path,
                                        "b" + path if path.startswith("/") else "b/" + path))


def _write_atomic(path, data):
    """Replace path's content, keeping its mode; the file is never half-written."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".source_patch.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        st = os.stat(path)
        os.chmod(tmp, st.st_mode & 0o7777)
        try:
            os.chown(tmp, st.st_uid, st.st_gid)
        except OSError:  # not owner: keep ours
            pass
        os.replace(tmp, path)
    except Exception:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _byte_compile(path):
    """Compile path to its .pyc; raise py_compile.PyCompileError on a syntax error."""
    py_compile.compile(path, doraise=True)


def _result(mod, result, target, message, version=None, diff="", strict=False):
    return {
        "name": mod.get("name"), "result": result, "target": target, "message": message,
        "version": version, "diff": diff, "changed": result == APPLIED, "strict": strict,
        "ok": result in OK_RESULTS or not strict,
    }


def _script(mod, target, check, strict):
    """Run a script mod: exit 0 = applied unless its last output line names a result."""
    if check:
        return _result(mod, APPLIED, target, "check mode: script not run", strict=strict)
    env = dict(os.environ, MOD_TARGET=target)
    proc = subprocess.run(["/bin/sh", "-ec", mod["script"]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          env=env, universal_newlines=True, check=False)
    lines = proc.stdout.strip().splitlines()
    last = lines[-1].strip() if lines else ""
    if proc.returncode != 0:
        return _result(mod, FAILED, target, "script exited %d: %s" % (proc.returncode, proc.stdout.strip()[-2000:]),
                       strict=strict)
    result = last if last in RESULTS else APPLIED
    return _result(mod, result, target, proc.stdout.strip()[-2000:], strict=strict)


def _launcher(mod, check, strict):
    """Run a launcher mod as launch-cluster.sh does: its folder at /workspace/mods/<name>, ./run.sh there."""
    folder = mod["launcher"]
    if not os.path.isfile(os.path.join(folder, "run.sh")):
        return _result(mod, TARGET_MISSING, folder, "%s has no run.sh" % folder, strict=strict)
    if check:
        return _result(mod, APPLIED, folder, "check mode: %s/run.sh not run" % folder, strict=strict)
    dest = os.path.join(LAUNCHER_DEST, mod["name"])
    proc = subprocess.run(
        ["bash", "-c", 'rm -rf "$2" && mkdir -p "$2" && cp -a "$1/." "$2/" && export WORKSPACE_DIR=$PWD '
                       '&& cd "$2" && chmod +x run.sh && ./run.sh', "launcher-mod", folder, dest],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    tail = proc.stdout.strip()[-2000:]
    if proc.returncode != 0:
        return _result(mod, FAILED, dest, "run.sh exited %d: %s" % (proc.returncode, tail), strict=strict)
    return _result(mod, APPLIED, dest, tail, strict=strict)


def patch(mod, check=False, strict=False):
    """Apply one mod definition; return its result dict (never raises on a bad target)."""
    problems = validate(mod)
    if not isinstance(mod, dict):
        return _result({}, FAILED, None, "; ".join(problems), strict=strict)
    strict = bool(mod.get("strict", True if "launcher" in mod else strict))
    if problems:
        return _result(mod, FAILED, None, "; ".join(problems), strict=strict)
    if "launcher" in mod:
        return _launcher(mod, check, strict)
    cond = mod.get("not_needed") or {}
    version = distribution_version(cond["distribution"]) if cond.get("distribution") else None
    if mod.get("module"):
        target = find_module_file(mod["module"])
        if target is None:
            return _result(mod, TARGET_MISSING, None, "module %s is not installed for %s" % (mod["module"], sys.executable),
                           version, strict=strict)
    else:
        target = mod["path"]
        if not os.path.isfile(target):
            return _result(mod, TARGET_MISSING, target, "file %s does not exist" % target, version, strict=strict)
    if mod.get("script"):
        return _script(mod, target, check, strict)

    with open(target, "rb") as handle:
        raw = handle.read()
    try:
        before = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _result(mod, FAILED, target, "%s is not UTF-8 text" % target, version, strict=strict)
    old, new = mod["old"], mod["new"]
    if new and new in before:
        return _result(mod, ALREADY_APPLIED, target, "the new block is already in %s" % target, version, strict=strict)
    if cond.get("marker") and cond["marker"] in before:
        return _result(mod, NOT_NEEDED, target, "marker %r found: fixed upstream" % cond["marker"], version, strict=strict)
    count = before.count(old)
    if count == 0:
        if cond.get("version") and version and version_matches(version, cond["version"]):
            return _result(mod, NOT_NEEDED, target, "%s %s matches %s and the old block is gone: fixed upstream"
                           % (cond["distribution"], version, cond["version"]), version, strict=strict)
        where = " (%s %s)" % (cond["distribution"], version or "not installed") if cond.get("distribution") else ""
        return _result(mod, TARGET_MISSING, target, "the old block is not in %s%s" % (target, where), version, strict=strict)
    if count > 1:
        return _result(mod, FAILED, target, "the old block occurs %d times in %s; make it unique" % (count, target),
                       version, strict=strict)

    after = before.replace(old, new, 1)
    diff = _unified(before, after, target)
    try:
        compile(after, target, "exec")
    except SyntaxError as exc:
        return _result(mod, FAILED, target, "the patched %s would not compile: %s" % (target, exc), version, diff, strict)
    if check:
        return _result(mod, APPLIED, target, "check mode: would patch %s" % target, version, diff, strict)
    _write_atomic(target, after.encode("utf-8"))
    try:
        _byte_compile(target)
    except py_compile.PyCompileError as exc:
        _write_atomic(target, raw)
        return _result(mod, FAILED, target, "byte-compiling the patched %s failed, restored it: %s" % (target, exc.msg),
                       version, diff, strict)
    return _result(mod, APPLIED, target, "patched %s" % target, version, diff, strict)


def run(mods, check=False, strict=False):
    """Apply mods in order; return (results, names of mods that failed under their strictness)."""
    results = [patch(mod, check=check, strict=strict) for mod in mods]
    return results, [r["name"] for r in results if not r["ok"]]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = [a for a in argv if a != "--check"]
    if len(args) != 1:
        sys.stderr.write("usage: %s MODS.json [--check]\n" % os.path.basename(sys.argv[0]))
        return 2
    with open(args[0]) as handle:
        spec = json.load(handle)
    results, failed = run(spec.get("mods", []), check="--check" in argv, strict=bool(spec.get("strict", False)))
    json.dump({"results": results, "failed": failed}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
