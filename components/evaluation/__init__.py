"""Pure evaluation metrics: text scores (chrF, ROUGE-L), generation efficiency (%Gen, speed-up), cloze items,
prompts, and relative-representation similarity of embedding spaces. No MLflow, no vLLM, no lm-eval here."""
