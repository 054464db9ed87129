"""``sites.assignment_site``: where the name ``fit`` receives (``batch_size=batch_size``) was
last assigned before the call, in the scope of the call (issue 12). Pure: no TensorFlow."""

from __future__ import annotations

import textwrap

from rnndoctor.capture import sites

SOURCE = textwrap.dedent(
    """\
    batch_size = 16
    x_train, y_train = load()
    batch_size = 32  # the one in force

    def main():
        batch_size = 8
        model.fit(x, y, batch_size=batch_size)

    model.fit(x_train, y_train, batch_size=batch_size)
    batch_size = 64  # after the call: not the one fit received
    """
)


def write(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SOURCE)
    return str(path)


def test_the_last_module_level_assignment_before_the_call(tmp_path):
    site = sites.assignment_site(write(tmp_path), "batch_size", 9)
    assert site.line == 3
    assert site.call_source == "batch_size = 32"
    assert site.code == "batch_size = 32  # the one in force"


def test_inside_a_function_its_own_assignment(tmp_path):
    site = sites.assignment_site(write(tmp_path), "batch_size", 7)
    assert site.line == 6 and site.call_source == "batch_size = 8"


def test_a_global_name_used_in_a_function_and_a_parameter(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(
        "epochs_size = 4\n"
        "def train(batch_size):\n"
        "    model.fit(x, y, batch_size=batch_size, epochs=epochs_size)\n"
    )
    assert sites.assignment_site(str(path), "epochs_size", 3).line == 1
    assert sites.assignment_site(str(path), "batch_size", 3) is None  # a parameter


def test_tuple_targets_and_unknown_names(tmp_path):
    path = write(tmp_path)
    assert sites.assignment_site(path, "x_train", 9).line == 2
    assert sites.assignment_site(path, "nowhere", 9) is None
