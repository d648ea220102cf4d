"""Makes this machine's Python look like the lent GPU machine's image, to rehearse ``benchmarks/device_payload.py``
here before any device time is spent: every distribution the image does not hold is hidden (its modules are not
found, its metadata is not listed) unless it was shipped into ``$SHIPPED`` (default ``/tmp/site``, where ``unpack``
puts the packages). The image's distributions are the names listed in ``$LENT_IMAGE_PACKAGES`` (a file, one name per
line or comma-separated; default: the "Packages:" line of the device tool's KINDS.md). Refused imports are appended to
``$SHIPPED/../refused.txt``. Put this folder first on ``PYTHONPATH``; Ray's workers inherit it.

    stage --python 3.11; unpack 1; unpack 2; unpack 3; . /tmp/payload/env.sh
    PYTHONPATH=benchmarks/lent_image:$PYTHONPATH python benchmarks/recovery_gpu.py --device cpu --tiny ...
"""

import importlib.machinery
import importlib.metadata
import os
import re
import sys
from pathlib import Path

SHIPPED = os.environ.get("SHIPPED", "/tmp/site")
KINDS = "/work/.library/device/KINDS.md"


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _image_packages() -> set[str]:
    listed = os.environ.get("LENT_IMAGE_PACKAGES")
    text = Path(listed or KINDS).read_text(encoding="utf-8")
    if not listed:
        text = re.search(r"Packages: (.*?)\.\n", text, re.S).group(1)
    return {_normal(name) for name in re.split(r"[,\s]+", text) if name}


IMAGE = _image_packages() | {"vocadapt"}
HIDDEN = {module for module, dists in importlib.metadata.packages_distributions().items()
          if not any(_normal(d) in IMAGE for d in dists)} - {"backports"}  # a namespace setuptools vendors too
PathFinder = importlib.machinery.PathFinder


class LentImagePathFinder:
    """``PathFinder``, except that a hidden top-level module is searched for in ``SHIPPED`` alone."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if "." not in fullname and fullname in HIDDEN:
            spec = PathFinder.find_spec(fullname, [SHIPPED])
            if spec is None:
                with open(Path(SHIPPED).parent / "refused.txt", "a", encoding="utf-8") as refused:
                    refused.write(fullname + "\n")
            return spec
        return PathFinder.find_spec(fullname, path, target)

    @classmethod
    def invalidate_caches(cls):
        return PathFinder.invalidate_caches()

    @staticmethod
    def find_distributions(context=None):
        context = context or importlib.metadata.DistributionFinder.Context()
        for dist in PathFinder.find_distributions(context):
            if str(getattr(dist, "_path", "")).startswith(SHIPPED) or _normal(dist.metadata["Name"] or "") in IMAGE:
                yield dist


sys.meta_path[:] = [LentImagePathFinder if finder is PathFinder else finder for finder in sys.meta_path]
