#!/bin/sh
# Stand-in for the NVIDIA Container Toolkit's runtime on a simulated DGX Spark node (sim only; installed as
# /usr/local/bin/nvidia-container-runtime and registered with Docker as the runtime "nvidia", as
# `nvidia-ctk runtime configure` does on DGX OS). The sim has no GPU to hand to a container: it runs runc.
exec runc "$@"
