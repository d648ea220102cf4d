"""Evaluation at the edge: suite configs, lm-evaluation-harness task folders and runs, generation backends
(transformers in process, vLLM over HTTP from its own serving environment), and embedding-similarity artifacts."""
