"""What a run leaves behind: saved sessions (``saving``), exports to Markdown, HTML and notebooks
(``export``), the transcript as HTML (``transcript_html``, the notebook shows it too) and as text
(``terminal``). Built on the core; never imported by it."""
