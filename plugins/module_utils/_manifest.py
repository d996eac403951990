# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Manifests of a directory tree: list, hash, compare, and find Triton kernels.

Shared by the dgxspark.vllm.triton_cache_sync module (Triton caches) and by any
role that copies and verifies a folder between nodes (e.g. model folders).

This file uses the standard library only, on purpose: the module sends its own
source text to each destination node over SSH (``python3 -c``, the text on
stdin) so that the destination's manifest is computed on the destination
itself, where the files are. ``remote_main`` is the entry point there.

Manifest: ``{"root": abs path, "files": {rel: [size, mtime_ns, digest]},
"links": {rel: target}, "dirs": [rel, ...]}``. ``digest`` is the hex SHA-256 of
the content, or None when the manifest was built without hashing.
"""

from __future__ import annotations

import concurrent.futures
import fnmatch
import hashlib
import json
import os
import pwd
import grp
import shutil
import sys

# SHA-256: OpenSSL runs it on the CPU's SHA instructions (SHA-NI on x86, the
# ARMv8 SHA2 extension on the GB10's Grace cores), faster there than BLAKE2 in
# hashlib, and a cryptographic hash, so two different files never agree by chance.
HASH_NAME = "sha256"
# rsync's scratch dir on the receiving side; excluded from every manifest and
# removed after each transfer, so a killed transfer leaves nothing under a final name.
TMP_DIR = ".dgxspark-sync.tmp"
# Optional digest cache of a node (verify=content with digest_cache): a file is
# hashed again only when its inode, size, mtime or ctime changed. Writing a file
# changes its ctime, even when mtime is put back, so the byte flip is still seen.
CACHE_FILE = ".dgxspark-sync.digests"
# A Triton kernel is usable when its metadata and its binary sit in one <hash>/ dir.
KERNEL_BINARY_SUFFIXES = (".cubin", ".hsaco", ".spv")
_CHUNK = 1 << 20


def expand_root(path, home=None):
    """Expand a leading ~ against ``home`` (the login user's, even under sudo)."""
    if home and (path == "~" or path.startswith("~/")):
        path = home + path[1:]
    return os.path.abspath(os.path.expanduser(path))


def _excluded(rel, name, excludes):
    return any(fnmatch.fnmatch(name, pat) or fnmatch.fnmatch(rel, pat) for pat in excludes)


def scan(root, excludes=()):
    """Walk ``root`` once with scandir: files (size, mtime), links, dirs, and access problems.

    Returns a manifest without digests plus the lists ``unreadable`` (files or
    dirs the current user cannot read) and ``unwritable`` (dirs it cannot write).
    """
    files, links, dirs, unreadable, unwritable, keys = {}, {}, [], [], [], {}
    excludes = tuple(excludes or ())
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        abs_dir = os.path.join(root, rel_dir) if rel_dir else root
        if not os.access(abs_dir, os.W_OK):
            unwritable.append(rel_dir)
        try:
            entries = list(os.scandir(abs_dir))
        except PermissionError:
            unreadable.append(rel_dir or ".")
            continue
        for entry in entries:
            rel = rel_dir + "/" + entry.name if rel_dir else entry.name
            if rel == TMP_DIR or rel.startswith(CACHE_FILE) or _excluded(rel, entry.name, excludes):
                continue
            if entry.is_symlink():
                links[rel] = os.readlink(entry.path)
            elif entry.is_dir():
                dirs.append(rel)
                stack.append(rel)
            elif entry.is_file():
                st = entry.stat()
                files[rel] = [st.st_size, st.st_mtime_ns, None]
                keys[rel] = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
                if not os.access(entry.path, os.R_OK):
                    unreadable.append(rel)
    dirs.sort()
    return {"root": root, "files": files, "links": links, "dirs": dirs, "keys": keys,
            "unreadable": sorted(unreadable), "unwritable": sorted(unwritable)}


def hash_file(path, buf=None):
    """Hex SHA-256 of one file, streamed through ``buf`` (1 MiB; reused across files by a batch)."""
    h = hashlib.new(HASH_NAME)
    if buf is None:
        buf = bytearray(_CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            h.update(view[:n])
    return h.hexdigest()


def _hash_batch(root, rels):
    # One buffer per batch: allocating 1 MiB per small file would cost more than hashing it.
    buf, out = bytearray(_CHUNK), []
    for rel in rels:
        try:
            out.append((rel, hash_file(os.path.join(root, rel), buf)))
        except OSError as exc:
            out.append((rel, "error:%s" % exc.strerror))
    return out


def default_workers():
    return min(32, (os.cpu_count() or 2) * 2)


def hash_files(root, rels, workers=0):
    """Hash ``rels`` under ``root`` in parallel: {rel: digest}.

    Threads are enough: reading and hashing release the GIL. Files go out in
    batches so that thousands of small files do not cost a task each.
    """
    rels = list(rels)
    workers = workers or default_workers()
    if not rels:
        return {}
    size = max(1, min(64, len(rels) // (workers * 4) or 1))
    batches = [rels[i:i + size] for i in range(0, len(rels), size)]
    result = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        for pairs in pool.map(lambda b: _hash_batch(root, b), batches):
            result.update(pairs)
    return result


def build(root, excludes=(), hashing=True, workers=0, cache=False, write_cache=True):
    """Scan ``root`` and hash every readable file once. A missing root is an empty tree.

    With ``cache``, digests of files whose (inode, size, mtime, ctime) did not
    change since they were hashed come from the node's digest cache; ``hashed``
    tells how many files were actually read.
    """
    if not os.path.isdir(root):
        return {"root": root, "exists": False, "files": {}, "links": {}, "dirs": [], "keys": {}, "hashed": 0,
                "unreadable": [], "unwritable": [] if _creatable(root) else [""]}
    man = scan(root, excludes)
    man["exists"] = True
    man["hashed"] = 0
    if hashing:
        skip = set(man["unreadable"])
        known = load_cache(root) if cache else {}
        todo = []
        for rel in man["files"]:
            if rel in skip:
                continue
            hit = known.get(rel)
            if hit is not None and hit[:4] == man["keys"][rel]:
                man["files"][rel][2] = hit[4]
            else:
                todo.append(rel)
        for rel, digest in hash_files(root, todo, workers).items():
            man["files"][rel][2] = digest
        man["hashed"] = len(todo)
        if cache and write_cache and (todo or len(known) != len(man["files"])):
            save_cache(root, man)
    return man


def load_cache(root):
    try:
        with open(os.path.join(root, CACHE_FILE), "r", encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def save_cache(root, man):
    """Write the digest cache atomically; best effort (a read-only tree just has none)."""
    data = {rel: man["keys"][rel] + [v[2]] for rel, v in man["files"].items()
            if v[2] and not v[2].startswith("error:") and rel in man["keys"]}
    tmp = os.path.join(root, CACHE_FILE + ".%d" % os.getpid())
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, separators=(",", ":"))
        os.replace(tmp, os.path.join(root, CACHE_FILE))
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _creatable(path):
    parent = os.path.dirname(path.rstrip("/")) or "/"
    while not os.path.exists(parent) and parent != "/":
        parent = os.path.dirname(parent)
    return os.access(parent, os.W_OK)


def totals(man):
    return len(man["files"]), sum(v[0] for v in man["files"].values())


def digest(man):
    """One SHA-256 over the sorted (path, size, content digest) list: equal trees, equal digest."""
    h = hashlib.sha256()
    for rel in sorted(man["files"]):
        size, _mtime, dig = man["files"][rel]
        h.update(("f\0%s\0%d\0%s\n" % (rel, size, dig)).encode("utf-8", "surrogateescape"))
    for rel in sorted(man["links"]):
        h.update(("l\0%s\0%s\n" % (rel, man["links"][rel])).encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def compare(src, dst, content=True):
    """What it takes to make ``dst`` agree with ``src``.

    ``send``: files missing on dst or differing (by digest when ``content``,
    else by size and mtime like ``rsync -a``), plus links missing or pointing
    elsewhere. ``content_mismatch``: the subset with equal size and mtime but
    different bytes (what a plain ``rsync -a`` leaves in place). ``extra``: on dst only.
    """
    send, mismatch = [], []
    sf, df = src["files"], dst["files"]
    for rel, (size, mtime, dig) in sf.items():
        other = df.get(rel)
        if other is None:
            send.append(rel)
            continue
        same_stat = other[0] == size and other[1] == mtime
        if content:
            if other[2] != dig or other[0] != size:
                send.append(rel)
                if same_stat:
                    mismatch.append(rel)
        elif not same_stat:
            send.append(rel)
    for rel, target in src["links"].items():
        if dst["links"].get(rel) != target:
            send.append(rel)
    extra = sorted(set(df) - set(sf)) + sorted(set(dst["links"]) - set(src["links"]))
    return {"send": sorted(send), "content_mismatch": sorted(mismatch), "extra": extra}


def kernels(paths):
    """Names of the Triton kernels present among ``paths`` (relative file paths).

    A kernel ``name`` is present when some dir, at any depth, holds both
    ``name.json`` and ``name`` + a binary suffix (``.cubin``; ``.hsaco``, ``.spv``
    on other backends). ``~/.triton`` holds ``cache/<hash>/``; a ``TRITON_CACHE_DIR``
    holds ``<hash>/`` directly: both work.
    """
    by_dir = {}
    for rel in paths:
        head, _sep, name = rel.rpartition("/")
        by_dir.setdefault(head, set()).add(name)
    found = set()
    for names in by_dir.values():
        for name in names:
            if name.endswith(".json") and not name.startswith("__grp__"):
                stem = name[:-5]
                if any(stem + suffix in names for suffix in KERNEL_BINARY_SUFFIXES):
                    found.add(stem)
    return found


def missing_kernels(paths, required):
    present = kernels(paths)
    return [k for k in required if k not in present]


def _owner_ids(owner, group):
    uid = pwd.getpwnam(owner).pw_uid if owner else -1
    gid = grp.getgrnam(group).gr_gid if group else -1
    return uid, gid


def owner_mismatch(root, man, owner, group):
    """Entries (dirs, files, links; "" is the root) not owned by owner/group."""
    if not (owner or group) or not man.get("exists", True):
        return []
    uid, gid = _owner_ids(owner, group)
    out = []
    for rel in [""] + man["dirs"] + list(man["files"]) + list(man["links"]):
        st = os.lstat(os.path.join(root, rel) if rel else root)
        if (uid != -1 and st.st_uid != uid) or (gid != -1 and st.st_gid != gid):
            out.append(rel)
    return sorted(out)


def chown(root, rels, owner, group):
    uid, gid = _owner_ids(owner, group)
    for rel in rels:
        os.lchown(os.path.join(root, rel) if rel else root, uid, gid)


def remove(root, rels, src_dirs=()):
    """Remove files/links ``rels``, then dirs that are now empty and absent from the source."""
    for rel in rels:
        try:
            os.unlink(os.path.join(root, rel))
        except FileNotFoundError:
            pass
    keep = set(src_dirs)
    parents = sorted({os.path.dirname(r) for r in rels if os.path.dirname(r)}, key=len, reverse=True)
    for rel in parents:
        while rel and rel not in keep:
            try:
                os.rmdir(os.path.join(root, rel))
            except OSError:
                break
            rel = os.path.dirname(rel)


def sweep_tmp(root):
    """Remove the scratch dir a killed transfer left behind. True when there was one."""
    path = os.path.join(root, TMP_DIR)
    if os.path.lexists(path):
        shutil.rmtree(path, ignore_errors=True)
        return True
    return False


def run_action(req):
    """One request: what the module asks a node (local or remote) to do.

    ``manifest``: build the manifest (``hash``, ``excludes``, ``owner``/``group``
    to report mismatches, ``sweep`` to remove a stale scratch dir first).
    ``finish``: hash ``verify`` paths, remove ``delete`` paths, chown, drop the scratch dir.
    """
    root = expand_root(req["path"], req.get("home"))
    action = req["action"]
    out = {"root": root}
    if action == "manifest":
        out["swept"] = sweep_tmp(root) if req.get("sweep") and os.path.isdir(root) else False
        man = build(root, req.get("excludes", ()), req.get("hash", True), req.get("workers", 0),
                    cache=req.get("cache", False), write_cache=not req.get("check", False))
        man.pop("keys", None)
        man["owner_mismatch"] = owner_mismatch(root, man, req.get("owner"), req.get("group"))
        out.update(man)
    elif action == "finish":
        if req.get("delete"):
            remove(root, req["delete"], req.get("src_dirs", ()))
        out["swept"] = sweep_tmp(root)
        out["verified"] = hash_files(root, req.get("verify", ()), req.get("workers", 0))
        if req.get("cache"):
            # Record what was just verified, so the next run need not read it again.
            man = scan(root, req.get("excludes", ()))
            known = load_cache(root)
            for rel, v in man["files"].items():
                hit = known.get(rel)
                if rel in out["verified"]:
                    v[2] = out["verified"][rel]
                elif hit is not None and hit[:4] == man["keys"][rel]:
                    v[2] = hit[4]
            save_cache(root, man)
        out["stat"] = {}
        for rel in req.get("verify", ()):
            try:
                st = os.stat(os.path.join(root, rel))
                out["stat"][rel] = [st.st_size, st.st_mtime_ns]
            except OSError:
                out["stat"][rel] = None
        if req.get("owner") or req.get("group"):
            man = scan(root, req.get("excludes", ()))
            man["exists"] = True
            fix = owner_mismatch(root, man, req.get("owner"), req.get("group"))
            chown(root, fix, req.get("owner"), req.get("group"))
            out["chowned"] = len(fix)
    else:
        raise ValueError("unknown action %r" % action)
    return out


def answer_to(man, src_digest):
    """The manifest to send back to a source whose tree digest is ``src_digest``.

    An equal tree (same paths, sizes, content digests and links) is answered with
    ``same`` and no file list: a no-op sync then moves a few hundred bytes
    instead of the whole manifest (2 MB for a 10,000-file cache).
    """
    if not src_digest or "files" not in man or any(v[2] is None for v in man["files"].values()):
        return man
    if digest(man) != src_digest:
        return man
    small = {k: v for k, v in man.items() if k not in ("files", "links", "dirs", "unwritable")}
    small["same"] = True
    small["digest"] = src_digest
    return small


def remote_main(req=None):
    """Entry point on a node: one JSON request per line on stdin (the first carries the code),
    one JSON answer on stdout.

    With ``exchange`` the node builds its manifest at once, then reads one more line, the source's
    tree digest (the source hashes its own tree meanwhile), and answers through ``answer_to``.
    """
    if req is None:
        req = json.loads(sys.stdin.readline())
    if len(sys.argv) > 1 and not req.get("home"):
        req["home"] = sys.argv[1]
    try:
        out = run_action(req)
        if req.get("exchange") and "error" not in out:
            line = sys.stdin.readline()
            out = answer_to(out, json.loads(line).get("digest") if line.strip() else None)
    except Exception as exc:  # pylint: disable=broad-except
        out = {"error": "%s: %s" % (type(exc).__name__, exc)}
    sys.stdout.write(json.dumps(out))
    sys.stdout.flush()


# The command that runs this file on a node: stdin's first line is {"code": <this file>, ...request}.
# "$HOME" is expanded by the login shell before any sudo, so ~ stays the login user's home.
BOOTSTRAP = ("import json,sys;d=json.loads(sys.stdin.readline());g={'__name__':'dgxspark_manifest'};"
             "exec(compile(d.pop('code'),'dgxspark_manifest','exec'),g);g['remote_main'](d)")


def source_text():
    """This file's source, to ship to nodes (works from AnsiballZ's zip too)."""
    # Imported here: on a node this file runs alone, without the collection.
    from ansible_collections.dgxspark.vllm.plugins.module_utils._source import source_of  # pylint: disable=import-outside-toplevel
    return source_of(__name__)
