"""The MLflow model registry: registering, promoting and rolling back versions, the MLflow model (logged from code), and the promotion gates with their per-item records."""
