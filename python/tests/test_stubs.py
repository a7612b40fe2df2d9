"""The type stubs (_core.pyi) name what the extension has: compress()'s keyword options here,
report.json's fields on RunReport in test_compress.py."""
import ast
from pathlib import Path

import pytest

import autocompress

STUB = ast.parse((Path(autocompress.__file__).parent / "_core.pyi").read_text())


def stub_fields(class_name: str) -> set:
    """The annotated attributes of a class of the stub."""
    cls = next(n for n in STUB.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    return {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)}


def test_compress_keywords_are_its_options():
    compress = next(n for n in STUB.body if isinstance(n, ast.FunctionDef) and n.name == "compress")
    stubbed = {a.arg for a in compress.args.kwonlyargs} - {"progress", "resume"}
    with pytest.raises(autocompress.ConfigError) as e:
        autocompress.compress("m", "s", "o", no_such_option=1)
    known = set(str(e.value).split("the options are ")[1].split(", "))
    assert stubbed == known
