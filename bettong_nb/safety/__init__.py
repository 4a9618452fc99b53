"""Credential safety, beneath everything else: the secrets matcher and redaction (``secrets``),
text made inert for HTML, Markdown and terminals (``sanitize``), and paths confined to a root
(``rooted``). Imports nothing else of the package."""
