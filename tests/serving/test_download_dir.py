"""`vocadapt serve --download-dir` never replaces a folder that is not an earlier download of a model."""

from __future__ import annotations

import pytest

from vocadapt.components.errors import UserError
from vocadapt.platform.registry.model_versions import MANIFEST
from vocadapt.platform.serving.registered import download_verified


class _NoRegistry:
    """Any registry call fails the test: the refusal must come before the download starts."""

    def __getattr__(self, name):
        raise AssertionError(f"the registry was asked ({name}) before the folder was checked")


def test_a_folder_with_other_files_is_refused_before_any_download(tmp_path):
    folder = tmp_path / "my-notes"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(UserError, match="is not a model vocadapt downloaded") as caught:
        download_verified(_NoRegistry(), "models:/tiny@champion", folder, "sqlite:///unused.db")
    assert "name a new or empty folder" in str(caught.value)
    assert (folder / "notes.txt").read_text(encoding="utf-8") == "keep me"
    a_file = tmp_path / "a-file"
    a_file.write_text("x", encoding="utf-8")
    with pytest.raises(UserError, match="is not a model vocadapt downloaded"):
        download_verified(_NoRegistry(), "models:/tiny@champion", a_file, "sqlite:///unused.db")


@pytest.mark.parametrize("contents", ["empty", "earlier download"])
def test_an_empty_folder_or_an_earlier_download_goes_on_to_the_registry(tmp_path, contents):
    folder = tmp_path / "served"
    folder.mkdir()
    if contents == "earlier download":
        (folder / MANIFEST).write_text("{}", encoding="utf-8")
    with pytest.raises(AssertionError, match="the registry was asked"):
        download_verified(_NoRegistry(), "models:/tiny@champion", folder, "sqlite:///unused.db")
