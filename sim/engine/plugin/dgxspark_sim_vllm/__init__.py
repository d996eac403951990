"""Sim only: vLLM plugins that make its CPU build stand in for the b12x engine on a DGX Spark pair.

* ``platform`` (vllm.platform_plugins): the CPU platform with Ray support, one rank per
  stand-in GPU that each sim node's Ray announces, as on the pair (vLLM's CPU platform
  refuses Ray: "current platform cpu does not support ray").
* ``faults`` (vllm.general_plugins, loaded in every vLLM process, ranks included): the
  field report's failures and the engine-side checks of the real stack, modelled (see
  faults.py). Every figure they produce is modelled, not measured. Each process also asks for
  what the CPU build needs from the x86 host the sim runs on (host.py: AMX).
"""


def platform():
    return "dgxspark_sim_vllm.platform.SimSparkPlatform"


def install_faults():
    from dgxspark_sim_vllm import faults as _faults, host as _host  # pylint: disable=import-outside-toplevel
    _host.allow_amx()
    _faults.install()
