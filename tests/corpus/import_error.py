import keras  # noqa: F401
import rnndoctor_corpus_no_such_module  # noqa: F401
