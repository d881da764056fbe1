"""The llama.cpp backend, driven through llama-cpp-python's low-level ctypes layer."""
