"""Stand-in for ansible-test's get-pip bootstrap script, whose download host is
unreachable here: bootstrap pip with ensurepip, then install what ansible-test
asked for (pip at its pinned version, from the package index)."""
import ensurepip
import subprocess
import sys

ensurepip.bootstrap(upgrade=True)
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
cert = ["--cert", "/etc/ssl/certs/ca-certificates.crt"]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *cert, *args]))
