# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The community launcher's formats (spark-vllm-docker): recipe files and mod folders.

Pure functions, standard library only (PyYAML is passed in by the caller where a
YAML file is read), shared by the ``launcher_recipe`` filter and the
``launcher_mods`` module.

A launcher recipe (``recipe_version: "1"``) holds ``defaults``, ``env``,
``mods`` and a ``command`` whose ``{placeholders}`` are filled from
``defaults`` with ``str.format`` (``{{``/``}}`` are literal braces). The
launcher runs that command as shell text; here it is split the way the shell
would split it and turned into the collection's recipe data: ``model``,
``args`` (flag -> value, JSON flags as mappings), ``env`` and ``mods``.

A launcher mod is a folder with ``run.sh``; a mod group is a folder with
``mod-group.yaml`` (or a YAML file) listing mods and groups, expanded
depth-first in order, paths relative to the checkout's root.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shlex
import string

RECIPE_VERSIONS = ("1",)
# Short spellings vLLM's parser accepts, by their long names.
ALIASES = {"tp": "tensor-parallel-size", "pp": "pipeline-parallel-size", "dp": "data-parallel-size",
           "O": "compilation-config", "q": "quantization"}
# Flags the deployment decides (where the API binds, how ranks find each other): a recipe's
# values for them are kept out of ``args`` and reported in ``deployment``.
DEPLOYMENT_FLAGS = ("host", "port", "distributed-executor-backend", "nnodes", "node-rank", "master-addr",
                    "master-port", "headless")
GROUP_FILE = "mod-group.yaml"
_ENV_REF = re.compile(r"^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$")
_NUMBER = re.compile(r"^-?(?:\d+|\d*\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)$")


class LauncherError(ValueError):
    """A launcher recipe or mod tree the collection cannot use; the message names the fix."""


def _value(text):
    """A flag's value as data: JSON objects and lists parsed, numbers as numbers, else the string."""
    if text[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise LauncherError("%r is not valid JSON (%s)" % (text, exc)) from exc
    if _NUMBER.match(text):
        return float(text) if any(c in text for c in ".eE") else int(text)
    return text


def parse_command(command):
    """Split a ``vllm serve MODEL --flag value ...`` command; return (model, args, deployment).

    A flag followed by another flag (or nothing) is a switch (``True``). Flags the
    deployment decides go to ``deployment`` instead of ``args``.
    """
    if not isinstance(command, str):
        raise LauncherError("the recipe's command must be text")
    try:
        words = shlex.split(command.replace("\\\n", " "), comments=True)
    except ValueError as exc:
        raise LauncherError("the recipe's command does not split as shell words: %s" % exc) from exc
    if words[:2] != ["vllm", "serve"]:
        raise LauncherError("the recipe's command must start with 'vllm serve', found %r"
                            % " ".join(words[:2]))
    words = words[2:]
    model = None
    if words and not words[0].startswith("-"):
        model = words.pop(0)
    args, deployment = {}, {}
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-") or word in ("-", "--"):
            raise LauncherError("unexpected word %r in the recipe's command (a value without its flag?)" % word)
        name, eq, inline = word.lstrip("-").partition("=")
        name = ALIASES.get(name, name)
        if eq:
            value = _value(inline)
        elif i < len(words) and not (words[i].startswith("-") and not _NUMBER.match(words[i])):
            value = _value(words[i])
            i += 1
        else:
            value = True
        if name == "model":
            model = value
        elif name in DEPLOYMENT_FLAGS:
            deployment[name] = value
        else:
            args[name] = value
    if not isinstance(model, str) or not model:
        raise LauncherError("the recipe's command names no model (vllm serve MODEL ...)")
    return model, args, deployment


def placeholders(command):
    """The names the command's ``{placeholders}`` use (none for a malformed command: render_command says why)."""
    try:
        return [name.split(".")[0].split("[")[0] for _text, name, _spec, _conv in string.Formatter().parse(command) if name]
    except ValueError:
        return []


def render_command(command, params):
    """Fill the command's ``{placeholders}`` from params the way the launcher does."""
    try:
        return command.format(**params)
    except KeyError as exc:
        raise LauncherError("the command uses {%s}, which the recipe's defaults do not set" % exc.args[0]) from exc
    except (IndexError, ValueError) as exc:
        raise LauncherError("the command's placeholders are malformed: %s" % exc) from exc


def recipe_from_launcher(doc, source="the recipe", params=None):
    """A launcher recipe (parsed YAML) as the collection's recipe data.

    params: values merged over the recipe's ``defaults`` before the command is
    filled in (the launcher's command-line overrides).
    """
    if not isinstance(doc, dict):
        raise LauncherError("%s is not a mapping" % source)
    version = str(doc.get("recipe_version", ""))
    if version not in RECIPE_VERSIONS:
        raise LauncherError("%s has recipe_version %r; this collection reads version %s"
                            % (source, doc.get("recipe_version"), ", ".join(RECIPE_VERSIONS)))
    missing = [k for k in ("name", "command") if not doc.get(k)]
    if missing:
        raise LauncherError("%s lacks %s" % (source, ", ".join(missing)))
    defaults = doc.get("defaults") or {}
    env = doc.get("env") or {}
    mods = doc.get("mods") or []
    if not isinstance(defaults, dict) or not isinstance(env, dict) or not isinstance(mods, list):
        raise LauncherError("%s: defaults and env must be mappings, mods a list" % source)
    unknown = sorted(set(params or {}) - set(defaults) - set(placeholders(doc["command"])))
    if unknown:
        # The launcher ignores a value nothing reads: a typo would serve the recipe's own value without a word.
        known = sorted(set(defaults) | set(placeholders(doc["command"])))
        raise LauncherError("%s takes no parameter %s; its parameters: %s%s" % (
            source, ", ".join(unknown), ", ".join(known) or "none",
            "".join(" (%s: did you mean %s?)" % (k, m[0]) for k in unknown
                    for m in [difflib.get_close_matches(k, known, 1)] if m)))
    model, args, deployment = parse_command(render_command(doc["command"], dict(defaults, **(params or {}))))
    plain, from_controller = {}, []
    for key, value in env.items():
        ref = _ENV_REF.match(str(value))
        if ref:
            # The launcher expands $NAME from the shell that starts it: a secret, never written to a unit.
            from_controller.append(ref.group(1) or ref.group(2))
        else:
            plain[str(key)] = str(value)
    if doc.get("model") and doc["model"] != model:
        raise LauncherError("%s: model %r differs from the command's %r" % (source, doc["model"], model))
    recipe = {
        "name": str(doc["name"]),
        "description": str(doc.get("description") or ""),
        "model": model,
        # Pictures are sent (validate) only to a recipe that says how many a prompt may hold.
        "vision": "limit-mm-per-prompt" in args and not args.get("language-model-only", False),
        "args": args,
        "env": plain,
        "mods": [str(m) for m in mods],
        "launcher": {"source": source, "container": doc.get("container"), "build_args": doc.get("build_args") or [],
                     "cluster_only": bool(doc.get("cluster_only", False)), "deployment": deployment,
                     "env_from_controller": from_controller},
    }
    build = _build(doc.get("build_args") or [], doc.get("container"))
    if build:
        recipe["build"] = build
    spec = args.get("speculative-config")
    if isinstance(spec, dict) and isinstance(spec.get("model"), str):
        recipe["draft_model"] = spec["model"]
    return recipe


def _build(build_args, container):
    """The build a launcher recipe pins: --vllm-ref and --apply-vllm-patch of its build_args ({} without a ref)."""
    words = [str(w) for w in build_args]
    pinned = {"vllm_ref": None, "vllm_patches": []}
    for at, word in enumerate(words[:-1]):
        if word == "--vllm-ref":
            pinned["vllm_ref"] = words[at + 1]
        elif word == "--apply-vllm-patch":
            pinned["vllm_patches"].append(words[at + 1])
    if not pinned["vllm_ref"]:
        return {}
    if container:
        pinned["image"] = str(container)
    return pinned


def is_launcher_recipe(doc):
    return isinstance(doc, dict) and "recipe_version" in doc


# ------------------------------------------------------------------ mods
def _resolve(root, ref):
    path = os.path.expanduser(str(ref))
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(root, path))


