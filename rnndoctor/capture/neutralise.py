"""No harm to the user's files: what would write user state is turned off during the check.

A pre-flight check must leave the user's checkpoints, logs and exported models exactly as they
were, yet the script runs in the user's own working directory with their relative paths. So, for
the whole check (from the script's first line, not only inside the diagnosis window):

- ``fit`` runs without the user's ``ModelCheckpoint``, ``BackupAndRestore``, ``CSVLogger``,
  ``TensorBoard``, ``OrbaxCheckpoint`` and ``RemoteMonitor`` callbacks (subclasses included):
  :func:`filter_callbacks` drops them from the callback list (``window.run_window`` calls
  it). ``BackupAndRestore`` would also have restored (and at the end deleted) its backup.
- ``Model.save`` / ``save_weights`` / ``export``, ``keras.saving.save_model`` /
  ``save_weights`` (and ``keras.models.save_model``, the same function),
  ``ExportArchive.write_out``, ``tf.saved_model.save``, ``tf.train.Checkpoint.save`` /
  ``write`` and ``tf.train.CheckpointManager.save`` do nothing and return what the real call
  returns when it writes nothing (``None``; the checkpoint prefix for ``Checkpoint.save`` /
  ``write``). ``tf.summary.create_file_writer`` returns ``tf.summary.create_noop_writer()``.

They are no-ops rather than redirected into ``--out``: a check saves nothing, costs no disk and no
time in the measured steps. The cost is that a script that saves a file and loads it back before
``fit`` fails to load it (the report lists the neutralised save, with the user's line).

Each is recorded once per (what, path, user's line) in ``facts.run.neutralised``, with the number
of calls turned off. Plain file writes (``open(..., "w")``, ``os.mkdir``, ``os.remove``, ...) are
not blocked, since a script may need them to run, but an audit hook (``sys.addaudithook``, PEP
578) records those made by the user's code outside ``--out`` (but not the files and folders that
``tempfile`` creates), and a note lists them, so the report says what the check may have
changed. TensorFlow's C++ file system and h5py raise no audit event, so their writes
(``tf.io.gfile.makedirs`` / ``mkdir`` / ``rmtree`` / ``remove`` / ``rename`` / ``copy``,
``tf.io.gfile.GFile`` opened for writing, ``tf.io.write_file``, ``tf.io.TFRecordWriter``,
``tf.data.Dataset.save``, ``tf.data.experimental.save``, ``h5py.File`` in a mode but ``"r"``)
are wrapped to be recorded the same way (:func:`_install_silent_writes`). Every one of these
writes, like the neutralised saves and the child commands, first asks
:func:`rnndoctor.capture.after_window.stop_before_write`: during the run-on after the window
the script stops before it.

Commands the script runs in child processes (``os.system``, ``subprocess.Popen``, which
``subprocess.run`` / ``call`` / ``check_call`` / ``check_output`` go through: the audit events
``os.system`` and ``subprocess.Popen``) are recorded too, never blocked, in
``facts.run.child_commands`` with their command line and the user's line. A child's writes raise
no audit event in this process, so the user's tree (the script's folder and the working
directory, at most ``_MAX_TREE_ENTRIES`` entries, ``--out`` left out) is snapshotted (mtime and
size) when each command starts; what is new or changed at the next command's start, at the
``fit`` call or at the script's end (:func:`attribute_child_writes`), less what the script's
Python code wrote itself, is credited to the command. The same note lists them.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rnndoctor.capture import after_window, sites
from rnndoctor.capture.session import NeutraliseState
from rnndoctor.facts import ChildCommand, Neutralised, SourceLocation

if TYPE_CHECKING:
    from rnndoctor.capture.session import CaptureSession

# Keras callbacks that write user state, with the attribute naming where (keras/src/callbacks/*.py
# of Keras 3.15: ModelCheckpoint.filepath, BackupAndRestore.backup_dir, CSVLogger.filename,
# TensorBoard.log_dir, OrbaxCheckpoint.directory; RemoteMonitor posts to root + path).
_CALLBACK_TARGETS: dict[str, Callable[[Any], str | None]] = {
    "ModelCheckpoint": lambda cb: getattr(cb, "filepath", None),
    "BackupAndRestore": lambda cb: getattr(cb, "backup_dir", None),
    "CSVLogger": lambda cb: getattr(cb, "filename", None),
    "TensorBoard": lambda cb: getattr(cb, "log_dir", None),
    "OrbaxCheckpoint": lambda cb: getattr(cb, "directory", None),
    "RemoteMonitor": lambda cb: f"{getattr(cb, 'root', '')}{getattr(cb, 'path', '')}" or None,
}
_MAX_WRITES_LISTED = 10  # distinct plain-write paths named in the note; the rest are counted
_MAX_WRITES_TRACKED = 10_000  # distinct paths remembered (memory bound); past it none is counted
_MAX_TREE_ENTRIES = 10_000  # files compared around child commands (the walk's bound)
_MAX_SNAPSHOTS = 50  # command starts snapshotted; later commands are recorded, their writes not
_MAX_COMMAND_CHARS = 300
_CHILD_EVENTS = ("os.system", "subprocess.Popen")  # PEP 578 audit events, Python 3.11
_WRITE_EVENTS = (
    "os.mkdir",
    "os.remove",
    "os.rename",
    "os.rmdir",
    "shutil.rmtree",
    "os.link",
    "os.symlink",
    "os.replace",
)  # fmt: skip  (PEP 578 audit events, Python 3.11)

_RNNDOCTOR_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep
_HOOKS_ATTR = "_rnndoctor_neutralise_hooks"  # the _Hooks, on keras.Model once patched
_lock = threading.RLock()
_guard = threading.local()


class _Hooks:
    """The patches' and the audit hook's link to the session that records (one per process,
    kept on ``keras.Model``; an audit hook cannot be removed, :func:`install` re-points it)."""

    def __init__(self) -> None:
        self.session: CaptureSession | None = None

    def record(self, what: str, detail: str | None, location: SourceLocation | None) -> None:
        if self.session is not None:
            _record(self.session, what, detail, location)

    def audit(self, event: str, args: tuple) -> None:
        """PEP 578 audit hook: records plain file writes by the user's code (never blocks)."""
        if event != "open" and event not in _WRITE_EVENTS and event not in _CHILD_EVENTS:
            return
        session = self.session
        if session is None or getattr(_guard, "busy", False):
            return
        _guard.busy = True
        try:
            if event in _CHILD_EVENTS:
                _child_command(session, event, args)
            else:
                _audit(session, event, args)
        except Exception:  # an audit hook must never break the user's script
            pass
        finally:
            _guard.busy = False


