"""The reader: a transformers model run only up to the layer the sparse autoencoder reads.

`engine.features.reader_spec.resolve_reader` names the model and layer without loading weights; `Reader.load`
builds the model with its later blocks never constructed (the config is cut to `layer + 1` blocks), drops the
final norm of decoders so the output is the residual stream after block `layer` (sae-lens / TransformerLens
`blocks.{layer}.hook_resid_post`), and runs it in bf16 on CUDA, fp32 on CPU. `Reader.read` streams segments:
it tokenises a block of them at once, chunks long ones (see `engine.features.inputs`), sorts the chunks by
length, batches them under a padded-token budget, and yields each segment's own token activations.

A row is padded to a width set by its own length alone (`padded_width`), and a batch holds rows of one width
(`padded_batches`). On CPU a row's activations then do not depend on what it was batched with (checked bit for
bit in the tests), so the content-hash caches hold the same vectors whichever run, and whichever set of cache
misses, computed them. Padding each row only to its batch's longest made about one row in five differ in the
last bits, which moved segments sitting at a labeler's threshold between a fresh run and a resumed one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.errors import InputError
from engine.features.inputs import plan_chunks, reader_text
from engine.features.reader_spec import ReaderSpec
from engine.features.settings import FeatureSettings

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)

_FINAL_NORMS = ("norm", "final_layernorm", "final_layer_norm", "ln_f")
PAD_MULTIPLE = 16  # a row's padded width is its length rounded up to this: at most 15 pad tokens a row


def padded_width(n_tokens: int, window: int) -> int:
    """The width a row of `n_tokens` is padded to: its length rounded up to PAD_MULTIPLE, within the window."""
    rounded = -(-max(n_tokens, 1) // PAD_MULTIPLE) * PAD_MULTIPLE
    return max(n_tokens, min(rounded, window))


def padded_batches(lengths: list[int], budget: int, window: int) -> Iterator[tuple[list[int], int]]:
    """(row indices, width): rows longest first, each batch of one padded width and at most `budget` padded
    tokens (a row wider than the budget goes alone)."""
    batch: list[int] = []
    width = 0
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        own = padded_width(lengths[i], window)
        if batch and (own != width or (len(batch) + 1) * width > budget):
            yield batch, width
            batch = []
        if not batch:
            width = own
        batch.append(i)
    if batch:
        yield batch, width


def resolve_device(device: str) -> str:
    """'auto' means CUDA when available."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device is available")
    return device


def reader_dtype(device: str) -> torch.dtype:
    import torch

    return torch.bfloat16 if device.startswith("cuda") else torch.float32


def truncate_config(config: Any, n_blocks: int) -> None:
    """Cut a model config to its first `n_blocks` blocks, so later blocks are never built or loaded."""
    text = config.get_text_config()
    text.num_hidden_layers = n_blocks
    layer_types = getattr(text, "layer_types", None)
    if isinstance(layer_types, list):
        text.layer_types = layer_types[:n_blocks]


def truncate_model(model: PreTrainedModel, n_blocks: int, causal: bool) -> torch.nn.Module:
    """The base model (no LM head, no pooler) running exactly `n_blocks` blocks, without a final norm."""
    import torch

    base = model.base_model
    blocks = _block_list(base)
    if len(blocks) < n_blocks:
        raise InputError(f"reader has {len(blocks)} blocks, {n_blocks} needed")
    del blocks[n_blocks:]
    if getattr(base, "pooler", None) is not None:
        base.pooler = None  # type: ignore[assignment]  # BERT-likes skip a None pooler; their stubs say Module
    if causal:
        for attr in _FINAL_NORMS:
            if isinstance(getattr(base, attr, None), torch.nn.Module):
                setattr(base, attr, torch.nn.Identity())
    return base


def _block_list(base: torch.nn.Module) -> torch.nn.ModuleList:
    """The ModuleList of transformer blocks (encoder.layer, layers, h, ...): the longest one."""
    import torch

    lists = [m for _, m in base.named_modules() if isinstance(m, torch.nn.ModuleList) and len(m) > 0]
    if not lists:
        raise InputError(f"{type(base).__name__}: cannot find its transformer blocks")
    return max(lists, key=len)


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Loading a truncated model reports the unused weights of the dropped blocks; that is intended."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


@dataclass
class ReadSegment:
    """One segment's own token activations: rows of `acts` are tokens, `spans` their [start, end) in text."""

    key: str
    acts: torch.Tensor  # [n_tokens, hidden] bf16 on CPU
    spans: np.ndarray  # [n_tokens, 2] int32 character offsets into the segment text
    input_tokens: int  # tokens the reader processed for it (context and special tokens included)


