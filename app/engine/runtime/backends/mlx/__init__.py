"""The MLX backend: mlx-lm's model classes with MTP heads built by the project."""
