"""Whether the Hugging Face hub can be reached, decided in seconds, so offline runs fail fast and clearly."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlparse

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 3.0
_TRUE = {"1", "true", "yes", "on"}


def hub_offline_by_choice() -> bool:
    """The user asked for offline mode (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE)."""
    return any(os.environ.get(var, "").strip().lower() in _TRUE for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_reachable(timeout_s: float = CONNECT_TIMEOUT_S) -> bool:
    """One TCP connect to the hub endpoint with a short timeout; False in offline mode."""
    if hub_offline_by_choice():
        return False
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (443 if endpoint.scheme != "http" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError as exc:
        log.info("Hugging Face hub %s:%d not reachable: %s", host, port, exc)
        return False


@contextmanager
def hub_offline() -> Iterator[None]:
    """Serve Hugging Face downloads from the local cache only: a miss fails at once instead of retrying."""
    from huggingface_hub import constants

    saved = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = saved
