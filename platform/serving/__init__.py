"""Serving and its checks: a registered model behind vLLM, the serve check (with its vLLM probe script and the probe process it keeps), and GGUF export for llama.cpp."""