def _skip_dirs(facts_path: Any) -> tuple[str, ...]:
    """The folders whose writes are not recorded: ``/dev``, ``/proc``, ``/sys`` and ``--out``."""
    skip = ["/dev", "/proc", "/sys"]
    if facts_path is not None:
        skip.append(os.path.dirname(os.path.abspath(os.fspath(facts_path))))
    return tuple(os.path.realpath(d).rstrip(os.sep) + os.sep for d in skip)


def install(session: CaptureSession) -> None:
    """Turns off the user's saving APIs and starts recording plain file writes.

    Runs in the capture child before the user's script, after Keras and TensorFlow are imported.
    The patches are installed once per process; installing again only points them at another
    session.

    Args:
        session: the check's session: its ``facts.run.neutralised`` receives the records, its
            ``neutralise_state`` the plain writes; its ``facts_path`` folder (``--out``) is
            where the check itself writes.
    """
    import keras

    hooks = keras.Model.__dict__.get(_HOOKS_ATTR)
    if hooks is None:
        hooks = _Hooks()
        _install_keras(hooks)
        _install_tf_keras(hooks)
        _install_tensorflow(hooks)
        _install_silent_writes(hooks)
        sys.addaudithook(hooks.audit)
        setattr(keras.Model, _HOOKS_ATTR, hooks)
    state = NeutraliseState(skip_dirs=_skip_dirs(session.facts_path))
    script = getattr(getattr(session.facts, "run", None), "script", None)
    roots = [os.path.dirname(os.path.abspath(script))] if script else []
    roots.append(os.getcwd())
    state.tree_roots = tuple(dict.fromkeys(os.path.realpath(r) for r in roots))
    session.neutralise_state = state
    hooks.session = session


