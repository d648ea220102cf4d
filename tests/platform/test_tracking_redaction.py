"""Secrets never reach logged params or tags."""

from vocadapt.platform.tracking import REDACTED, redact


def test_secret_keys_and_uri_credentials_are_redacted():
    safe = redact({
        "hf_token": "hf_abc", "mlflow.password": "pw", "source.model": "org/model",
        "tracking.tracking_uri": "https://alice:s3cret@mlflow.example/", "api_key": "", "seed": 3,
    })
    assert safe["hf_token"] == REDACTED and safe["mlflow.password"] == REDACTED
    assert safe["source.model"] == "org/model" and safe["seed"] == 3
    assert "s3cret" not in safe["tracking.tracking_uri"] and "alice" not in safe["tracking.tracking_uri"]
    assert safe["api_key"] == ""


def test_tokenizer_and_token_counts_are_not_secrets():
    safe = redact({"tokenizer.vocab_size": 16384, "vocadapt.tokenizer_sha256": "ab12", "lapt.max_tokens": 10,
                   "MLFLOW_TRACKING_TOKEN": "t", "aws_secret_access_key": "k"})
    assert safe["tokenizer.vocab_size"] == 16384 and safe["vocadapt.tokenizer_sha256"] == "ab12"
    assert safe["lapt.max_tokens"] == 10
    assert safe["MLFLOW_TRACKING_TOKEN"] == REDACTED and safe["aws_secret_access_key"] == REDACTED
