"""Converting a checkpoint the MLX backend cannot load into one it can.

mlx-lm loads BF16/F16 safetensors and its own quantised folders, but not FP8 block-quantised
releases (DeepSeek V3/R1, Qwen's ``-FP8`` repos): their ``…weight_scale_inv`` companions are
parameters no mlx-lm model has. :mod:`fp8_check` recognises such a folder,
:mod:`fp8_to_bf16` writes a BF16 copy with the sidecar extractor's exact dequantiser, and
:mod:`mlx_quantise` optionally quantises that copy for MLX with ``mlx_lm.convert``;
:mod:`job` runs both as one job with progress.
"""
