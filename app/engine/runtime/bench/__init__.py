"""Benchmarks over the runtime (`mtp-studio bench decode|chat`), and the llama-server peer."""
