#!/usr/bin/env python3
"""Simulated DGX Spark cluster for tests: podman containers with systemd, sshd and Docker Engine.

Test harness only. The roles never see this script; they see an inventory with
addresses, an SSH key and a few variables a real user could set as well.

    simctl.py build                       # node + serving images (cached by input hash)
    simctl.py up   --cluster pair --nodes 2 [--gpu spark-worker-1=wedged]
    simctl.py down --cluster pair
    simctl.py status --cluster pair
    simctl.py logs --cluster pair --dest DIR   # each node's dgxspark-* journals, before a down
    simctl.py stop-node  --cluster pair spark-worker-1 [--grace 5]   # a node that is down
    simctl.py start-node --cluster pair spark-worker-1               # ... and back (waits for sshd)
    simctl.py prune                       # every sim node, volume and network left by earlier runs

Every cluster has a fixed index (sim/clusters.yml) that gives it its own two
networks (management and ConnectX-7 "fabric") with static addresses, so an
inventory for it can be written once and checked in.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import yaml

SIM_DIR = pathlib.Path(__file__).resolve().parent
CACHE = pathlib.Path(os.environ.get("DGXSPARK_SIM_CACHE", pathlib.Path.home() / ".cache" / "dgxspark-sim"))
SSH_KEY = CACHE / "ssh" / "id_ed25519"
IMAGE_DIR = CACHE / "images"
MIRROR = os.environ.get("DGXSPARK_SIM_MIRROR", "http://deb.debian.org/debian")
BASE_PACKAGES = "openssh-server,python3,rsync,sudo,iproute2,procps"
# Outer podman: runc (crun refuses cgroup v1 hybrid here) and ulimits below the host's hard limits.
PODMAN = ["podman", "--runtime", "runc"]
ULIMITS = ["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]
FABRIC_IFACE = "enp1s0f1np1"
SERVING_ARCHIVE = "/srv/dgxspark-sim/serving-image.tar"
# The real vLLM engine (CPU build) image, and the tiny model it serves, on every node.
ENGINE_ARCHIVE = "/srv/dgxspark-sim/vllm-image.tar"
ENGINE_REF = "localhost/dgxspark-sim-vllm:latest"
TINY_MODEL = "dgxspark-sim/tiny-llama"
TINY_MODEL_SRC = "/srv/dgxspark-sim/tiny-model"
# The CPU build of torch on this kind of machine, which the engine image installs from.
WHEELS = "/opt/wheels"
# A stand-in checkout of the community launcher on the head (recipes, mod folders, mod groups).
LAUNCHER_CHECKOUT = "/home/spark/spark-vllm-docker"
RDMA_DEVICE = "rocep1s0f1"
# What a Spark's sysfs shows that this machine's does not (the node sees the host's): the RoCE device's PCIe link
# width and the firmware release (NVIDIA's Founders Edition strings), in a tree the sim overlay points preflight at.
SYSFS_STANDIN = "/etc/dgxspark-sim/sys"
SYSFS_FILES = {f"class/infiniband/{RDMA_DEVICE}/device/current_link_width": "4",
               "class/dmi/id/bios_version": "5.36_0ACUM023", "class/dmi/id/bios_date": "12/25/2025"}
# Stand-ins installed on every node under the real command names.
STANDINS = {
    "nvidia_smi_standin.py": "/usr/local/bin/nvidia-smi",
    "ibdev2netdev_standin.sh": "/usr/local/bin/ibdev2netdev",
    "uname_standin.sh": "/usr/local/bin/uname",
    "ib_write_bw_standin.py": "/usr/local/bin/ib_write_bw",
    "hf_mirror_standin.py": "/usr/local/bin/hf-mirror-standin",
}
# The CUDA driver library's stand-in (C, built here with the machine's gcc), in a folder the dynamic loader
# searches without its cache: gpu_health's built-in load opens it by name as it opens the real one.
LIBCUDA_SOURCE = "libcuda_standin.c"
LIBCUDA_PATH = "/usr/lib/libcuda.so.1"
# A stand-in local mirror of the recipes' models (hub-cache layout, tiny files) on the head,
# where a user's own mirror would be (the models role's `local` source).
HF_MIRROR = "/srv/dgxspark-sim/hf-mirror"


def log(msg):
    print(f"[sim] {msg}", file=sys.stderr, flush=True)


def run(cmd, check=True, capture=False, **kw):
    if capture:
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
    res = subprocess.run(cmd, check=False, text=True, **kw)
    if check and res.returncode != 0:
        err = (res.stderr or "").strip() if capture else ""
        raise SystemExit(f"[sim] command failed ({res.returncode}): {' '.join(cmd)}\n{err}")
    return res


def image_exists(ref):
    return run(PODMAN + ["image", "exists", ref], check=False).returncode == 0


def digest(*parts):
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, pathlib.Path):
            for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
                if f.is_file():
                    h.update(str(f.relative_to(p if p.is_dir() else p.parent)).encode())
                    h.update(f.read_bytes())
        else:
            h.update(str(p).encode())
    return h.hexdigest()[:16]


def base_image(suite="bookworm"):
    """A minimal Debian of this suite as an image (the nodes: trixie, for Docker Engine 26; the nested
    serving and engine images: bookworm)."""
    tag = "localhost/dgxspark-sim-base:" + digest(suite, BASE_PACKAGES)
    if image_exists(tag):
        return tag
    root = CACHE / f"rootfs-build-{suite}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    log(f"debootstrap {suite} -> {tag} (a minute or two)")
    run(["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}", suite, str(root), MIRROR],
        stdout=subprocess.DEVNULL)
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    run(PODMAN + ["import", "-", tag], stdin=tar.stdout, stdout=subprocess.DEVNULL)
    tar.wait()
    shutil.rmtree(root, ignore_errors=True)
    return tag


def save(tag, stable_ref, prefix):
    """A built image as a docker archive under its stable name, cached by its tag."""
    archive = IMAGE_DIR / f"{prefix}-{tag.rsplit(':', 1)[1]}.tar"
    if not archive.exists():
        IMAGE_DIR.mkdir(parents=True, exist_ok=True)
        log(f"saving {tag} to {archive}")
        partial = archive.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        # Saved under a stable name: the inventory refers to the image by it.
        run(PODMAN + ["tag", tag, stable_ref])
        run(PODMAN + ["save", "--format", "docker-archive", "-o", str(partial), stable_ref], stdout=subprocess.DEVNULL)
        partial.rename(archive)
        for old in IMAGE_DIR.glob(f"{prefix}-*.tar"):  # archives of earlier inputs: gigabytes each
            if old != archive:
                old.unlink()
    return archive


def build(context, name, base, extra_args=()):
    tag = f"localhost/{name}:" + digest(base, context)
    if image_exists(tag):
        return tag
    log(f"building {tag}")
    run(PODMAN + ["build", "--quiet", *ULIMITS, "--network", "host", "--build-arg", f"BASE={base}",
                  *extra_args, "-t", tag, str(context)])
    # Builds of earlier inputs: gigabytes each for the engine image.
    listed = run(PODMAN + ["images", "--format", "{{.Repository}}:{{.Tag}}", f"localhost/{name}"], capture=True)
    stale = [ref for ref in listed.stdout.split() if ref not in (tag, f"localhost/{name}:latest")]
    if stale:
        run(PODMAN + ["rmi", *stale], check=False, capture=True)
    return tag


def serving_image(base):
    """The nested serving test image (real Ray, stand-in engine), as a docker archive."""
    shutil.copy("/etc/ssl/certs/ca-certificates.crt", SIM_DIR / "serving" / "ca-certificates.crt")
    tag = build(SIM_DIR / "serving", "dgxspark-sim-serving", base)
    return save(tag, "localhost/dgxspark-sim-serving:latest", "serving")


def engine_image(base):
    """The real engine image (vLLM's CPU build, Ray, the sim plugins) as an archive, and its tiny model."""
    if not pathlib.Path(WHEELS).is_dir():
        raise SystemExit(f"[sim] {WHEELS} is missing: the engine image installs the CPU build of torch from the "
                         "wheel this kind of machine keeps there")
    shutil.copy("/etc/ssl/certs/ca-certificates.crt", SIM_DIR / "engine" / "ca-certificates.crt")
    # The engine plugin models a GB10's KV budget with the collection's own memory plan: the same file.
    shutil.copy(SIM_DIR.parent / "plugins" / "module_utils" / "_memory_plan.py",
                SIM_DIR / "engine" / "plugin" / "dgxspark_sim_vllm" / "_memory_plan.py")
    tag = build(SIM_DIR / "engine", "dgxspark-sim-vllm", base, ["--volume", f"{WHEELS}:{WHEELS}:ro"])
    model = CACHE / "models" / f"tiny-{tag.rsplit(':', 1)[1]}"
    if not model.is_dir():
        log(f"extracting the tiny model from {tag}")
        partial = model.with_suffix(".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.parent.mkdir(parents=True, exist_ok=True)
        box = run(PODMAN + ["create", tag, "true"], capture=True).stdout.strip()
        try:
            run(PODMAN + ["cp", f"{box}:/opt/dgxspark-sim/tiny-model", str(partial)])
        finally:
            run(PODMAN + ["rm", "-f", box], check=False, capture=True)
        partial.rename(model)
    return save(tag, ENGINE_REF, "vllm"), model


def cmd_build(_args=None):
    """Build (or find cached) node image, serving archives and tiny model; return them."""
    base = base_image()
    # Docker Engine as on DGX OS (Docker 25+: `docker save` writes the OCI layout); Debian 12's is 20.10.
    node = build(SIM_DIR / "node", "dgxspark-sim-node", base_image("trixie"))
    archives = {"serving": serving_image(base)}
    archives["engine"], model = engine_image(base)
    if not SSH_KEY.exists():
        SSH_KEY.parent.mkdir(parents=True, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dgxspark-sim", "-f", str(SSH_KEY)])
    return node, archives, model


def libcuda_standin():
    """The stand-in libcuda.so.1, compiled once per source version."""
    source = SIM_DIR / "standins" / LIBCUDA_SOURCE
    lib = CACHE / f"libcuda-standin-{digest(source)}.so.1"
    if not lib.exists():
        lib.parent.mkdir(parents=True, exist_ok=True)
        partial = lib.with_suffix(".partial")
        run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(partial), str(source)])
        partial.rename(lib)
    return lib


def recipe_models():
    """Every model and drafter the serve role's recipes name."""
    models = set()
    for recipe in sorted((SIM_DIR.parent / "roles" / "recipe" / "files" / "recipes").glob("*.yml")):
        data = yaml.safe_load(recipe.read_text()) or {}
        models.update(m for m in (data.get("model"), data.get("draft_model")) if m)
    return sorted(models)


def clusters():
    return yaml.safe_load((SIM_DIR / "clusters.yml").read_text())


def layout(cluster, nodes):
    """Names and static addresses of a cluster's nodes."""
    index = clusters()[cluster]
    names = ["spark-head"] + [f"spark-worker-{i}" for i in range(1, nodes)]
    return index, [
        {"name": n, "container": f"{cluster}-{n}",
         "mgmt_ip": f"10.231.{index}.{10 + i}", "fabric_ip": f"10.231.{index + 100}.{10 + i}"}
        for i, n in enumerate(names)
    ]


def mac(ip):
    """A locally administered MAC made from an address (one per interface, the same on every start)."""
    return "02:dc:" + ":".join(f"{int(octet):02x}" for octet in ip.split("."))


def ensure_network(name, subnet, mtu=None):
    if run(PODMAN + ["network", "exists", name], check=False).returncode == 0:
        return
    opts = ["--opt", f"mtu={mtu}"] if mtu else []
    run(PODMAN + ["network", "create", "--subnet", subnet, *opts, name], capture=True)


def node_exec(container, *cmd, check=True):
    return run(PODMAN + ["exec", container, *cmd], check=check, capture=True)


def start_node(cluster, node, image, archives, model, gpu_state):
    c = node["container"]
    # A node with nested containers can take a few tries to go away.
    for _ in range(10):
        run(PODMAN + ["rm", "-f", "-t", "0", c], check=False, capture=True)
        if run(PODMAN + ["container", "exists", c], check=False, capture=True).returncode != 0:
            break
        time.sleep(2)
    # A fresh node has a fresh disk: a volume left by a node that was killed mid-write (an image
    # half streamed) would hand the new node's container storage layers that are not there.
    run(PODMAN + ["volume", "rm", "-f", f"{c}-docker"], capture=True)
    run(PODMAN + ["volume", "create", "--label", f"dgxspark-sim={cluster}", f"{c}-docker"], capture=True)
    # A new node starts with an empty Docker store. Once, after a run was killed mid-destroy, a new worker's
    # Docker held image records without their layers; a folder left behind is the suspected cause.
    mount = pathlib.Path(run(PODMAN + ["volume", "inspect", "--format", "{{.Mountpoint}}", f"{c}-docker"],
                             capture=True).stdout.strip())
    for entry in mount.iterdir() if mount.is_dir() else ():
        shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    run(PODMAN + ["run", "-d", "--name", c, "--hostname", node["name"], "--privileged",
                  "--systemd=always", *ULIMITS,
                  # A DGX OS node's /dev/shm is half its memory; vLLM's ranks share it (--ipc host).
                  "--shm-size", "1g",
                  "-v", "/sys/fs/cgroup/unified:/sys/fs/cgroup:rw",
                  # Docker's overlay2 needs a file system that is not itself overlay.
                  "-v", f"{c}-docker:/var/lib/docker",
                  # The serving test image as an archive on each node, where a user's
                  # own image archive would be (the image role's `load` source).
                  "-v", f"{archives['serving']}:{SERVING_ARCHIVE}:ro",
                  "-v", f"{archives['engine']}:{ENGINE_ARCHIVE}:ro",
                  # Fixed MACs: a restarted node keeps its MAC as a real one does, so its peers'
                  # neighbour caches stay right.
                  "--network", f"{cluster}-mgmt:ip={node['mgmt_ip']},mac={mac(node['mgmt_ip'])}",
                  # The second interface stands in for the ConnectX-7 port, under its DGX name.
                  "--network", f"{cluster}-fabric:ip={node['fabric_ip']},mac={mac(node['fabric_ip'])},"
                               f"interface_name={FABRIC_IFACE}",
                  "--label", f"dgxspark-sim={cluster}", image, "/sbin/init"], capture=True)
    node_exec(c, "mkdir", "-p", "/etc/dgxspark-sim")
    for src, dest in STANDINS.items():
        path = SIM_DIR / "standins" / src
        if path.exists():
            run(PODMAN + ["cp", str(path), f"{c}:{dest}"])
            node_exec(c, "chmod", "0755", dest)
    run(PODMAN + ["cp", str(libcuda_standin()), f"{c}:{LIBCUDA_PATH}"])
    if node["name"] == "spark-head":  # workers get the models from the head, as on a real pair
        run(PODMAN + ["cp", str(model), f"{c}:{TINY_MODEL_SRC}"])
        node_exec(c, "python3", STANDINS["hf_mirror_standin.py"], HF_MIRROR, *recipe_models(),
                  f"{TINY_MODEL}={TINY_MODEL_SRC}")
        # The launcher checkout the user cloned on the head (the mods role reads its mods there).
        run(PODMAN + ["cp", str(SIM_DIR / "launcher-standin"), f"{c}:{LAUNCHER_CHECKOUT}"])
        node_exec(c, "chown", "-R", "spark:spark", LAUNCHER_CHECKOUT)
    for rel, value in SYSFS_FILES.items():
        node_exec(c, "sh", "-c", f"mkdir -p {SYSFS_STANDIN}/{os.path.dirname(rel)} && echo {value} > {SYSFS_STANDIN}/{rel}")
    scenario = {"gpu_state": gpu_state, "rdma_device": RDMA_DEVICE, "fabric_iface": FABRIC_IFACE,
                "kernel": "6.17.0-1032-nvidia"}
    node_exec(c, "sh", "-c", f"cat > /etc/dgxspark-sim/scenario.json <<'EOF'\n{json.dumps(scenario)}\nEOF")
    pub = SSH_KEY.with_suffix(".pub").read_text()
    node_exec(c, "sh", "-c", f"echo '{pub.strip()}' > /home/spark/.ssh/authorized_keys && "
                             "chown spark:spark /home/spark/.ssh/authorized_keys && "
                             "chmod 600 /home/spark/.ssh/authorized_keys")
    return c


def wait_ssh(node, timeout=300):  # generous: a loaded host boots nodes slowly
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if ssh_node(node["mgmt_ip"], "true", timeout=30).returncode == 0:
                return
        except subprocess.TimeoutExpired:  # a booting node can accept the connection and stall
            pass
        time.sleep(1)
    raise SystemExit(f"[sim] {node['name']} ({node['mgmt_ip']}): sshd did not answer in {timeout}s")


def cmd_up(args):
    image, archives, model = cmd_build()
    libcuda_standin()
    index, nodes = layout(args.cluster, args.nodes)
    ensure_network(f"{args.cluster}-mgmt", f"10.231.{index}.0/24")
    ensure_network(f"{args.cluster}-fabric", f"10.231.{index + 100}.0/24", mtu=9000)
    gpu = dict(kv.split("=", 1) for kv in args.gpu)
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(len(nodes)) as pool:
        list(pool.map(lambda n: start_node(args.cluster, n, image, archives, model, gpu.get(n["name"], "healthy")),
                      nodes))
        list(pool.map(wait_ssh, nodes))
    log(f"cluster {args.cluster}: {len(nodes)} nodes up in {time.time() - t0:.1f}s")
    for n in nodes:
        print(f"{n['name']}\tmgmt {n['mgmt_ip']}\tfabric {n['fabric_ip']}")


def cluster_containers(cluster):
    res = run(PODMAN + ["ps", "-a", "--filter", f"label=dgxspark-sim={cluster}", "--format", "{{.Names}}"],
              capture=True)
    return res.stdout.split()


def cmd_down(args):
    names = cluster_containers(args.cluster)
    if names:
        # A loaded host sometimes reports that a node's processes "did not die within timeout": again.
        for attempt in range(4):
            res = run(PODMAN + ["rm", "-f", "-i", "-t", "0", *names], check=attempt == 3, capture=True)
            if res.returncode == 0:
                break
            time.sleep(5)
    # Volumes by label, so those of nodes already gone (a run killed mid-destroy) go too.
    volumes = run(PODMAN + ["volume", "ls", "-q", "--filter", f"label=dgxspark-sim={args.cluster}"],
                  capture=True).stdout.split()
    if volumes:
        run(PODMAN + ["volume", "rm", "-f", *volumes], check=False, capture=True)
    for net in ("mgmt", "fabric"):
        run(PODMAN + ["network", "rm", "-f", f"{args.cluster}-{net}"], check=False, capture=True)
    log(f"cluster {args.cluster}: removed {len(names)} nodes")


def ssh_node(mgmt_ip, command, timeout=60):
    """A command on a node over SSH as its admin user, as the roles reach it (`podman exec` into a node whose
    systemd has enabled its cgroup controllers fails with EBUSY)."""
    return run(["ssh", "-i", str(SSH_KEY), "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
                "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                f"spark@{mgmt_ip}", command], check=False, capture=True, timeout=timeout)


def cmd_logs(args):
    """Each node's failed units, containers and journals of the collection's units, one file a node: what a
    failed scenario needs to be diagnosed after its nodes are gone."""
    dest = pathlib.Path(args.dest)
    names = set(cluster_containers(args.cluster))
    _, nodes = layout(args.cluster, 16)
    for n in (n for n in nodes if n["container"] in names):
        dest.mkdir(parents=True, exist_ok=True)
        parts = []
        for title, cmd in (("systemctl --failed", "systemctl --failed --no-pager"),
                           ("docker ps -a", "sudo docker ps -a"),
                           ("journalctl -u docker (last 60 lines)", "sudo journalctl -u docker -n 60 --no-pager -o short-monotonic"),
                           ("journalctl -u dgxspark-* (last 1500 lines)",
                            "sudo journalctl -u 'dgxspark-*' -n 1500 --no-pager -o short-monotonic")):
            try:
                res = ssh_node(n["mgmt_ip"], cmd)
                parts.append(f"### {n['container']}: {title}\n{res.stdout}{res.stderr}")
            except subprocess.TimeoutExpired:
                parts.append(f"### {n['container']}: {title}\n(no answer over SSH in 60 s)")
        (dest / f"{n['container']}.log").write_text("\n".join(parts))
    log(f"cluster {args.cluster}: node logs in {dest}")


def cmd_prune(_args=None):
    """Remove what earlier runs left: every container, volume and network of a sim cluster. Names what it removed."""
    names = run(PODMAN + ["ps", "-a", "--filter", "label=dgxspark-sim", "--format", "{{.Names}}"],
                capture=True).stdout.split()
    if names:
        run(PODMAN + ["rm", "-f", "-i", "-t", "0", *names], check=False, capture=True)
    volumes = run(PODMAN + ["volume", "ls", "-q", "--filter", "label=dgxspark-sim"], capture=True).stdout.split()
    if volumes:
        run(PODMAN + ["volume", "rm", "-f", *volumes], check=False, capture=True)
    ours = {f"{c}-{net}" for c in clusters() for net in ("mgmt", "fabric")}
    nets = [n for n in run(PODMAN + ["network", "ls", "--format", "{{.Name}}"], capture=True).stdout.split() if n in ours]
    if nets:
        run(PODMAN + ["network", "rm", "-f", *nets], check=False, capture=True)
    log(f"pruned {len(names)} nodes, {len(volumes)} volumes, {len(nets)} networks left by earlier runs"
        + (f": {' '.join(names)}" if names else ""))


def find_node(args):
    _, nodes = layout(args.cluster, 16)
    found = [n for n in nodes if n["name"] == args.node]
    if not found or found[0]["container"] not in cluster_containers(args.cluster):
        raise SystemExit(f"[sim] cluster {args.cluster} has no node {args.node}")
    return found[0]


def cmd_stop_node(args):
    """Stop one node as a power-off would (the fault tests' "node down"): its systemd gets --grace
    seconds to stop the units, then everything in it is killed."""
    node = find_node(args)
    run(PODMAN + ["stop", "-t", str(args.grace), node["container"]], capture=True)
    log(f"{node['name']} stopped")


def cmd_start_node(args):
    """Start a stopped node again and wait for its sshd. A start that podman refuses is named with
    podman's message; the stopped container's leftovers (network, mounts) are then cleaned up and the
    start tried again, twice at most."""
    node = find_node(args)
    for attempt in range(1, 4):
        res = run(PODMAN + ["start", node["container"]], check=False, capture=True)
        if res.returncode == 0:
            break
        log(f"{node['name']}: podman start failed ({res.returncode}, try {attempt} of 3): {res.stderr.strip()}")
        if attempt == 3:
            raise SystemExit(f"[sim] {node['name']} did not start: {res.stderr.strip()}")
        run(PODMAN + ["container", "cleanup", node["container"]], check=False, capture=True)
        time.sleep(5)
    wait_ssh(node)
    log(f"{node['name']} started")


def cmd_status(args):
    for n in cluster_containers(args.cluster):
        state = run(PODMAN + ["inspect", "-f", "{{.State.Status}}", n], capture=True).stdout.strip()
        print(f"{n}\t{state}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build")
    sub.add_parser("prune")
    for name in ("up", "down", "status", "logs", "stop-node", "start-node"):
        sp = sub.add_parser(name)
        sp.add_argument("--cluster", default="pair", choices=sorted(clusters()))
        if name.endswith("-node"):
            sp.add_argument("node", help="the node's name (spark-head, spark-worker-1, ...)")
        if name == "stop-node":
            sp.add_argument("--grace", type=int, default=0, help="seconds for the node's own shutdown")
        if name == "up":
            sp.add_argument("--nodes", type=int, default=2)
            sp.add_argument("--gpu", action="append", default=[], metavar="NODE=STATE",
                            help="stand-in GPU state of a node: healthy, idle, throttled, wedged")
        if name == "logs":
            sp.add_argument("--dest", required=True, help="folder for one log file a node")
    args = p.parse_args()
    {"build": cmd_build, "up": cmd_up, "down": cmd_down, "status": cmd_status, "logs": cmd_logs,
     "prune": cmd_prune, "stop-node": cmd_stop_node, "start-node": cmd_start_node}[args.cmd](args)


if __name__ == "__main__":
    main()
