"""Writing the benchmark's pages: a results folder's leaderboard and the reproduction report.

The only module of ``zoo.bench``'s reporting side that writes files; every path comes from the
caller (the CLI passes this repository's layout).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

from zoo._io import write_atomic
from zoo.bench.analyze.board import load_board
from zoo.bench.report.errors import MissingNotesError
from zoo.bench.report.notes import default_notes
from zoo.bench.report.status import Report, build_report
from zoo.bench.render.html import to_html as leaderboard_html
from zoo.bench.render.leaderboard import to_csv, to_json, to_markdown as leaderboard_markdown
from zoo.bench.render.report import ReportSources, missing_notes_message, to_html, to_markdown

PathLike = Union[str, Path]


def write_leaderboard(results: Sequence[PathLike], out: PathLike) -> Dict[str, Path]:
    """Write ``leaderboard.md``, ``.csv``, ``.json`` and ``index.html`` for ``results`` folders into ``out``."""
    boards = [load_board(r) for r in results]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"md": out / "leaderboard.md", "csv": out / "leaderboard.csv", "json": out / "leaderboard.json",
             "html": out / "index.html"}
    write_atomic(paths["md"], "\n\n".join(leaderboard_markdown(b) for b in boards))
    write_atomic(paths["csv"], to_csv(boards))
    write_atomic(paths["json"], to_json(boards))
    write_atomic(paths["html"], leaderboard_html(boards))
    return paths


def write_report(records_dir: PathLike, md: Optional[PathLike], html_path: Optional[PathLike],
                 sources: ReportSources, notes_path: Optional[PathLike] = None,
                 check: bool = False, draft: bool = False) -> Tuple[Report, List[str]]:
    """Build the report; write ``md``/``html_path`` (atomically), or with ``check`` compare the
    Markdown with ``md`` on disk.  Returns the report and the problems found (``check``: an
    out-of-date page; ``draft``: open cells without a note).  Open cells without a note raise
    :class:`MissingNotesError` and nothing is written — unless ``draft``, which writes the pages
    with those rows marked ``NO NOTE YET`` (to see the numbers before writing the notes)."""
    notes_path = Path(notes_path) if notes_path is not None else default_notes(Path(records_dir))
    report = build_report(records_dir, notes_path)
    problems = []
    if report.missing_notes() or report.missing_finding_notes():
        if check or not draft:
            raise MissingNotesError(missing_notes_message(report, str(notes_path)))
        problems.append(missing_notes_message(report, str(notes_path)))
    problems += [f"note figure: {p}" for p in report.figure_problems]
    text = to_markdown(report, sources)
    if check:
        if md is not None:
            on_disk = Path(md).read_text() if Path(md).is_file() else None
            if on_disk != text:
                problems.append(f"{md} is {'missing' if on_disk is None else 'out of date'} with respect to the "
                                f"records and notes; regenerate it with `{sources.command}` and commit it")
        return report, problems
    if md is not None:
        Path(md).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(Path(md), text)
    if html_path is not None:
        Path(html_path).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(Path(html_path), to_html(report, sources))
    return report, problems
