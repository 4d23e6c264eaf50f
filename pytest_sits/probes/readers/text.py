"""The bounds of the line-oriented readers (``lspci``, ``nvidia-smi topo -m``): a text is untrusted, so it is at
most :data:`MAX_BYTES` characters, :data:`MAX_LINES` lines of at most :data:`MAX_LINE` characters, read with
anchored regular expressions without nested repetition (linear time), and every error names the line."""

from __future__ import annotations

from typing import List

#: Largest text accepted (an `lspci -vv` of a 1,000-function host is about 3 MB).
MAX_BYTES = 16 << 20
MAX_LINES = 400_000
#: pciutils cuts tree lines at 1,024 characters; a `topo -m` row with 64 NICs is about 600.
MAX_LINE = 16_384


class TextEvidenceError(ValueError):
    """The text is not the output it claims to be; the message names the line."""


def text_lines(text: str, what: str, max_lines: int = MAX_LINES, max_line: int = MAX_LINE) -> List[str]:
    """The lines of a ``what`` text, refused (:class:`TextEvidenceError`) past the bounds (a reader whose tool
    writes longer lines, or more of them, gives its own ``max_lines`` / ``max_line``)."""
    if len(text) > MAX_BYTES:
        raise TextEvidenceError(f"{len(text)} characters, over the {MAX_BYTES >> 20} MiB limit for {what} text; "
                                "fix: submit the output of one run")
    lines = text.splitlines()
    if len(lines) > max_lines:
        raise TextEvidenceError(f"{len(lines)} lines, over the {max_lines}-line limit for {what} text")
    for n, ln in enumerate(lines, 1):
        if len(ln) > max_line:
            raise TextEvidenceError(f"line {n}: {len(ln)} characters, over the {max_line}-character limit; "
                                    f"no {what} line is that long")
    return lines


#: The most accelerators (GPUs, NPUs) one submitted text may describe: one machine (an 8-GPU node is normal; the
#: largest single systems hold 16 to 32).  Above it the text is refused before its devices are parsed.
MAX_ACCELERATORS = 64


def check_device_count(count: int, what: str, line: int) -> None:
    """Refuse a text that describes more accelerators than one machine holds (one line naming the cap)."""
    if count > MAX_ACCELERATORS:
        raise TextEvidenceError(f"line {line}: {count} GPUs in one {what} text, more than the {MAX_ACCELERATORS} "
                                "one machine holds; fix: submit one machine's output per file")
