"""Capture: runs inside the user's process and is the only layer that imports TensorFlow/Keras.

Submodules import TensorFlow or Keras at import time; import them only in the capture child or in
:func:`rnndoctor.diagnose`.
"""
