"""Write database/: an HPCToolkit database in the experiment.xml + metric-db format (hpcprof-mpi,
HPCToolkit 2020-2022) for a small calling-context tree of workloads/cuda-histogram.

Run from this folder: `python make_database.py`. The bytes are deterministic; the test reads the
written files, never this script. The layout follows what hpcprof writes and what LLNL Hatchet's
HPCToolkitReader decodes (see README.md beside this file):

- experiment.xml: LoadModuleTable, FileTable, ProcedureTable, MetricDBTable, then the calling-context
  tree in SecCallPathProfileData (PF procedure frames, C call sites, L loops, S statements; `i` is
  the node id, `n` a procedure, `f` a file, `l` a line, `lm` a load module).
- one <prog>-<rank>-<thread>-<host>-<pid>-<gen>.metric-db per thread: an 18-byte tag
  "HPCPROF-metricdb__", a 5-byte version, 'b' (big-endian), int32 node count, int32 metric count,
  then node-major float64 values (node id 1 first, one value per metric).
"""

import struct
from pathlib import Path

US = 1e-6
# Metric DB columns, in file order. CPUTIME is in microseconds, GKER (GPU kernel time) in seconds,
# GINS the GPU instruction samples of PC sampling (`hpcrun -e gpu=nvidia,pc`), a count.
METRICS = ["CPUTIME (usec) (I)", "CPUTIME (usec) (E)", "GKER (sec) (I)", "GKER (sec) (E)",
           "GKER:COUNT (I)", "GKER:COUNT (E)", "GINS (I)", "GINS (E)"]
MODULES = {"2": "/home/user/cuda-histogram/histogram", "3": "/usr/local/cuda/lib64/libcudart.so.12",
           "4": "/home/user/cuda-histogram/hpctoolkit-histogram-measurements/cubins/histogram_kernel.gpubin"}
FILES = {"5": "/home/user/cuda-histogram/main.cu", "6": "/home/user/cuda-histogram/histogram.cu",
         "7": "~unknown-file~"}
PROCS = {"8": "main", "9": "histogram(unsigned int const*, long, unsigned int*, int, CUstream_st*)",
         "10": "histogram_kernel", "11": "cudaLaunchKernel", "12": "cudaMemcpy"}

# (id, tag, attributes, own exclusive cost {metric base: value}, children)
TREE = ("1", "PF", {"n": "8", "f": "5", "l": "32", "lm": "2"}, {}, [
    ("2", "S", {"l": "38"}, {"CPUTIME (usec)": 150000.0}, []),
    ("3", "C", {"l": "45"}, {}, [
        ("4", "PF", {"n": "9", "f": "6", "l": "15", "lm": "2"}, {}, [
            ("5", "C", {"l": "18"}, {}, [
                ("6", "PF", {"n": "10", "f": "6", "l": "5", "lm": "4"},
                 {"GKER (sec)": 0.0240, "GKER:COUNT": 20.0}, [
                    ("7", "L", {"f": "6", "l": "8"}, {}, [
                        ("8", "S", {"l": "9"}, {"GINS": 1200.0}, []),
                        ("9", "S", {"l": "11"}, {"GINS": 22800.0}, []),
                    ]),
                ]),
                ("10", "PF", {"n": "11", "f": "7", "l": "0", "lm": "3"}, {"CPUTIME (usec)": 9000.0}, []),
            ]),
        ]),
    ]),
    ("11", "C", {"l": "47"}, {}, [
        ("12", "PF", {"n": "12", "f": "7", "l": "0", "lm": "3"}, {"CPUTIME (usec)": 4000.0}, []),
    ]),
])


def walk(node, rows):
    """Fill rows[id] = {metric: value}: inclusive = subtree; exclusive as hpcprof reports it (a
    procedure or loop frame's exclusive cost is its own plus that of the statements inside it, not
    of its calls)."""
    nid, tag, _, own, children = node
    inc = dict(own)
    exc = dict(own)
    for child in children:
        c_inc, c_exc = walk(child, rows)
        for k, v in c_inc.items():
            inc[k] = inc.get(k, 0.0) + v
        if child[1] in ("S", "L"):
            for k, v in c_exc.items():
                exc[k] = exc.get(k, 0.0) + v
    rows[nid] = (inc, exc)
    return inc, exc


def xml_node(node, indent):
    nid, tag, attrs, _, children = node
    a = " ".join(f'{k}="{v}"' for k, v in {"i": nid, **attrs}.items())
    pad = " " * indent
    if not children:
        return f"{pad}<{tag} {a}/>\n"
    inner = "".join(xml_node(c, indent + 1) for c in children)
    return f"{pad}<{tag} {a}>\n{inner}{pad}</{tag}>\n"


def main(out=Path("database")):
    out.mkdir(exist_ok=True)
    rows: dict = {}
    walk(TREE, rows)
    table = lambda tag, items: "".join(f'      <{tag} i="{k}" n="{v}"/>\n' for k, v in items.items())
    metric_db = "".join(f'      <MetricDB i="{i}" n="{n}"/>\n' for i, n in enumerate(METRICS))
    xml = ('<?xml version="1.0"?>\n<HPCToolkitExperiment version="2.2">\n'
           '<Header n="histogram">\n  <Info/>\n</Header>\n'
           '<SecCallPathProfile i="0" n="histogram">\n<SecHeader>\n'
           f'    <MetricDBTable>\n{metric_db}    </MetricDBTable>\n'
           f'    <LoadModuleTable>\n{table("LoadModule", MODULES)}    </LoadModuleTable>\n'
           f'    <FileTable>\n{table("File", FILES)}    </FileTable>\n'
           f'    <ProcedureTable>\n{table("Procedure", PROCS)}    </ProcedureTable>\n'
           '</SecHeader>\n<SecCallPathProfileData>\n'
           f'{xml_node(TREE, 0)}</SecCallPathProfileData>\n</SecCallPathProfile>\n</HPCToolkitExperiment>\n')
    (out / "experiment.xml").write_text(xml)
    n = len(rows)
    blob = b"HPCPROF-metricdb__" + b"01.00" + b"b" + struct.pack(">ii", n, len(METRICS))
    for nid in range(1, n + 1):
        inc, exc = rows[str(nid)]
        for name in METRICS:
            base, scope = name.rsplit(" (", 1)
            blob += struct.pack(">d", (inc if scope == "I)" else exc).get(base, 0.0))
    (out / "histogram-000000-000-a8c00471-4242-0.metric-db").write_bytes(blob)


if __name__ == "__main__":
    main()
