"""The documents name every policy field the core has, and only those."""

from __future__ import annotations

import re
from pathlib import Path

import metal_linalg_torch as mlt
import pytest
from metal_linalg_torch._shared.queries import OPS

DOCS = Path(__file__).resolve().parents[3] / "docs"


@pytest.mark.parametrize(
    ("doc", "start", "end"),
    [("api.md", "Policy fields:", "(what each"), ("routing.md", "Fields:", ". The CPU")],
)
def test_policy_field_lists_match_the_core(doc, start, end):
    text = (DOCS / doc).read_text()
    i = text.index(start)
    listed = re.findall(r"`([a-z_]+)`", text[i : text.index(end, i)])
    fields = set(mlt.qr_policy())
    assert fields == {f for op in OPS for f in getattr(mlt, f"{op}_policy")()}
    assert len(listed) == len(set(listed)) and set(listed) == fields, sorted(fields ^ set(listed))
