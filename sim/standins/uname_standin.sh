#!/bin/sh
# Stand-in for uname on a sim node: `uname -r` gives the kernel release a DGX OS node reports (the node's
# /etc/dgxspark-sim/scenario.json "kernel", a test can set a known-bad one); anything else is the real uname.
if [ "$*" = "-r" ]; then
  exec python3 -c "import json; print(json.load(open('/etc/dgxspark-sim/scenario.json')).get('kernel', '6.17.0-1032-nvidia'))"
fi
exec /usr/bin/uname "$@"