def filter_callbacks(session: CaptureSession, callbacks: list[Any]) -> list[Any]:
    """The user's callbacks less those that write user state (see the module doc).

    Args:
        session: the check's session, whose facts record what was dropped.
        callbacks: the ``callbacks`` argument of the user's ``fit``, as a list.

    Returns:
        The callbacks ``fit`` should run, in the user's order.
    """
    kept = []
    for callback in callbacks:
        kind = _callback_kind(callback)
        if kind is None:
            kept.append(callback)
            continue
        name = type(callback).__name__
        what = f"{name} callback" if name == kind else f"{name} callback (a {kind})"
        try:
            target = _CALLBACK_TARGETS[kind](callback)
        except Exception:  # a user subclass with odd attributes: still dropped
            target = None
        location = session.site_book.lookup("saving_callbacks", callback)
        _record(session, what, _where(target), location or _fit_location(session))
    return kept


# -- callbacks -------------------------------------------------------------------------------
def _callback_kind(callback: Any) -> str | None:
    """The neutralised Keras class ``callback`` is (or derives from), or None. Works without
    :func:`install` too (``rnndoctor.diagnose`` in the user's own process drops them as well)."""
    types = _callback_types() + _tf_keras_callback_types()
    for cls in type(callback).__mro__:
        if cls in types:
            return cls.__name__
    return None


@functools.cache
def _callback_types() -> tuple[type, ...]:
    """The Keras callback classes that write user state (``_CALLBACK_TARGETS``)."""
    import keras

    return tuple(
        cls
        for cls in (getattr(keras.callbacks, name, None) for name in _CALLBACK_TARGETS)
        if isinstance(cls, type)
    )


def _tf_keras_callback_types() -> tuple[type, ...]:
    """tf_keras' callback classes that write user state, when tf_keras is imported
    (``tf_keras/src/callbacks.py``: ``ModelCheckpoint.filepath``, ``BackupAndRestore.backup_dir``,
    ``CSVLogger.filename``, ``TensorBoard.log_dir``, ``RemoteMonitor`` root + path: the same
    attributes as Keras 3's)."""
    module = sys.modules.get("tf_keras")
    callbacks = getattr(module, "callbacks", None) if module is not None else None
    if callbacks is None:
        return ()
    found = (getattr(callbacks, name, None) for name in _CALLBACK_TARGETS)
    return tuple(cls for cls in found if isinstance(cls, type))


def _recording_init(init: Callable[..., None], name: str) -> Callable[..., None]:
    @functools.wraps(init)
    def __init__(self, *args, **kwargs):  # noqa: N807 - it replaces __init__
        try:
            sites.record("saving_callbacks", self, _construction_site(name))
        except TypeError:  # not hashable: no site, still dropped
            pass
        init(self, *args, **kwargs)

    return __init__


def _construction_site(name: str) -> SourceLocation | None:
    """The user's line that built the callback: the innermost user frame that is not a user
    subclass's own ``__init__`` (which calls ``super().__init__``)."""
    frame = sys._getframe(2)
    first = None
    while frame is not None:
        if sites.is_user_file(frame.f_code.co_filename):
            location = (frame.f_code.co_filename, frame.f_lineno)
            first = first or location
            if frame.f_code.co_name != "__init__":
                return sites.source_location(*location, (name,))
        frame = frame.f_back
    return sites.source_location(*first, (name,)) if first else None


def _fit_location(session: CaptureSession) -> SourceLocation | None:
    fit = getattr(getattr(session, "facts", None), "fit", None)
    return getattr(fit, "location", None)


# -- saving functions ------------------------------------------------------------------------
_PATH_KEYWORDS = ("filepath", "file_prefix", "export_dir", "logdir")


