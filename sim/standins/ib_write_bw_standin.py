#!/usr/bin/env python3
"""Stand-in for perftest's ib_write_bw on a sim node: the server (no address) accepts the client's connection on its
port over the sim's fabric network and holds it for the test; the client connects, holds it for -D seconds and prints
perftest's report with a modelled figure: the node's /etc/dgxspark-sim/scenario.json "rdma_gbps" (a number, or
device -> number), 95 Gb/s when unset (a healthy ConnectX-7 rail of a Spark carries 92-97). A test sets 13 for the
degraded initialization. The connection is real, so a fabric address that does not answer fails as it would."""
import argparse
import json
import os
import socket
import sys
import time

SCENARIO = os.environ.get("DGXSPARK_SIM_SCENARIO", "/etc/dgxspark-sim/scenario.json")


def figure(device):
    try:
        with open(SCENARIO) as handle:
            value = json.load(handle).get("rdma_gbps", 95.0)
    except (OSError, ValueError):
        value = 95.0
    return float(value.get(device, 95.0) if isinstance(value, dict) else value)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-d", dest="device", default="")
    parser.add_argument("-p", dest="port", type=int, default=18515)
    parser.add_argument("-D", dest="seconds", type=float, default=5)
    parser.add_argument("-F", action="store_true")
    parser.add_argument("--report_gbits", action="store_true")
    parser.add_argument("address", nargs="?")
    args, _rest = parser.parse_known_args()
    if args.address is None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("", args.port))
        server.listen(1)
        server.settimeout(args.seconds + 30)
        conn, _peer = server.accept()
        while conn.recv(4096):
            pass
        return 0
    deadline = time.monotonic() + 10
    while True:
        try:
            conn = socket.create_connection((args.address, args.port), timeout=5)
            break
        except OSError as exc:
            if time.monotonic() > deadline:
                print(" Couldn't connect to %s:%d (%s)" % (args.address, args.port, exc), file=sys.stderr)
                return 1
            time.sleep(0.2)
    time.sleep(args.seconds)
    conn.close()
    gbps = figure(args.device)
    print("dgxspark-sim (modelled): the figure below is the scenario's, not measured")
    print(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]")
    print(" 65536      %-10d       %.2f              %.2f              %.6f"
          % (int(gbps * 1e9 / 8 / 65536 * args.seconds), gbps, gbps, gbps * 1e9 / 8 / 65536 / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
