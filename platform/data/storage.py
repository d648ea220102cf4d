"""Where LAPT checkpoints, sweep state and the sweep's artefact cache live: a local folder or any storage URI.

``locate("s3://bucket/prefix")`` gives a :class:`StorageLocation`: a pyarrow filesystem and the path on it, which
Ray Train and Tune take as ``RunConfig(storage_path=..., storage_filesystem=...)`` and which the platform reads and
writes small files through (the run record, the sweep's state, cache entries). Every node of a cluster reaches
the same bytes, so a worker group restarted on another node resumes from the last checkpoint instead of from
nothing. A plain path (or ``file://``) stays a local folder, resolved against the current folder.

S3 (and any S3-compatible store: MinIO, Ceph, moto) is configured by the standard AWS variables:
``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` (a store other than AWS), ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION`` / ``AWS_DEFAULT_REGION``; without keys pyarrow
uses AWS's default chain (instance profile, ``~/.aws``). Keys written into the URI (``s3://KEY:SECRET@bucket/x``)
win but are never shown: ``str(location)`` and every message print ``s3://***@bucket/x``. ``gs://`` (and the other
schemes pyarrow knows) use pyarrow's own filesystem and its standard variables; any other scheme an installed
fsspec implementation knows goes through fsspec.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from vocadapt.components.errors import UserError

_PYARROW_SCHEMES = {"s3", "gs", "gcs", "hdfs", "viewfs"}


@dataclass(frozen=True)
class StorageLocation:
    """A folder on a filesystem: ``path`` on ``filesystem`` (pyarrow), written by the user as ``uri``.

    ``uri`` is exact (credentials included: pass it on, never print it); ``str()`` is the redacted form for
    messages. ``local`` is the folder as a ``Path`` when the filesystem is the local disk, else None."""

    uri: str
    path: str
    filesystem: Any  # pyarrow.fs.FileSystem

    def __truediv__(self, name: str) -> StorageLocation:
        name = str(name).strip("/")
        return StorageLocation(f"{self.uri.rstrip('/')}/{name}", f"{self.path.rstrip('/')}/{name}", self.filesystem)

    def __str__(self) -> str:
        return redact_uri(self.uri)

    def __repr__(self) -> str:
        return f"StorageLocation({str(self)!r})"

    @property
    def local(self) -> Path | None:
        from pyarrow.fs import LocalFileSystem

        return Path(self.path) if isinstance(self.filesystem, LocalFileSystem) else None

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def ray_storage(self) -> dict[str, Any]:
        """Keywords for ``ray.train.RunConfig`` / ``ray.tune.RunConfig`` / ``Tuner.restore``: a local folder as
        a path, anything else as the path on this filesystem (Ray expects it without the scheme then)."""
        if self.local is not None:
            return {"storage_path": self.path}
        return {"storage_path": self.path, "storage_filesystem": self.filesystem}

    def _info(self):
        return self.filesystem.get_file_info(self.path)

    def exists(self) -> bool:
        from pyarrow.fs import FileType

        return self._info().type != FileType.NotFound

    def is_file(self) -> bool:
        from pyarrow.fs import FileType

        return self._info().type == FileType.File

    def is_dir(self) -> bool:
        """A folder; on an object store, a prefix holding at least one object."""
        from pyarrow.fs import FileSelector, FileType

        if self.local is not None:
            return self.local.is_dir()
        if self._info().type == FileType.Directory:
            return True
        try:  # some stores list a prefix without reporting it as a directory
            return bool(self.filesystem.get_file_info(FileSelector(self.path, allow_not_found=True)))
        except OSError:
            return False

    def mkdir(self) -> None:
        self.filesystem.create_dir(self.path, recursive=True)

    def read_text(self) -> str:
        with self.filesystem.open_input_stream(self.path) as stream:
            return stream.read().decode("utf-8")

    def write_text(self, text: str) -> None:
        """Write the whole file at once: a local file through a temporary name and a rename, an object in one PUT
        (an object store never shows half an object), so a reader never sees half a file."""
        if self.local is not None:
            self.local.parent.mkdir(parents=True, exist_ok=True)
            staging = self.local.with_name(f".{self.local.name}.{os.getpid()}.tmp")
            staging.write_text(text, encoding="utf-8")
            os.replace(staging, self.local)
            return
        with self.filesystem.open_output_stream(self.path) as stream:
            stream.write(text.encode("utf-8"))

    def unlink(self) -> None:
        if self.is_file():
            self.filesystem.delete_file(self.path)

    def upload(self, folder: Path) -> None:
        """Copy the local ``folder``'s files here (its tree below this location)."""
        from pyarrow.fs import LocalFileSystem, copy_files

        copy_files(str(folder), self.path, source_filesystem=LocalFileSystem(), destination_filesystem=self.filesystem)

    def download(self, folder: Path) -> None:
        """Copy the files below this location into the local ``folder``."""
        from pyarrow.fs import LocalFileSystem, copy_files

        folder.mkdir(parents=True, exist_ok=True)
        copy_files(self.path, str(folder), source_filesystem=self.filesystem, destination_filesystem=LocalFileSystem())

    def check_reachable(self, field: str) -> None:
        """Raise a UserError naming ``field`` when the storage cannot be reached (no such bucket, refused
        credentials, no endpoint) before any run starts; a local folder is always reachable (it is created)."""
        if self.local is not None:
            return
        from pyarrow.fs import FileType

        root = self.path.split("/", 1)[0]
        try:
            missing = self.filesystem.get_file_info(root).type == FileType.NotFound
        except OSError as error:
            raise UserError(f"{field} {self}: the storage cannot be reached ({redact_uri(str(error))}); check the "
                            "endpoint and credentials (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
                            "AWS_REGION for S3)") from None
        if missing:
            raise UserError(f"{field} {self}: bucket {root!r} does not exist; create it or fix the URI")