def _arg(index: int, *keywords: str) -> Callable[[tuple, dict], Any]:
    """Picks argument ``index`` (``self`` included for a method) or the first of ``keywords``."""

    def pick(args: tuple, kwargs: dict) -> Any:
        for key in keywords:
            if key in kwargs:
                return kwargs[key]
        return args[index] if len(args) > index else None

    return pick


def _path_arg(index: int) -> Callable[[tuple, dict], Any]:
    """Picks the path argument of a saving call: positional ``index`` (``self`` included for a
    method) or a path keyword (:func:`_arg`)."""
    return _arg(index, *_PATH_KEYWORDS)


def _where(path: Any) -> str | None:
    """The absolute path a call would write (relative paths are the user's working directory's),
    or a URL / remote path as given."""
    if path is None:
        return None
    try:
        text = os.fsdecode(os.fspath(path))
    except TypeError:
        return str(path)
    if "://" in text:
        return text
    return os.path.abspath(text)


def _noop(
    hooks: _Hooks,
    original: Callable[..., Any],
    what: str,
    pick: Callable[[tuple, dict], Any],
    result: Callable[[Any], Any] | None,
) -> Callable[..., Any]:
    """A function that records the call and returns ``result(path)`` (None) without writing."""

    @functools.wraps(original)
    def neutralised(*args, **kwargs):
        try:
            path = pick(args, kwargs)
        except Exception:
            path = None
        if hooks.session is not None:
            after_window.stop_before_write(hooks.session, what)
        hooks.record(what, _where(path), sites.user_frame_location(skip=1))
        return result(path) if result is not None else None

    neutralised.__rnndoctor_original__ = original  # type: ignore[attr-defined]
    return neutralised


def _neutralise_method(
    hooks: _Hooks,
    cls: type,
    name: str,
    what: str,
    pick: Callable[[tuple, dict], Any],
    result: Callable[[Any], Any] | None = None,
) -> None:
    original = cls.__dict__.get(name) or getattr(cls, name, None)
    if original is not None and not hasattr(original, "__rnndoctor_original__"):
        setattr(cls, name, _noop(hooks, original, what, pick, result))


def _rebind(original: Any, replacement: Any, prefixes: tuple[str, ...]) -> None:
    """Replaces ``original`` wherever a loaded module under ``prefixes`` binds it
    (``keras.saving.save_model`` and ``keras.models.save_model`` are one function, bound in
    several modules, ``tf.keras`` included)."""
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(prefixes):
            continue
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attr, value in list(namespace.items()):
            if value is original:
                namespace[attr] = replacement


def _install_keras(hooks: _Hooks) -> None:
    import keras

    for name in _CALLBACK_TARGETS:
        cls = getattr(keras.callbacks, name, None)
        if isinstance(cls, type):
            cls.__init__ = _recording_init(cls.__init__, name)
    _neutralise_method(hooks, keras.Model, "save", "model.save", _path_arg(1))
    _neutralise_method(hooks, keras.Model, "save_weights", "model.save_weights", _path_arg(1))
    _neutralise_method(hooks, keras.Model, "export", "model.export", _path_arg(1))
    from keras.src.saving import saving_api

    for function, what in (
        (saving_api.save_model, "keras.saving.save_model"),
        (saving_api.save_weights, "keras.saving.save_weights"),
    ):
        _rebind(function, _noop(hooks, function, what, _path_arg(1), None), ("keras",))
    try:
        from keras.src.export.saved_model import ExportArchive
    except ImportError:  # another Keras layout: Model.export above still covers the usual call
        return
    _neutralise_method(hooks, ExportArchive, "write_out", "ExportArchive.write_out", _path_arg(1))


