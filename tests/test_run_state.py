"""Nothing survives a run (issue 26): kernel state, the tree, hostile trees.

Each test runs tests/data/run-state/state.c, one small program that tries one way of keeping state
for the next run, through ``pw.workload.steps.run_once`` in the real sandbox (the way pw runs every
oracle, timed and profiled run): run k leaves its mark, run k+1 must not see it, and what run k did
to its tree must be named (so a candidate doing it is caught beyond what the baseline leaves).
Kernel channels also run the same program outside any sandbox, where the state does carry: the
test can fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from ledger.contract import Contract, Source, Step
from ledger.errors import WorkloadError
from ledger.evidence import EvidenceStore
from pw.workload import changes, containment
from pw.workload.steps import Target, build, caught, run_once

STATE_C = Path(__file__).parent / "data" / "run-state" / "state.c"


@pytest.fixture(scope="module")
def state_exe(tmp_path_factory) -> Path:
    if not shutil.which("cc"):
        pytest.skip("no C compiler")
    exe = tmp_path_factory.mktemp("state") / "state"
    subprocess.run(["cc", "-O1", "-o", str(exe), str(STATE_C)], check=True, timeout=60)
    return exe


def _bwrap_or_skip() -> None:
    found = containment.probe()
    if found.sandbox is None or found.sandbox.tool != "bwrap":
        pytest.skip(f"no bwrap sandbox here: {found.reasons}")


@pytest.fixture(scope="module", params=["throwaway", "snapshot"])
def tree_mode(request):
    """Runs see their tree through a throwaway overlay, or (where none can be made) are checked by
    snapshots before and after. Module scope: the sandbox is probed once per mode."""
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "snapshot":
            mp.setenv("PW_NO_THROWAWAY", "1")
        containment.probe.cache_clear()
        containment._upper_works_on.cache_clear()
        if request.param == "throwaway" and not containment.throwaway_works():
            pytest.skip(f"no throwaway trees here: {containment.probe()}")
        yield request.param
    containment.probe.cache_clear()
    containment._upper_works_on.cache_clear()


class Tree:
    """A built tree inside a runs directory its sandbox hides, holding the program and input.dat."""

    def __init__(self, root: Path, exe: Path) -> None:
        self.runs = root / "runs"
        self.build = self.runs / "r" / "build" / "c"
        self.build.mkdir(parents=True)
        shutil.copy2(exe, self.build / "state")
        (self.build / "input.dat").write_text("data\n")
        os.chmod(self.build / "input.dat", 0o644)
        self.contract = Contract(version=1, name="state", source=Source(editable=["*.c"]),
                                 run=Step(argv=["./state"], timeout_s=30))
        self.target = Target(label="c", src_dir=self.build, build_dir=self.build, files=[],
                             hidden=[str(self.runs)])
        self.n = 0

    def run(self, *args: str):
        self.n += 1
        return run_once(self.contract, self.target, self.runs / "r" / "scratch" / "c", argv=["./state", *args],
                        tag=f"run-{self.n}")

    def as_built(self) -> dict:
        """What a later run would see of the tree: every entry's kind, mode and attributes, and
        input.dat's bytes."""
        state = changes.tree_state(self.build)
        return {"entries": {rel: (e.kind, e.mode, e.target) for rel, e in state.entries.items()},
                "problems": state.problems, "input": (self.build / "input.dat").read_bytes(),
                "xattrs": os.listxattr(self.build / "input.dat")}


@pytest.fixture
def tree(tmp_path, state_exe) -> Tree:
    return Tree(tmp_path, state_exe)


# --- kernel state ------------------------------------------------------------------------------------

def _outside(exe: Path, *args: str) -> str:
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=30, check=True).stdout


@pytest.mark.parametrize("channel", ["keys", "mq", "shm"])
def test_kernel_state_written_by_one_run_is_invisible_to_the_next(tree, state_exe, channel):
    """keys: the user, user-session, session and persistent keyrings and every keyring /proc/keys
    lists (keys are not namespaced: a serial names a key from anywhere); mq: a POSIX message queue;
    shm: System V shared memory."""
    _bwrap_or_skip()
    first = tree.run(channel, "write", "42")
    assert first.process.ok, first.stderr
    second = tree.run(channel, "read")
    assert second.process.ok and second.stdout == "none\n", (first.stdout, second.stdout)
    if channel == "keys":
        assert first.stdout.startswith("wrote 0 (Operation not permitted)"), first.stdout  # the seccomp filter
    # The same program outside any sandbox keeps the value from one run to the next.
    local = "keys-user" if channel == "keys" else channel  # the user keyring only, cleared after
    try:
        _outside(state_exe, local, "write", "42")
        assert _outside(state_exe, local, "read") == "42\n"
    finally:
        _outside(state_exe, local, "clear")


