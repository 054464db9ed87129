"""Runnable example training scripts (installed as ``rnndoctor.examples``; ``rnndoctor demo``)."""