def _install_tf_keras(hooks: _Hooks) -> None:
    """The tf_keras (Keras 2) saving APIs and callbacks, when tf_keras is installed:
    ``Model.save`` / ``save_weights`` (``tf_keras/src/engine/training.py``),
    ``tf_keras.saving.save_model`` / ``save_weights`` / ``tf_keras.models.save_model``
    (``tf_keras/src/saving/saving_api.py``, bound in several modules, ``tf.keras`` under
    ``TF_USE_LEGACY_KERAS=1`` included) and ``Model.export`` / ``ExportArchive.write_out``
    (``tf_keras/src/export/export_lib.py``)."""
    from rnndoctor.capture import flavour

    module = flavour.tf_keras()
    if module is None:
        return
    for cls in _tf_keras_callback_types():
        if not hasattr(cls.__init__, "__wrapped__"):
            cls.__init__ = _recording_init(cls.__init__, cls.__name__)
    model = module.Model
    _neutralise_method(hooks, model, "save", "model.save", _path_arg(1))
    _neutralise_method(hooks, model, "save_weights", "model.save_weights", _path_arg(1))
    _neutralise_method(hooks, model, "export", "model.export", _path_arg(1))
    from tf_keras.src.saving import saving_api

    prefixes = ("tf_keras", "tensorflow", "keras")
    for function, what in (
        (saving_api.save_model, "tf_keras.saving.save_model"),
        (saving_api.save_weights, "tf_keras.saving.save_weights"),
    ):
        _rebind(function, _noop(hooks, function, what, _path_arg(1), None), prefixes)
    try:
        from tf_keras.src.export.export_lib import ExportArchive
    except ImportError:  # another layout: Model.export above still covers the usual call
        return
    _neutralise_method(hooks, ExportArchive, "write_out", "ExportArchive.write_out", _path_arg(1))


def _install_tensorflow(hooks: _Hooks) -> None:
    try:
        import tensorflow as tf
    except ImportError:
        return
    prefixes = ("tensorflow", "keras", "tf_keras")
    _rebind(
        tf.saved_model.save,
        _noop(hooks, tf.saved_model.save, "tf.saved_model.save", _path_arg(1), None),
        prefixes,
    )
    prefix = _path_arg(1)  # Checkpoint.save / write(file_prefix) return the written prefix

    def same_prefix(path: Any) -> str | None:
        return None if path is None else os.fsdecode(os.fspath(path))

    for name in ("save", "write"):
        _neutralise_method(
            hooks, tf.train.Checkpoint, name, f"tf.train.Checkpoint.{name}", prefix, same_prefix
        )
    _neutralise_method(
        hooks, tf.train.CheckpointManager, "save", "tf.train.CheckpointManager.save",
        lambda a, k: getattr(a[0], "directory", None) if a else None,
    )  # fmt: skip
    original_writer = tf.summary.create_file_writer

    @functools.wraps(original_writer)
    def create_file_writer(logdir, *args, **kwargs):
        if hooks.session is not None:
            after_window.stop_before_write(hooks.session, "tf.summary.create_file_writer")
        hooks.record(
            "tf.summary.create_file_writer", _where(logdir), sites.user_frame_location(skip=1)
        )
        return tf.summary.create_noop_writer()

    _rebind(original_writer, create_file_writer, prefixes)


# -- writes that raise no audit event -------------------------------------------------------
# h5py/_hl/files.py (make_fid) of h5py 3: every mode but "r" may create or change the file.
_H5PY_WRITE_MODES = ("w", "w-", "x", "a", "r+")


def _silent_write(hooks: _Hooks, path: Any, what: str) -> None:
    """A TensorFlow or h5py write of ``path`` by the user's code: recorded as a plain write
    (:func:`_note_write`, which stops a run-on before it), or, for a remote path
    (``gs://...``), only the run-on's stop."""
    session = hooks.session
    if session is None or path is None or getattr(_guard, "busy", False):
        return
    text = _where(path)
    if text is not None and "://" in text:
        if _writer_location(sys._getframe(2)) is not None:
            after_window.stop_before_write(session, f"{what} {text}")
        return
    _note_write(session, path, what)


def _stopping(
    hooks: _Hooks,
    original: Callable[..., Any],
    what: str,
    picks: tuple[Callable[[tuple, dict], Any], ...],
    writes: Callable[[tuple, dict], bool] | None = None,
) -> Callable[..., Any]:
    """``original``, which first records the paths ``picks`` name as written (``writes``
    says whether this call writes) and so stops a run-on before the write."""

    @functools.wraps(original)
    def guarded(*args, **kwargs):
        if hooks.session is not None and (writes is None or writes(args, kwargs)):
            for pick in picks:
                try:
                    path = pick(args, kwargs)
                except Exception:
                    path = None
                _silent_write(hooks, path, what)
        return original(*args, **kwargs)

    guarded.__rnndoctor_original__ = original  # type: ignore[attr-defined]
    return guarded