def test_an_abstract_socket_outside_the_run_cannot_be_reached(tree, state_exe):
    """A helper that outlives the runs (the agent's own process, holding what each run tells it)
    listens on an abstract unix socket: the run's network namespace has none of them."""
    _bwrap_or_skip()
    name = f"pw-run-state-{os.getpid()}-{time.monotonic_ns()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind("\0" + name)
        server.listen(4)
        assert _outside(state_exe, "sock", name) == "connected\n"
        out = tree.run("sock", name)
        assert out.process.ok and out.stdout == "refused\n"


# --- the tree ----------------------------------------------------------------------------------------

# channel -> (what the run's change is named, by mode); a prefix for the long path (it names a
# directory 6000 bytes deep).
NAMED = {
    "dir": {"throwaway": "created directory .seen", "snapshot": "created directory .seen"},
    "link": {"throwaway": "created link .root to /", "snapshot": "created link .root to /"},
    "fifo": {"throwaway": "created fifo .pipe", "snapshot": "created fifo .pipe"},
    "xattr": {"throwaway": "changed the extended attributes of input.dat (user.runs)",
              "snapshot": "modified input.dat"},  # its change time moved: no program can set it back
    "rewrite": {"throwaway": "modified input.dat", "snapshot": "modified input.dat"},
    "mode": {"throwaway": "changed the mode of input.dat (644 to 755)",
             "snapshot": "changed the mode of input.dat (644 to 755)"},
    "longpath": {"throwaway": "made a path longer than PATH_MAX (4096 bytes) under .deep/",
                 "snapshot": "made a path longer than PATH_MAX (4096 bytes) under .deep/"},
}
# What a snapshot cannot undo (no overlay): the next run sees it, and the candidate is caught for it.
CARRIED_BY_SNAPSHOT = {"xattr", "rewrite", "mode"}


@pytest.mark.parametrize("channel", sorted(NAMED))
def test_state_in_the_tree_is_named_and_never_reaches_the_next_run(tree, tree_mode, channel):
    """Empty directories, links (to /), fifos, an extended attribute counter, a same-size rewrite
    with its mtime put back, a mode bit, a directory chain deeper than PATH_MAX: each is named in
    the run's side effects, so caught beyond a baseline that leaves nothing; with a throwaway tree
    the next run starts from the tree as built, and no walk crashes."""
    if channel == "xattr":
        try:
            os.setxattr(tree.build / "input.dat", "user.pw-probe", b"1")
            os.removexattr(tree.build / "input.dat", "user.pw-probe")
        except OSError:
            pytest.skip("this filesystem keeps no user extended attributes")
    built = tree.as_built()
    started = time.monotonic()
    first = tree.run(channel)
    assert first.process.ok and first.stdout == "fresh\n", (first.stdout, first.stderr)
    named = NAMED[channel][tree_mode]
    assert any(s.startswith(named) for s in first.side_effects), first.side_effects
    assert any(c.startswith(named) for c in caught(first, allowed=[])), first.side_effects
    second = tree.run(channel)
    assert second.process.ok, second.stderr
    if tree_mode == "throwaway" or channel not in CARRIED_BY_SNAPSHOT:
        assert second.stdout == "fresh\n", second.stdout
        assert tree.as_built() == built
    else:
        assert second.stdout.startswith("state: "), second.stdout  # no overlay: carried, but caught above
    assert time.monotonic() - started < 20


def test_both_arms_share_a_scratch_and_each_run_starts_from_its_own_tree(tmp_path, state_exe, tree_mode):
    """A campaign runs the baseline and the candidate one after the other in one scratch
    directory: the changes directory an empty run leaves is the next run's (any arm's), one that
    holds changes is discarded first, and every run sees only its own tree as built."""
    a, b = Tree(tmp_path / "a", state_exe), Tree(tmp_path / "b", state_exe)
    (b.build / "input.dat").write_text("DATA\n")  # another tree: "rewrite" sees it as a mark
    scratch = tmp_path / "scratch" / "c"

    def run(t: Tree, *args):
        return run_once(t.contract, t.target, scratch, argv=["./state", *args])

    seen = [run(a, "mode"), run(b, "rewrite"), run(a, "dir"), run(b, "dir"), run(a, "dir"), run(b, "mode")]
    assert [o.stdout for o in seen] == ["fresh\n", "state: input.dat holds DATA\n", *["fresh\n"] * 4], seen
    assert seen[1].side_effects == [] and seen[3].side_effects == ["created directory .seen"]


