"""Export a checkpoint to other runtimes' formats (GGUF for llama.cpp, Ollama, LM Studio)."""
