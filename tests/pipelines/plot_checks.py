"""What a plotted PNG must show: a real image of the figure's size, every panel drawn with coloured data on it."""

from __future__ import annotations

from pathlib import Path


def assert_plot(path: Path, size: tuple[int, int], grid: tuple[int, int],
                blank: frozenset[tuple[int, int]] = frozenset()) -> None:
    """``path`` is a PNG of ``size`` (width, height in pixels: figsize x dpi) whose ``grid`` (rows, columns) of
    panels each hold coloured pixels (curves or bars; axes, text, black reference lines and the background are
    grey, black or white), except the panels in ``blank`` (row, column), which have no coloured data and must show
    none."""
    import numpy as np
    from PIL import Image

    with Image.open(path) as image:
        assert image.format == "PNG" and image.size == size, (image.format, image.size)
        pixels = np.asarray(image.convert("RGB"), dtype=np.int16)
    coloured = (pixels.max(axis=2) - pixels.min(axis=2)) > 60  # a saturated colour, not grey or white
    rows, columns = grid
    height, width = coloured.shape
    for row in range(rows):
        for column in range(columns):
            panel = coloured[row * height // rows:(row + 1) * height // rows,
                             column * width // columns:(column + 1) * width // columns]
            if (row, column) in blank:
                assert panel.mean() == 0, f"panel {row},{column} of {path.name} has data it was not given"
            else:
                assert panel.mean() > 0.002, f"panel {row},{column} of {path.name} is blank ({panel.mean():.4%})"
