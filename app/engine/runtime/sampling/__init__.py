"""Sampling: one sampler definition and the acceptance laws built on it.

The target's p, the draft's q and plain decoding all go through :mod:`.sampler`, so a mismatch
cannot bias the output — penalties and logit bias included (:mod:`.penalties` counts the tokens
so far, drafts included; :mod:`.logit_edits` applies them to a row without copying it).
:mod:`.acceptance` holds the Leviathan–Chen accept/repair law (and the simpler match rule),
:mod:`.draft_confidence` the confidence stop. Nothing here knows a backend.
"""
