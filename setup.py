"""The optional compiled core (``ledger.core._hot``, ``ledger.core._strictjson`` and
``ledger.core._recordread``, C): everything else is in pyproject.toml.

A wheel or a regular ``pip install .`` builds it when a C compiler and the Python headers are
there, and installs the pure core when the build fails (``optional=True``: ``CC=/bin/false pip
install .`` works). Editable installs stay pure unless ``make native`` builds it in place
(docs/design.md "The compiled core").
"""

import sys

from setuptools import Extension, setup

HOT = Extension(
    "ledger.core._hot",
    sources=["ledger/core/_hot.c"],
    optional=True,
    extra_compile_args=["-O3"],
)

STRICT_JSON = Extension(
    "ledger.core._strictjson",
    sources=["ledger/core/_strictjson.c"],
    optional=True,
    extra_compile_args=["-O3"],
)

RECORD_READ = Extension(
    "ledger.core._recordread",
    sources=["ledger/core/_recordread.c"],
    optional=True,
    extra_compile_args=["-O3"],
)

setup(ext_modules=[] if "editable_wheel" in sys.argv else [HOT, STRICT_JSON, RECORD_READ])
