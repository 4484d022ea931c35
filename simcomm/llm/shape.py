"""The scenario's ``[model]`` keys -> the :class:`~simcomm.llm.models.TransformerConfig` a run simulates.

The base is a zoo transformer (``model``), a Hugging Face ``config.json`` (``model_config``) or, with
neither, the keys themselves; every key given then changes exactly what it names.  The run says in
``assumed:`` lines where the shape came from, what changed, every default filled in, and the parameter
count (total, and active per token for mixture-of-experts models).
"""

from __future__ import annotations

from dataclasses import replace

from simcomm.errors import ConfigError
from simcomm.llm.models import TransformerConfig
from simcomm.llm.zoo import TRANSFORMERS

__all__ = ["resolve_shape", "params_line", "REQUIRED"]

#: keys a shape given by keys alone must have (the rest have stated defaults: SHAPE_DEFAULTS)
REQUIRED = ("layers", "hidden", "heads", "vocab", "seq")
#: defaults of a shape given by keys alone: a GPT (Megatron-LM's defaults: GELU MLP of 4h, LayerNorm, biases,
#: tied embeddings) with rotary positions
SHAPE_DEFAULTS = {"mlp": "gelu", "norm": "layernorm", "bias": True, "tied": True}


def params_line(cfg: TransformerConfig) -> str:
    """``model: NAME, N parameters (...)``: what the run counts, for its assumed lines."""
    what = f"model: {cfg.name}, {cfg.params:,} parameters"
    if cfg.experts:
        what += (f" ({cfg.active_params:,} active per token: {cfg.top_k} of {cfg.experts} experts in "
                 f"{cfg.moe_blocks()} of {cfg.layers} layers)")
    if cfg.mtp_layers:
        what += (f"; its {cfg.mtp_layers} multi-token-prediction module(s), {cfg.mtp_params():,} parameters, "
                 "are not simulated")
    return what


def _keyed(given: dict) -> tuple[TransformerConfig, str]:
    """A shape from the keys alone (no base): the required ones, the rest defaulted and said."""
    missing = [k for k in REQUIRED if k not in given]
    if missing:
        raise ConfigError(f"{missing[0]}: a model given by its shape needs {', '.join(REQUIRED)} (missing: "
                          f"{', '.join(missing)}); or name a zoo model (--model) or a Hugging Face config "
                          "(--model-config)")
    h, heads = given["hidden"], given["heads"]
    filled = {**SHAPE_DEFAULTS, "kv_heads": heads, "ffn": 4 * h}
    if given.get("mlp") == "swiglu":
        filled.update(bias=False)
    defaults = {k: v for k, v in filled.items() if k not in given}
    said = ", ".join(f"{k} {str(v).lower() if isinstance(v, bool) else v}" for k, v in defaults.items())
    base = TransformerConfig("custom", layers=1, hidden=h, ffn=filled["ffn"], heads=heads, kv_heads=heads,
                             vocab=1, seq=1, tied=filled["tied"], mlp=filled["mlp"], norm=filled["norm"],
                             bias=filled["bias"], head_dim=given.get("head_dim", 0) or (0 if h % heads else h // heads))
    return base, f"model: given by its shape; defaults: {said}" if said else ""


def _changes(base: TransformerConfig, given: dict) -> dict:
    """The config fields the keys set (``ffn``/``expert_ffn`` mapped to the config's dense and expert sizes)."""
    out = {k: v for k, v in given.items() if k not in ("ffn", "expert_ffn")}
    experts = given.get("experts", base.experts)
    if "expert_ffn" in given:
        if not experts:
            raise ConfigError("expert_ffn: the model has no experts (give experts too)")
        out["ffn"] = given["expert_ffn"]
    if "ffn" in given:
        if not experts:
            out["ffn"] = given["ffn"]
        elif not (given.get("first_dense", base.first_dense) or given.get("moe_every", base.moe_every) > 1
                  or base.dense_layers):
            raise ConfigError(f"ffn: every layer of {base.name} is a mixture-of-experts layer, so no dense MLP "
                              "uses ffn; the experts' FFN size is expert_ffn")
        else:
            out["dense_ffn"] = given["ffn"]
    if experts and not base.experts:
        if "expert_ffn" not in given:
            raise ConfigError("expert_ffn: experts need each expert's FFN size")
        out.setdefault("dense_ffn", base.ffn)
    followed = base.head_dim == base.hidden // base.heads and not base.hidden % base.heads
    if "head_dim" not in given and ((("hidden" in given or "heads" in given) and followed and not base.mla)
                                    or (given.get("kv_lora_rank") and not base.mla)):
        out["head_dim"] = 0  # it followed hidden / heads and still does, or latent attention's qk width sets it
    return out


def resolve_shape(model: str | None, spec) -> tuple[TransformerConfig, list[str]]:
    """The transformer a run simulates from ``model`` (a zoo name or None) and ``spec`` (a ShapeSpec), and
    the run's lines saying so.  Only called when ``spec`` gives a key."""
    given = spec.given()
    notes: list[str] = []
    if spec.config is not None:
        if model:
            raise ConfigError(f"model_config: give a zoo model or a Hugging Face config, not both (model {model!r})")
        from simcomm.llm.hf import read_hf_config

        hf = read_hf_config(spec.config)
        base = hf.config
        notes.append(f"model: {base.name} from Hugging Face config {spec.config} (model_type {hf.model_type})"
                     + (f"; absent fields take transformers' defaults: {', '.join(hf.defaults)}" if hf.defaults
                        else ""))
        notes.extend(hf.notes)
        if "seq" not in given:
            notes.append(f"seq {base.seq} (the config's context length; --seq to train at another)")
    elif model:
        if model not in TRANSFORMERS:
            keys = ", ".join(given)
            raise ConfigError(f"{keys}: these keys shape a transformer; model {model!r} is not one "
                              f"(transformers: {', '.join(TRANSFORMERS)})")
        base = TRANSFORMERS[model][0]
    else:
        base, line = _keyed(given)
        notes += [line] if line else []
    changes = _changes(base, given)
    label = ",".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in given.items())
    name = base.name if spec.config is None and model is None else (f"{base.name}({label})" if label else base.name)
    cfg = replace(base, name=name, **changes)  # the shape's own checks: one line naming the key
    if cfg.positions and cfg.seq > cfg.positions:  # a learned table has a row per position, no more
        raise ConfigError(f"seq: {cfg.seq} is longer than the {cfg.positions} learned positions of {base.name}; "
                          f"give positions too (e.g. positions = {cfg.seq}) to train with a longer table")
    if model and given:
        was = ", ".join(f"{k} {v} (was {_was(base, k)})" for k, v in given.items())
        notes.append(f"model: {model} changed by the scenario: {was}")
    notes.append(params_line(cfg))
    return cfg, notes


def _was(base: TransformerConfig, key: str):
    if key == "expert_ffn":
        return base.ffn if base.experts else "none"
    if key == "ffn" and base.experts:
        return base.dense_ffn or base.ffn
    value = getattr(base, key)
    return str(value).lower() if isinstance(value, bool) else value
