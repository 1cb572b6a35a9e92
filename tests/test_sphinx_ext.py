"""coheriq.sphinx: a candidate's autodoc entry names the engines that implement it."""

import json
import pydoc
import re
import textwrap

import pytest

pytest.importorskip("sphinx")

LIBRARY = '''
import coheriq

domain = coheriq.AccelerationDomain("sxdom")

@domain.acceleration_candidate
def scale(xs, factor=2.0):
    """Multiply every value by ``factor``."""
    return [x * factor for x in xs]

@domain.acceleration_candidate
def shift(xs, by=1.0):
    """Add ``by`` to every value."""
    return [x + by for x in xs]

@domain.acceleration_candidate
class Grid:
    """Cells in rows."""

    def __init__(self, cells):
        self.cells = cells

def helper(xs):
    """Not a candidate."""
    return xs

domain.materialize()
'''

PAGE = """
sxdom
=====

.. autofunction:: sxdom_lib.scale

.. autofunction:: sxdom_lib.shift

.. autoclass:: sxdom_lib.Grid

.. autofunction:: sxdom_lib.helper
"""


def stated(engine, implements, **more):
    said = {"coheriq_statement": 1, "domain": "sxdom", "engine": engine}
    return {**said, "implements": implements, **more}


@pytest.fixture
def project(make_dist, tmp_path):
    """The library, an installed engine "fast" (its module cannot even be imported) and docs."""
    site = make_dist(
        "sxdom_dist",
        {"sxdom_lib": LIBRARY, "sxdom_fast": "raise ImportError('no AVX2 here')\n"},
        {
            "coheriq.engines.sxdom": {"fast": "sxdom_fast"},
            "coheriq.statements.sxdom": {"fast": "sxdom_fast:sxdom_fast.coheriq.json"},
        },
    )
    fast = stated("fast", ["scale"], description="One pass, vectorized.", needs="AVX2")
    (site / "sxdom_fast.coheriq.json").write_text(json.dumps(fast))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.rst").write_text(PAGE)
    gpu = stated("gpu", ["scale", "Grid"], description="Rows *on* a GPU_", needs="an NVIDIA GPU")
    (docs / "gpu.json").write_text(json.dumps(gpu))
    return docs


def build(docs, engines):
    """Build ``docs`` with the extension and ``coheriq_engines = engines``; return status, HTML."""
    from sphinx.cmd.build import build_main

    (docs / "conf.py").write_text(
        textwrap.dedent(
            f"""
            extensions = ["sphinx.ext.autodoc", "coheriq.sphinx"]
            coheriq_engines = {engines!r}
            """
        )
    )
    out = docs.parent / "html"
    warnings = docs.parent / "warnings.txt"
    status = build_main(["-q", "-E", "-W", "-w", str(warnings), "-b", "html", str(docs), str(out)])
    html = (out / "index.html").read_text() if (out / "index.html").exists() else ""
    return status, html, warnings.read_text()


def entry(html, name):
    """The HTML of the entry of ``sxdom_lib.<name>``: from its signature to the next entry."""
    start = html.index(f'id="sxdom_lib.{name}"')
    following = html.find('<dl class="py', start)
    return html[start : following if following != -1 else len(html)]


def test_an_implemented_candidate_lists_its_engines_and_no_other_does(project):
    status, html, warnings = build(project, {"sxdom": ["gpu.json"]})
    assert status == 0, warnings
    scale = entry(html, "scale")
    assert '<p class="rubric">Engines</p>' in scale
    items = re.findall(r"<li><p>(.*?)</p></li>", scale, re.S)
    text = [re.sub(r"<[^>]+>", "", item) for item in items]
    assert text == [  # sorted by engine; the installed one read without importing it
        "fast — One pass, vectorized. (needs: AVX2)",
        "gpu — Rows *on* a GPU_ (needs: an NVIDIA GPU)",  # plain text, not markup
    ]
    grid = entry(html, "Grid")
    assert "Engines" in grid and "gpu" in grid and "fast" not in grid
    for untouched in ("shift", "helper"):  # a candidate nobody implements; no candidate
        assert "Engines" not in entry(html, untouched)


def test_engines_given_in_conf_py_take_the_place_of_installed_ones(project):
    mpi = stated("mpi", ["shift"], description="Spread over ranks.")
    fast = stated("fast", ["shift"], description="As documented.")
    status, html, warnings = build(project, {"sxdom": [mpi, fast]})
    assert status == 0, warnings
    assert "Engines" not in entry(html, "scale")  # fast, as conf.py gives it, does not
    shift = re.sub(r"<[^>]+>", "", entry(html, "shift"))
    assert "fast — As documented." in shift and "mpi — Spread over ranks." in shift


def test_a_statement_conf_py_gives_that_cannot_be_used_is_a_warning(project):
    status, _, warnings = build(project, {"sxdom": ["missing.json", stated("mpi", "shift")]})
    assert status != 0
    said = " ".join(warnings.split())
    assert "coheriq_engines['sxdom'][0], the file 'missing.json', of domain 'sxdom'" in said
    assert "The statement of engine 'mpi' of domain 'sxdom' (conf.py's coheriq_engines" in said
    assert "not a list of candidate names" in said


def test_one_statement_not_in_a_list_is_taken_as_it_is_meant(project):
    status, html, warnings = build(project, {"sxdom": "gpu.json"})
    assert status == 0, warnings
    assert "gpu" in entry(html, "Grid")


def test_help_and_doc_stay_as_they_were(project):
    status, html, warnings = build(project, {"sxdom": ["gpu.json"]})
    assert status == 0 and "Engines" in entry(html, "scale"), warnings
    import sxdom_lib  # imported by the build, in this process

    assert sxdom_lib.scale.__doc__ == "Multiply every value by ``factor``."
    assert sxdom_lib.Grid.__doc__ == "Cells in rows."
    assert "Engines" not in pydoc.render_doc(sxdom_lib.scale)
    assert "gpu" not in pydoc.render_doc(sxdom_lib.Grid)


def test_the_extension_says_it_is_safe_to_read_in_parallel():
    import coheriq
    from coheriq.sphinx import setup

    class App:
        def __init__(self):
            self.values, self.events = [], []

        def add_config_value(self, name, default, rebuild, types=()):
            self.values.append((name, default))

        def connect(self, event, handler):
            self.events.append(event)

    app = App()
    metadata = setup(app)
    assert metadata["parallel_read_safe"] is True and metadata["version"] == coheriq.__version__
    assert app.values == [("coheriq_engines", {})]
    assert app.events == ["autodoc-process-docstring"]
