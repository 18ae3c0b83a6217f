"""Nsight Systems adapter: the same GPU timeline, from ``nsys profile`` + ``nsys export --type sqlite``.

nsys records CUPTI activity like our injection library does; its SQLite export holds them in the
``CUPTI_ACTIVITY_KIND_{KERNEL,MEMCPY,MEMSET,SYNCHRONIZATION,RUNTIME}`` tables (names interned in
``StringIds``). ``read_sqlite`` turns those rows into ``ledger.gpu_activity`` records, and
``adapters.gpu_timeline`` makes the profile, so nsys and CUPTI timelines are the same numbers.

The failure seen on the device machine (tests/data/nsys-cuda-transpose-sqlite/without-libs.log):
nsys collects, then its ``QdstrmImporter`` cannot start (libdw.so.1 / libelf.so.1 missing), prints
"Importer error status ... skipping importation of the QDSTRM file", leaves only ``X.qdstrm`` and
**exits 0**. So the probe profiles a trivial program for real and checks that a ``.nsys-rep``
appeared; when only a ``.qdstrm`` did, it is unusable with that reason (and the importer's missing
libraries from ``ldd``), and routing takes the CUPTI timeline instead. Carrying the two libraries
(Debian's libdw1 + libelf1 unpacked with ``dpkg -x``) and naming their folder in ``PW_NSYS_LIBS``
(prepended to LD_LIBRARY_PATH for nsys) made the real nsys path work end to end there.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Mapping

from adapters.base import (
    Adapter,
    AdapterSpec,
    Capture,
    CaptureError,
    CaptureRequest,
    Usability,
    decode_meta,
    last_line,
    require_artifact,
    run_tool,
    true_argv,
)
from adapters.cupti import gpu_visible
from adapters.gpu_timeline import TIMELINE_METRICS, summarize, to_profile
from ledger.gpu_activity import (
    ApiActivity,
    GpuActivity,
    KernelActivity,
    MemcpyActivity,
    MemsetActivity,
    SyncActivity,
)
from ledger.profile import Profile

SQLITE_ROLE = "nsys.sqlite"
LIBS_ENV = "PW_NSYS_LIBS"
PROFILE_FLAGS = ["-t", "cuda", "--sample=none", "--cpuctxsw=none", "-f", "true"]

SPEC = AdapterSpec(
    name="nsys",
    tool="nsys",
    measures=list(TIMELINE_METRICS),
    granularity=["kernel", "timeline"],
    phases=["discovery", "diagnosis"],
    targets=["cuda"],
    can_reprofile=True,
    partial=False,
    overhead_factor=1.1,
    setup_s=3.5,
    cost_note=("measured on H200 with carried libdw1/libelf1: nsys profile of a 0.3 s transpose run took "
               "2.8 s, export to SQLite ~1 s more"),
)

_COPY_KIND = {1: "HtoD", 2: "DtoH", 8: "DtoD", 9: "HtoH", 10: "PtoP"}
_SYNC_KIND = {1: "event", 2: "stream_wait_event", 3: "stream", 4: "context"}


def find_nsys(tool_path: str | None = None) -> str | None:
    if tool_path:
        return shutil.which(tool_path)
    return shutil.which("nsys") or next(iter(sorted(glob.glob("/opt/nvidia/nsight-systems/*/bin/nsys")) +
                                             sorted(glob.glob("/usr/local/cuda*/bin/nsys")) +
                                             sorted(glob.glob("/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys"))),
                                        None)


def nsys_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """LD_LIBRARY_PATH with ``$PW_NSYS_LIBS`` in front (the carried libdw/libelf), else nothing."""
    env = env if env is not None else os.environ
    libs = env.get(LIBS_ENV, "")
    if not libs:
        return {}
    old = env.get("LD_LIBRARY_PATH", "")
    return {"LD_LIBRARY_PATH": libs + (":" + old if old else "")}


def classify_outputs(files: list[str], log: str, missing_libs: list[str]) -> tuple[bool, str]:
    """Whether an ``nsys profile`` run produced a report, and why not (pure).

    ``files`` are the names left in the output folder, ``log`` nsys's stdout+stderr, ``missing_libs``
    what ``ldd`` says the importer lacks."""
    if any(f.endswith(".nsys-rep") for f in files):
        return True, "nsys profile wrote a .nsys-rep report"
    why = next((ln.strip() for ln in log.splitlines() if "Importer error" in ln or "skipping importation" in ln), "")
    libs = f"; the importer lacks {', '.join(missing_libs)} (carry libdw1 + libelf1 and set {LIBS_ENV})" \
        if missing_libs else ""
    if any(f.endswith(".qdstrm") for f in files):
        return False, f"nsys wrote only a .qdstrm, no .nsys-rep: the QDSTRM import failed ({why or 'no reason printed'}){libs}"
    return False, f"nsys profile wrote no report ({last_line(log.encode(), 'no output')}){libs}"


def importer_missing_libs(nsys: str, env: Mapping[str, str]) -> list[str]:
    """Libraries ``ldd`` reports 'not found' for the QdstrmImporter next to ``nsys``."""
    ldd = shutil.which("ldd")
    host = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nsys))), "host-linux-x64")
    importer = os.path.join(host, "QdstrmImporter")
    if not ldd or not os.path.isfile(importer):
        return []
    r = run_tool([ldd, importer], timeout_s=20, env=env)
    return sorted({m.group(1) for m in re.finditer(r"^\s*(\S+) => not found", r.stdout.decode(errors="replace"), re.M)})


def _strings(db: sqlite3.Connection) -> dict[int, str]:
    return dict(db.execute("SELECT id, value FROM StringIds"))


def _table_columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def read_sqlite(data: bytes) -> list[GpuActivity]:
    """CUPTI activity rows of an nsys SQLite export (bytes, opened in memory) as activity records."""
    db = sqlite3.connect(":memory:")
    try:
        db.deserialize(data)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"nsys export: not an SQLite database ({exc})") from None
    if "StringIds" not in tables:
        raise ValueError("nsys export: no StringIds table; expected `nsys export --type sqlite` output")
    s = _strings(db)
    out: list[GpuActivity] = []

    def rows(table: str, cols: list[str]):
        if table not in tables:
            return []
        have = _table_columns(db, table)
        sel = ", ".join(c if c in have else "NULL" for c in cols)
        return db.execute(f"SELECT {sel} FROM {table} ORDER BY start")

    kcols = ["start", "end", "deviceId", "streamId", "correlationId", "gridX", "gridY", "gridZ", "blockX", "blockY",
             "blockZ", "registersPerThread", "staticSharedMemory", "dynamicSharedMemory", "mangledName",
             "demangledName", "shortName"]
    for r in rows("CUPTI_ACTIVITY_KIND_KERNEL", kcols):
        mangled, demangled, short = (s.get(x) if x is not None else None for x in r[14:17])
        out.append(KernelActivity(name=mangled or demangled or short or "<unknown>", demangled=demangled,
                                  start_ns=r[0], end_ns=r[1], device=r[2] or 0, stream=r[3] or 0,
                                  correlation_id=r[4] or 0, grid=(r[5] or 0, r[6] or 0, r[7] or 0),
                                  block=(r[8] or 0, r[9] or 0, r[10] or 0), registers_per_thread=r[11] or 0,
                                  static_shared_bytes=r[12] or 0, dynamic_shared_bytes=r[13] or 0))
    for r in rows("CUPTI_ACTIVITY_KIND_MEMCPY", ["start", "end", "deviceId", "streamId", "correlationId", "bytes",
                                                 "copyKind"]):
        out.append(MemcpyActivity(copy_kind=_COPY_KIND.get(r[6], "other"), bytes=r[5] or 0, start_ns=r[0],  # type: ignore[arg-type]
                                  end_ns=r[1], device=r[2] or 0, stream=r[3] or 0, correlation_id=r[4] or 0))
    for r in rows("CUPTI_ACTIVITY_KIND_MEMSET", ["start", "end", "deviceId", "streamId", "correlationId", "bytes"]):
        out.append(MemsetActivity(bytes=r[5] or 0, start_ns=r[0], end_ns=r[1], device=r[2] or 0, stream=r[3] or 0,
                                  correlation_id=r[4] or 0))
    for r in rows("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", ["start", "end", "streamId", "correlationId", "syncType"]):
        out.append(SyncActivity(sync_kind=_SYNC_KIND.get(r[4], "other"), start_ns=r[0], end_ns=r[1],  # type: ignore[arg-type]
                                stream=r[2] or 0, correlation_id=r[3] or 0))
    for r in rows("CUPTI_ACTIVITY_KIND_RUNTIME", ["start", "end", "globalTid", "correlationId", "nameId"]):
        out.append(ApiActivity(name=s.get(r[4], "<unknown runtime api>"), start_ns=r[0], end_ns=r[1],
                               thread=(r[2] or 0) & 0xFFFFFF, correlation_id=r[3] or 0))
    db.close()
    return out


class NsysAdapter(Adapter):
    spec = SPEC

    def resolve_tool(self) -> str | None:
        return find_nsys(self.tool_path)

    def probe(self) -> Usability:
        exe = self.resolve_tool()
        if exe is None:
            return Usability(usable=False, reason="nsys not found on PATH, /opt/nvidia/nsight-systems/*/bin, "
                                                  "/usr/local/cuda*/bin or /opt/nvidia/nsight-compute/*/host/"
                                                  "target-linux-x64")
        env = nsys_env()
        try:
            version = last_line(run_tool([exe, "--version"], timeout_s=30, env=env).stdout)
            ok, how = gpu_visible()
            if not ok:
                return Usability(usable=False, version=version, reason=how)
            with tempfile.TemporaryDirectory(prefix="pw-nsys-probe-") as tmp:
                r = run_tool([exe, "profile", *PROFILE_FLAGS, "-o", os.path.join(tmp, "probe"), *true_argv()],
                             timeout_s=120, cwd=tmp, env=env)
                files = os.listdir(tmp)
                log = (r.stdout + r.stderr).decode(errors="replace")
                usable, reason = classify_outputs(files, log, [] if any(f.endswith(".nsys-rep") for f in files)
                                                  else importer_missing_libs(exe, {**os.environ, **env}))
        except CaptureError as exc:
            return Usability(usable=False, reason=f"nsys probe failed: {exc}")
        mode = "carried-libs" if env else "system-libs"
        return Usability(usable=usable, version=version, mode=mode if usable else "", reason=reason,
                         notes=[f"{LIBS_ENV}={os.environ[LIBS_ENV]}"] if env else [])

    def capture(self, req: CaptureRequest) -> Capture:
        exe = self.require_tool()
        os.makedirs(req.out_dir, exist_ok=True)
        env = {**req.env, **nsys_env()}
        version = last_line(run_tool([exe, "--version"], timeout_s=30, env=env).stdout)
        base = os.path.join(req.out_dir, "nsys")
        stdout = os.path.join(req.out_dir, "stdout.txt")
        cmd = [exe, "profile", *PROFILE_FLAGS, "-o", base, "--", *req.argv]
        r = run_tool(cmd, cwd=req.cwd, env=env, timeout_s=req.timeout_s, stdout_path=stdout)
        log = open(stdout, "rb").read().decode(errors="replace") + r.stderr.decode(errors="replace")
        ok, reason = classify_outputs(os.listdir(req.out_dir), log, [])
        if r.returncode != 0 or not ok:
            raise CaptureError(f"nsys profile (exit {r.returncode}): {reason}")
        sqlite_path = os.path.join(req.out_dir, SQLITE_ROLE)
        exp = [exe, "export", "--type", "sqlite", "-f", "true", "-o", sqlite_path, base + ".nsys-rep"]
        e = run_tool(exp, timeout_s=300, env=env)
        if e.returncode != 0 or not os.path.isfile(sqlite_path):
            raise CaptureError(f"nsys export --type sqlite exited {e.returncode}: {last_line(e.stderr)}")
        meta = self.write_meta(req.out_dir, tool_version=version, cwd=req.cwd, argv=list(req.argv),
                               options={"flags": " ".join(PROFILE_FLAGS), "libs": os.environ.get(LIBS_ENV, "")})
        return Capture(adapter=self.spec.name, label=req.label, wall_s=r.wall_s + e.wall_s, tool_version=version,
                       commands=[cmd, exp], artifacts={SQLITE_ROLE: sqlite_path, "nsys.nsys-rep": base + ".nsys-rep",
                                                       "capture.json": meta, "stdout.txt": stdout})

    def normalize(self, artifacts: Mapping[str, bytes], source_root: str, target: str) -> Profile:
        meta = decode_meta(artifacts)
        records = read_sqlite(require_artifact(artifacts, SQLITE_ROLE, self.spec.name))
        return to_profile(summarize(records), records, tool="nsys", tool_version=meta.tool_version, target=target)