def test_an_output_the_run_writes_is_read_then_thrown_away(tree, tree_mode):
    """What every oracle reads still arrives: a created file's text, the declared output's bytes;
    neither stays in the tree, and the declared output is not a side effect."""
    from ledger.contract import Oracle

    contract = Contract(version=1, name="state", source=Source(editable=["*.c"]),
                        run=Step(argv=["sh", "-c", "echo 7 > out.txt; mkdir -p res; echo r > res/x; echo ok"],
                                 timeout_s=30),
                        oracle=Oracle(kind="file", path="out.txt", reference="ref.txt"))
    out = run_once(contract, tree.target, tree.runs / "r" / "scratch" / "c")
    assert out.process.ok and out.stdout == "ok\n"
    assert out.output_file == b"7\n"
    assert out.side_effects == ["created res/x"]  # res/ holds a named file: not named itself
    assert out.created == {"res/x": "r\n"}
    assert sorted(os.listdir(tree.build)) == ["input.dat", "state"]


def test_a_throwaway_tree_works_under_perf_wrapping_sandbox_and_launcher(tree, tree_mode, tmp_path):
    """Every timed run will run under `perf record` around the sandbox and the launcher (the
    launched capture): the launcher still mounts the overlay, the program still writes its tree in
    vain, and perf's samples are the program's, with its source lines."""
    from adapters.base import CaptureRequest, read_artifacts
    from adapters.perf import PerfAdapter
    from pw.workload.steps import RunTree, confine_for

    perf = PerfAdapter()
    if not perf.probe().usable:
        pytest.skip("perf cannot sample here")
    _bwrap_or_skip()
    if tree_mode != "throwaway":
        pytest.skip("a snapshot needs nothing mounted")
    spin = tree.build / "spin.c"
    spin.write_text("#include <stdio.h>\nint main(void){volatile double s=0;for(long i=0;i<20000000;i++)"
                    "s+=(double)(i%7);FILE*f=fopen(\"made\",\"w\");fputs(\"x\",f);fclose(f);"
                    "printf(\"%.0f\\n\",s);return 0;}\n")
    subprocess.run(["cc", "-g", "-O1", "-o", str(tree.build / "spin"), str(spin)], check=True, timeout=60)
    scratch = tree.runs / "r" / "scratch" / "c"
    scratch.mkdir(parents=True)
    run_tree = RunTree.before(tree.target, scratch, "perf")
    assert run_tree.changes is not None
    conf = confine_for(tree.target, tree.build, changes=run_tree.changes)
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
    try:
        cap = perf.capture(CaptureRequest(argv=["./spin"], cwd=str(tree.build), out_dir=str(tmp_path / "p"),
                                          launch=True, launch_env=env, confine=conf, timeout_s=120))
        words, created, _ = run_tree.after(None)
    finally:
        run_tree.discard()
    assert cap.program is not None and cap.program.returncode == 0
    assert words == ["created made"] and created == {"made": "x"}
    assert not (tree.build / "made").exists()
    profile = perf.normalize(read_artifacts(cap), str(tree.build), "baseline")
    assert "main@spin.c" in {o.id for o in profile.operations}


# --- hostile trees -----------------------------------------------------------------------------------

_DEEP = "d=$(printf 'd%.0s' $(seq 200)); mkdir x && cd x && for i in $(seq 30); do mkdir $d && cd $d; done; echo k > f"


