"""The documentation site (Sphinx, MyST Markdown, the Furo theme): `make docs`.

Built with warnings as errors, so a link to a missing page or anchor, or a page left out of
every table of contents, fails the build; tests/test_docs.py builds it and checks every
internal link and anchor of the output as well.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "Countersign"
author = "Countersign maintainers"
extensions = ["myst_parser", "pages"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext"]

# GitHub's heading slugs, so `[text](page.md#a-heading)` links work here and on GitHub.
myst_heading_anchors = 4
myst_enable_extensions = ["attrs_inline", "colon_fence", "deflist"]
# A link to a page or anchor that does not exist is a warning, hence an error.
myst_all_links_external = False
suppress_warnings: list[str] = []

html_theme = "furo"
html_title = "Countersign"
# Everything the site needs is in the build: no web fonts, no CDN (Furo ships its assets).
html_permalinks_icon = "#"
html_show_sourcelink = False
html_copy_source = False
pygments_style = "friendly"
