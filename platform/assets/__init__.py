"""What runs offline is built from packages: the embedded default (model, corpora), their builders, the text sources, out-of-domain text and word vectors."""
