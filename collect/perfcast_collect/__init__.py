"""perfcast-collect: S1's operator micro-benchmarks and NCCL collectives on the local GPU(s), written in perfcast's
sample format (JSON lines) and optionally uploaded to a perfcast server.

Only ``ops``, ``nccl`` (when it runs collectives), ``timing.CudaTimer`` and ``env.collect`` import torch, and only
when called: planning, writing, validating and uploading work on a machine without torch or a GPU.
"""

__version__ = "0.1.0"
