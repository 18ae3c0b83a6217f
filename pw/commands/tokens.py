"""`pw tokens`: the measured o200k_base cost of what an agent loads (skills, references, a run's brief).

Exit 1 when a file is over its budget (root skill 1,500, child skill 1,200, brief 320 tokens).
"""

from __future__ import annotations

from pathlib import Path

from pw.commands.common import print_json, print_text


def tokens(args) -> int:
    from pw import skilltree
    from pw.tokens import provenance

    root = skilltree.SKILLS_DIR
    rows = skilltree.skill_costs(root)
    run_rows = []
    run_path = None
    run_arg = getattr(args, "run", None)
    if run_arg:
        from pw.runpath import resolve_run

        run_path = resolve_run(run_arg).path
        run_rows = skilltree.run_costs(Path(run_path))
    over = [r for r in rows + run_rows if not r.within]
    if getattr(args, "json", False):
        def row(r):
            return {"kind": r.kind, "path": r.path, "tokens": r.tokens, "limit": r.limit, "within": r.within}

        doc = {
            **provenance(),
            "skills_dir": str(root),
            "files": [row(r) for r in rows],
            "total": sum(r.tokens for r in rows),
            "over_budget": [r.path for r in over],
        }
        if run_path is not None:
            doc["run"] = {"run_dir": str(run_path), "files": [row(r) for r in run_rows],
                          "total": sum(r.tokens for r in run_rows)}
        print_json(doc)
        return 1 if over else 0

    prov = provenance()
    lines = []
    for title, group in (("skill tree", rows), (f"run {run_path}", run_rows)):
        if title.startswith("run") and run_path is None:
            continue
        lines.append(f"{title}: {prov['tokenizer']} tokens ({prov['package']} {prov['version']})")
        lines += _table(group)
        lines.append("")
    if run_path is not None and not run_rows:
        lines.append(f"{run_path}: no agent-brief.txt, agent-view.json or source-slices yet")
    if over:
        lines.append("over budget: " + ", ".join(f"{r.path} ({r.tokens} > {r.limit})" for r in over))
    print_text("\n".join(lines).rstrip("\n"))
    return 1 if over else 0


def _table(group) -> list[str]:
    """Plain aligned columns: readable in a terminal and when piped, never wrapped."""
    body = [(r.kind, r.path, str(r.tokens), "-" if r.limit is None else str(r.limit),
             "" if r.within else "OVER") for r in group]
    body.append(("", "total", str(sum(r.tokens for r in group)), "", ""))
    head = ("kind", "file", "tokens", "budget", "")
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(4)]

    def fmt(row) -> str:
        return (f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:>{widths[2]}}  "
                f"{row[3]:>{widths[3]}}  {row[4]}").rstrip()

    rule = "-" * (sum(widths) + 8)
    return [fmt(head), rule, *[fmt(r) for r in body[:-1]], rule, fmt(body[-1])]
