"""Sim only: the environment this Python process started with.

Imported at interpreter start by a .pth line the engine image installs, before the process
changes anything (vLLM's setdefault of the driver's env, Ray's OMP_NUM_THREADS, process titles
that overwrite /proc/self/environ).
"""
import os

ENV = dict(os.environ)
