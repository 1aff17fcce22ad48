"""Errors of input records: a malformed record of a corpus file or of a JSON structure form.

Raised by the readers and by the JSON decoders of the representations; carries the file and the
1-based line when known, and the fix.
"""

from gramtile.kernels.errors import GramtileError


class CorpusFormatError(GramtileError, ValueError):
    """A malformed input record. Carries ``path`` and ``line`` (1-based) when known."""

    def __init__(self, message, path=None, line=None, fix=None):
        self.path = None if path is None else str(path)
        self.line = line
        self.fix = fix
        self.reason = message
        where = ""
        if self.path is not None:
            where = f"{self.path}"
            if line is not None:
                where += f", line {line}"
            where += ": "
        text = where + message
        if fix:
            text = f"{sentence(text)} Fix: {sentence(fix)}"
        super().__init__(text)


def sentence(text: str) -> str:
    """``text`` ending in a full stop (kept as it is when it already ends a sentence)."""
    text = str(text).rstrip()
    return text if text.endswith((".", "!", "?")) else text + "."