@pytest.mark.parametrize(("script", "says"), [
    (_DEEP, "holds a path longer than PATH_MAX (4096 bytes): x/ddd"),
    ("mkfifo p", "holds a fifo: p"),
    ("python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"s\")'", "holds a socket: s"),
    ("ln -s / root", "holds a link out of the tree: root to /"),
    ("mkdir -p a && ln -s ../../elsewhere a/up", "holds a link out of the tree: a/up to ../../elsewhere"),
])
def test_a_hostile_built_tree_fails_its_build_with_the_reason(tmp_path, script, says):
    """A build whose steps pass but leave a tree pw cannot hash or time is a failed build, said
    why, and nothing raises (``_all_files`` once crashed on ENAMETOOLONG)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.c").write_text("int x;\n")
    contract = Contract(version=1, name="hostile", source=Source(editable=["*.c"]), run=Step(argv=["true"]),
                        build=[Step(argv=["sh", "-c", script], timeout_s=30)])
    target = Target(label="c", src_dir=src, build_dir=tmp_path / "runs" / "r" / "build" / "c", files=["a.c"],
                    hidden=[str(tmp_path / "runs")])
    built = build(contract, target, EvidenceStore(tmp_path / "raw"), tmp_path / "logs")
    assert all(s.exit_code == 0 for s in built.steps)
    assert built.outcome == "build-failed" and built.binary_sha256 is None
    assert built.problem is not None and says in built.problem, built.problem
    assert "\n" not in built.problem and len(built.problem) < 400


def test_a_link_inside_the_tree_is_kept(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libx.so.1").write_text("elf")
    os.symlink("libx.so.1", tmp_path / "lib" / "libx.so")
    os.symlink(str(tmp_path / "lib"), tmp_path / "abs")  # absolute, but into the tree
    assert changes.built_files(tmp_path) == ["lib/libx.so.1"]


def test_too_many_entries_is_refused_after_the_limit_not_after_the_tree(tmp_path):
    """A million empty files: the walk stops one entry past the limit, so its time is bounded by
    the limit, whatever the tree holds (here with a small limit; MAX_ENTRIES in production)."""
    for i in range(400):
        (tmp_path / f"e{i}").touch()
    with pytest.raises(WorkloadError, match="more than 300 entries"):
        changes.built_files(tmp_path, limit=300)
    assert changes.built_files(tmp_path, limit=500)[:2] == ["e0", "e1"]
    words = changes.state_changes(changes.tree_state(tmp_path / "none"), changes.tree_state(tmp_path, limit=300))
    assert words.words[0] == "changed more than 300 entries (the listing stopped there)"


def test_a_file_pw_cannot_read_is_refused_not_a_crash(tmp_path):
    """Root reads every file, so as root the walk runs as nobody."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="pw-unreadable-", dir="/var/tmp" if os.access("/var/tmp", os.W_OK) else None))
    try:
        os.chmod(root, 0o755)
        (root / "ok.c").write_text("int x;\n")
        (root / "secret").write_text("s\n")
        os.chmod(root / "secret", 0)
        if os.geteuid() != 0:
            with pytest.raises(WorkloadError, match="secret, which pw cannot read"):
                changes.built_files(root)
            return
        from tests.conftest import python_as

        argv = python_as("nobody", home="/")
        if argv is None:
            pytest.skip("cannot run this checkout's Python as nobody here")
        code = ("import sys; from pathlib import Path; from pw.workload import changes\n"
                "from ledger.errors import WorkloadError\n"
                "try:\n changes.built_files(Path(sys.argv[1])); print('accepted')\n"
                "except WorkloadError as e: print(e)\n")
        r = subprocess.run([*argv, "-c", code, str(root)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "its built tree holds secret, which pw cannot read", r.stdout
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --- through pw evaluate -----------------------------------------------------------------------------

LONG_PATH_TINY_C = r"""
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
int main(void)
{
    /* A cache at the bottom of a directory chain longer than PATH_MAX (red team, issue 26). */
    char name[201];
    memset(name, 'd', 200);
    name[200] = 0;
    if (mkdir(".deep", 0755) == 0 && chdir(".deep") == 0)
        for (int i = 0; i < 30 && mkdir(name, 0755) == 0 && chdir(name) == 0; i++)
            ;
    unsigned long s = 0;
    for (unsigned long i = 0; i < 300000; i++)
        s += i % 7;
    printf("sum %lu\n", s);
    return 0;
}
"""


@pytest.mark.slow
def test_a_candidate_writing_beyond_path_max_is_rejected_with_the_reason_not_a_traceback(tiny_budget_run, tmp_path):
    """Red team: `pw evaluate` exited 1 with `OSError: [Errno 36] File name too long` in
    steps._all_files and left the candidate prepared, with no verdict."""
    from tests.conftest import copy_run, pw_main

    run = copy_run(tiny_budget_run, tmp_path)
    assert pw_main("prepare", run, "--candidate", "deep:baseline:cache").code == 0
    (run / "candidates" / "deep" / "src" / "tiny.c").write_text(LONG_PATH_TINY_C)
    r = pw_main("evaluate", run, "deep", "--json")
    assert r.code in (0, 1) and "Traceback" not in r.err, r
    out = r.json()
    assert out["status"] == "rejected", out
    assert "made a path longer than PATH_MAX (4096 bytes) under .deep/" in " ".join(out["reasons"]), out["reasons"]
    assert not (run / "build" / "deep" / ".deep").exists()
