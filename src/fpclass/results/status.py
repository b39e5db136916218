"""What became of each item a scan or a check met: one word each, shared by the scan's tasks and
every result."""

CHECKED = "checked"                # read and classified
NOT_APPLICABLE = "not_applicable"  # integer / bool / string data: proven to hold no NaN or Inf
UNCHECKED = "unchecked"            # could not be checked; the reason says why (never clean)
PROBLEM = "problem"                # a file-level problem (no tensor name); the reason says why
FILE = "file"                      # marks a file that was opened; its format is recorded
SKIPPED = "skipped"                # a file that holds no tensors, or was filtered out; the reason