def _mode_writes(index: int) -> Callable[[tuple, dict], bool]:
    def writes(args: tuple, kwargs: dict) -> bool:
        mode = _arg(index, "mode")(args, kwargs)
        return isinstance(mode, str) and mode != "r" and mode != "rb"

    return writes


def _install_silent_writes(hooks: _Hooks) -> None:
    """Records the writes of TensorFlow's C++ file system and of h5py, which raise no audit
    event, as plain writes (never blocked before the run-on; a run-on stops before them):
    ``tf.io.gfile.makedirs`` / ``mkdir`` / ``rmtree`` / ``remove`` / ``rename`` / ``copy``,
    ``tf.io.write_file``, ``tf.data.experimental.save`` (rebound in ``tensorflow._api``, the
    public ``tf.*`` modules), ``tf.data.Dataset.save``, ``tf.io.gfile.GFile`` opened for
    writing (``tensorflow/python/platform/gfile.py``), ``tf.io.TFRecordWriter`` and
    ``h5py.File`` in a mode other than ``"r"``."""
    try:
        import tensorflow as tf
    except ImportError:
        tf = None
    if tf is not None:
        gfile, src, dst = tf.io.gfile, _arg(0, "src"), _arg(1, "dst")
        functions = {
            gfile.makedirs: ("tf.io.gfile.makedirs", (_arg(0, "path"),)),
            gfile.mkdir: ("tf.io.gfile.mkdir", (_arg(0, "path"),)),
            gfile.rmtree: ("tf.io.gfile.rmtree", (_arg(0, "path"),)),
            gfile.remove: ("tf.io.gfile.remove", (_arg(0, "path"),)),
            gfile.rename: ("tf.io.gfile.rename", (src, dst)),
            gfile.copy: ("tf.io.gfile.copy", (dst,)),
            tf.io.write_file: ("tf.io.write_file", (_arg(0, "filename"),)),
            tf.data.experimental.save: ("tf.data.experimental.save", (_arg(1, "path"),)),
        }
        for original, (what, picks) in functions.items():
            _rebind(original, _stopping(hooks, original, what, picks), ("tensorflow._api",))
        for cls, name, what, picks, writes in (
            (tf.data.Dataset, "save", "tf.data.Dataset.save", (_arg(1, "path"),), None),
            (gfile.GFile, "__init__", "tf.io.gfile.GFile", (_arg(1, "name"),), _mode_writes(2)),
            (tf.io.TFRecordWriter, "__init__", "tf.io.TFRecordWriter", (_arg(1, "path"),), None),
        ):
            original = cls.__dict__.get(name) or getattr(cls, name)
            if not hasattr(original, "__rnndoctor_original__"):
                setattr(cls, name, _stopping(hooks, original, what, picks, writes))
    try:
        import h5py
    except ImportError:
        return

    def h5_writes(args: tuple, kwargs: dict) -> bool:
        return _arg(2, "mode")(args, kwargs) in _H5PY_WRITE_MODES

    init = h5py.File.__init__
    if not hasattr(init, "__rnndoctor_original__"):
        h5py.File.__init__ = _stopping(hooks, init, "h5py.File", (_arg(1, "name"),), h5_writes)


# -- records ---------------------------------------------------------------------------------
def _same_place(a: SourceLocation | None, b: SourceLocation | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.file, a.line) == (b.file, b.line)


def _record(
    session: CaptureSession, what: str, detail: str | None, location: SourceLocation | None
) -> None:
    """Adds a :class:`Neutralised` entry, or counts one more call of an existing one."""
    with _lock:
        for entry in session.facts.run.neutralised:
            if (
                entry.what == what
                and entry.detail == detail
                and _same_place(entry.location, location)
            ):
                entry.calls += 1
                return
        session.facts.run.neutralised.append(Neutralised(what, detail, location))
    try:
        session.save()
    except Exception:  # never fail the user's call over saving the facts
        pass


