"""The one error type for bad input, importable from every layer.

A ``UserError`` says what is wrong with something the user gave (a file, a field, a flag, a model) and how to fix
it. The command line prints its message and exits with code 2, without a traceback; a pipeline or a component
raises it wherever it finds such a problem. It lives at the bottom of the layering so that components, the edges
and the pipelines can all raise it without importing the command line.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: the message names the problem and the fix. Exits with code 2, no traceback."""
