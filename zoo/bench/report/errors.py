"""The errors of the reproduction report: a record folder, reported file or notes file that cannot make it."""


class ReportError(ValueError):
    """A record folder or the notes file cannot make a report; the message names the fix."""


class MissingNotesError(ReportError):
    """Some *open* cells have no note saying what was tried."""
