# Sphinx configuration for the jetstream_sync documentation site.
#
# Pages are Markdown (MyST); the API reference comes from the docstrings
# (autodoc). The site is built with -W: every warning is a failure.
from __future__ import annotations

import jetstream_sync

project = "jetstream_sync"
author = "The jetstream_sync authors"
copyright = "2026, The jetstream_sync authors"
release = jetstream_sync.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", ".ipynb_checkpoints", "**/.ipynb_checkpoints"]

myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}

html_theme = "furo"
html_title = f"jetstream_sync {release}"
html_static_path: list[str] = []


def _no_builtin_docstring(app, what, name, obj, options, lines):
    """A constant documented in api.md (a tuple, say) must not show its type's own docstring."""
    builtin = type(obj).__module__ == "builtins" and type(obj).__doc__
    if what == "data" and builtin and "\n".join(lines).strip() == type(obj).__doc__.strip():
        del lines[:]


def setup(app):
    app.connect("autodoc-process-docstring", _no_builtin_docstring)
