"""The launcher must start inside the sandbox wherever pw itself lives, a checkout under /tmp too
(a CI clone): the sandbox's fresh /tmp would otherwise hide the interpreter and launch.py."""

from __future__ import annotations

from adapters import sandbox as sb


def test_paths_under_a_masked_scratch_dir_are_shown_read_only():
    layout = sb.Layout(writable=["/tmp/clone/runs/r/build/baseline"], hidden=["/tmp/clone/runs"],
                       cwd="/tmp/clone/runs/r/build/baseline")
    shown = sb.show_readonly(layout, ["/tmp/clone/.venv", "/tmp/clone/adapters", "/usr", "/tmp/clone/runs/r/raw"])
    # /usr is visible anyway; the runs directory stays hidden even when asked for.
    assert shown.readonly == ["/tmp/clone/.venv", "/tmp/clone/adapters"]
    assert sb.show_readonly(shown, ["/tmp/clone/.venv"]) == shown  # never twice
    argv = sb.bwrap_argv("bwrap", shown, ["true"])
    assert argv.index("/tmp/clone/.venv") > argv.index("/tmp")  # bound after the /tmp mask
