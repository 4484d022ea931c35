"""Large language models as people configure and train them.

:mod:`.models` is the shape of a decoder-only transformer (dense or mixture-of-experts, MHA/GQA/MQA or
DeepSeek's multi-head latent attention) with exact parameter counts and per-layer FLOPs; :mod:`.zoo` the
published models as such shapes; :mod:`.hf` reads a Hugging Face ``config.json`` into one; :mod:`.shape`
turns the scenario's ``[model]`` keys into the shape a run simulates (docs/transformers.md).
:mod:`.compute` is the per-rank compute of a layer at a layout's tensor- and context-parallel shapes, shared by
the ``megatron`` strategy and ``plan``'s estimate.
"""
