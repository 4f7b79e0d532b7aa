"""Ingest rollouts from common formats into the study store."""

from engine.ingest.formats import FORMATS
from engine.ingest.ingest import IngestResult, ingest_file, resolve_formats

__all__ = ["FORMATS", "IngestResult", "ingest_file", "resolve_formats"]