def _audit(session: CaptureSession, event: str, args: tuple) -> None:
    """Records the write an ``open`` or a file-system audit event makes, if any."""
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        if isinstance(mode, str):
            writing = any(c in mode for c in "wax+")
        else:
            writing = bool((flags or 0) & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC))
        if not writing:
            return
        _note_write(session, path, f"open({mode!r})" if isinstance(mode, str) else "os.open")
    else:
        _note_write(session, args[0] if args else None, event)
        if event in ("os.rename", "os.replace", "os.link", "os.symlink") and len(args) > 1:
            _note_write(session, args[1], event)


def _writer_location(frame: Any) -> SourceLocation | None:
    """The user's line behind a write: the nearest frame, from the one that wrote outwards, that
    is the user's code. None when rnndoctor's own code comes first (the probes run inside the
    user's ``fit``, so the user's frames are further out), or when no user frame is on the stack.
    """
    while frame is not None:
        filename = frame.f_code.co_filename
        if sites.is_user_file(filename):
            return sites.source_location(filename, frame.f_lineno)
        real = os.path.realpath(filename) if filename and not filename.startswith("<") else ""
        if real.startswith(_RNNDOCTOR_DIR):
            return None
        frame = frame.f_back
    return None


def _note_write(session: CaptureSession, path: Any, how: str) -> None:
    if path is None or isinstance(path, int):
        return
    state = session.neutralise_state
    full = os.path.realpath(os.path.abspath(os.fsdecode(os.fspath(path))))
    if (full + os.sep).startswith(state.skip_dirs):
        return
    caller = sys._getframe(3)  # the Python code that opened, made or removed the path
    if caller.f_code.co_filename == tempfile.__file__:
        return  # a temporary file or folder (tempfile.mkstemp, mkdtemp): not the user's files
    location = _writer_location(caller)
    if location is None:
        return
    after_window.stop_before_write(session, f"{how} {full}")
    if full in state.writes:
        return
    with _lock:
        if len(state.python_writes) < _MAX_WRITES_TRACKED:
            state.python_writes.add(full)
        if len(state.writes) >= _MAX_WRITES_LISTED:
            if state.writes_more >= _MAX_WRITES_TRACKED:
                return
            state.writes_more += 1
        state.writes[full] = (how, location)
        session.facts.run.written_files.append(full)
        _update_note(session)


def _update_note(session: CaptureSession) -> None:
    """Writes (or rewrites) the one note that lists the plain writes and the child commands."""
    state = session.neutralise_state
    listed = [
        f"{p} ({h} at {loc.file}:{loc.line})"
        for p, (h, loc) in list(state.writes.items())[:_MAX_WRITES_LISTED]
    ]
    more = f"; and {state.writes_more} more" if state.writes_more else ""
    parts = []
    if listed:
        parts.append(
            "the script wrote outside --out during the check (plain file writes are recorded, "
            f"not blocked; rnndoctor turns off only Keras/TensorFlow saving): {'; '.join(listed)}"
            f"{more}"
        )
    commands = [_command_text(c) for c in session.facts.run.child_commands]
    if commands:
        parts.append(
            "the script ran commands in child processes (recorded, not blocked): "
            + "; ".join(commands)
        )
    if not parts:
        return
    text = ". ".join(parts)
    notes = session.facts.run.notes
    if state.writes_note is not None and state.writes_note < len(notes):
        notes[state.writes_note] = text
    else:
        state.writes_note = len(notes)
        notes.append(text)


def _command_text(command: ChildCommand) -> str:
    where = f" at {command.location.file}:{command.location.line}" if command.location else ""
    calls = f" ({command.calls} calls)" if command.calls > 1 else ""
    wrote = ", ".join(command.wrote)
    if command.wrote_more:
        wrote += f" and {command.wrote_more} more"
    what = f", which wrote {wrote}" if wrote else ""
    return f"{command.how} {command.command!r}{where}{calls}{what}"