def locate(where: str | Path | StorageLocation, *, field: str = "storage_path") -> StorageLocation:
    """The storage at ``where``: a local path (resolved against the current folder), ``file://``, ``s3://``,
    ``gs://`` or another fsspec URI. An unknown scheme is a UserError naming ``field``."""
    if isinstance(where, StorageLocation):
        return where
    from pyarrow.fs import LocalFileSystem

    text = str(where)
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if "://" not in text or scheme == "file" or len(scheme) == 1:  # a path (a Windows drive is not a scheme)
        local = unquote(parts.path) if scheme == "file" else text
        folder = str(Path(local).expanduser().resolve())
        return StorageLocation(folder, folder, LocalFileSystem())
    if scheme in {"s3", "s3a"}:
        filesystem = s3_filesystem(parts.username and unquote(parts.username),
                                   parts.password and unquote(parts.password))
        return StorageLocation(text, f"{parts.hostname or ''}{parts.path}".rstrip("/"), filesystem)
    if scheme in _PYARROW_SCHEMES:
        from pyarrow.fs import FileSystem

        try:
            filesystem, path = FileSystem.from_uri(text)
        except (OSError, ValueError) as error:
            raise UserError(f"{field} {redact_uri(text)}: {redact_uri(str(error))}; fix the URI") from None
        return StorageLocation(text, path.rstrip("/"), filesystem)
    return _fsspec_location(text, scheme, field)


def s3_filesystem(access_key: str | None = None, secret_key: str | None = None):
    """pyarrow's S3 filesystem configured from the standard AWS variables (keys given here win)."""
    from pyarrow.fs import S3FileSystem

    options: dict[str, Any] = {}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        parsed = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        options["endpoint_override"] = parsed.netloc
        options["scheme"] = parsed.scheme or "https"
    access_key = access_key or os.environ.get("AWS_ACCESS_KEY_ID")
    secret_key = secret_key or os.environ.get("AWS_SECRET_ACCESS_KEY")
    if access_key and secret_key:
        options.update(access_key=access_key, secret_key=secret_key)
        if os.environ.get("AWS_SESSION_TOKEN"):
            options["session_token"] = os.environ["AWS_SESSION_TOKEN"]
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        options["region"] = region
    return S3FileSystem(**options)


def _fsspec_location(text: str, scheme: str, field: str) -> StorageLocation:
    import fsspec
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    try:
        filesystem = fsspec.filesystem(scheme)
    except (ImportError, ValueError) as error:
        raise UserError(f"{field} {redact_uri(text)}: no filesystem for {scheme}:// ({error}); use a local path, "
                        "s3://, gs:// or file://, or install the fsspec package for that scheme") from None
    path = filesystem._strip_protocol(text)
    return StorageLocation(text, str(path).rstrip("/"), PyFileSystem(FSSpecHandler(filesystem)))


def redact_uri(text: str) -> str:
    """Credentials inside URIs (``s3://KEY:SECRET@bucket``) become ``***@``; the rest is unchanged."""
    from vocadapt.platform.tracking import redact_value

    return redact_value(text)


def local_mirror(location: StorageLocation) -> Path:
    """A local folder standing for a remote location (files read from an object store are used from disk):
    under the system's temporary folder, one per location, the same in every process of this machine."""
    import hashlib

    digest = hashlib.sha256(location.uri.encode()).hexdigest()[:24]
    return Path(tempfile.gettempdir()) / "vocadapt-storage" / digest
