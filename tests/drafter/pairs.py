"""The tiny Gemma 4 target + drafter pairs shipped in resources/models (tools/make_gemma_pair.py).

Two kinds, as Google ships them: ``centroid`` (E2B/E4B: the drafter's head masked by centroids;
drafter beside the trunk as ``mtp-<base>.gguf``) and ``dense`` (26B/31B: tied dense head; drafter
in an ``MTP/`` folder as ``<base>-assistant``). Each also keeps its transformers checkpoints and the
reference drafts transformers 5.23 computed for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter

MODELS = Path(__file__).resolve().parents[2] / "resources" / "models"
KINDS = ("centroid", "dense")


@dataclass(frozen=True)
class Pair:
    kind: str

    @property
    def folder(self) -> Path:
        return MODELS / f"gemma4-tiny-{self.kind}"

    @property
    def target(self) -> Path:
        return self.folder / f"gemma4-tiny-{self.kind}-Q8_0.gguf"

    @property
    def drafter(self) -> Path:
        if self.kind == "centroid":
            return self.folder / f"mtp-gemma4-tiny-{self.kind}-Q8_0.gguf"
        return self.folder / "MTP" / f"gemma4-tiny-{self.kind}-assistant-Q8_0.gguf"

    @property
    def hf_target(self) -> Path:
        return self.folder / "hf" / "target"

    @property
    def hf_drafter(self) -> Path:
        return self.folder / "hf" / "assistant"

    @property
    def reference(self) -> Path:
        return self.folder / "reference_drafts.npz"


PAIRS = {kind: Pair(kind) for kind in KINDS}


def rewrite_gguf(source: Path, out: Path, changes: dict[str, object]) -> Path:
    """A copy of ``source`` with some metadata values replaced (same value types), written with
    gguf-py's own writer: a drafter of another size, vocabulary or head shape."""
    reader = GGUFReader(source)
    architecture = str(reader.fields["general.architecture"].contents())
    writer = GGUFWriter(out, architecture)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == GGUFValueType.ARRAY else None
        writer.add_key_value(key, changes.get(key, field.contents()), kind, sub_type=sub)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, np.asarray(tensor.data), raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out
