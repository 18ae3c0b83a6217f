"""HPCToolkit adapter (partial): a pre-captured database read through LLNL's Hatchet.

HPCToolkit (hpcrun, hpcstruct, hpcprof) does not run here. A user profiles on their machine
(`hpcrun -e CPUTIME -e gpu=nvidia,pc`, `hpcstruct`, `hpcprof`) and hands pw the database directory:
`pw import RUN hpctoolkit=hpctoolkit-<prog>-database`. ``read`` runs Hatchet's HPCToolkit reader
(``GraphFrame.from_hpctoolkit``: experiment.xml plus one metric-db per thread, the format hpcprof
wrote up to 2022) and reduces its graph to a small call-tree document, kept as the artifact
``hatchet-tree.json`` beside the database files; ``normalize`` reads only that document (pure).

The sparse format of HPCToolkit 2023 and later (meta.db, profile.db, cct.db) is refused with a
clear line: Hatchet reads it (``from_hpctoolkit_latest``), but no database of that format has been
checked here, so pw does not claim to read it correctly.

What the numbers mean (HPCToolkit metric -> pw metric):
- ``CPUTIME (usec|sec)`` -> ``cpu_time_s`` (sampled CPU time, scaled to seconds);
- ``GKER (sec)`` -> ``gpu_time_ns`` (GPU kernel time attributed to the calling context of the
  launch), ``GKER:COUNT`` -> ``kernel_launches``;
- ``GINS`` -> ``gpu_pc_samples`` (PC samples inside GPU code, per source line).
Self cost of a function is the sum over the statements of its own frames (hpcprof's exclusive cost of
a procedure frame already includes them: Hatchet subtracts them again, so pw sums the statements
itself), or the frame's exclusive value when it has no statements. Inclusive cost is summed over
the function's frames that are not inside another frame of the same function (recursion counted
once). Any other metric is listed in the document's ``ignored`` and not used.
"""

from __future__ import annotations

import importlib.util
import posixpath
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from adapters.partial import PartialAdapter, partial_spec, read_bytes, relative_by_suffix, text_of
from ledger.errors import InputError
from ledger.profile import CallEdge, LineCost, Operation, Profile

TREE_ROLE = "hatchet-tree.json"
TREE_FORMAT = 1

# HPCToolkit metric base name -> (pw metric id, factor to pw's unit)
METRICS: dict[str, tuple[str, float]] = {
    "CPUTIME (usec)": ("cpu_time_s", 1e-6),
    "CPUTIME (sec)": ("cpu_time_s", 1.0),
    "GKER (sec)": ("gpu_time_ns", 1e9),
    "GKER:COUNT": ("kernel_launches", 1.0),
    "GINS": ("gpu_pc_samples", 1.0),
}
_SCOPED = re.compile(r"^(?P<base>.+?)(?::Sum)? \((?P<scope>[IE])\)$")
_CALL_LINE = re.compile(r"^\d+:(?=.)")  # Hatchet prefixes a callee's name with its call-site line

SPEC = partial_spec(
    "hpctoolkit", "hpcrun", measures=["cpu_time_s", "gpu_time_ns", "kernel_launches", "gpu_pc_samples"],
    granularity=["process", "function", "line", "kernel"], targets=["native", "cuda"], setup_s=2.0, time_metric=True,
    cost_note="import only: reading a database costs ~2 s (Hatchet and pandas load); the capture happened elsewhere")


