"""Metrics that compare models across tokenizers."""

from vocadapt.components.metrics.bits_per_byte import BitsPerByte, bits_per_byte, score_bits_per_byte

__all__ = ["BitsPerByte", "bits_per_byte", "score_bits_per_byte"]
