"""Which name a fix may write for tensorflow in each file a location points at
(``rnndoctor/capture/sites.py: tensorflow_names``, ``facts.run.tensorflow_names``), and the last
line of a location's statement (``SourceLocation.end_line``). A new user's trial: RD202's "safe"
``.prefetch(tf.data.AUTOTUNE)`` raised NameError in a script importing only keras, and RD205's
"add after line 9" of a call spanning lines 9-12 was a SyntaxError. No TensorFlow: a stand-in
module object is the "tensorflow" the names must hold."""

from __future__ import annotations

import sys
import types

from rnndoctor.capture import sites
from rnndoctor.facts import Facts, FitConfig, RunInfo, SourceLocation


def _facts(script, *others) -> Facts:
    facts = Facts(run=RunInfo(script=str(script), argv=[], cwd="."))
    facts.fit = FitConfig(data_kind="numpy", location=SourceLocation(file=str(script), line=2))
    facts.fit.x_location = SourceLocation(file=str(others[0]), line=1) if others else None
    if len(others) > 1:
        facts.fit.compile_location = SourceLocation(file=str(others[1]), line=1)
    return facts


def test_each_file_gets_the_names_its_imports_and_the_running_script_bind(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text("import keras\nmodel.fit(x)\n")
    helper = tmp_path / "data.py"
    helper.write_text("import numpy as np\nimport tensorflow, tensorflow as tff\n")
    broken = tmp_path / "broken.py"
    broken.write_text("def (:\n")
    module = types.ModuleType("tensorflow")
    main = types.ModuleType("__main__")
    main.keras = object()
    monkeypatch.setitem(sys.modules, "tensorflow", module)
    monkeypatch.setitem(sys.modules, "__main__", main)
    facts = _facts(script, helper, broken)
    names = sites.tensorflow_names(facts)
    assert names == {str(script): [], str(helper): ["tensorflow", "tff"]}  # broken: not known
    main.tf = module  # the running script bound it (a notebook's earlier cell, say)
    assert sites.tensorflow_names(facts)[str(script)] == ["tf"]
    assert sites.tensorflow_names(facts)[str(helper)] == ["tensorflow", "tff"]  # not __main__


def test_only_module_level_bindings_count_and_another_tf_is_never_assumed(tmp_path, monkeypatch):
    """The review: an import inside a function (or under TYPE_CHECKING) binds no module name,
    and a file binding ``tf`` to tensorflow.compat.v1 must get no ``import tensorflow as tf``
    over it."""
    monkeypatch.setitem(sys.modules, "tensorflow", types.ModuleType("tensorflow"))
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
    local = tmp_path / "local.py"
    local.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import tensorflow as tf\n"
        "def build():\n    import tensorflow as tf\n    return tf\n"
    )
    compat = tmp_path / "compat.py"
    compat.write_text("import tensorflow.compat.v1 as tf\n")
    submodule = tmp_path / "submodule.py"
    submodule.write_text("try:\n    import tensorflow.keras\nexcept ImportError:\n    pass\n")
    names = sites.tensorflow_names(_facts(local, compat, submodule))
    assert names[str(local)] == []  # known: no module-level name, so a fix imports it
    assert str(compat) not in names  # tf is another module: not known, no import written
    assert names[str(submodule)] == ["tensorflow"]


def test_a_location_knows_the_last_line_of_its_statement(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import keras\n"
        "train = keras.utils.timeseries_dataset_from_array(\n"
        "    x,\n"
        "    y,\n"
        ")\n"
        "model.fit(train)\n"
    )
    where = sites.source_location(str(script), 2, ("timeseries_dataset_from_array",))
    assert (where.line, where.end_line) == (2, 5)
    assert sites.source_location(str(script), 6).end_line == 6
