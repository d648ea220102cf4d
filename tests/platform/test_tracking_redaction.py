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


def test_nested_configs_are_redacted_at_every_depth():
    from vocadapt.platform.tracking import redact_tree

    tree = {"lapt": {"storage_path": "s3://KEY:SECRET@bucket/x", "datasets": [{"path": "https://u:p@host/a"}]},
            "hub": {"hf_token": "hf_abc"}, "tokenizer": {"vocab_size": 10}}
    safe = redact_tree(tree)
    assert safe["lapt"]["storage_path"] == "s3://***@bucket/x"
    assert safe["lapt"]["datasets"][0]["path"] == "https://***@host/a"
    assert safe["hub"]["hf_token"] == REDACTED and safe["tokenizer"]["vocab_size"] == 10
    records = redact_tree({"new_token_ids": [1, 2], "uri": "s3://KEY:SECRET@b/x"}, mask_keys=False)
    assert records == {"new_token_ids": [1, 2], "uri": "s3://***@b/x"}  # result records keep their keys' values


def test_logged_texts_and_dicts_lose_uri_credentials(tmp_path, monkeypatch):
    import mlflow

    monkeypatch.chdir(tmp_path)  # artifacts go to ./mlartifacts

    from vocadapt.platform.tracking import Tracker

    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "redaction")
    with tracker.run("r") as run:
        tracker.log_text(run.info.run_id, "storage: s3://KEY:SECRET@bucket/x\n", "notes.txt")
        tracker.log_dict(run.info.run_id, {"a": ["s3://KEY:SECRET@bucket/x"]}, "record.json")
    for name in ("notes.txt", "record.json"):
        text = mlflow.artifacts.load_text(f"{run.info.artifact_uri}/{name}")
        assert "SECRET" not in text and "s3://***@bucket/x" in text