class TreeNode(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: int
    parent: int | None
    kind: str  # function | loop | statement
    name: str
    file: str
    line: int
    module: str
    exclusive: dict[str, float] = {}
    inclusive: dict[str, float] = {}


class Tree(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    format: int
    reader: str
    nodes: list[TreeNode]
    ignored: list[str] = []


class HpctoolkitAdapter(PartialAdapter):
    spec = SPEC
    expects = "an HPCToolkit database directory (experiment.xml and *.metric-db files, from hpcprof)"

    def reader_missing(self) -> str:
        if importlib.util.find_spec("hatchet") is None:
            return "the HPCToolkit reader needs LLNL Hatchet: pip install 'profileweaver[hpctoolkit]' (llnl-hatchet)"
        return ""

    def read(self, path: str) -> dict[str, bytes]:
        folder = self._require(path)
        if not folder.is_dir():
            raise InputError(f"hpctoolkit={path}: not a directory; expected {self.expects}")
        if (folder / "meta.db").is_file():
            raise InputError(f"hpctoolkit={path}: a sparse HPCToolkit database (meta.db, HPCToolkit 2023+) is not "
                             f"read by pw yet; expected {self.expects}")
        dbs = sorted(folder.glob("*.metric-db"))
        if not (folder / "experiment.xml").is_file() or not dbs:
            raise InputError(f"hpctoolkit={path}: no experiment.xml with *.metric-db files; expected {self.expects}")
        missing = self.reader_missing()
        if missing:
            raise InputError(f"hpctoolkit={path}: {missing}")
        out = {"experiment.xml": read_bytes(self.spec.name, folder / "experiment.xml")}
        for db in dbs:
            out[db.name] = read_bytes(self.spec.name, db)
        out[TREE_ROLE] = msgspec.json.encode(read_tree(folder), order="deterministic")
        return out

    def normalize(self, artifacts: Mapping[str, bytes], source_root: str, target: str,
                  known_files: Sequence[str] = ()) -> Profile:
        try:
            tree = msgspec.json.decode(artifacts[TREE_ROLE], type=Tree)
        except KeyError:
            raise ValueError(f"hpctoolkit: artifact {TREE_ROLE!r} missing; got {sorted(artifacts)}") from None
        if tree.format != TREE_FORMAT:
            raise ValueError(f"hpctoolkit: {TREE_ROLE} format {tree.format}; expected {TREE_FORMAT}")
        version = _version(text_of(artifacts, "experiment.xml", "hpctoolkit"))
        return tree_profile(tree, target, version, known_files)


def read_tree(folder: Path) -> Tree:
    """Hatchet's graph of the database at ``folder`` as a Tree (the I/O half of normalize)."""
    import hatchet

    try:
        gf = hatchet.GraphFrame.from_hpctoolkit(str(folder))
    except Exception as exc:  # Hatchet raises whatever its XML/NumPy readers raise on a damaged database
        raise InputError(f"hpctoolkit={folder}: Hatchet could not read the database "
                         f"({type(exc).__name__}: {str(exc)[:120]})") from None
    names = _metric_names((folder / "experiment.xml").read_text(errors="replace"))
    columns, ignored = {}, []
    for col in gf.exc_metrics + gf.inc_metrics:
        original = names.get(col, col)
        m = _SCOPED.match(original)
        base = m.group("base") if m else original
        if base in METRICS:
            columns[col] = (METRICS[base], m.group("scope") if m else ("I" if col in gf.inc_metrics else "E"))
        else:
            ignored.append(original)
    df = gf.dataframe
    numeric = [c for c in columns if c in df.columns]
    # One row per node: metrics summed over ranks and threads, the node's attributes from its first row.
    sums = df[numeric].groupby(level="node").sum()
    firsts = df[["name", "type", "file", "line", "module"]].groupby(level="node").first()
    ids: dict[int, int] = {}
    nodes: list[TreeNode] = []
    for node in gf.graph.traverse():
        ids[id(node)] = len(ids) + 1
    for node in gf.graph.traverse():
        row, attrs = sums.loc[node], firsts.loc[node]
        exc: dict[str, float] = {}
        inc: dict[str, float] = {}
        for col, ((metric, factor), scope) in columns.items():
            value = float(row[col]) * factor
            if value:
                into = inc if scope == "I" else exc
                into[metric] = into.get(metric, 0.0) + value
        kind = str(node.frame.get("type", "function"))
        parent = node.parents[0] if node.parents else None
        nodes.append(TreeNode(id=ids[id(node)], parent=ids[id(parent)] if parent is not None else None,
                              kind=kind, name=_CALL_LINE.sub("", str(attrs["name"])) if kind == "function" else "",
                              file=str(attrs["file"] or ""), line=int(attrs["line"] or 0),
                              module=str(attrs["module"] or ""), exclusive=exc, inclusive=inc))
    return Tree(format=TREE_FORMAT, reader=f"hatchet {getattr(hatchet, '__version__', '?')} from_hpctoolkit",
                nodes=sorted(nodes, key=lambda n: n.id), ignored=sorted(set(ignored)))


def _metric_names(xml: str) -> dict[str, str]:
    """Hatchet's column name -> the database's metric name (it renames CPUTIME to 'time')."""
    out = {}
    for name in re.findall(r'<MetricDB\b[^>]*\bn="([^"]+)"', xml):
        if name.startswith("CPUTIME") and name.endswith("(E)"):
            out["time"] = name
        elif name.startswith("CPUTIME") and name.endswith("(I)"):
            out["time (inc)"] = name
    return out


def _version(xml: str) -> str:
    m = re.search(r'<HPCToolkitExperiment\b[^>]*\bversion="([^"]+)"', xml)
    return f"experiment.xml {m.group(1)}" if m else "experiment.xml"


def tree_profile(tree: Tree, target: str, version: str, known_files: Sequence[str] = ()) -> Profile:
    """The common profile of a call tree (pure): functions with self, inclusive and line costs."""
    frames = _Frames(tree, known_files)
    self_cost: dict[str, dict[str, float]] = {}
    incl: dict[str, dict[str, float]] = {}
    ops: dict[str, Operation] = {}
    lines: dict[tuple[str, int, str], dict[str, float]] = {}
    edges: dict[tuple[str, str], dict[str, float]] = {}
    for n in tree.nodes:
        if n.kind != "function":
            continue
        oid, rel = frames.op_id(n)
        kind = "kernel" if n.exclusive.get("gpu_time_ns") or n.module.endswith(".gpubin") else "function"
        if oid not in ops:
            ops[oid] = Operation(id=oid, name=n.name, kind=kind,
                                 module=posixpath.basename(n.module) if n.module else "?",
                                 file=rel, line_start=n.line if rel and n.line else None,
                                 line_end=n.line if rel and n.line else None, line_span="definition")
        stmts = frames.statements.get(n.id, [])
        for s in stmts:
            if rel and s.exclusive and relative_by_suffix(s.file, known_files) == rel:
                _add(lines.setdefault((rel, s.line, oid), {}), s.exclusive)
        _add(self_cost.setdefault(oid, {}), _own_cost(n, stmts))
        if not frames.nested_in_itself(n, oid):  # inclusive once per function along a path (recursion)
            _add(incl.setdefault(oid, {}), n.inclusive)
        caller = frames.frame_of(n)
        if caller is not None:
            _add(edges.setdefault((frames.op_id(frames.by_id[caller])[0], oid), {}), n.inclusive)
    metrics = [m for m in dict.fromkeys(m for m, _ in METRICS.values())
               if any(m in v for v in self_cost.values()) or any(m in v for v in incl.values())]
    if not metrics:
        raise ValueError("hpctoolkit: the database has none of the metrics pw reads "
                         f"({', '.join(METRICS)}); it has {', '.join(tree.ignored) or 'none'}")
    totals: dict[str, float] = {}
    for r in (n for n in tree.nodes if n.parent is None):
        _add(totals, r.inclusive)
    operations = [msgspec.structs.replace(op, self_metrics=self_cost.get(op.id, {}), inclusive_metrics=incl.get(op.id, {}))
                  for op in ops.values()]
    # the primary metric leads: GPU time when the program ran kernels, else CPU time
    metrics.sort(key=lambda m: ("gpu_time_ns", "cpu_time_s", "gpu_pc_samples", "kernel_launches").index(m))
    granularity = ["process", "function"] + (["line"] if lines else []) + \
        (["kernel"] if any(o.kind == "kernel" for o in operations) else [])
    return Profile(tool="hpctoolkit", tool_version=version, target=target, granularity=granularity,  # type: ignore[arg-type]
                   metrics=metrics, totals={m: totals.get(m, 0.0) for m in metrics}, operations=operations,
                   lines=[LineCost(file=f, line=ln, operation=o, self_metrics=v) for (f, ln, o), v in lines.items()],
                   edges=[CallEdge(caller=a, callee=b, metrics=v) for (a, b), v in edges.items()])


def _add(into: dict[str, float], values: Mapping[str, float]) -> None:
    for k, v in values.items():
        into[k] = into.get(k, 0.0) + v


def _own_cost(n: TreeNode, stmts: list[TreeNode]) -> dict[str, float]:
    """A function frame's self cost: its statements carry the frame's cost for each metric they
    have, the frame its own for the rest."""
    own = dict(n.exclusive)
    for s in stmts:
        for m in s.exclusive:
            own.pop(m, None)
    for s in stmts:
        _add(own, s.exclusive)
    return own


class _Frames:
    """The function frames of a call tree: the frame each node belongs to, each frame's statements
    and operation id, and whether a frame runs inside another of the same function."""

    def __init__(self, tree: Tree, known_files: Sequence[str]) -> None:
        self.known_files = known_files
        self.by_id = {n.id: n for n in tree.nodes}
        owner: dict[int, int] = {}  # node id -> id of the function frame it belongs to
        for n in tree.nodes:
            if n.kind == "function":
                owner[n.id] = n.id
            else:
                f = self.frame_of(n)
                if f is not None:
                    owner[n.id] = f
        self.statements: dict[int, list[TreeNode]] = {}
        for n in tree.nodes:
            if n.kind == "statement" and n.id in owner:
                self.statements.setdefault(owner[n.id], []).append(n)

    def frame_of(self, n: TreeNode) -> int | None:
        p = n.parent
        while p is not None and self.by_id[p].kind != "function":
            p = self.by_id[p].parent
        return p

    def op_id(self, frame: TreeNode) -> tuple[str, str | None]:
        rel = relative_by_suffix(frame.file, self.known_files)
        module = posixpath.basename(frame.module) if frame.module else "?"
        return (f"{frame.name}@{rel}" if rel else f"{frame.name}@[{module}]"), rel

    def nested_in_itself(self, n: TreeNode, oid: str) -> bool:
        ancestor = n.parent
        while ancestor is not None:
            a = self.by_id[ancestor]
            if a.kind == "function" and self.op_id(a)[0] == oid:
                return True
            ancestor = a.parent
        return False