# -- child processes -------------------------------------------------------------------------
def _command_line(event: str, args: tuple) -> str:
    """The command line of an ``os.system`` (``(command,)``) or ``subprocess.Popen``
    (``(executable, args, cwd, env)``) audit event, as text."""
    if event == "os.system":
        value = args[0] if args else ""
        text = os.fsdecode(value) if isinstance(value, (bytes, os.PathLike)) else str(value)
    else:
        executable, argv = (tuple(args) + (None, None))[:2]
        if isinstance(argv, (str, bytes, os.PathLike)):
            text = os.fsdecode(argv)
        elif argv is not None:
            import shlex

            text = shlex.join(os.fsdecode(a) if not isinstance(a, str) else a for a in argv)
        else:
            text = os.fsdecode(executable) if executable is not None else ""
    return text[:_MAX_COMMAND_CHARS]


def _child_command(session: CaptureSession, event: str, args: tuple) -> None:
    """An ``os.system`` / ``subprocess.Popen`` from the user's code: recorded, its writes to be
    attributed when the next one starts (or at :func:`attribute_child_writes`)."""
    location = _writer_location(sys._getframe(2))  # the code that raised the event
    if location is None:
        return  # rnndoctor's own commands (nvidia-smi, say), or a library's with no user frame
    command = _command_line(event, args)
    after_window.stop_before_write(session, f"{event} {command!r}")
    attribute_child_writes(session, save=False)
    with _lock:
        entries = session.facts.run.child_commands
        entry = next(
            (
                c
                for c in entries
                if (c.how, c.command) == (event, command) and _same_place(c.location, location)
            ),
            None,
        )
        if entry is not None:
            entry.calls += 1
        else:
            entry = ChildCommand(event, command, location)
            entries.append(entry)
        state = session.neutralise_state
        state.snapshots += 1
        if state.snapshots <= _MAX_SNAPSHOTS:
            state.pending_command = entry
            state.snapshot, state.snapshot_truncated = _snapshot(state)
        else:
            entry.tree_truncated = True  # its writes are not looked for
        _update_note(session)
    try:
        session.save()
    except Exception:
        pass


def _snapshot(state: Any) -> tuple[dict[str, tuple[int, int]], bool]:
    """``(mtime_ns, size)`` of each file under the user's tree, at most ``_MAX_TREE_ENTRIES``,
    ``--out`` and the other skipped folders left out; and whether the bound cut it."""
    found: dict[str, tuple[int, int]] = {}
    for root in state.tree_roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = [
                d
                for d in dirs
                if d != "__pycache__"  # Python's own bytecode cache
                and not (os.path.join(folder, d) + os.sep).startswith(state.skip_dirs)
            ]
            for name in files:
                if len(found) >= _MAX_TREE_ENTRIES:
                    return found, True
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path, follow_symlinks=False)
                except OSError:
                    continue
                found[path] = (st.st_mtime_ns, st.st_size)
    return found, False


def attribute_child_writes(session: CaptureSession, save: bool = True) -> None:
    """Credits the files created or changed since the last child command started (less the
    script's own Python writes) to that command. Called when the next command starts, at the
    ``fit`` call and at the script's end; a no-op when no command is pending.

    Args:
        session: the check's session.
        save: save the facts afterwards.
    """
    state = session.neutralise_state
    command = state.pending_command
    if command is None or state.snapshot is None:
        return
    with _lock:
        now, truncated = _snapshot(state)
        changed = [
            p
            for p, stamp in now.items()
            if state.snapshot.get(p) != stamp and os.path.realpath(p) not in state.python_writes
        ]
        for path in sorted(changed):
            if path in command.wrote:
                continue
            if len(command.wrote) < _MAX_WRITES_LISTED:
                command.wrote.append(path)
            else:
                command.wrote_more += 1
        command.tree_truncated = command.tree_truncated or truncated or state.snapshot_truncated
        state.snapshot, state.snapshot_truncated = now, truncated
        state.pending_command = None
        _update_note(session)
    if save:
        try:
            session.save()
        except Exception:
            pass
