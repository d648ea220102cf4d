"""Serving and its checks: a registered model behind vLLM, the serve check (and its vLLM probe script), and GGUF export for llama.cpp."""
