"""cli.py — how the export/ tools end on bad input: one line on stderr and
exit status 1, not a traceback. A missing or unreadable file (OSError), a
file that is not what it claims (qkvfile.FormatError and the other
ValueErrors: a bad header, a token id out of range; struct.error: a file cut
short), a pickle or torch file that does not load: each is the user's input,
not the tool's bug. The line names where it was raised (file:line), so a
ValueError of the tools' own making is still found.

    if __name__ == "__main__":
        cli.run(main)
"""
import os
import pickle
import struct
import sys
import traceback


def run(main):
    try:
        main()
    except (OSError, ValueError, EOFError, pickle.UnpicklingError, struct.error) as e:
        frame = traceback.extract_tb(e.__traceback__)[-1]
        where = "" if isinstance(e, OSError) else " (%s:%d)" % (os.path.basename(frame.filename), frame.lineno)
        sys.exit("%s: error: %s%s" % (os.path.basename(sys.argv[0]), e, where))
