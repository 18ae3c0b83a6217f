"""adapters/sandbox.py: the argv builders (pure) and real sandboxes made by bwrap and unshare.

The real tests run a shell inside the sandbox through ``adapters.process.run_process`` (the way pw
runs every build, oracle, timed and profiled run) and check, from inside, what it can see and do.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from unittest import mock

import pytest

from adapters import sandbox as sb
from adapters.process import Confinement, run_process


def layout(tree: str = "/r/runs/x/build/c", hidden=("/r/runs", "/w/matmul-c")) -> sb.Layout:
    return sb.Layout(writable=[tree], hidden=list(hidden), cwd=tree)


def pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_bwrap_argv_masks_before_it_binds_the_tree_back():
    argv = sb.bwrap_argv("/usr/bin/bwrap", layout(), ["./matmul", "720", "1"])
    for flag in ("--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--die-with-parent",
                 "--new-session"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL" and "--cap-add" not in argv
    assert argv[argv.index("--ro-bind"):argv.index("--ro-bind") + 3] == ["--ro-bind", "/", "/"]
    # /dev first (its nodes bound one by one, not --dev), then the masks, parents first.
    assert "--dev" not in argv and "/dev/null" in pairs(argv, "--dev-bind")
    assert pairs(argv, "--tmpfs") == ["/dev", "/tmp", "/dev/shm", "/r/runs", "/var/tmp", "/w/matmul-c"]
    bind = argv.index("--bind")
    assert argv[bind:bind + 3] == ["--bind", "/r/runs/x/build/c", "/r/runs/x/build/c"]
    assert all(i < bind for i, a in enumerate(argv) if a == "--tmpfs")  # the mask goes on first
    assert argv[argv.index("--chdir") + 1] == "/r/runs/x/build/c"
    assert argv[-4:] == ["--", "./matmul", "720", "1"]


def test_masks_inside_a_tmpfs_are_not_mounted_twice():
    argv = sb.bwrap_argv("bwrap", layout("/tmp/p/runs/x/build/c", ["/tmp/p/runs", "/tmp/p/w"]), ["true"])
    assert pairs(argv, "--tmpfs") == ["/dev", "/tmp", "/dev/shm", "/var/tmp"]


@pytest.mark.parametrize("bad", [
    sb.Layout(writable=["rel/tree"], hidden=[], cwd="/x"),
    sb.Layout(writable=["/t"], hidden=["/"], cwd="/t"),
    sb.Layout(writable=["/a/t"], hidden=["/b"], cwd="/b/elsewhere"),
])
def test_bad_layouts_are_refused(bad):
    with pytest.raises(ValueError):
        sb.bwrap_argv("bwrap", bad, ["true"])


def test_unshare_argv_binds_from_the_fd_opened_before_the_masks():
    argv = sb.unshare_argv("/usr/bin/unshare", layout(), ["./matmul"])
    assert argv[:10] == ["/usr/bin/unshare", "--pid", "--fork", "--kill-child", "--mount", "--net", "--ipc",
                         "--uts", "--mount-proc", "--"]
    script = argv[argv.index("-c") + 1]
    assert script.index("exec 3</r/runs/x/build/c") < script.index("tmpfs /r/runs")
    assert script.index("tmpfs /r/runs") < script.index("--bind /proc/self/fd/3 /r/runs/x/build/c")
    assert "setpriv --bounding-set -all" in script
    assert argv[-1] == "./matmul"


# --- real sandboxes ----------------------------------------------------------------------------------

def _tools() -> list[str]:
    return [t for t in ("bwrap", "unshare") if shutil.which(t)]


@pytest.fixture(params=_tools() or ["none"])
def sandbox(request) -> sb.Sandbox:
    tool = request.param
    if tool == "none":
        pytest.skip("neither bwrap nor unshare is installed")
    real = shutil.which
    with mock.patch.object(sb.shutil, "which", lambda t: real(t) if t == tool else None):
        found = sb.probe()
    if found.sandbox is None:
        pytest.skip(f"no working {tool} sandbox here: {found.reasons}")
    return found.sandbox


@pytest.fixture
def area():
    """A tree and a secret sibling outside /tmp (the sandbox's /tmp is empty)."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="pw-sbtest-", dir="/var/lib" if os.access("/var/lib", os.W_OK) else None))
    (root / "runs" / "x" / "build" / "c").mkdir(parents=True)
    (root / "runs" / "x" / "baseline" / "reference").mkdir(parents=True)
    (root / "runs" / "x" / "baseline" / "reference" / "stdout.txt").write_text("the answer\n")
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def sh(sandbox: sb.Sandbox, area: Path, script: str, tmp_path: Path):
    tree = area / "runs" / "x" / "build" / "c"
    conf = Confinement(sandbox=sandbox, layout=sb.Layout(writable=[str(tree)], hidden=[str(area / "runs")],
                                                         cwd=str(tree)))
    r = run_process(["/bin/sh", "-c", script], cwd=tree, env={"PATH": "/usr/bin:/bin"}, timeout_s=30,
                    stdout_path=tmp_path / "out", stderr_path=tmp_path / "err", own_peak_rss=True, confine=conf)
    return r, (tmp_path / "out").read_text(), (tmp_path / "err").read_text()


def test_probe_launches_true_or_says_why_not():
    found = sb.probe()
    if found.sandbox is None:
        assert found.reasons and all(":" in r for r in found.reasons)
    else:
        assert found.sandbox.tool in ("bwrap", "unshare") and os.path.isabs(found.sandbox.exe)


def test_the_run_directory_and_references_are_not_visible(sandbox, area, tmp_path):
    r, out, _ = sh(sandbox, area, "cat ../../baseline/reference/stdout.txt; ls -A ../..; echo end", tmp_path)
    assert r.sandboxed and "the answer" not in out
    assert out.split() == ["build", "end"]  # only the path down to its own tree exists


def test_only_the_tree_is_writable_and_scratch_is_fresh_each_run(sandbox, area, tmp_path):
    script = ("cat /dev/shm/cache 2>/dev/null && echo CACHED; echo v > /dev/shm/cache; echo v > /tmp/c2; "
              "echo x > mine; ( : > /usr/pw-sandbox-test ) 2>/dev/null || echo RO")
    for _ in range(2):
        r, out, _ = sh(sandbox, area, script, tmp_path)
        assert r.ok and "CACHED" not in out and "RO" in out
        assert r.scratch_files == ["/dev/shm/cache", "/tmp/c2"]
    assert (area / "runs" / "x" / "build" / "c" / "mine").read_text() == "x\n"
    assert not Path("/dev/shm/cache").exists() or Path("/dev/shm/cache").read_text() != "v\n"


def test_no_process_outlives_the_run_and_none_outside_is_visible(sandbox, area, tmp_path):
    token = f"pw-sandbox-test-{os.getpid()}-{area.name}"
    r, out, _ = sh(sandbox, area, f"(setsid sh -c 'sleep 60; true {token}' &) ; ls /proc | grep -c '^[0-9]'", tmp_path)
    assert r.ok and int(out.strip()) < 10  # the host has far more processes than this
    assert r.leftover_processes, r  # 'PID setsid', 'PID sh' or 'PID sleep', as far as it got
    assert r.wall_s < 30
    # Nothing of it is left on the host: the shell that would still be waiting for its sleep is gone.
    import subprocess

    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert token not in ps


def test_output_is_a_pipe_with_no_telling_name_and_no_tracer(sandbox, area, tmp_path):
    r, out, _ = sh(sandbox, area, "readlink /proc/self/fd/1 /proc/self/fd/2; grep TracerPid /proc/self/status; "
                                  "echo HOME=$HOME TMPDIR=$TMPDIR", tmp_path)
    lines = out.splitlines()
    assert lines[0].startswith("pipe:[") and lines[1].startswith("pipe:[")
    assert lines[2].split() == ["TracerPid:", "0"]
    assert lines[3] == f"HOME={sb.SANDBOX_HOME} TMPDIR=/tmp"


def test_no_network(sandbox, area, tmp_path):
    r, out, _ = sh(sandbox, area, "cat /proc/net/dev", tmp_path)
    names = [n.split(":")[0].strip() for n in out.split() if n.strip()]
    assert "lo" in names or "lo:" in out
    assert not any(n.startswith(("eth", "en", "wl")) for n in names)


def test_a_tree_inside_tmp_is_not_reported_as_scratch(sandbox, tmp_path):
    """Test runs live under /tmp: the tree is bound back inside the fresh /tmp and is not a cache."""
    tree = tmp_path / "runs" / "x" / "build" / "c"
    tree.mkdir(parents=True)
    (tree / "kept.c").write_text("int x;\n")
    conf = Confinement(sandbox=sandbox, layout=sb.Layout(writable=[str(tree)], hidden=[str(tmp_path / "runs")],
                                                         cwd=str(tree)))
    r = run_process(["/bin/sh", "-c", "cat kept.c && echo new > made && echo c > /tmp/cache"], cwd=tree,
                    env={"PATH": "/usr/bin:/bin"}, timeout_s=30, stdout_path=tmp_path / "out",
                    stderr_path=tmp_path / "err", own_peak_rss=True, confine=conf)
    assert r.ok and (tmp_path / "out").read_text() == "int x;\n"
    assert r.scratch_files == ["/tmp/cache"]
    assert (tree / "made").read_text() == "new\n"


def test_read_only_search_path_dirs_are_bound_back_after_the_masks():
    lay = sb.Layout(writable=["/tmp/r/build/c"], hidden=[], cwd="/tmp/r/build/c", readonly=["/tmp/tools"])
    argv = sb.bwrap_argv("bwrap", lay, ["true"])
    ro = [i for i, a in enumerate(argv) if a == "--ro-bind"]
    assert argv[ro[-1]:ro[-1] + 3] == ["--ro-bind", "/tmp/tools", "/tmp/tools"]
    assert ro[-1] > max(i for i, a in enumerate(argv) if a == "--tmpfs")
    script = sb.unshare_argv("unshare", lay, ["true"])[-3]
    assert "mount -o remount,bind,ro /tmp/tools" in script and "mount -o remount,bind,rw /tmp/r/build/c" in script


# --- a profiled run looks like a timed run from inside (issue 12, red team misattr*.patch) ---------

# What a program could look at to tell a profiled run from a timed one: its parent, every process
# it can see and their names, its environment, its open descriptors, a tracer. (C built with -g:
# perf 6.1's `perf script` dies on the garbage `//anon` frames DWARF unwinding makes of a stripped
# /bin/sh now and then.)
_LOOK_AROUND = r"""
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
extern char **environ;
static void cat(const char *path, const char *only)
{
    char line[4096];
    FILE *f = fopen(path, "r");
    if (!f) { puts("-"); return; }
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = 0;
    for (size_t i = 0; i < n; i++) if (line[i] == 0) line[i] = ' ';
    if (!only) { puts(line); return; }
    for (char *l = strtok(line, "\n"); l; l = strtok(NULL, "\n")) if (strncmp(l, only, strlen(only)) == 0) puts(l);
}
int main(void)
{
    char p[300];
    printf("parent %d\n", (int)getppid());
    snprintf(p, sizeof p, "/proc/%d/comm", (int)getppid()); cat(p, NULL);
    snprintf(p, sizeof p, "/proc/%d/cmdline", (int)getppid()); cat(p, NULL);
    DIR *d = opendir("/proc");
    for (struct dirent *e; (e = readdir(d));)
        if (isdigit((unsigned char)e->d_name[0])) { snprintf(p, sizeof p, "/proc/%s/comm", e->d_name); printf("proc %s ", e->d_name); cat(p, NULL); }
    closedir(d);
    for (char **v = environ; *v; v++) puts(*v);
    int fds = 0;
    d = opendir("/proc/self/fd");
    for (struct dirent *e; (e = readdir(d));) fds++;
    closedir(d);
    printf("fds %d\n", fds);
    cat("/proc/self/status", "TracerPid");
    cat("/proc/self/status", "NSpid");
    volatile double s = 0;
    for (long i = 0; i < 60000000; i++) s += (double)(i % 7);
    puts("done");
    return 0;
}
"""


def test_a_profiled_run_looks_like_a_timed_run_from_inside_and_its_profile_is_the_programs(sandbox, area, tmp_path):
    """perf wraps the sandbox and the launcher from outside: the program's parent is the launcher,
    as in a timed run, and perf has no /proc entry in the run's PID namespace. The samples of the
    sandbox and of the launcher are not in the profile."""
    from adapters.base import CaptureRequest, read_artifacts
    from adapters.perf import PerfAdapter

    perf = PerfAdapter()
    if not perf.probe().usable or not shutil.which("cc"):
        pytest.skip("perf cannot sample here, or no C compiler")
    import subprocess

    tree = area / "runs" / "x" / "build" / "c"
    (tree / "look.c").write_text(_LOOK_AROUND)
    subprocess.run(["cc", "-g", "-O1", "-o", str(tree / "look"), str(tree / "look.c")], check=True)
    conf = Confinement(sandbox=sandbox, layout=sb.Layout(writable=[str(tree)], hidden=[str(area / "runs")],
                                                         cwd=str(tree)))
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
    timed = run_process(["./look"], cwd=tree, env=env, timeout_s=60, stdout_path=tmp_path / "out",
                        stderr_path=tmp_path / "err", own_peak_rss=True, confine=conf)
    assert timed.ok and timed.reported, (tmp_path / "err").read_text()
    cap = perf.capture(CaptureRequest(argv=["./look"], cwd=str(tree), out_dir=str(tmp_path / "p"),
                                      launch=True, launch_env=env, confine=conf, timeout_s=120))
    arts = read_artifacts(cap)
    seen_timed, seen_profiled = (tmp_path / "out").read_text(), arts["stdout.txt"].decode()
    assert "parent" in seen_timed and "perf" not in seen_profiled, seen_profiled
    assert seen_profiled == seen_timed
    assert cap.program is not None and cap.program.wall_s > 0 and cap.program.returncode == 0
    profile = perf.normalize(arts, str(tree), "baseline")
    modules = {o.module for o in profile.operations}
    assert not any(m.startswith(("python", "libpython", "bwrap", "unshare", "setpriv")) for m in modules), modules
    assert "main@look.c" in {o.id for o in profile.operations}, modules  # the program's own samples, with lines
    assert profile.operation("main@look.c").line_start is not None