@dataclass
class ReaderStats:
    """Work the model did: batches, padded tokens, and padded tokens weighted by their batch's width."""

    batches: int = 0
    padded_tokens: int = 0
    width_weighted: int = 0  # sum over batches of rows x width^2: attention work grows with width

    def add(self, rows: int, width: int) -> None:
        self.batches += 1
        self.padded_tokens += rows * width
        self.width_weighted += rows * width * width

    @property
    def mean_width(self) -> float:
        return self.width_weighted / max(1, self.padded_tokens)


@dataclass
class Tokenized:
    """A segment's tokens: the kind prefix's, the text's, and each text token's character span."""

    key: str
    prefix_ids: list[int]
    text_ids: list[int]
    spans: np.ndarray  # [n_text_tokens, 2] int32


@dataclass
class _Piece:
    """One chunk of one segment, ready for the model."""

    segment: int
    ids: list[int]
    own_from: int  # position in ids of the first reported token
    own_to: int
    text_from: int  # index of that token among the segment's text tokens


class Reader:
    """A loaded, truncated reader. Use `Reader.load(spec, device, settings)`."""

    def __init__(
        self,
        spec: ReaderSpec,
        model: torch.nn.Module,
        tokenizer: PreTrainedTokenizerBase | None,
        device: str,
        settings: FeatureSettings,
    ) -> None:
        self.spec, self.model, self.tokenizer, self.device, self.settings = spec, model, tokenizer, device, settings
        self.dtype = next(model.parameters()).dtype
        self.stats = ReaderStats()
        self.pad_id = 0
        self.lead: list[int] = []
        self.trail: list[int] = []
        if tokenizer is not None:
            self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
            self.lead, self.trail = _special_tokens(tokenizer)

    @classmethod
    def load(cls, spec: ReaderSpec, device: str, settings: FeatureSettings) -> Reader:
        from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

        dtype = reader_dtype(device)
        config = AutoConfig.from_pretrained(spec.source, local_files_only=spec.local_only)
        truncate_config(config, spec.layer + 1)
        auto = AutoModelForCausalLM if spec.causal else AutoModel
        with _quiet_transformers():
            model = auto.from_pretrained(spec.source, config=config, dtype=dtype, local_files_only=spec.local_only)
            tokenizer = AutoTokenizer.from_pretrained(spec.source, local_files_only=spec.local_only)
        tokenizer.model_max_length = 1 << 30  # long segments are chunked here, not truncated by the tokenizer
        base = truncate_model(model, spec.layer + 1, spec.causal).to(device).eval()
        log.info(
            "reader %s: %d of %d blocks, hidden %d, %s on %s",
            spec.name,
            spec.layer + 1,
            spec.n_layers,
            spec.hidden_size,
            dtype,
            device,
        )
        return cls(spec, base, tokenizer, device, settings)

    def read(self, segments: Iterable[tuple[str, str, str]]) -> Iterator[ReadSegment]:
        """Token activations of (key, kind, text) segments, in input order, a block at a time."""
        block: list[tuple[str, str, str]] = []
        chars = 0
        budget = self.settings.block_tokens * 4  # about four characters a token
        for segment in segments:
            block.append(segment)
            chars += len(segment[2])
            if chars >= budget:
                yield from self.read_tokenized(self._tokenize(block))
                block, chars = [], 0
        if block:
            yield from self.read_tokenized(self._tokenize(block))

    def _tokenize(self, block: list[tuple[str, str, str]]) -> list[Tokenized]:
        """Tokenise `PREFIX + text` at once and split each segment's tokens into prefix and text."""
        assert self.tokenizer is not None
        texts, prefix_lens = zip(*(reader_text(kind, text) for _, kind, text in block), strict=True)
        enc = self.tokenizer(
            list(texts),
            add_special_tokens=False,
            return_offsets_mapping=True,
            return_attention_mask=False,
            return_token_type_ids=False,
        )
        tokenized = []
        for (key, _, _), ids, offsets, plen in zip(block, enc["input_ids"], enc["offset_mapping"], prefix_lens,
                                                   strict=True):  # fmt: skip
            offsets = np.asarray(offsets, dtype=np.int32).reshape(-1, 2)
            is_text = offsets[:, 1] > plen
            prefix_ids = [t for t, keep in zip(ids, is_text, strict=True) if not keep]
            text_ids = [t for t, keep in zip(ids, is_text, strict=True) if keep]
            tokenized.append(Tokenized(key, prefix_ids, text_ids, np.clip(offsets[is_text] - plen, 0, None)))
        return tokenized

    def read_tokenized(self, block: list[Tokenized]) -> Iterator[ReadSegment]:
        """Run a block of tokenised segments: chunk, sort by length, batch, and reassemble per segment."""
        import torch

        pieces: list[_Piece] = []
        input_tokens = [0] * len(block)
        for i, segment in enumerate(block):
            head = self.lead + segment.prefix_ids
            body = self.spec.window - len(head) - len(self.trail)
            for chunk in plan_chunks(len(segment.text_ids), body, self.settings.context_tokens):
                if chunk.end == chunk.own_start:  # a segment without text tokens: nothing to read
                    continue
                piece_ids = head + segment.text_ids[chunk.start : chunk.end] + self.trail
                own_from = len(head) + chunk.own_start - chunk.start
                pieces.append(_Piece(i, piece_ids, own_from, own_from + chunk.end - chunk.own_start, chunk.own_start))
                input_tokens[i] += len(piece_ids)
        outputs = [torch.empty(len(s.text_ids), self.spec.hidden_size, dtype=torch.bfloat16) for s in block]
        # One batch in flight: the device runs batch i + 1 while the host files the rows of batch i.
        pending: tuple[list[_Piece], Landing] | None = None
        for rows, width in padded_batches([len(p.ids) for p in pieces], self.settings.batch_tokens, self.spec.window):
            batch = [pieces[i] for i in rows]
            launched = (batch, self.run_pieces(batch, width))
            if pending is not None:
                _file(*pending, outputs)
            pending = launched
        if pending is not None:
            _file(*pending, outputs)
        for segment, acts, n_in in zip(block, outputs, input_tokens, strict=True):
            yield ReadSegment(segment.key, acts, segment.spans, n_in)

    def run_pieces(self, batch: list[_Piece], width: int) -> Landing:
        """Launch one batch padded to `width`; its reported tokens' activations (piece after piece, bf16) land
        on the host.

        On CUDA nothing here waits for the device: inputs go up from pinned memory, the reported rows are
        picked by precomputed indices (a boolean mask would synchronise) and copied down into pinned memory
        without blocking; `Landing.rows()` waits for them."""
        import torch

        self.stats.add(len(batch), width)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, piece in enumerate(batch):
            ids[row, : len(piece.ids)] = torch.tensor(piece.ids)
            mask[row, : len(piece.ids)] = 1
        own = torch.cat([torch.arange(p.own_from, p.own_to) + row * width for row, p in enumerate(batch)])
        cuda = self.device.startswith("cuda")
        ids, mask, own = (t.pin_memory().to(self.device, non_blocking=True) if cuda else t for t in (ids, mask, own))
        hidden = self.forward(ids, mask)
        rows = hidden.reshape(-1, hidden.shape[-1]).index_select(0, own).to(torch.bfloat16)
        if not cuda:
            return Landing(rows, None)
        host = torch.empty(rows.shape, dtype=torch.bfloat16, pin_memory=True)
        host.copy_(rows, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        return Landing(host, done)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Hidden states after block `layer`: [batch, tokens, hidden]."""
        import torch

        with torch.inference_mode():
            kwargs = {"use_cache": False} if self.spec.causal else {}
            return self.model(input_ids=ids, attention_mask=mask, **kwargs).last_hidden_state


@dataclass
class Landing:
    """Activations on their way to the host: `rows()` once the device has finished copying them."""

    host: torch.Tensor
    done: Any  # a torch.cuda.Event, or None when the rows are already there

    def rows(self) -> torch.Tensor:
        if self.done is not None:
            self.done.synchronize()
        return self.host


def _file(batch: list[_Piece], landing: Landing, outputs: list[torch.Tensor]) -> None:
    """Copy a batch's reported rows into each segment's output, at the chunk's place in the segment."""
    rows, start = landing.rows(), 0
    for piece in batch:
        n = piece.own_to - piece.own_from
        outputs[piece.segment][piece.text_from : piece.text_from + n] = rows[start : start + n]
        start += n


def _special_tokens(tokenizer: PreTrainedTokenizerBase) -> tuple[list[int], list[int]]:
    """The special tokens the tokenizer puts before and after a sequence (e.g. [CLS] ... [SEP], or BOS)."""
    bare = tokenizer("reader", add_special_tokens=False)["input_ids"]
    full = tokenizer("reader", add_special_tokens=True)["input_ids"]
    for start in range(len(full) - len(bare) + 1):
        if full[start : start + len(bare)] == bare:
            return full[:start], full[start + len(bare) :]
    return [], []
