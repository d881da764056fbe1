"""Separate drafter models (Gemma 4's ``-it-assistant``): recognising them and pairing them.

- :mod:`facts`: whether a GGUF or model folder is a drafter (by architecture), and the numbers
  pairing compares, from headers only;
- :mod:`pairing`: the drafter that belongs to a target (beside it, ``MTP/``, a cache) and the
  one-line reason a drafter does not fit.
"""
