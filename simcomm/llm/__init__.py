"""Large language models as people configure and train them.

:mod:`.models` is the shape of a decoder-only transformer (dense or mixture-of-experts, MHA/GQA/MQA or
DeepSeek's multi-head latent attention) with exact parameter counts and per-layer FLOPs; :mod:`.zoo` the
published models as such shapes; :mod:`.hf` reads a Hugging Face ``config.json`` into one; :mod:`.shape`
turns the scenario's ``[model]`` keys into the shape a run simulates (docs/transformers.md).

Training them: :mod:`.layout` is the one layout (and its divisibility rules), :mod:`.placement` where its
ranks sit, :mod:`.compute` the per-layer compute the ``megatron`` emitter and ``plan``'s estimate share,
:mod:`.estimate` that estimate and :mod:`.search` ``plan``'s search (docs/plan.md).
"""