def _group_file(path):
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, GROUP_FILE)):
        return os.path.join(path, GROUP_FILE)
    if os.path.isfile(path) and path.endswith((".yaml", ".yml")):
        return path
    return None


def expand_mods(root, refs, load_yaml, _chain=()):
    """Expand mod refs (folders and groups) into mod folders in order.

    Returns a list of dicts ``{name, ref, path, via}`` (``via``: the groups it came
    through). ``load_yaml(path)`` parses a group file. Raises LauncherError on a
    missing folder, a folder without run.sh, a group without a ``mods`` list, or a cycle.
    """
    out = []
    for ref in refs:
        path = _resolve(root, ref)
        group = _group_file(path)
        if group:
            if group in _chain:
                raise LauncherError("mod group %s includes itself (through %s)" % (ref, " -> ".join(_chain)))
            doc = load_yaml(group)
            if not isinstance(doc, dict) or not isinstance(doc.get("mods"), list):
                raise LauncherError("mod group %s has no top-level 'mods' list" % group)
            out.extend(expand_mods(root, doc["mods"], load_yaml, _chain + (group,)))
            continue
        where = (" (listed in %s)" % _chain[-1]) if _chain else ""
        if not os.path.isdir(path):
            raise LauncherError("mod %s: no folder %s%s" % (ref, path, where))
        if not os.path.isfile(os.path.join(path, "run.sh")):
            raise LauncherError("mod %s: %s has no run.sh%s" % (ref, path, where))
        out.append({"name": os.path.basename(path), "ref": str(ref), "path": path,
                    "via": [os.path.relpath(g, root) for g in _chain]})
    return out


def folder_digest(path):
    """SHA-256 over a folder's file names and contents (byte-compiled caches left out)."""
    h = hashlib.sha256()
    for base, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            full = os.path.join(base, name)
            h.update(os.path.relpath(full, path).encode("utf-8") + b"\0")
            with open(full, "rb") as handle:
                h.update(handle.read())
            h.update(b"\0")
    return h.hexdigest()
